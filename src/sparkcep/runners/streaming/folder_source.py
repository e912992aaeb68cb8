"""The stream reader of a folder of event files (`folder`): which files each micro-batch
takes, and their rows as text. Spark runs it in a Python process of its own for each
stream started, so it imports nothing heavy (no pandas, no pyarrow until a file is read):
that process started in 4 s of CPU with them, 2.5 s without."""

from __future__ import annotations

import csv
import gc
import gzip
import json
import os
from pathlib import Path

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadMaxFiles,
    SupportsTriggerAvailableNow,
)

from sparkcep.errors import DataError
from sparkcep.failures import reading
from sparkcep.input_types import CORRUPT, NULL_TOKENS
from sparkcep.sizes import file_format


def listing(folder: str, fmt: str) -> list[tuple[int, str]]:
    """(modification time in ns, name) of the folder's files of this format, in order."""
    out = []
    for entry in os.scandir(folder):
        if entry.is_file() and not entry.name.startswith(".") and file_format(entry.name) == fmt:
            out.append((entry.stat().st_mtime_ns, entry.name))
    return sorted(out)


# A CSV or Parquet file up to this size is read in several parts (each task reads it and
# keeps its share of the rows) when a micro-batch has fewer files than cores.
SPLIT_BYTES = 64 * 2**20


class FolderReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets name the files of each micro-batch, so a batch re-run after a crash reads
    the same files; the files already read are kept in the checkpoint folder (a file is
    read once, even if it is touched again).

    A micro-batch of fewer files than cores (`cores`) reads a CSV or Parquet file (of up
    to SPLIT_BYTES) in as many parts as it takes to keep the cores busy: each part's
    task reads the file and keeps its share of the rows, and the checks that follow in
    the JVM run on every core (G2, one 50k-event file a micro-batch on 2 cores: a
    micro-batch's median 0.64 -> 0.55 s, the reading stage 179 -> 151 ms). The files of a stream are whole once they appear (written
    elsewhere and moved in), so each part reads the same rows."""

    def __init__(self, options: dict):
        self.folder = options["path"]
        self.format = options["format"]
        self.sep = options.get("sep", ",")
        self.columns = json.loads(options["columns"])
        self.headerless = options.get("headerless", "false") == "true"
        self.max_files = int(options.get("maxFilesPerTrigger", 0)) or None
        self.seen_file = options.get("seen") or None
        self.seen = _read_seen(self.seen_file)
        self.target: set[str] | None = None
        self.cores = max(1, int(options.get("cores", 1)))

    def initialOffset(self) -> dict:
        return {"batch": 0, "files": []}

    def getDefaultReadLimit(self):
        return ReadMaxFiles(self.max_files) if self.max_files else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = {name for _, name in listing(self.folder, self.format)}

    def latestOffset(self, start: dict, limit) -> dict:
        done = self.seen | set(start["files"])
        files = [name for _, name in listing(self.folder, self.format) if name not in done]
        if self.target is not None:
            files = [name for name in files if name in self.target]
        if isinstance(limit, ReadMaxFiles):
            files = files[: limit.max_files]
        if not files:
            return start
        return {"batch": int(start["batch"]) + 1, "files": files}

    def partitions(self, start: dict, end: dict):
        files = end["files"]
        parts = -(-self.cores // max(1, len(files))) if self.format in ("csv", "parquet") else 1
        out = []
        for name in files:
            n = parts if parts > 1 and _size(os.path.join(self.folder, name)) <= SPLIT_BYTES else 1
            out += [InputPartition((name, part, n)) for part in range(n)]
        return out

    def read(self, partition):
        name, part, parts = partition.value
        path = os.path.join(self.folder, name)
        header = self.columns if self.headerless else None
        batches = _batches(path, self.format, self.sep, self.columns, header)
        if parts == 1:
            yield from batches
            return
        import pyarrow as pa

        batches = list(batches)
        if not batches:  # a file of no rows (a header alone): no part has any
            return
        table = pa.Table.from_batches(batches)
        first, last = (table.num_rows * part) // parts, (table.num_rows * (part + 1)) // parts
        yield from table.slice(first, last - first).to_batches()

    def commit(self, end: dict) -> None:
        new = [name for name in end["files"] if name not in self.seen]
        self.seen.update(new)
        if self.seen_file and new:
            Path(self.seen_file).parent.mkdir(parents=True, exist_ok=True)
            with open(self.seen_file, "a") as f:
                f.writelines(name + "\n" for name in new)


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:  # gone: its reading says so
        return 0


def _read_seen(path: str | None) -> set[str]:
    if not path or not os.path.exists(path):
        return set()
    return {line.rstrip("\n") for line in open(path) if line.strip()}


def _batches(path: str, fmt: str, sep: str, columns: list[str], header: list[str] | None):
    """A file's rows as Arrow record batches of the stream's columns (text, but parquet);
    text files also fill CORRUPT, the text of a malformed row."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if fmt == "parquet":
        with reading(path):
            table = pq.read_table(path)
        yield from table.select([c for c in columns if c in table.column_names]).to_batches()
        return
    names = [*columns, CORRUPT]
    if fmt == "csv":
        table = _plain_csv(path, sep, header, expected=columns)
        if table is not None:
            yield from table.to_batches()
            return
        data = _csv_columns(path, sep, header, expected=columns)
    else:
        rows = text_rows(path, fmt, sep, header, expected=columns)
        data = {c: [r.get(c) for r in rows] for c in names}
    yield pa.RecordBatch.from_pydict(data, schema=pa.schema([(c, pa.string()) for c in names]))


