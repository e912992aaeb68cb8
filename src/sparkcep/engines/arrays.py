"""Small numpy building blocks shared by engines."""

from __future__ import annotations

import numpy as np


def ranges(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For rows with [lo, hi): (row index repeated, each value in the range).

    >>> rows, values = ranges(np.array([0, 5]), np.array([2, 7]))
    >>> rows.tolist(), values.tolist()
    ([0, 0, 1, 1], [0, 1, 5, 6])
    """
    counts = np.maximum(hi - lo, 0)
    total = int(counts.sum())
    rows = np.repeat(np.arange(len(lo)), counts)
    if total == 0:
        return rows, np.zeros(0, dtype=np.int64)
    starts = np.repeat(lo - np.concatenate(([0], np.cumsum(counts)[:-1])), counts)
    return rows, starts + np.arange(total)
