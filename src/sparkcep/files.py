"""Event files in and result files out: CSV (with a header), JSON lines, Parquet, gzipped or
not, one file or a folder of them (read in name order)."""

from __future__ import annotations

import csv
import glob
import gzip
import io
import json
import math
import os
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from sparkcep.errors import DataError
from sparkcep.failures import reading
from sparkcep.inputs import (
    CORRUPT,
    LEADING_ZERO,
    NULL_TOKENS,
    NUMERIC_SHARE,
    READ_REASON,
    null_cells,
)
from sparkcep.jsonlines import TIME_FORMAT, java_double, json_bytes
from sparkcep.sizes import FORMATS as FORMATS
from sparkcep.sizes import UNKNOWN_RATIO as UNKNOWN_RATIO
from sparkcep.sizes import data_bytes as data_bytes
from sparkcep.sizes import file_format as file_format

REPLACEMENT = "\ufffd"  # what a byte that is not UTF-8 is read as
OUTPUT_FORMATS = {".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet"}


def input_files(path: str) -> tuple[list[str], str]:
    """The files to read (in name order) and their format."""
    if not os.path.exists(path):
        raise DataError(f"the input '{path}' does not exist")
    if os.path.isdir(path):
        files = sorted(
            f for f in glob.glob(os.path.join(path, "*")) if os.path.isfile(f) and file_format(f)
        )
        if not files:
            raise DataError(
                f"the folder '{path}' holds no .csv, .jsonl or .parquet files (gzipped or not)"
            )
    else:
        files = [path]
    formats = {file_format(f) for f in files}
    if None in formats:
        raise DataError(
            f"cannot tell the format of '{files[0]}': name it .csv, .jsonl or .parquet "
            "(optionally .gz)"
        )
    if len(formats) > 1:
        raise DataError(f"the folder '{path}' mixes formats ({', '.join(sorted(formats))})")
    return files, formats.pop()


@dataclass(frozen=True)
class InputSource:
    """An input resolved once per run and handed to whatever reads it: its files (in
    name order), their format and how to read them (`sep`, the names of a headerless
    CSV's columns, the user's null tokens). Its size, its CSV header and the cells of
    its first rows are read when first asked for, once."""

    path: str
    files: tuple[str, ...]
    fmt: str
    sep: str = ","
    columns: tuple[str, ...] | None = None  # a headerless CSV's column names
    null_values: tuple[str, ...] = ()

    @classmethod
    def of(
        cls, path: str | InputSource, *, sep: str = ",", columns=None, null_values=()
    ) -> InputSource:
        """The input at `path` (a DataError when there is none); a source as it is."""
        if isinstance(path, InputSource):
            return path
        files, fmt = input_files(path)
        names = tuple(columns) if columns else None
        return cls(path, tuple(files), fmt, sep, names, tuple(null_values))

    def reading(self) -> dict:
        """How to read it, as keywords of the readers (`read_pandas`, `read_spark`)."""
        return {"sep": self.sep, "columns": self.columns, "null_values": self.null_values}

    @cached_property
    def size(self) -> int:
        """Its bytes, unpacked (`sizes.data_bytes`)."""
        return data_bytes(list(self.files))

    @cached_property
    def header(self) -> list[str]:
        """A CSV input's columns: the names given, or the header its files share."""
        return list(self.columns) if self.columns else check_headers(list(self.files), self.sep)

    @cached_property
    def head(self) -> dict[str, list[str]] | None:
        """A CSV input's first cells by column (the first file's first HEAD_ROWS rows, rows
        of another length left out; the null tokens blank), a guess of the column types
        that never decides a result; None when they cannot be read (the run reports the
        file's fault as it always has)."""
        try:
            header = self.header
            rows = csv_head(self.files[0], self.sep, header=not self.columns)
        except Exception:
            return None
        rows = [r for r in rows if len(r) == len(header)]
        tokens = {v.strip(" ") for v in self.null_values}
        blank = (lambda c: "" if c.strip(" ") in tokens else c) if tokens else (lambda c: c)
        return {name: [blank(r[i]) for r in rows] for i, name in enumerate(header)}


def output_format(path: str, role: str = "output") -> str:
    name = path.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    fmt = OUTPUT_FORMATS.get(os.path.splitext(name)[1])
    if fmt is None:
        raise DataError(f"name the {role} .jsonl, .csv or .parquet (got '{path}')")
    return fmt


