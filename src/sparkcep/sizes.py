"""How many bytes an input holds unpacked (what a run's settings are chosen by) and a file's
format by its name. Its own module, importing nothing heavy: `sparkcep._early` sizes the
input before the command's imports, and a stream's reader lists its folder in a Python
process of its own (`files` re-exports both)."""

from __future__ import annotations

import os

UNKNOWN_RATIO = 10  # a compressed file whose size unpacked it does not record: a guess


def data_bytes(files: list[str]) -> int:
    """About how many bytes the files hold unpacked (what a run's settings are chosen by,
    runners.spark.session.light_driver): a gzip file records its size unpacked in its last
    4 bytes (modulo 4 GiB: a smaller figure than the file's own means more than that);
    other compressed files count UNKNOWN_RATIO times their size."""
    total = 0
    for name in files:
        size = os.path.getsize(name)
        suffix = name.lower().rsplit(".", 1)[-1]
        if suffix == "gz" and size >= 18:  # a gzip header and trailer at least
            with open(name, "rb") as f:
                f.seek(-4, os.SEEK_END)
                recorded = int.from_bytes(f.read(4), "little")
            size = recorded if recorded >= size else size * UNKNOWN_RATIO
        elif suffix in ("gz", "bz2", "zst", "snappy"):
            size *= UNKNOWN_RATIO
        total += size
    return total


FORMATS = {
    ".csv": "csv",
    ".jsonl": "json",
    ".json": "json",
    ".ndjson": "json",
    ".parquet": "parquet",
}


def file_format(path: str) -> str | None:
    name = path.lower()
    for suffix in (".gz", ".bz2", ".zst", ".snappy"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return FORMATS.get(os.path.splitext(name)[1])
