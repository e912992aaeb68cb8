"""Event files as Spark DataFrames, and result files written by Spark (one file each)."""

from __future__ import annotations

import glob
import os
import re
import shutil
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkcep.errors import DataError
from sparkcep.files import (
    CORRUPT,
    InputSource,
    check_names,
    count_rows,
    csv_head,
    json_key_order,
    output_format,
)
from sparkcep.runners.spark.rows import _null_tokens
from sparkcep.runners.spark.session import default_parallelism
from sparkcep.runners.spark.split_rows import rows_per_split, spark_split_bytes

# CSV inputs under this size (unpacked) may be checked with one read (runners/spark/one_read.py):
# their checked rows are kept for the run (in memory, on disk past it). Spilled to disk, the
# one read still wins (G2, 16M events, 411 MB: 42.8-46.4 s against 48.9-52.0 s read twice);
# the limit keeps a run's spilled rows to about a gigabyte of local disk. A run that checks
# its rows on their way to the matcher (runners/spark/one_pass.py) keeps none: no limit.
ONE_READ_BYTES = 2**30

# Spark's pattern for jsonlines.TIME_FORMAT (its default drops microseconds).
SPARK_TIME_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSSSSS'Z'"


@dataclass
class SplitRows:
    """The rows of each split of one CSV file (`split_rows.rows_per_split`), counted in a
    thread of their own from `start()` (while the driver builds the run's plans)."""

    path: str
    split_bytes: int
    header: bool
    _counting: Future | None = None

    def start(self) -> SplitRows:
        if self._counting is None:
            pool = ThreadPoolExecutor(1, thread_name_prefix="sparkcep-split-rows")
            self._counting = pool.submit(rows_per_split, self.path, self.split_bytes, self.header)
            pool.shutdown(wait=False)
        return self

    def result(self) -> list[int] | None:
        """The counts (None: Spark must count them: see `rows_per_split`)."""
        try:
            return self.start()._counting.result()
        except OSError:  # the file Spark reads is not one Python can: Spark counts
            return None


@dataclass
class SparkInput:
    """A DataFrame over event files, and how to read it on: the splits of the files in
    input order (for row numbers) and whether its columns are text to type."""

    df: object
    split_cols: list
    infer_types: bool
    # CSV: the first rows' cells (header order), a guess of the column types that lets
    # the checking pass read the files once (runners/spark/one_read.py, one_pass.py);
    # None: two reads.
    head: dict | None = None
    size: int | None = None  # the input's bytes (unpacked)
    # One CSV file: its rows in each of Spark's splits, counted here (None: Spark counts)
    split_rows: SplitRows | None = None

    def options(self) -> dict:
        return {"split_cols": self.split_cols, "infer_types": self.infer_types}