# Python's whitespace (what `str.strip` strips): a cell of these only is blank, hence null.
SPACE = "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"


def _plain_csv(path: str, sep: str, header: list[str] | None, expected: list[str]):
    """A plain CSV file read by Arrow's reader (a 50k-row file: 10 against 75 ms), as
    the stream's columns of text (nulls for blank cells) and CORRUPT (all null); or
    None where the file is not plain and `_csv_columns` must read it. Plain: not
    compressed, UTF-8 without a byte-order mark, no quote character (nor a NUL byte),
    no empty line, the expected header, and every line of the header's field count (at
    least two). On such a file both readers cut the same cells at the same separators
    and line ends (tests/test_folder_stream_csv.py: an oracle on random files)."""
    import pyarrow as pa
    import pyarrow.csv as pa_csv

    if NULL_TOKENS != ("",) or path.endswith(".gz") or len(expected) < 2:
        return None
    if len(sep) != 1 or sep in '"\r\n':
        return None
    with reading(path), open(path, "rb") as f:
        data = f.read()
    if b'"' in data or b"\x00" in data or data.startswith(b"\xef\xbb\xbf"):
        return None
    try:  # (Arrow's reader hands a row with bytes that are not UTF-8 on as a failure)
        data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    # An empty line (two line ends in a row) is a malformed row to the csv module, a
    # row of blanks to Arrow's reader.
    if data[:1] in (b"\n", b"\r") or any(two in data for two in (b"\n\n", b"\n\r", b"\r\r")):
        return None
    uneven = []

    def odd_row(row) -> str:
        uneven.append(row)
        return "skip"

    try:
        table = pa_csv.read_csv(
            pa.BufferReader(data),
            read_options=pa_csv.ReadOptions(column_names=header or None, use_threads=False),
            parse_options=pa_csv.ParseOptions(
                delimiter=sep, quote_char=False, ignore_empty_lines=False,
                invalid_row_handler=odd_row,
            ),
            convert_options=pa_csv.ConvertOptions(
                column_types={c: pa.string() for c in expected},
                strings_can_be_null=False, quoted_strings_can_be_null=False,
            ),
        )  # fmt: skip
    except (pa.ArrowInvalid, ValueError):  # no header line, ...: the csv module's to say
        return None
    if uneven or table.column_names != expected:
        return None
    columns = [_blank_as_null(table.column(c)) for c in expected]
    corrupt = pa.nulls(table.num_rows, pa.string())
    return pa.table([*columns, corrupt], names=[*expected, CORRUPT])


def _blank_as_null(column):
    """Text cells that are empty or whitespace only (`str.strip`) become nulls (the
    null tokens are the blank cell alone, `_cells`): only a cell starting with
    whitespace can be one, and only those are looked at one by one."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    column = column.combine_chunks()
    first = pc.utf8_slice_codeunits(column, 0, 1)
    maybe = np.flatnonzero(pc.is_in(first, value_set=pa.array(["", *SPACE])).to_numpy(False))
    if not len(maybe):
        return column
    blank = np.zeros(len(column), dtype=bool)
    cells = column.take(pa.array(maybe)).to_pylist()
    blank[maybe] = [not cell.strip() for cell in cells]
    return pc.if_else(pa.array(blank), pa.scalar(None, pa.string()), column)


def _csv_columns(path: str, sep: str, header: list[str] | None, expected: list[str]) -> dict:
    """A CSV file's cells column by column (the rows `text_rows` reads, without a dict
    per row), CORRUPT holding the text of each malformed row.

    The garbage collector waits meanwhile: the file's rows, a list of cells each, hold no
    cycles to collect, and its passes over them took longer than the reading."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _csv_cells(path, sep, header, expected)
    finally:
        if collecting:
            gc.enable()


