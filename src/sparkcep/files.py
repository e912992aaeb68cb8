"""Event files in and result files out: CSV (with a header), JSON lines, Parquet, gzipped or
not, one file or a folder of them (read in name order)."""

from __future__ import annotations

import glob
import gzip
import os
from pathlib import Path

import pandas as pd

from sparkcep.errors import DataError
from sparkcep.inputs import NULL_TOKENS
from sparkcep.jsonlines import json_lines

FORMATS = {
    ".csv": "csv",
    ".jsonl": "json",
    ".json": "json",
    ".ndjson": "json",
    ".parquet": "parquet",
}
OUTPUT_FORMATS = {".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet"}
CORRUPT = "__corrupt_record"  # Spark's column for a row it could not parse


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


def read_pandas(path: str, *, sep: str = ",", columns: list[str] | None = None) -> pd.DataFrame:
    """Event files as one pandas frame; `columns` names the columns of CSV files that
    have no header line."""
    files, fmt = input_files(path)
    frames = []
    for f in files:
        if fmt == "csv":
            header = {"header": None, "names": list(columns)} if columns else {}
            frames.append(
                pd.read_csv(
                    f, sep=sep, na_values=list(NULL_TOKENS), keep_default_na=False, **header
                )
            )
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


def count_rows(path: str, fmt: str) -> int:
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return pq.ParquetFile(path).metadata.num_rows
    import gzip

    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    return lines - 1 if fmt == "csv" else lines
