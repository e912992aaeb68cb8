"""`Vec`: a column of values with a mask of nulls, what expressions and functions compute on
(`expressions` evaluates query expressions on them, `functions` holds the named functions)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Vec:
    values: np.ndarray
    null: np.ndarray | None = None  # True where the value is null; None means no nulls

    def __len__(self) -> int:
        return len(self.values)

    def nulls(self) -> np.ndarray:
        return self.null if self.null is not None else np.zeros(len(self.values), bool)

    def take(self, index: np.ndarray) -> Vec:
        return Vec(self.values[index], None if self.null is None else self.null[index])

    def truth(self) -> np.ndarray:
        """Where a condition is TRUE (null counts as not true)."""
        values = self.values.astype(bool, copy=False)
        return values if self.null is None else values & ~self.null

    def to_list(self) -> list:
        out = self.values.tolist()
        if self.null is not None:
            for i in np.flatnonzero(self.null):
                out[i] = None
        return out