def _csv_cells(path: str, sep: str, header: list[str] | None, expected: list[str]) -> dict:
    with reading(path), _text_file(path) as f:
        reader = csv.reader(f, delimiter=sep)
        named = header is not None
        header = _csv_header(path, header or next(reader, []), expected)
        rows = list(reader)
    width = len(header)
    corrupt = [None] * len(rows)
    if any(len(values) != width for values in rows):  # as in `text_rows`
        texts = _row_texts(path, sep, has_header=not named)
        corrupt = [None if len(v) == width else texts[i] for i, v in enumerate(rows)]
        rows = [values if len(values) == width else _first(values, width) for values in rows]
    cells = list(zip(*rows)) if rows else [()] * width
    data = {name: _column_cells(column) for name, column in zip(header, cells)}
    data[CORRUPT] = corrupt
    return data


def _first(values: list[str], width: int) -> list[str | None]:
    return values[:width] + [None] * (width - len(values))


class _Taken:
    """The lines a csv reader takes from a file, until a row's text is asked for."""

    def __init__(self, lines):
        self.lines, self.taken = iter(lines), []

    def __iter__(self):
        return self

    def __next__(self) -> str:
        line = next(self.lines)
        self.taken.append(line)
        return line

    def row(self) -> str:
        text, self.taken = "".join(self.taken).rstrip("\r\n"), []
        return text


def _row_texts(path: str, sep: str, has_header: bool) -> list[str]:
    """Each row's text as the file holds it (quotes and all), as a batch run keeps a
    malformed row's: read again, only for a file that has one."""
    with reading(path), _text_file(path) as f:
        taken = _Taken(f)
        reader = csv.reader(taken, delimiter=sep)
        if has_header:
            next(reader, None)
            taken.row()
        texts = []
        for _ in reader:
            texts.append(taken.row())
    return texts


def _csv_header(path: str, header: list[str], expected: list[str] | None) -> list[str]:
    if expected is not None and header != expected:
        raise DataError(
            f"'{path}' has the header ({', '.join(header)}) but the stream's files have "
            f"({', '.join(expected)}): move it out of the folder"
        )
    return header


def _text_file(path: str):
    opener = gzip.open if path.endswith(".gz") else open
    return opener(path, "rt", newline="", encoding="utf-8-sig", errors="replace")


def text_rows(
    path: str, fmt: str, sep: str, header: list[str] | None, expected: list[str] | None = None
) -> list[dict]:
    """Rows of a CSV or JSON lines file as text cells (a JSON value that is not text is
    written as JSON); a row that cannot be read (in CSV, a field count other than the
    header's; in JSON lines, a line that is not an object) is a row of its text in
    CORRUPT, rejected downstream as malformed (docs/input.md). A CSV file whose header
    is not the stream's is refused."""
    with reading(path), _text_file(path) as f:
        if fmt == "csv":
            reader = csv.reader(f, delimiter=sep)
            named = header is not None
            header = _csv_header(path, header or next(reader, []), expected)
            rows = list(reader)
            width = len(header)
            odd = any(len(values) != width for values in rows)
            texts = _row_texts(path, sep, has_header=not named) if odd else []
            # a malformed row: its first fields as cells (as Spark's reader fills them),
            # shown only where it is written as rejected, and its text
            return [
                dict(zip(header, _cells(values)))
                if len(values) == width
                else {**dict(zip(header, _cells(values))), CORRUPT: texts[i]}
                for i, values in enumerate(rows)
            ]
        out = []
        for line in f:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                record = None
            if isinstance(record, dict):
                out.append({k: _text(v) for k, v in record.items()})
            else:
                out.append({CORRUPT: line.rstrip("\r\n")})
        return out


def _cells(values: list[str]) -> list[str | None]:
    return [None if v.strip() in NULL_TOKENS else v for v in values]


def _column_cells(column) -> list[str | None]:
    """`_cells` of a column, whose malformed rows hold None."""
    return [None if v is None or v.strip() in NULL_TOKENS else v for v in column]


def _text(v) -> str | None:
    if v is None:
        return None
    return v if isinstance(v, str) else json.dumps(v)


class FolderSource(DataSource):
    """`spark.readStream.format("sparkcep_folder")`: see the module's docstring."""

    @classmethod
    def name(cls) -> str:
        return "sparkcep_folder"

    def schema(self):
        return self.options["schema"]

    def streamReader(self, schema):
        return FolderReader(self.options)
