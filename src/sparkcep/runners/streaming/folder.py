"""A folder of event files as a stream, taken in a defined order, with types that never change.

Spark's own file source takes new files in order of modification time and leaves files of
equal time in no defined order; split over micro-batches (`--max-files-per-trigger`), a
later file could be read first and make the events of an earlier one late. This source
takes files in order of (modification time, name) — files that arrive together are read
in name order — and at most the given number per micro-batch.

Text files (CSV, JSON lines) are read as text; the stream's column types are decided once,
from the files present at its first start (the same rules as a batch run: `inputs`), and
kept in the checkpoint folder, so a restart reads the same types and a bad cell never
re-types a column: it is a rejected row, with its reason. Parquet files keep their schema.
"""

from __future__ import annotations

import csv
import gc
import gzip
import json
import os
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadMaxFiles,
    SupportsTriggerAvailableNow,
)

from sparkcep.errors import DataError
from sparkcep.failures import damaged_checkpoint, reading
from sparkcep.files import check_headers, check_names, file_format, input_files
from sparkcep.inputs import CORRUPT, NULL_TOKENS, null_cells, typed_columns
from sparkcep.runners.spark.rows import spark_type

TYPES_FILE = "sparkcep-types.json"
SEEN_FILE = "sparkcep-files-read.txt"
SAMPLE_ROWS = 10_000


def listing(folder: str, fmt: str) -> list[tuple[int, str]]:
    """(modification time in ns, name) of the folder's files of this format, in order."""
    out = []
    for entry in os.scandir(folder):
        if entry.is_file() and not entry.name.startswith(".") and file_format(entry.name) == fmt:
            out.append((entry.stat().st_mtime_ns, entry.name))
    return sorted(out)


class FolderReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets name the files of each micro-batch, so a batch re-run after a crash reads
    the same files; the files already read are kept in the checkpoint folder (a file is
    read once, even if it is touched again)."""

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
        return [InputPartition(name) for name in end["files"]]

    def read(self, partition):
        path = os.path.join(self.folder, partition.value)
        header = self.columns if self.headerless else None
        yield from _batches(path, self.format, self.sep, self.columns, header)

    def commit(self, end: dict) -> None:
        new = [name for name in end["files"] if name not in self.seen]
        self.seen.update(new)
        if self.seen_file and new:
            Path(self.seen_file).parent.mkdir(parents=True, exist_ok=True)
            with open(self.seen_file, "a") as f:
                f.writelines(name + "\n" for name in new)


def _read_seen(path: str | None) -> set[str]:
    if not path or not os.path.exists(path):
        return set()
    return {line.rstrip("\n") for line in open(path) if line.strip()}


def _batches(path: str, fmt: str, sep: str, columns: list[str], header: list[str] | None):
    """A file's rows as Arrow record batches of the stream's columns (text, but parquet);
    text files also fill CORRUPT, the text of a malformed row."""
    if fmt == "parquet":
        with reading(path):
            table = pq.read_table(path)
        yield from table.select([c for c in columns if c in table.column_names]).to_batches()
        return
    names = [*columns, CORRUPT]
    if fmt == "csv":
        data = _csv_columns(path, sep, header, expected=columns)
    else:
        rows = _text_rows(path, fmt, sep, header, expected=columns)
        data = {c: [r.get(c) for r in rows] for c in names}
    yield pa.RecordBatch.from_pydict(data, schema=pa.schema([(c, pa.string()) for c in names]))


def _csv_columns(path: str, sep: str, header: list[str] | None, expected: list[str]) -> dict:
    """A CSV file's cells column by column (the rows `_text_rows` reads, without a dict
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
        header = _csv_header(path, header or next(reader, []), expected)
        rows = list(reader)
    width = len(header)
    corrupt = [None if len(values) == width else sep.join(values) for values in rows]
    if any(text is not None for text in corrupt):
        blank = [None] * width
        rows = [values if len(values) == width else blank for values in rows]
    cells = list(zip(*rows)) if rows else [()] * width
    data = {name: _column_cells(column) for name, column in zip(header, cells)}
    data[CORRUPT] = corrupt
    return data


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


