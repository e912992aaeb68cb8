"""The rows Spark's CSV reader gives each split of one file, counted in Python.

A run that numbers its rows (no `--id`) needs the rows of each split before the job that
matches them. Spark counting them costs a job of its own (G2, 16M events: 1.9 s, the
run's first job); counting the lines of the file here costs a read of its bytes (0.3 s
for 411 MB), and runs while the driver builds the run's plans.

Spark cuts a file of `size` bytes into splits of `split_bytes` (the last shorter) and
reads each one's lines as Hadoop's line reader does: a line belongs to the split in
which it starts, where the line starting exactly at a split's end belongs to that split,
not the next (a split that does not start the file skips its first, partial line). Its
CSV reader then drops the lines that are blank once trimmed (every byte at most ' '),
and in the first split the header: the first line that is not blank. Each other line is
a row, a malformed one too.

Where the file does not fit these rules as counted here (a line ended by a lone '\\r',
which Hadoop also ends lines with; a header not in the first split), the counts are
None and Spark counts. The run checks the counts against the rows its job reads
(`one_pass.Pending`): a count that does not hold is never used for a result.

>>> import tempfile, os
>>> with tempfile.NamedTemporaryFile("wb", suffix=".csv", delete=False) as f:
...     _ = f.write(b"a,b\\n1,2\\n\\n  \\n3,4\\r\\n5,6")
>>> rows_per_split(f.name, 9, header=True), rows_per_split(f.name, 100, header=True)
([1, 2, 0], [3])
>>> os.unlink(f.name)
"""

from __future__ import annotations

import numpy as np

CHUNK = 1 << 24
NEWLINE, RETURN, BLANK = 10, 13, 32


def spark_split_bytes(total: int, files: int, limit: int, open_cost: int, min_splits: int) -> int:
    """The size Spark cuts files into (`FilePartition.maxSplitBytes`): at most `limit`
    (spark.sql.files.maxPartitionBytes), else the bytes per core counting each file's
    open cost (spark.sql.files.openCostInBytes), but not under that cost."""
    per_core = (total + files * open_cost) // max(1, min_splits)
    return min(limit, max(open_cost, per_core))


def rows_per_split(path: str, split_bytes: int, header: bool) -> list[int] | None:
    """The rows Spark's CSV reader gives each split of the file at `path`, in order;
    None where this count may not be Spark's (see the module)."""
    counts: list[int] = []
    header_left = header
    offset = 0  # of `carry` in the file
    carry = b""
    with open(path, "rb") as f:
        while True:
            more = f.read(CHUNK)
            data = carry + more
            if not data:
                break
            end = len(data) if not more else data.rfind(b"\n") + 1
            if end == 0:  # no line ends in it yet
                carry = data
                continue
            lines = np.frombuffer(data, np.uint8, end)
            if _lone_return(lines, last=not more):
                return None
            # the starts of the lines in it, each as a position in the file
            breaks = np.flatnonzero(lines == NEWLINE)
            starts = np.concatenate(([0], breaks[:-1] + 1)) if len(breaks) else np.zeros(1, int)
            if not more and end and data[end - 1 : end] != b"\n":  # the last line, unended
                starts = np.concatenate((starts, [breaks[-1] + 1])) if len(breaks) else starts
            starts = starts[starts < end]
            kept = ~_blank(lines, starts, breaks, end)
            at = starts[kept] + offset
            if header_left and len(at):
                if _split_of(at[:1], split_bytes)[0] != 0:
                    return None  # Spark drops a header only in the first split
                at, header_left = at[1:], False
            splits = _split_of(at, split_bytes)
            if len(splits):
                found = np.bincount(splits)
                counts += [0] * (len(found) - len(counts))
                for i in np.flatnonzero(found):
                    counts[i] += int(found[i])
            offset += end
            carry = data[end:]
            if not more:
                break
    size = offset + len(carry)
    splits = max(1, -(-size // split_bytes))
    return counts + [0] * (splits - len(counts))


def _split_of(starts: np.ndarray, split_bytes: int) -> np.ndarray:
    """The split of each line start: (start - 1) // split_bytes, the file's first line in
    the first split."""
    return np.maximum(starts - 1, 0) // split_bytes


def _lone_return(lines: np.ndarray, last: bool) -> bool:
    """Whether a '\\r' not followed by '\\n' ends a line here (Hadoop ends a line there)."""
    returns = np.flatnonzero(lines == RETURN)
    if not len(returns):
        return False
    after = returns + 1
    if after[-1] == len(lines):
        return True  # the text's last byte (it ends at a line's end otherwise)
    return bool((lines[after] != NEWLINE).any())


def _blank(lines: np.ndarray, starts: np.ndarray, breaks: np.ndarray, end: int) -> np.ndarray:
    """Whether each line starting at `starts` is blank once trimmed: only the lines whose
    first byte is at most ' ' are looked at (an empty line's is its '\\n')."""
    blank = np.zeros(len(starts), bool)
    first = lines[starts] <= BLANK
    if not first.any():
        return blank
    # each line's end: the next line's start, or the end of the text
    ends = np.append(starts[1:], end)
    look = np.flatnonzero(first)
    # reduceat sums a[i:j] over each pair (start, end) given in turn (the sums between
    # one line's end and the next one's start are not used); its indices must lie in the
    # array: one more byte, not printing
    printing = np.append(lines[:end] > BLANK, False)
    pairs = np.column_stack((starts[look], ends[look])).ravel()
    sums = np.add.reduceat(printing, pairs, dtype=np.int64)[::2]
    blank[look] = sums == 0
    return blank
