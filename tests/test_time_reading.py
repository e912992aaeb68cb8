"""Reading text as integers and times in Spark (`spark_rows.integer_text`, `integer_time`)
against their definitions, written here in Python (docs/input.md):

- integer text: optional blanks, an optional sign, the digits 0-9, optional blanks; its
  value when it fits in 64 bits;
- a time: integer text, or a number with a whole value (`12.0`, `1e3`); it must lie
  strictly within ±2^62, else it is "out of range"; anything else is no time.
"""

from __future__ import annotations

import datetime as dt
import math
import re

from hypothesis import example, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkcep.runners.spark.rows import integer_text, integer_time
from sparkcep.timeunits import TIME_LIMIT

INTEGER = re.compile(r"[ \t]*[+-]?[0-9]+[ \t]*")
EDGES = [
    "12", " 12 ", "\t-7\t", "+0", "-0", "00012", "12.0", "12.", ".5", "1e3", "1E3", "-2.5e1",
    "12.5", "1e-3", "e3", "+", "-", "", "+-1", "1-", "0x10", "1 2", "NaN", "nan", "Infinity",
    "-inf", "9223372036854775807", "9223372036854775808", "-9223372036854775808",
    "-9223372036854775809", str(TIME_LIMIT), str(TIME_LIMIT - 1), str(-TIME_LIMIT),
    str(1 - TIME_LIMIT), "4.611686018427388e18", "4.6e18", "99999999999999999999", "1e30",
]  # fmt: skip
CELLS = st.one_of(
    st.text(alphabet="0123456789+-.eE x\t", max_size=8),
    st.integers(-(2**64), 2**64).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(EDGES),
)


def integer_of(text: str) -> int | None:
    if not INTEGER.fullmatch(text):
        return None
    value = int(text.strip(" \t"))
    return value if -(2**63) <= value < 2**63 else None


def time_of(text: str) -> int | str | None:
    """The time `text` reads as: an integer, "far", or None (no time)."""
    t = text.strip(" \t")
    if INTEGER.fullmatch(t):
        value = int(t)
    else:
        try:
            number = float(t)
        except ValueError:
            return None
        if not math.isfinite(number) or number != math.floor(number):
            return None
        value = int(number)
    return value if -TIME_LIMIT < value < TIME_LIMIT else "far"


def read_in_spark(spark, cells: list[str]) -> list[tuple]:
    df = spark.createDataFrame([(i, c) for i, c in enumerate(cells)], "i long, s string")
    s = F.col("s")
    time, far = integer_time(s, T.StringType())
    rows = df.select("i", integer_text(s).alias("n"), time.alias("t"), far.alias("far"))
    return sorted(tuple(r) for r in rows.collect())


@settings(max_examples=12, deadline=None)
@given(cells=st.lists(CELLS, min_size=1, max_size=60))
def test_text_reads_as_integers_and_times_by_their_definitions(spark, cells):
    cells = [*cells, *EDGES]
    for i, n, t, far in read_in_spark(spark, cells):
        text = cells[i]
        assert n == integer_of(text), repr(text)
        expected = time_of(text)
        assert far == (expected == "far"), repr(text)
        assert t == (None if expected == "far" else expected), repr(text)


def test_numbers_read_as_times_by_the_same_rule(spark):
    """Float and decimal columns: whole values are times, others are not; beyond ±2^62
    is out of range (a float time of 2.5 was once read as 2 by a stream)."""
    values = [1.0, 2.5, -3.0, float("nan"), float("inf"), 1e30, -1e19, 4.5e18]
    df = spark.createDataFrame([(v,) for v in values], "x double")
    df = df.withColumn("d", F.col("x").try_cast("decimal(38,1)"))
    for name in ("x", "d"):
        time, far = integer_time(F.col(name), df.schema[name].dataType)
        got = [tuple(r) for r in df.select("x", time, far).collect()]
        for x, t, is_far in got:
            if name == "d" and not math.isfinite(x):
                assert (t, is_far) == (None, False)  # no decimal holds them: null cells
                continue
            expected = time_of(repr(x))
            assert (t, is_far) == (None if expected == "far" else expected, expected == "far"), x


def test_text_numbers_are_those_the_local_runner_reads(spark):
    """'nan' and a number beyond the doubles are not numbers (pandas reads them as
    missing), 'inf' is one; Spark read '1e400' as infinity and 'nan' as NaN."""
    from sparkcep.runners.spark.rows import text_number

    inf = float("inf")
    expected = {
        "1": 1.0, "1e400": None, "-1e400": None, "inf": inf, "-Infinity": -inf, "nan": None,
        "NaN": None, "1.5": 1.5, " 2 ": 2.0, "x": None, "": None, ".5": 0.5, "-0": 0.0,
    }  # fmt: skip
    df = spark.createDataFrame([(c,) for c in expected], "s string")
    got = dict(df.select("s", text_number(F.col("s"))).collect())
    assert got == expected


