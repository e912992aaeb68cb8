"""Event files in and result files out: CSV (with a header), JSON lines, Parquet, gzipped or
not, one file or a folder of them (read in name order)."""

from __future__ import annotations

import glob
import gzip
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from sparkcep.errors import DataError
from sparkcep.jsonlines import json_lines

FORMATS = {
    ".csv": "csv",
    ".jsonl": "json",
    ".json": "json",
    ".ndjson": "json",
    ".parquet": "parquet",
}
OUTPUT_FORMATS = {".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet"}
CORRUPT = "__corrupt_record"
# Spark's pattern for jsonlines.TIME_FORMAT (its default drops microseconds).
SPARK_TIME_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSSSSS'Z'"


def file_format(path: str) -> str | None:
    name = path.lower()
    for suffix in (".gz", ".bz2", ".zst", ".snappy"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return FORMATS.get(os.path.splitext(name)[1])


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


def output_format(path: str) -> str:
    name = path.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    fmt = OUTPUT_FORMATS.get(os.path.splitext(name)[1])
    if fmt is None:
        raise DataError(f"name the output .jsonl, .csv or .parquet (got '{path}')")
    return fmt


def default_rejected_path(output: str) -> str:
    base = output[:-3] if output.endswith(".gz") else output
    stem, _ = os.path.splitext(base)
    return f"{stem}.rejected.jsonl"


# ---- pandas (run --local) -----------------------------------------------------------------


def read_pandas(path: str, *, sep: str = ",") -> pd.DataFrame:
    files, fmt = input_files(path)
    frames = []
    for f in files:
        if fmt == "csv":
            frames.append(pd.read_csv(f, sep=sep))
        elif fmt == "json":
            frames.append(pd.read_json(f, lines=True, precise_float=True))
        else:
            frames.append(pd.read_parquet(f))
    frame = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    if not len(frame):
        raise DataError(f"the input '{path}' holds no events")
    return frame


def write_pandas(frame: pd.DataFrame, path: str) -> None:
    fmt = output_format(path)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    compression = "gzip" if path.endswith(".gz") else None
    if fmt == "json":
        text = "".join(line + "\n" for line in json_lines(frame))
        if compression:
            with gzip.open(path, "wt", encoding="utf-8") as f:
                f.write(text)
        else:
            Path(path).write_text(text, encoding="utf-8")
    elif fmt == "csv":
        out = frame.copy()
        for col in out.columns:
            if out[col].map(lambda v: isinstance(v, list)).any():
                out[col] = out[col].map(
                    lambda v: pd.io.json.ujson_dumps(v) if isinstance(v, list) else v
                )
        out.to_csv(path, index=False, compression=compression)
    else:
        frame.to_parquet(path, index=False)


# ---- Spark --------------------------------------------------------------------------------


@dataclass
class SparkInput:
    """A DataFrame over event files, and how to read it on: the splits of the files in
    input order (for row numbers) and whether its columns are text to type."""

    df: object
    split_cols: list
    infer_types: bool

    def options(self) -> dict:
        return {"split_cols": self.split_cols, "infer_types": self.infer_types}


def read_spark(spark, path: str, *, sep: str = ",") -> SparkInput:
    """Event files as a Spark DataFrame. CSV is read as text in one pass (the column
    types are inferred in the checking pass); malformed rows are kept for `rejected`."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    files, fmt = input_files(path)
    if fmt == "csv":
        # Without this, which rows count as malformed depends on the columns a query
        # reads, and a row could be rejected by one pass and matched by another.
        spark.conf.set("spark.sql.csv.parser.columnPruning.enabled", "false")
        header = _csv_header(files[0], sep)
        fields = [T.StructField(name, T.StringType()) for name in header]
        schema = T.StructType([*fields, T.StructField(CORRUPT, T.StringType())])
        df = (
            spark.read.option("header", True)
            .option("sep", sep)
            .option("mode", "PERMISSIVE")
            .option("columnNameOfCorruptRecord", CORRUPT)
            .option("enforceSchema", False)
            .schema(schema)
            .csv(files)
        )
        infer = True
    elif fmt == "json":
        df = spark.read.option("columnNameOfCorruptRecord", CORRUPT).json(files)
        infer = False
    else:
        df = spark.read.parquet(*files)
        infer = False
    split_cols = [F.col("_metadata.file_path"), F.col("_metadata.file_block_start")]
    return SparkInput(df, split_cols, infer)


def _csv_header(path: str, sep: str) -> list[str]:
    import csv
    import gzip

    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", newline="") as f:
        row = next(csv.reader(f, delimiter=sep), None)
    if not row:
        raise DataError(f"the CSV file '{path}' is empty: it needs a header line")
    return row


def write_spark(df, path: str, *, order: list[str] | None = None, limit: int | None = None) -> int:
    """Write one file at `path` (Spark writes a folder of parts; we keep the one part),
    its rows sorted by `order` (in the one partition: no range shuffle). Returns the
    number of rows written, read off the file (no second Spark job)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    fmt = output_format(path)
    if fmt == "csv":
        for field in df.schema.fields:
            if isinstance(field.dataType, T.ArrayType | T.StructType | T.MapType):
                df = df.withColumn(field.name, F.to_json(F.col(f"`{field.name}`")))
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".sparkcep-", dir=str(target.parent))
    try:
        single = df.coalesce(1)
        if order:
            single = single.sortWithinPartitions(*[F.col(f"`{c}`") for c in order])
        if limit is not None:
            single = single.limit(limit).coalesce(1)
        writer = single.write.mode("overwrite")
        if path.endswith(".gz"):
            writer = writer.option("compression", "gzip")
        if fmt == "json":
            writer.option("ignoreNullFields", False).option(
                "timestampFormat", SPARK_TIME_FORMAT
            ).json(tmp + "/out")
        elif fmt == "csv":
            writer.option("header", True).csv(tmp + "/out")
        else:
            writer.parquet(tmp + "/out")
        parts = sorted(p for p in glob.glob(tmp + "/out/part-*") if not p.endswith(".crc"))
        if not parts:  # no rows: Spark may write no part file
            if fmt == "parquet":
                df.limit(0).toPandas().to_parquet(path, index=False)
            else:
                header = ",".join(df.columns) + "\n" if fmt == "csv" else ""
                Path(path).write_text(header)
            return 0
        shutil.move(parts[0], path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return count_rows(path, fmt)


def count_rows(path: str, fmt: str) -> int:
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return pq.ParquetFile(path).metadata.num_rows
    import gzip

    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    return lines - 1 if fmt == "csv" else lines