def _text_rows(
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
            header = _csv_header(path, header or next(reader, []), expected)
            return [
                dict(zip(header, _cells(values)))
                if len(values) == len(header)
                else {CORRUPT: sep.join(values)}
                for values in reader
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


# ---- the stream's types, decided once ------------------------------------------------------


def stream_types(
    folder: str, fmt: str, sep: str, header, checkpoint: str | None, null_values=()
) -> dict[str, str]:
    """Column -> Spark type name: read from the checkpoint, or decided from the files
    present now (and written there)."""
    saved = Path(checkpoint) / TYPES_FILE if checkpoint else None
    if saved is not None and saved.exists():
        try:
            types = json.loads(saved.read_text(encoding="utf-8"))
        except ValueError:
            types = None
        if not isinstance(types, dict) or not all(isinstance(t, str) for t in types.values()):
            raise DataError(damaged_checkpoint(str(checkpoint), str(saved)))
        return types
    files, _ = input_files(folder)
    types = _decide_types(files, fmt, sep, header, null_values)
    if saved is not None:
        saved.parent.mkdir(parents=True, exist_ok=True)
        saved.write_text(json.dumps(types))
    return types


def _decide_types(files: list[str], fmt: str, sep: str, header, null_values=()) -> dict[str, str]:
    if fmt == "parquet":
        with reading(files[0]):
            schema = pq.read_schema(files[0])
        return {f.name: _arrow_kind(f.type) for f in schema}
    rows: list[dict] = []
    columns: list[str] = list(header) if header else []
    if fmt == "csv" and not header:
        columns = check_headers(files, sep)
    for path in files:
        batch = _text_rows(path, fmt, sep, header)
        if fmt == "json":
            keys = (k for r in batch for k in r if k != CORRUPT)
            columns = list(dict.fromkeys([*columns, *keys]))
        rows += batch
        if len(rows) >= SAMPLE_ROWS:
            break
    if not columns:
        raise DataError(
            f"the folder '{Path(files[0]).parent}' holds no events to learn its columns from"
        )
    check_names(columns, str(Path(files[0]).parent))
    frame = pd.DataFrame([{c: r.get(c) for c in columns} for r in rows[:SAMPLE_ROWS]], dtype=object)
    frame = null_cells(frame, null_values)
    typed, _, _ = typed_columns(frame, skip=set())
    return {c: _pandas_kind(typed[c]) for c in columns}


def _pandas_kind(col: pd.Series) -> str:
    if str(col.dtype) == "Int64" or pd.api.types.is_integer_dtype(col.dtype):
        return "long"
    if pd.api.types.is_float_dtype(col.dtype):
        return "double"
    return "string"


def _arrow_kind(t: pa.DataType) -> str:
    if pa.types.is_integer(t):
        return "long"
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "double"
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_timestamp(t) or pa.types.is_date(t):
        return "timestamp"
    return "string"


def read_folder(spark, folder: str, fmt: str, *, sep: str, columns: list[str] | None,
                max_files: int | None, checkpoint: str | None, null_values=()):  # fmt: skip
    """The folder as a streaming DataFrame of text columns (typed columns for parquet),
    and the types its columns are read as (`typed_stream` applies them)."""
    spark.dataSource.register(FolderSource)
    types = stream_types(folder, fmt, sep, columns, checkpoint, null_values)
    if fmt == "parquet":
        schema = T.StructType([T.StructField(c, spark_type(_kind_of(t))) for c, t in types.items()])
    else:  # text, and the text of a malformed row
        schema = T.StructType([T.StructField(c, T.StringType()) for c in [*types, CORRUPT]])
    reader = (
        spark.readStream.format("sparkcep_folder")
        .option("path", folder)
        .option("format", fmt)
        .option("sep", sep)
        .option("columns", json.dumps(list(types)))
        .option("headerless", "true" if columns else "false")
        .option("seen", str(Path(checkpoint) / SEEN_FILE) if checkpoint else "")
        .option("schema", schema.simpleString())
    )
    if max_files:
        reader = reader.option("maxFilesPerTrigger", max_files)
    df = reader.schema(schema).load()
    if null_values:
        from sparkcep.runners.spark.rows import _null_tokens

        df = _null_tokens(df, null_values)
    return df, types


def _kind_of(spark_name: str) -> str:
    return {"long": "int", "double": "float", "boolean": "bool"}.get(spark_name, spark_name)


def typed_stream(df: DataFrame, types: dict[str, str], keep: set[str]) -> DataFrame:
    """Text columns cast to their decided types; a cell that does not cast becomes null,
    and its text stays in `__raw_<i>` for the columns in `keep` (the time column's text
    is kept by the streaming runner itself)."""
    from sparkcep.runners.spark.rows import text_cast

    out = df
    for i, (col, kind) in enumerate(types.items()):
        if kind == "string" or dict(df.dtypes).get(col) != "string":
            continue
        if col in keep:
            out = out.withColumn(f"__raw_{i}", F.col(f"`{col}`"))
        out = out.withColumn(col, text_cast(F.col(f"`{col}`"), kind))
    return out
