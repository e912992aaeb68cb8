"""The input of every imprecise algorithm: one plan's events with their intervals and
point probabilities, and the pattern in the shape the algorithms read.

Events are those that can match some component (the shared bitmask), in processing
order (segment, time, tie-break, id). Event `e` happened at one integer point of
[lo[e], hi[e]]; `pmf[e, k]` is the probability of point lo[e] + k (zero beyond the
interval), `cum`/`rcum` its running sums from the left and from the right, so that the
mass of the points <= s, or >= t, is exact (a sum of zeros is exactly zero). Which
points have a positive probability is kept apart, as integers (`first`, `last`,
`positive_between`), so that whether a match is certain is decided exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd

from sparkcep.expressions import Vec, column_vec, evaluate
from sparkcep.language import ast
from sparkcep.plan import Plan
from sparkcep.plan.intervals import IntervalSpec
from sparkcep.prep.table import EventTable, build_table


@dataclass
class Pattern:
    """SEQ(E1, ..., El) with its window (ticks), strategy, the bit of each component and
    the cross conditions checked when component j binds (stage j)."""

    bits: tuple[int, ...]
    window: int
    next: bool  # SKIP_TILL_NEXT_MATCH
    stages: tuple[tuple[ast.Expr, ...], ...]  # conditions per stage
    variables: tuple[str, ...]
    max_width: int

    @property
    def length(self) -> int:
        return len(self.bits)

    @staticmethod
    def of(plan: Plan) -> Pattern:
        spec: IntervalSpec = plan.spec  # type: ignore[assignment]
        positives = plan.positives
        stages: list[list[ast.Expr]] = [[] for _ in positives]
        for cond in plan.conditions:
            stages[cond.stage].append(cond.expr)
        return Pattern(
            bits=tuple(c.bit for c in positives),
            window=spec.points_window(int(plan.window)),  # type: ignore[arg-type]
            next=plan.strategy == "SKIP_TILL_NEXT_MATCH",
            stages=tuple(tuple(s) for s in stages),
            variables=tuple(c.var for c in positives),
            max_width=spec.max_width,
        )


@dataclass
class IntervalEvents:
    """One plan's candidate events (see the module docstring)."""

    seg: np.ndarray  # int64 segment (partition) of each event
    ts: np.ndarray  # int64 time column, in ticks (processing order)
    lo: np.ndarray  # int64
    hi: np.ndarray  # int64
    mask: np.ndarray  # int64 bitmask of the components the event can match
    pmf: np.ndarray  # (n, P) float64
    columns: dict[str, Vec] = field(default_factory=dict)
    row: np.ndarray | None = None  # each event's row in the frame it came from
    cum: np.ndarray = field(init=False)
    rcum: np.ndarray = field(init=False)

    def __post_init__(self):
        self.cum = np.cumsum(self.pmf, axis=1)
        self.rcum = np.cumsum(self.pmf[:, ::-1], axis=1)[:, ::-1]

    def __len__(self) -> int:
        return len(self.ts)

    @property
    def width(self) -> int:
        """Columns of `pmf`: the widest interval's number of points."""
        return self.pmf.shape[1]

    def prob(self, e: np.ndarray, t: np.ndarray) -> np.ndarray:
        """P[event e happened at point t] (0 outside its interval); broadcasts."""
        k = t - self.lo[e]
        inside = (k >= 0) & (t <= self.hi[e])
        return np.where(inside, self.pmf[e, np.clip(k, 0, self.width - 1)], 0.0)

    def mass_upto(self, e: np.ndarray, s: np.ndarray) -> np.ndarray:
        """P[e happened at a point <= s]; broadcasts."""
        k = np.clip(s - self.lo[e], -1, self.width - 1)
        return np.where(k >= 0, self.cum[e, np.maximum(k, 0)], 0.0)

    def mass_from(self, e: np.ndarray, t: np.ndarray) -> np.ndarray:
        """P[e happened at a point >= t]; broadcasts."""
        k = np.clip(t - self.lo[e], 0, self.width)
        return np.where(k < self.width, self.rcum[e, np.minimum(k, self.width - 1)], 0.0)

    @cached_property
    def first(self) -> np.ndarray:
        """Each event's first point of positive probability."""
        return self.lo + np.argmax(self.pmf > 0, axis=1)

    @cached_property
    def last(self) -> np.ndarray:
        """Each event's last point of positive probability."""
        return self.lo + self.width - 1 - np.argmax(self.pmf[:, ::-1] > 0, axis=1)

    @cached_property
    def _positive_upto(self) -> np.ndarray:
        return np.cumsum(self.pmf > 0, axis=1)

    def positive_between(self, e: np.ndarray, s: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Whether event e has a point of positive probability strictly between s and t
        (counted on integers, not summed probabilities)."""
        count = self._positive_upto

        def upto(x):  # positive points <= x
            k = np.clip(x - self.lo[e], -1, self.width - 1)
            return np.where(k >= 0, count[e, np.maximum(k, 0)], 0)

        return upto(t - 1) > upto(s)

    def points(self, e: int) -> list[tuple[int, float]]:
        """(point, probability) of event e, zero-probability points left out."""
        return [
            (int(self.lo[e]) + k, float(self.pmf[e, k]))
            for k in range(int(self.hi[e] - self.lo[e]) + 1)
            if self.pmf[e, k] > 0
        ]

    @staticmethod
    def from_arrays(lo, hi, mask, seg=None, ts=None, pmf=None, columns=None) -> IntervalEvents:
        """Events from plain arrays (tests, doctests): uniform pmfs unless given."""
        lo, hi = np.asarray(lo, np.int64), np.asarray(hi, np.int64)
        n = len(lo)
        seg = np.zeros(n, np.int64) if seg is None else np.asarray(seg, np.int64)
        ts = lo.copy() if ts is None else np.asarray(ts, np.int64)
        return IntervalEvents(
            seg, ts, lo, hi, np.asarray(mask, np.int64), pmf_matrix(lo, hi, pmf),
            columns or {}, np.arange(n),
        )  # fmt: skip


def pmf_matrix(lo: np.ndarray, hi: np.ndarray, lists=None) -> np.ndarray:
    """(n, P) point probabilities: uniform over each interval, or the given lists, each
    divided by its sum (the row checks accept a sum within 1e-9 of 1: rounding in the
    input, which would otherwise carry into every confidence)."""
    n = len(lo)
    widths = (hi - lo + 1).astype(np.int64)
    width = int(widths.max()) if n else 1
    out = np.zeros((n, max(width, 1)), dtype=np.float64)
    if lists is None:
        cols = np.arange(out.shape[1])
        inside = cols[None, :] < widths[:, None]
        out[inside] = np.repeat(1.0 / widths, widths)
        return out
    for i, values in enumerate(lists):
        values = np.asarray(values, dtype=np.float64)
        out[i, : len(values)] = values / values.sum()
    return out


def interval_events(
    plan: Plan, frame: pd.DataFrame, mask: np.ndarray, segment_cols: list[str]
) -> IntervalEvents:
    """The plan's candidate events among `frame`'s rows (in processing order)."""
    spec: IntervalSpec = plan.spec  # type: ignore[assignment]
    options = plan.options
    table: EventTable = build_table(
        frame,
        mask=mask,
        segment_cols=segment_cols,
        time_col=options.time_col,
        tiebreak=plan.tiebreak,
        attributes=plan.engine_attributes(),
        time_end_col=options.time_end_col,
    )
    rows = frame.iloc[table.row] if len(table) < len(frame) else frame
    if table.ts_end is not None and spec.point_unit is None:  # --time-upper: ts is the lower
        lo, hi = table.ts, table.ts_end
    else:
        lo, hi = bound_values(spec, rows, len(table))
    lists = rows[spec.pmf_col].to_numpy() if spec.pmf_col else None
    return IntervalEvents(
        table.segment, table.ts // spec.point_us, lo, hi, table.mask, pmf_matrix(lo, hi, lists),
        table.columns, table.row,
    )  # fmt: skip


def bound_values(spec: IntervalSpec, rows: pd.DataFrame, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The interval bounds of `rows` (row checks have made them integers, not null)."""
    cache: dict[str, Vec] = {}

    def resolve(node):
        if node.attr not in cache:
            cache[node.attr] = column_vec(rows[node.attr])
        return cache[node.attr]

    lo = evaluate(spec.lower, resolve, n).values.astype(np.int64)
    hi = evaluate(spec.upper, resolve, n).values.astype(np.int64)
    return lo, hi