def read_spark(
    spark,
    path: str | InputSource,
    *,
    sep: str = ",",
    columns: list[str] | None = None,
    null_values=(),
) -> SparkInput:
    """Event files as a Spark DataFrame. CSV is read as text in one pass (the column
    types are inferred in the checking pass); malformed rows are kept for `rejected`.
    `columns` names the columns of CSV files that have no header line; a text cell in
    `null_values` (trimmed) is null, as a blank one is (docs/input.md). `path` may be an
    `InputSource` (its own way of reading then applies)."""
    source = InputSource.of(path, sep=sep, columns=columns, null_values=null_values)
    files, sep, null_values = list(source.files), source.sep, source.null_values
    head = None
    if source.fmt == "csv":
        # Without this, which rows count as malformed depends on the columns a query
        # reads, and a row could be rejected by one pass and matched by another.
        spark.conf.set("spark.sql.csv.parser.columnPruning.enabled", "false")
        # Every file's header is read here (BOM-less, names checked, one header for the
        # folder: docs/input.md), so Spark need not check them: it skips each header line.
        header = source.header
        named = bool(source.columns)
        first_rows = any(source.head.values()) if source.head else False  # read anyway
        if not (first_rows or any(_has_rows(f, sep, has_header=not named) for f in files)):
            raise DataError(f"the input '{source.path}' holds no events")  # as read_pandas says
        fields = [T.StructField(name, T.StringType()) for name in header]
        schema = T.StructType([*fields, T.StructField(CORRUPT, T.StringType())])
        df = (
            spark.read.option("header", not named)
            .option("sep", sep)
            .option("mode", "PERMISSIVE")
            .option("columnNameOfCorruptRecord", CORRUPT)
            .option("enforceSchema", True)
            .schema(schema)
            .csv(files)
        )
        infer = True
        head = source.head
    elif source.fmt == "json":
        df = spark.read.option("columnNameOfCorruptRecord", CORRUPT).json(files)
        infer = True  # a field of numbers and a few texts is read as text: type it
        df = df.select(*[F.col(f"`{c}`") for c in _json_columns(df.columns, files[0])])
    else:
        df = spark.read.parquet(*files)
        infer = False
    split_size = balance_splits(spark, files)
    check_names([c for c in df.columns if c != CORRUPT], source.path)
    if null_values:
        df = _null_tokens(df, null_values)
    # The input order of the splits (row numbers follow it): by file, then offset; one
    # file needs no path (a text per row to group by and keep: G2, 1M events, one read:
    # 1.4 of 8.9 JVM CPU seconds).
    # One file: Spark's partitions of it are its splits in order (equal splits, the last
    # the shortest, one per partition), and a partition's number costs nothing where the
    # offset is a metadata column read per row (G2 4M, the checks: 0.2 s of 3.9).
    split_cols = [F.spark_partition_id()]
    if len(files) > 1:
        split_cols = [F.col("_metadata.file_path"), F.col("_metadata.file_block_start")]
    split_rows = None
    if source.fmt == "csv" and split_size is not None:
        split_rows = SplitRows(files[0], split_size, header=not named)
    return SparkInput(df, split_cols, infer, head, source.size, split_rows)


MAX_PARTITION_BYTES = "spark.sql.files.maxPartitionBytes"
# What a run set the limit to and the session's own limit it replaced ("set|own"): a later
# run starts from the session's own, unless the session's setting changed since.
LIMIT_KEPT = "spark.sparkcep.files.maxPartitionBytes"
_BYTES = re.compile(r"^\s*(\d+)\s*([kmgtp]?)b?\s*$", re.IGNORECASE)


def balance_splits(spark, files: list[str]) -> int | None:
    """Cut the files into splits that keep every core busy to the end: a multiple of the
    cores, as equal as the files allow, none larger than Spark's limit (its default 128
    MiB, or the session's). Spark cuts an input of more than a split per core at its
    limit: 411 MB into 128, 128, 128 and 27 MB, and on 2 cores the third split runs
    alone (G2, 16M events: the reading stage 22.2 -> 18.3 s, the same rows). A smaller
    input is Spark's to cut (a split per core). Every job of the run plans with it.

    Returns the size Spark cuts one uncompressed file into (None: several files, or not
    known), for `split_rows.rows_per_split`."""
    try:
        now = spark.conf.get(MAX_PARTITION_BYTES)
        set_to, _, own = (spark.conf.get(LIMIT_KEPT, None) or "|").partition("|")
        own = own if own and now == set_to else now
        limit = _bytes(own)
        total = sum(os.path.getsize(f) for f in files if not f.lower().endswith(".gz"))
        cores = default_parallelism(spark)
        open_cost = _bytes(spark.conf.get("spark.sql.files.openCostInBytes"))
        min_splits = spark.conf.get("spark.sql.files.minPartitionNum", None)
        max_splits = spark.conf.get("spark.sql.files.maxPartitionNum", None)
        leaves = spark.conf.get("spark.sql.leafNodeDefaultParallelism", None)
    except Exception:  # files Python cannot see, a setting it cannot read: Spark's own cut
        return None
    if not (limit and cores and open_cost):
        return None
    size = split_bytes(total, cores, limit) if total > cores * limit else limit
    spark.conf.set(MAX_PARTITION_BYTES, str(size))
    spark.conf.set(LIMIT_KEPT, f"{size}|{own}")
    if len(files) != 1 or files[0].lower().endswith(".gz") or max_splits:
        return None
    return spark_split_bytes(total, 1, size, open_cost, int(min_splits or leaves or cores))