def test_timestamp_text_is_read_alike_in_pandas_and_spark(spark):
    """One rule for timestamp text (docs/input.md): a date written year first with '-'
    or '/', an optional time, fraction and zone; the local runner (pandas) and Spark read
    each cell to the same instant, or both to none. The instants are worked out by hand."""
    import datetime as dt

    import pandas as pd

    from sparkcep.inputs import text_timestamps
    from sparkcep.runners.spark.rows import text_timestamp

    t = dt.datetime
    expected = {
        "2014/10/22 11:15:41.000": t(2014, 10, 22, 11, 15, 41),
        "2014-10-22": t(2014, 10, 22),
        "2014-1-2": t(2014, 1, 2),
        " 2014-10-22T11:15 ": t(2014, 10, 22, 11, 15),
        "2014-10-22 1:05:07": t(2014, 10, 22, 1, 5, 7),
        "2014-10-22 11:15:41.1234567": t(2014, 10, 22, 11, 15, 41, 123456),
        "2014-10-22T11:15:41Z": t(2014, 10, 22, 11, 15, 41),
        "2014-10-22 12:15:41+01:00": t(2014, 10, 22, 11, 15, 41),
        "2014/10/22 12:15:41+0100": t(2014, 10, 22, 11, 15, 41),
        "2014-10-22T06:15:41-05": t(2014, 10, 22, 11, 15, 41),
        "22/10/2014": None, "10/22/2014 11:15": None, "Oct 22 2014": None, "2014": None,
        "2014-10": None, "2014-02-30": None, "2014-10-22 24:00:00": None, "2014/10-22": None,
        "2014-10-22Z": None, "1414000000": None, "": None, "soon": None,
    }  # fmt: skip
    cells = list(expected)
    local = text_timestamps(pd.Series(cells, dtype=object))
    got_local = {c: (None if pd.isna(v) else v.to_pydatetime()) for c, v in zip(cells, local)}
    df = spark.createDataFrame([(c,) for c in cells], "s string")
    got_spark = dict(df.select("s", text_timestamp(F.col("s"))).collect())
    assert got_local == expected
    assert got_spark == expected


# ---- the one rule that types a text column (input_types.choose_kind) -----------------------

WORDS = st.sampled_from(["x", "NA", "soon", "1,5", "0x10", "e3", "nan", "1e400", "2014-02-30"])
COLUMN_CELLS = {
    "integers": st.integers(-(2**63), 2**63 - 1).map(str),
    "spaced": st.integers(-99, 99).map(lambda i: f" {i} "),
    "zeros": st.integers(0, 999).map(lambda i: f"0{i}"),
    "decimals": st.floats(-1e6, 1e6, allow_nan=False).map(lambda f: f"{f:.3f}"),
    "blanks": st.sampled_from(["", " ", "   "]),
    "dates": st.tuples(
        st.dates(dt.date(1970, 1, 1), dt.date(2100, 12, 31)),
        st.sampled_from(["", " 10:00", "T23:59:59", " 01:02:03.5", "T10:00Z", " 10:00+01:00"]),
        st.sampled_from(["-", "/"]),
    ).map(lambda d: d[0].isoformat().replace("-", d[2]) + d[1]),
    "words": WORDS,
    "booleans": st.sampled_from(["true", "false", "TRUE", "False", " true"]),
}


@st.composite
def text_column(draw) -> list[str]:
    """Cells mostly of one flavour, with a few of others (so that every type of the rule
    and the 90% share are reached)."""
    main = draw(st.sampled_from(sorted(COLUMN_CELLS)))
    cells = draw(st.lists(COLUMN_CELLS[main], min_size=1, max_size=30))
    others = st.one_of(*COLUMN_CELLS.values())
    return cells + draw(st.lists(others, max_size=draw(st.sampled_from([0, 0, 1, 3, 10]))))


@settings(max_examples=40, deadline=None)
@given(cells=text_column())
def test_pandas_and_the_first_rows_count_a_text_column_alike(cells):
    """The pandas reader's vectorised counts and the first rows' counts in Python are the
    same, so both give a column the same type by the one rule; the type the pandas
    reader gives the column is that type."""
    import pandas as pd

    from sparkcep.input_types import cell_counts, choose_kind
    from sparkcep.inputs import null_cells, text_counts, typed_columns

    column = pd.Series(cells, dtype=object)
    assert text_counts(column) == cell_counts(cells), cells
    kind = choose_kind(cell_counts(cells))
    typed, _, _ = typed_columns(null_cells(pd.DataFrame({"c": column})), skip=())
    dtype = {"long": "Int64", "double": "float64", "boolean": "boolean"}
    if kind == "timestamp":
        assert typed["c"].dtype.kind == "M"
    else:
        assert str(typed["c"].dtype) == dtype.get(kind, "object"), (cells, kind)


NASTY = [
    "1", " 22 ", "-3", "+4", "007", "0", "-0", "1.5", ".5", "5.", "1e3", "1E-2", "-2.5e1",
    "inf", "-Infinity", "nan", "NaN", "1e400", "9223372036854775807", "9223372036854775808",
    "-9223372036854775808", "true", "FALSE", " true", "2024-01-02", "2024/1/2 10:00",
    "2024-02-30", "2024-01-02T10:00:00.123456789Z", "2024-01-02 10:00+01:00", "22/10/2014",
    "abc", "", "  ", "1,5", "0x10", "1 2", "+", ".", "e3",
]  # fmt: skip


