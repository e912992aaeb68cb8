"""The one rule that gives a text column its type, from counts of its cells.

Every reader counts the same things and asks `choose_kind`: pandas (`inputs`, with
vectorised string operations), Spark's checking pass (`runners/spark_rows.py`, with
aggregate expressions) and the first rows of a file (`cell_counts`, in Python, the
guess of the one read and of a query's early error). The rule, and the cell rules
below it, are those of docs/input.md ("How a text cell is read"). This module imports
nothing heavy (no pandas, no pyspark).

The counts: 'any' (present cells, nulls left out), 'zeros' (numbers written with a
leading zero), then one per type of KINDS: the cells that read as that type.

>>> choose_kind(cell_counts(["1", " 22", "", "-3"])), choose_kind(cell_counts(["1.5", "2"]))
('long', 'double')
>>> choose_kind(cell_counts(["true", "x"])), choose_kind(cell_counts(["1", "2", "007"]))
('string', 'string')
>>> choose_kind(cell_counts([str(i) for i in range(9)] + ["2.5"]))
'long'
>>> choose_kind(cell_counts(["2024-01-02", "2024-1-3 10:00"])), choose_kind(cell_counts(["TRUE"]))
('timestamp', 'boolean')
"""

from __future__ import annotations

import csv
import math
import re
from datetime import datetime

# Cells that mean "no value" in text input (CSV), the same for pandas and Spark: an empty
# (or blank) cell only; the user may name more (`--null-value`, `null_values=`), since a
# word such as 'NA' is a value (a case id, a country code).
# A cell may be of any length, as Spark and pandas read it (Python's csv module stops at
# 128 KiB): for the headers, the first rows and a stream's files. Here, in the module every
# reader of text imports (a stream's reader process imports little else of sparkcep).
csv.field_size_limit(2**31 - 1)
CORRUPT = "__corrupt_record"  # the text of a row that could not be parsed (Spark's column)
NULL_TOKENS = ("",)
# Timestamp text, the one rule of every reader (docs/input.md): a date written year
# first with '-' or '/', then optionally a time after 'T' or a space (hours and minutes,
# seconds, a fraction, read to the microsecond) and a zone ('Z', '+01:00', '+0100', '-05').
TIMESTAMP_TEXT = (
    r"^\s*[0-9]{4}([-/])[0-9]{1,2}\1[0-9]{1,2}"
    r"([T ][0-9]{1,2}:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,9})?)?(Z|[+-][0-9]{2}(:?[0-9]{2})?)?)?\s*$"
)
ZONED = r":[0-9]{2}(?:\.[0-9]*)?(?:Z|[+-][0-9]{2}(?::?[0-9]{2})?)\s*$"  # timestamp text with a zone
# A number written with a leading zero ('007', '01'): an id or a code, not a quantity; a
# text column holding one stays text, so that '01' and '1' stay two values.
LEADING_ZERO = r"^\s*[+-]?0[0-9]"
# A text column whose non-empty cells are numbers but for a few (under 10%) is a column of
# numbers: those cells are not numbers, and a query that reads the column rejects their
# rows with the reason (docs/language.md, "Input").
NUMERIC_SHARE = 0.9
MOSTLY_NUMBERS = 0.5  # a text column at least this much numbers is worth a warning

KINDS = ("long", "double", "boolean", "timestamp")  # the order a text column is tried
COUNTS = ("any", "zeros", *KINDS)
LONG_LIMIT = 2**63
# A cell that reads as a number (a double): digits with an optional point and exponent,
# or an infinity said in words; 'nan' and a finite text beyond the doubles ('1e400') are
# none (Spark's `spark_rows.text_number` and the pandas reader read so too).
NUMBER = r"^\s*[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\s*$"
INFINITY = r"^\s*[+-]?(?i:inf|infinity)\s*$"
INTEGER = r"^\s*[+-]?[0-9]+\s*$"  # and within the longs
BOOLEAN = ("true", "false")  # in any case
# ASCII: '\s' and the digits as Java's regular expressions read them (Spark), not as
# Unicode (a no-break space is no blank, an Arabic digit no digit)
_NUMBER, _INFINITY = re.compile(NUMBER, re.ASCII), re.compile(INFINITY, re.ASCII)
_INTEGER, _ZEROS = re.compile(INTEGER, re.ASCII), re.compile(LEADING_ZERO, re.ASCII)
_STAMP = re.compile(TIMESTAMP_TEXT, re.ASCII)
_PARTS = re.compile(
    r"^\s*([0-9]{4})[-/]([0-9]{1,2})[-/]([0-9]{1,2})"
    r"(?:[T ]([0-9]{1,2}):([0-9]{2})(?::([0-9]{2}))?)?",
    re.ASCII,
)


def choose_kind(counts: dict[str, int]) -> str | None:
    """The type a text column gets from its counts: text when a number has a leading
    zero (ids, codes), else the first type of KINDS most of its values have (integers
    and doubles: at least NUMERIC_SHARE; booleans and timestamps: all), else 'string';
    None when a count the choice needs was not taken (the one read takes only some:
    runners/spark_once.py)."""
    if "zeros" not in counts:
        return None
    if not counts["any"] or counts["zeros"]:
        return "string"
    for kind in KINDS:
        if kind not in counts:
            return None
        need = counts["any"] if kind in ("boolean", "timestamp") else NUMERIC_SHARE * counts["any"]
        if counts[kind] >= need:
            return kind
    return "string"


def mostly_numbers(counts: dict[str, int]) -> tuple[int, int] | None:
    """(numbers, present values) of a column left text although most of its values are
    numbers (a warning), else None."""
    if counts["zeros"]:  # text by choice (ids, codes), not by a few words
        return None
    if counts["any"] and counts["double"] >= MOSTLY_NUMBERS * counts["any"]:
        return counts["double"], counts["any"]
    return None


def present_cells(cells) -> list[str]:
    """The cells that hold a value (not None, not blank once trimmed)."""
    return [c for c in cells if c is not None and c.strip(" ") not in NULL_TOKENS]


def cell_counts(cells) -> dict[str, int]:
    """The counts of `choose_kind` over text cells, cell by cell in Python (a file's
    first rows: a handful of cells)."""
    present = present_cells(cells)
    return {
        "any": len(present),
        "zeros": sum(bool(_ZEROS.match(c)) for c in present),
        "long": sum(is_long(c) for c in present),
        "double": sum(is_number(c) for c in present),
        "boolean": sum(c.lower() in BOOLEAN for c in present),
        "timestamp": sum(is_timestamp(c) for c in present),
    }


def is_long(cell: str) -> bool:
    return bool(_INTEGER.match(cell)) and -LONG_LIMIT <= int(cell) < LONG_LIMIT


def is_number(cell: str) -> bool:
    if _INFINITY.match(cell):
        return True
    return bool(_NUMBER.match(cell)) and math.isfinite(float(cell))


def is_timestamp(cell: str) -> bool:
    """Whether a cell is a timestamp by TIMESTAMP_TEXT and names a real date and time
    ('2014-02-30' is none)."""
    if not _STAMP.match(cell):
        return False
    y, mo, d, h, mi, s = (int(p) if p else 0 for p in _PARTS.match(cell).groups())
    try:
        datetime(y, mo, d, h, mi, s)
    except ValueError:
        return False
    return True
