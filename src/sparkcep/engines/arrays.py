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


def lexsort(keys: list[np.ndarray]) -> np.ndarray:
    """`np.lexsort(keys)` (stable; the last key is the most significant) in fewer passes:
    a key equal to a more significant one is left out, and neighbouring keys of
    non-negative integers below 2^31 (positions, ids, codes) are packed two to an int64.

    >>> lexsort([np.array([1, 0, 1]), np.array([2, 2, 1])]).tolist()
    [2, 1, 0]
    """
    if not len(keys[0]):
        return np.arange(0)
    kept: list[np.ndarray] = []
    for key in reversed(keys):  # the most significant first
        if not any(key.dtype == k.dtype and np.array_equal(key, k) for k in kept):
            kept.append(key)
    packed: list[np.ndarray] = []
    while kept:
        if len(kept) > 1 and _packable(kept[0]) and _packable(kept[1]):
            packed.append((kept[0].astype(np.int64) << 32) | kept[1].astype(np.int64))
            kept = kept[2:]
        else:
            packed.append(kept.pop(0))
    if len(packed) == 1:
        return np.argsort(packed[0], kind="stable")
    return np.lexsort(packed[::-1])


def _packable(key: np.ndarray) -> bool:
    return key.dtype.kind in "iu" and int(key.min()) >= 0 and int(key.max()) < 2**31