def test_spark_counts_a_text_column_as_python_does(spark):
    """Spark's checking pass counts each cell of a nasty column set as `cell_counts` does
    (and so chooses the same type): each cell alone, then the cells together."""
    from sparkcep.input_types import COUNTS, cell_counts
    from sparkcep.runners.spark.rows import _casts, _null_tokens

    df = _null_tokens(
        spark.createDataFrame([(i, c) for i, c in enumerate(NASTY)], "i long, c string")
    )
    casts = _casts("c")
    flags = df.select("i", *[casts[k].isNotNull().alias(k) for k in COUNTS]).collect()
    for row in flags:
        got = {k: int(row[k]) for k in COUNTS}
        assert got == cell_counts([NASTY[row["i"]]]), repr(NASTY[row["i"]])


def test_a_text_cast_reads_each_cell_as_the_rules_do(spark):
    """`text_cast` (a stream's typing: a plain number cast at once) gives every cell of
    the nasty column, and plain ones, the value the rules' expressions give it."""
    from sparkcep.runners.spark.rows import integer_text, text_cast, text_number

    cells = [*NASTY, "12", "-7", "3.25", "0.5", "123456789012345678", "1234567890123456789"]
    df = spark.createDataFrame([(i, c) for i, c in enumerate(cells)], "i long, c string")
    c = F.col("c")
    rows = df.select(
        "i", text_cast(c, "long").alias("long"), integer_text(c).alias("rule_long"),
        text_cast(c, "double").alias("double"), text_number(c).alias("rule_double"),
    ).collect()  # fmt: skip
    for row in rows:
        assert row["long"] == row["rule_long"], repr(cells[row["i"]])
        same = row["double"] == row["rule_double"] or row["double"] is row["rule_double"] is None
        assert same, repr(cells[row["i"]])
    assert {r["i"]: r["long"] for r in rows}[cells.index("-7")] == -7  # not null all through


def _starts_a_kept_text(data: bytes, sep: bytes) -> bool:
    """The definition, position by position: after the start, a line break, a quote or
    the separator, spaces or tabs, a sign, then a zero and a digit, or 'nan' in any case."""
    for i in range(len(data) + 1):
        if i and data[i - 1 : i] not in (b"\n", b'"', sep):
            continue
        j = i
        while data[j : j + 1] in (b" ", b"\t") and j < len(data):
            j += 1
        if data[j : j + 1] in (b"+", b"-"):
            j += 1
        rest = data[j : j + 3]
        if (rest[:1] == b"0" and rest[1:2].isdigit()) or rest.lower() == b"nan":
            return True
    return False


@settings(max_examples=300, deadline=None)
@example(data=b"1,09", sep=",")  # each digit after the zero
@example(data=b'x;"NaN', sep=";")
@example(data=b"9\t -0", sep="\t")
@given(
    data=st.lists(st.sampled_from(list(b'0123456789nNaA .,;\t+-"\nx'))).map(bytes),
    sep=st.sampled_from([",", ";", "\t"]),
)
def test_the_quick_look_for_kept_text_is_the_definition(data, sep):
    """`files._may_need_text` (one regex over the bytes) finds what the definition finds."""
    from sparkcep.files import _may_need_text

    expected = _starts_a_kept_text(data, sep.encode())
    assert _may_need_text(data, sep) == expected, data
    for step in (1, 2, 3, 5):  # parts of a few bytes: a cell's start on every boundary
        assert _may_need_text(data, sep, step=step) == expected, (data, step)


@settings(max_examples=100, deadline=None)
@given(
    cells=st.lists(
        st.one_of(
            st.sampled_from(["", " ", "  ", "NA", " NA ", "n/a", "x", " x", "0"]),
            st.none(),
            st.integers(-3, 3),
            st.lists(st.integers(0, 2), max_size=2),
        ),
        min_size=1,
        max_size=12,
    ),
    null_values=st.sampled_from([(), ("NA",), ("n/a", " x ")]),
)
def test_null_cells_are_the_cells_blank_or_a_null_value_once_trimmed(cells, null_values):
    """A text cell is null when, its spaces trimmed, it is empty or one of the null values
    (also trimmed); every other cell (numbers, lists from JSON lines) is kept as it is."""
    import pandas as pd

    from sparkcep.input_types import NULL_TOKENS
    from sparkcep.inputs import null_cells

    tokens = {*NULL_TOKENS, *(v.strip(" ") for v in null_values)}
    frame = pd.DataFrame({"c": pd.Series(cells, dtype=object)})
    got = null_cells(frame, null_values)["c"].tolist()
    expected = [None if isinstance(c, str) and c.strip(" ") in tokens else c for c in cells]
    assert [None if g is None or (isinstance(g, float) and math.isnan(g)) else g for g in got] == [
        None if e is None else e for e in expected
    ], cells