def split_bytes(total: int, cores: int, limit: int) -> int:
    """The size of the splits that cut `total` bytes into a multiple of `cores` splits,
    each at most `limit` bytes.

    >>> split_bytes(411_008_686, 2, 128 * 2**20), split_bytes(102_751_714, 2, 128 * 2**20)
    (102752172, 51375857)
    """
    pieces = cores * max(1, -(-total // (cores * limit)))
    return max(1, -(-total // pieces))


def _bytes(setting: str | None) -> int | None:
    """A Spark size setting ('134217728b', '64m', '1000') in bytes."""
    found = _BYTES.match(setting or "")
    if not found:
        return None
    return int(found.group(1)) * 1024 ** "_kmgtp".index((found.group(2) or "_").lower())


def _json_columns(columns: list[str], first_file: str) -> list[str]:
    """A JSON lines input's columns in the order of its first keys, as the local reader
    has them (Spark's reader sorts them by name), the others after, the malformed row's
    text last: rejected rows are written alike (docs/input.md)."""
    try:
        first = json_key_order(first_file)
    except Exception:  # the read above reports the file's fault
        first = []
    names = [c for c in columns if c != CORRUPT]
    ordered = [c for c in first if c in names] + [c for c in names if c not in first]
    return ordered + ([CORRUPT] if CORRUPT in columns else [])


def _has_rows(path: str, sep: str, has_header: bool) -> bool:
    """Whether a CSV file holds a row besides its header (True when that cannot be told
    here: Spark's read reports the file's fault)."""
    try:
        return bool(csv_head(path, sep, header=has_header, rows=1))
    except Exception:
        return True


def csv_layout(writer, columns: int):
    """Spark's CSV writer set to write text as the local runner (pandas, RFC 4180) does:
    a quote inside a quoted cell doubled (Spark's default escapes it with a backslash,
    which other readers take for a cell's end), blanks at either end of a cell kept (by
    default Spark trims them), an empty text an empty cell. In a file of one column, a
    null is `""`: an empty line would be no row (Spark's writer drops it)."""
    writer = (
        writer.option("escape", '"')
        .option("ignoreLeadingWhiteSpace", False)
        .option("ignoreTrailingWhiteSpace", False)
    )
    if columns == 1:
        return writer.option("nullValue", '""')
    return writer.option("emptyValue", "")


def write_spark(
    df, path: str, *, order: list[str] | None = None, limit: int | None = None,
    before_move=None,
) -> int:  # fmt: skip
    """Write one file at `path` (Spark writes a folder of parts; we keep the one part),
    its rows sorted by `order` (in the one partition: no range shuffle). Returns the
    number of rows written, read off the file (no second Spark job). `before_move()` is
    called once Spark has written the rows and before they are at `path` (an error it
    raises leaves `path` as it was).

    The rows meet in one partition through a shuffle, not `coalesce(1)`: a coalesce
    would pull the stage that computes them (the matching) into a single task."""
    fmt = output_format(path)
    if fmt == "csv":
        for field in df.schema.fields:
            if isinstance(field.dataType, T.ArrayType | T.StructType | T.MapType):
                df = df.withColumn(field.name, F.to_json(F.col(f"`{field.name}`")))
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".sparkcep-", dir=str(target.parent))
    try:
        single = df.repartition(1)
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
            csv_layout(writer, len(df.columns)).option("header", True).option(
                "timestampFormat", SPARK_TIME_FORMAT
            ).csv(tmp + "/out")
        else:
            writer.parquet(tmp + "/out")
        if before_move is not None:
            before_move()
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