def check_output(path: str, inputs: str, role: str = "output") -> None:
    """Refuse, before anything runs, an output that cannot be written or would overwrite
    (or later be read as) the input: a folder, a path under a file, a folder that is not
    writable, the input itself or a file inside the input folder."""
    if os.path.isdir(path):
        raise DataError(f"the {role} '{path}' is a folder: name a file, e.g. '{path}/rows.jsonl'")
    output_format(path, role)
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise DataError(f"cannot write the {role} '{path}': '{parent}' is a file, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise DataError(f"cannot write the {role} '{path}': the folder '{parent}' is not writable")
    target, source = os.path.realpath(path), os.path.realpath(inputs)
    if target == source or (os.path.isdir(source) and target.startswith(source + os.sep)):
        where = "is the input" if target == source else "is inside the input folder"
        raise DataError(f"the {role} '{path}' {where} '{inputs}': write it elsewhere")


def default_rejected_path(output: str) -> str:
    base = output[:-3] if output.endswith(".gz") else output
    stem, _ = os.path.splitext(base)
    return f"{stem}.rejected.jsonl"


# ---- CSV headers, checked the same way for pandas and Spark --------------------------------


def csv_header(path: str, sep: str) -> list[str]:
    """The column names of a CSV file's header line, without a UTF-8 byte order mark;
    an empty file, a name given twice or a name with a backtick is refused (docs/input.md)."""
    with reading(path), _open_binary(path) as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8-sig", errors="replace", newline="")
        row = next(csv.reader(text, delimiter=sep), None)
    if not row:
        raise DataError(f"the CSV file '{path}' is empty: it needs a header line")
    check_names(row, path)
    return row


def check_names(names: list[str], path: str) -> None:
    """Column names must be unique, UTF-8 and free of backticks (docs/input.md)."""
    seen: set[str] = set()
    for name in map(str, names):
        if name in seen:
            raise DataError(
                f"'{path}' names the column '{name}' twice: rename one (names must be unique)"
            )
        seen.add(name)
        if "`" in name:
            raise DataError(f"the column name '{name}' of '{path}' holds a backtick: rename it")
        if REPLACEMENT in name:
            raise DataError(f"the header of '{path}' is not UTF-8 text: convert the file")


def check_headers(files: list[str], sep: str) -> list[str]:
    """The header every CSV file of the input shares (a folder's files must agree)."""
    first = csv_header(files[0], sep)
    for f in files[1:]:
        other = csv_header(f, sep)
        if other != first:
            raise DataError(
                f"the CSV files of one input must share their header: '{f}' has "
                f"({', '.join(other)}) but '{files[0]}' has ({', '.join(first)})"
            )
    return first


HEAD_ROWS = 2000  # the rows whose cells guess the column types (runners/spark/one_read.py)


def csv_head(path: str, sep: str, header: bool, rows: int = HEAD_ROWS) -> list[list[str]]:
    """The cells of a CSV file's first `rows` data rows, as Python's reader splits them
    (a guess of the columns' types for Spark's one-read check: runners/spark/one_read.py;
    it never decides a result). Unreadable bytes are replaced; blank lines are no rows
    (as for Spark's and pandas' readers)."""
    with reading(path), _open_binary(path) as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8-sig", errors="replace", newline="")
        lines = csv.reader(text, delimiter=sep)
        if header:
            next(lines, None)
        out = []
        for row in filter(None, lines):
            out.append(row)
            if len(out) >= rows:
                break
        return out


def json_key_order(path: str, lines: int = HEAD_ROWS) -> list[str]:
    """The keys of a JSON lines file's first `lines` objects, in the order they first
    appear (the local reader's column order; Spark's reader sorts them by name)."""
    keys: dict[str, None] = {}
    with reading(path), _open_binary(path) as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8-sig", errors="replace")
        for line, _ in zip(text, range(lines)):
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                keys.update(dict.fromkeys(record))
    return list(keys)


def _open_binary(path: str):
    return gzip.open(path, "rb") if path.lower().endswith(".gz") else open(path, "rb")


def _file_bytes(path: str) -> bytes:
    with reading(path), _open_binary(path) as f:
        return f.read()


# ---- pandas (run --local) -----------------------------------------------------------------


def read_pandas(
    path: str | InputSource,
    *,
    sep: str = ",",
    columns: list[str] | None = None,
    text: bool = False,
    null_values: tuple[str, ...] | list[str] = (),
) -> pd.DataFrame:
    """Event files as one pandas frame; `columns` names the columns of CSV files that
    have no header line. A malformed row (in CSV, a field count other than the header's;
    in JSON lines, a line that is not a JSON object) or a row that is not UTF-8 text is
    kept, marked for `inputs.split_valid` to reject with the reason (as Spark does).
    `text`: CSV cells stay text (but the null tokens), as Spark reads them. A cell is
    null when it is blank, or one of `null_values` (docs/input.md), as in Spark.
    A CSV column with a number written with a leading zero ('007') stays text.
    `path` may be an `InputSource` (its own way of reading then applies)."""
    source = InputSource.of(path, sep=sep, columns=columns, null_values=null_values)
    sep, null_values = source.sep, source.null_values
    header = source.header if source.fmt == "csv" else None
    frames = []
    for f in source.files:
        with reading(f):
            if source.fmt == "csv":
                frames.append(_read_csv(f, sep, header, bool(source.columns), text, null_values))
            elif source.fmt == "json":
                frames.append(_read_jsonl(f))
            else:
                frames.append(pd.read_parquet(f))
        check_names(list(frames[-1].columns), f)
    frame = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    if not len(frame):
        raise DataError(f"the input '{source.path}' holds no events")
    return null_cells(frame, null_values)


def _read_csv(
    path: str, sep: str, header: list[str], named: bool, text: bool = False, null_values=()
) -> pd.DataFrame:
    """A CSV file of the input whose columns are `header` (`named`: the file has no
    header line, the names were given)."""
    data = _file_bytes(path)
    malformed = _malformed_csv_rows(data, sep, header, has_header=not named)
    options: dict = {"header": None, "names": header} if named else {}
    if malformed:  # line numbers (values never hold a line break: docs/input.md)
        options["skiprows"] = [row + (0 if named else 1) for row in malformed]

    def parse(**more):
        return pd.read_csv(
            io.BytesIO(data), sep=sep, na_values=[*NULL_TOKENS, *null_values],
            keep_default_na=False, encoding="utf-8-sig", encoding_errors="replace",
            **options, **more,
        )  # fmt: skip

    if text:
        frame = parse(dtype=str)
    else:
        frame = parse()
        numbers = [c for c in frame.columns if frame[c].dtype.kind in "iuf"]
        # decimals that may be integers by the one rule (input_types.choose_kind): the
        # text decides (a column of integers and a few decimals, or with a blank)
        whole = [c for c in numbers if frame[c].dtype.kind == "f" and _mostly_whole(frame[c])]
        if numbers and _may_need_text(data, sep):  # only a column of numbers may lose text
            cells = parse(dtype=str, usecols=numbers)
            kept = [c for c in numbers if cells[c].str.match(KEEP_TEXT, na=False).any()]
            whole = list(dict.fromkeys([*kept, *whole]))
        elif whole:
            cells = parse(dtype=str, usecols=whole)
        if whole:  # their columns are typed by the checks (inputs.typed_columns)
            frame = frame.assign(**{c: cells[c] for c in whole})
    return _not_utf8_rows(_with_malformed(frame, malformed), data)


# Cells pandas' reader would read as numbers where Spark's checks do not (docs/input.md):
# a number written with a leading zero (its column stays text) and 'nan' (no number).
# Their columns are read as text and typed by the checks (inputs.typed_columns).
KEEP_TEXT = rf"(?:{LEADING_ZERO}|^\s*[+-]?(?i:nan)\s*$)"


def _mostly_whole(values: pd.Series) -> bool:
    """Whether enough of a column's numbers have whole values to be integers."""
    numbers = values.dropna().to_numpy()
    whole = int((numbers == np.floor(numbers)).sum())
    return len(numbers) > 0 and whole >= NUMERIC_SHARE * len(numbers)


def _may_need_text(data: bytes, sep: str, step: int = 2**22) -> bool:
    """Whether a cell may be one of KEEP_TEXT (a quick look at the bytes; the cells
    decide): a cell that starts with a zero and a digit, or with 'nan', after spaces
    and a sign. A part of `step` bytes at a time: each start takes 8 bytes of arrays,
    and smaller arrays are memory the allocator hands out again, not new pages from the
    system (G2's 25 MB: 64 MiB parts, 0.16 s of which 0.13 s in the kernel; 4 MiB, 0.08 s;
    whole --local runs 1.23 against 0.95 s)."""
    return any(_kept_text_in(data, sep, lo, lo + step) for lo in range(0, len(data) or 1, step))


_DIGIT = np.zeros(256, bool)
_DIGIT[ord("0") : ord("9") + 1] = True


def _kept_text_in(data: bytes, sep: str, lo: int, hi: int) -> bool:
    """`_may_need_text` for the cells that start in data[lo:hi], with numpy (G2's 25 MB:
    0.06 s, against 0.15 s for one regular expression over the bytes)."""
    hi = min(hi, len(data))
    before = max(lo - 1, 0)
    b = np.frombuffer(data[before : hi + 3] + b"\0\0\0", np.uint8)  # 3 bytes past any start
    span = b[: hi - before]
    edge = (span == ord("\n")) | (span == ord('"')) | (span == ord(sep))
    starts = np.flatnonzero(edge[: hi - 1 - before]) + 1  # b's index of each start < hi
    if lo == 0:
        starts = np.concatenate(([0], starts))
    first = b[starts]
    if ((first == ord(" ")) | (first == ord("\t"))).any():  # blanks first: rare, the regex
        return _kept_text_regex(data[before:], sep, lo == 0)  # (any match there is one)
    starts = starts + ((first == ord("+")) | (first == ord("-")))
    c0, c1, c2 = b[starts], b[starts + 1], b[starts + 2]  # (the padding is none of these)
    zero = (c0 == ord("0")) & _DIGIT[c1]
    nan = ((c0 | 32) == ord("n")) & ((c1 | 32) == ord("a")) & ((c2 | 32) == ord("n"))
    return bool(zero.any() or nan.any())


def _kept_text_regex(data: bytes, sep: str, at_start: bool) -> bool:
    """The same look, with one regular expression (`data` from the byte before its first
    cell, or from the input's start)."""
    # One class of the bytes a cell starts after, not an alternation with '^' (2.6x as
    # fast over G2's 25 MB), and the first cell of the data on its own.
    start = rb"[ \t]*[+-]?(?:0[0-9]|[nN][aA][nN])"
    first = at_start and re.match(start, data) is not None
    return first or re.search(rb'[\n"' + re.escape(sep.encode()) + rb"]" + start, data) is not None


def _malformed_csv_rows(data: bytes, sep: str, header: list[str], has_header: bool) -> dict:
    """Row number -> text of each row whose field count is not the header's (Arrow's
    parser, line by line as Spark reads CSV: fast, and it counts fields exactly)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    bad: dict[int, str] = {}

    def invalid(row):
        bad[row.number - (2 if has_header else 1)] = row.text
        return "skip"

    # One block of the whole data: a row longer than a block (1 MB by default) is an
    # error to Arrow ("straddles two block boundaries"); Spark and pandas read it.
    block = min(max(len(data), 1), 2**31 - 1)
    pacsv.read_csv(
        io.BytesIO(data),
        read_options=pacsv.ReadOptions(
            use_threads=False, block_size=block, column_names=header,
            skip_rows=1 if has_header else 0,
        ),
        parse_options=pacsv.ParseOptions(delimiter=sep, invalid_row_handler=invalid),
        convert_options=pacsv.ConvertOptions(
            include_columns=[header[0]], column_types={header[0]: pa.binary()},
        ),
    )  # fmt: skip
    return bad


def _read_jsonl(path: str) -> pd.DataFrame:
    data = _file_bytes(path).removeprefix(b"\xef\xbb\xbf")
    # strings stay text (pandas would read "007" as 7): the checks type them, as Spark's
    options = {"lines": True, "precise_float": True, "encoding_errors": "replace", "dtype": False}
    try:
        frame = pd.read_json(io.BytesIO(data), **options)
        malformed: dict[int, str] = {}
    except ValueError:  # some line is not a JSON object: find which, keep the others
        lines = [line for line in data.split(b"\n") if line.strip()]
        malformed = {}
        for i, line in enumerate(lines):
            try:
                ok = isinstance(json.loads(line), dict)
            except ValueError:
                ok = False
            if not ok:
                malformed[i] = line.decode("utf-8", errors="replace").rstrip("\r")
        good = b"\n".join(line for i, line in enumerate(lines) if i not in malformed)
        frame = pd.read_json(io.BytesIO(good), **options) if good else pd.DataFrame()
    return _not_utf8_rows(_with_malformed(frame, malformed), data)


def malformed_cells(
    rows: pd.DataFrame, columns: list[str], sep: str, null_values=()
) -> pd.DataFrame:
    """A malformed CSV row's cells as Spark's reader fills them from the row's text: its
    first fields, in order, as many as there are columns (none past its end); the null
    tokens null. They are not values read: only the rejected rows show them, the same
    in every runner (docs/input.md)."""
    tokens = {*NULL_TOKENS, *(v.strip(" ") for v in null_values)}

    bad = rows[CORRUPT].notna().to_numpy()
    if not bad.any():
        return rows
    rows = rows.copy()
    for at in np.flatnonzero(bad):
        fields = next(csv.reader([rows[CORRUPT].iloc[at]], delimiter=sep), [])
        for i, col in enumerate(columns):
            cell = fields[i] if i < len(fields) else None
            null = cell is None or cell.strip(" ") in tokens
            rows.iloc[at, rows.columns.get_loc(col)] = None if null else cell
    return rows


def rows_as_read(text: pd.DataFrame, at, source: InputSource) -> pd.DataFrame:
    """Rows `at` (0-based row numbers) of a CSV input read as text (`read_pandas(...,
    text=True)`) as a rejected output shows them, in every runner: each column's text,
    and the malformed row's text in CORRUPT (its cells its first fields)."""
    columns = [c for c in text.columns if c not in (CORRUPT, READ_REASON)]
    rows = text.iloc[np.asarray(at, dtype=np.int64)]
    if CORRUPT not in rows:
        rows = rows.assign(**{CORRUPT: None})
    rows = malformed_cells(rows, columns, source.sep, source.null_values)
    return rows[[*columns, CORRUPT]].reset_index(drop=True)


def _with_malformed(frame: pd.DataFrame, malformed: dict[int, str]) -> pd.DataFrame:
    """The rows read, and each malformed row at its place (its text in CORRUPT)."""
    if not malformed:
        return frame
    n = len(frame) + len(malformed)
    good = np.setdiff1d(np.arange(n), np.fromiter(malformed, dtype=np.int64, count=len(malformed)))
    nullable = {
        c: ("Int64" if pd.api.types.is_integer_dtype(t) else "boolean")
        for c, t in frame.dtypes.items()
        if pd.api.types.is_integer_dtype(t) or pd.api.types.is_bool_dtype(t)
    }
    frame = frame.astype(nullable).set_axis(good, axis=0)
    bad = pd.DataFrame(
        {CORRUPT: list(malformed.values()), READ_REASON: "malformed row"},
        index=list(malformed),
    )
    return pd.concat([frame, bad]).sort_index().reset_index(drop=True)


def _not_utf8_rows(frame: pd.DataFrame, data: bytes) -> pd.DataFrame:
    """Rows holding bytes that are not UTF-8 (read as U+FFFD, the replacement character)
    or U+FFFD itself are marked with the reason, as Spark marks them (docs/input.md)."""
    if REPLACEMENT.encode() not in data:
        try:
            data.decode("utf-8")
            return frame
        except UnicodeDecodeError:
            pass
    bad = np.zeros(len(frame), dtype=bool)
    for col in frame.columns:
        if frame[col].dtype == object:
            cells = frame[col].map(lambda v: isinstance(v, str) and REPLACEMENT in v)
            bad |= cells.to_numpy(dtype=bool)
    reasons = frame[READ_REASON] if READ_REASON in frame else pd.Series(None, index=frame.index)
    frame[READ_REASON] = reasons.where(reasons.notna() | ~bad, "not UTF-8 text")
    return frame


def _csv_double(v: float) -> str:
    if v in (math.inf, -math.inf):
        return "Infinity" if v > 0 else "-Infinity"
    return java_double(v)


def write_pandas(frame: pd.DataFrame, path: str) -> None:
    fmt = output_format(path)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    compression = "gzip" if path.endswith(".gz") else None
    if fmt == "json":
        data = json_bytes(frame)
        if compression:
            with gzip.open(path, "wb") as f:
                f.write(data)
        else:
            Path(path).write_bytes(data)
    elif fmt == "csv":
        out = frame.copy(deep=False)  # new columns only
        for col in frame.columns:
            if pd.api.types.is_datetime64_any_dtype(frame[col].dtype):  # as Spark writes them
                out[col] = frame[col].dt.strftime(TIME_FORMAT)
            elif pd.api.types.is_float_dtype(frame[col].dtype):  # 1.0E20, as Spark writes it
                out[col] = [None if v != v else _csv_double(v) for v in frame[col].tolist()]
            elif frame[col].dtype == object and frame[col].map(lambda v: isinstance(v, list)).any():
                out[col] = frame[col].map(  # lists (only in object columns) as JSON text
                    lambda v: pd.io.json.ujson_dumps(v) if isinstance(v, list) else v
                )
        out.to_csv(path, index=False, compression=compression)
    else:
        frame.to_parquet(path, index=False)


def count_rows(path: str, fmt: str) -> int:
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return pq.ParquetFile(path).metadata.num_rows
    import gzip

    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    return lines - 1 if fmt == "csv" else lines
