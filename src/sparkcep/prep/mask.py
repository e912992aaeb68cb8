"""Which components an event can match, as one bitmask per event.

Several queries run together share one mask: their components are reduced to distinct
*signatures* (a type and local conditions, whatever the variable is called), one bit
each, and each query reads its own components' bits back out (`Signatures.plan_mask`).
The same signatures become a Spark column expression in `runners/spark/expr.py`, so the
mask and the filter are computed in the JVM there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sparkcep.errors import QueryError
from sparkcep.expressions import Vec, column_vec, truth
from sparkcep.language import ast

MAX_SIGNATURES = 62  # bits of an int64 mask, leaving the sign bit alone


@dataclass(frozen=True)
class Signature:
    """A component as the data sees it: its type and local conditions, and its bit."""

    event_type: str | None
    local: tuple[ast.Expr, ...]
    index: int

    @property
    def bit(self) -> int:
        return 1 << self.index


class Signatures:
    """The distinct signatures of a set of plans' components.

    >>> from sparkcep.plan import analyze
    >>> p1 = analyze("PATTERN SEQ(A a, B b) WHERE a.v > 1")
    >>> p2 = analyze("PATTERN SEQ(A x, C c) WHERE x.v > 1")
    >>> sigs = Signatures([p1, p2])
    >>> [(s.event_type, s.index) for s in sigs], sigs.bits(p2)
    ([('A', 0), ('B', 1), ('C', 2)], [0, 2])
    """

    def __init__(self, plans=()):
        self.items: list[Signature] = []
        self._index: dict[tuple, int] = {}
        for plan in plans:
            self.bits(plan)

    def __iter__(self):
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def of(self, comp) -> int:
        """The signature index of a component (added when new)."""
        texts = sorted(_normalized(e, comp.var) for e in comp.local)
        key = (comp.event_type, tuple(texts))
        if key not in self._index:
            if len(self.items) >= MAX_SIGNATURES:
                raise QueryError(
                    f"the queries run together have more than {MAX_SIGNATURES} distinct "
                    "components (type and conditions); run them in smaller groups"
                )
            self._index[key] = len(self.items)
            self.items.append(Signature(comp.event_type, tuple(comp.local), len(self.items)))
        return self._index[key]

    def bits(self, plan) -> list[int]:
        """The signature index of each of the plan's components, in component order."""
        return [self.of(c) for c in plan.components]

    def plan_mask(self, plan, mask: np.ndarray) -> np.ndarray:
        """The plan's own bitmask (bit i = its component i) from the shared one."""
        bits = self.bits(plan)
        if bits == list(range(len(bits))) and len(self.items) == len(bits):
            return mask
        out = np.zeros(len(mask), dtype=np.int64)
        for comp, sig in zip(plan.components, bits):
            out |= ((mask >> sig) & 1) << comp.index
        return out


def _normalized(expr: ast.Expr, var: str) -> str:
    return re.sub(rf"\b{re.escape(var)}\.", "$.", ast.to_text(expr))


def components_mask(components, type_col: str, frame: pd.DataFrame) -> np.ndarray:
    """Bitmask per row for any components with `event_type`, `local` and `bit`."""
    n = len(frame)
    mask = np.zeros(n, dtype=np.int64)
    types = frame[type_col].to_numpy(dtype=object) if type_col in frame.columns else None
    cache: dict[str, Vec] = {}

    def resolve(node: ast.Expr) -> Vec:
        if isinstance(node, ast.AttrRef):
            if node.attr not in cache:
                cache[node.attr] = column_vec(frame[node.attr])
            return cache[node.attr]
        raise TypeError(f"not a local expression: {node!r}")

    for comp in components:
        if comp.event_type is None:
            ok = np.ones(n, dtype=bool)
        else:
            ok = types == comp.event_type if types is not None else np.zeros(n, bool)
        for expr in comp.local:
            if not ok.any():
                break
            ok &= truth(expr, resolve, n)
        mask[ok] |= comp.bit
    return mask
