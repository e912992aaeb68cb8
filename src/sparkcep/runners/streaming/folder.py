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

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import types as T

from sparkcep.errors import DataError
from sparkcep.failures import damaged_checkpoint, reading
from sparkcep.files import check_headers, check_names, input_files
from sparkcep.inputs import CORRUPT, null_cells, typed_columns
from sparkcep.runners.spark.rows import spark_type
from sparkcep.runners.spark.session import default_parallelism
from sparkcep.runners.streaming.folder_source import FolderSource, text_rows

TYPES_FILE = "sparkcep-types.json"
SEEN_FILE = "sparkcep-files-read.txt"
SAMPLE_ROWS = 10_000


# ---- the stream's types, decided once ------------------------------------------------------


def stream_types(
    folder: str, fmt: str, sep: str, header, checkpoint: str | None, null_values=()
) -> dict[str, str]:
    """Column -> Spark type name: read from the checkpoint, or decided from the files
    present now (and written there)."""
    saved = Path(checkpoint) / TYPES_FILE if checkpoint else None
    if saved is not None and saved.exists():
        return read_kept(saved, str(checkpoint), _types_valid)
    files, _ = input_files(folder)
    types = _decide_types(files, fmt, sep, header, null_values)
    if saved is not None:
        keep(saved, types)
    return types


def _types_valid(types) -> bool:
    return isinstance(types, dict) and all(isinstance(t, str) for t in types.values())


def read_kept(saved: Path, checkpoint: str, valid):
    """A JSON value sparkcep keeps in a stream's checkpoint folder (`keep`); DataError,
    in one line, where the file is not JSON or not what `valid` accepts."""
    try:
        value = json.loads(saved.read_text(encoding="utf-8"))
    except ValueError:
        value = None
    if not valid(value):
        raise DataError(damaged_checkpoint(checkpoint, str(saved)))
    return value


def keep(saved: Path, value) -> None:
    """Write a JSON value into a stream's checkpoint folder (read back by `read_kept`)."""
    saved.parent.mkdir(parents=True, exist_ok=True)
    saved.write_text(json.dumps(value), encoding="utf-8")


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
        batch = text_rows(path, fmt, sep, header)
        if fmt == "json":
            keys = (k for r in batch for k in r if k != CORRUPT)
            columns = list(dict.fromkeys([*columns, *keys]))
        rows += [r for r in batch if CORRUPT not in r]  # a malformed row's cells: no values
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
    and the types its columns are read as (the streaming pipeline's `_typed` applies them)."""
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
        .option("cores", str(default_parallelism(spark)))
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
