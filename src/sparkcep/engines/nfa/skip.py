"""AFTER MATCH SKIP for pattern queries: which of a partition's matches are kept.

The matches of each partition (the key's values) are taken in *preferment order*: by
their first event in processing order, for one first event the longest first (its last
event latest), then in output order. A match is kept when its first event comes after
the *skip point*, which each kept match moves: to its last event (PAST LAST EVENT: kept
matches do not overlap) or to its first event (TO NEXT EVENT: one match per first event,
the longest). Kept matches are output as usual. So a run of rising prices, every part of
which matches `SEQ(Trade+ t[]) WHERE prev(t.price) < t.price`, gives one row: the whole
run (as a greedy quantifier does in MATCH_RECOGNIZE).

The matches starting at an event are all known once time passes its window: a match is
decided then (with no window, at the end of the input).

>>> import pandas as pd
>>> rows = pd.DataFrame({"t": [[0], [0, 1], [0, 1, 2], [1], [1, 2], [2]]})
>>> rows = with_keys(rows, first=[(1, 0, 0), (1, 0, 0), (1, 0, 0), (2, 0, 1), (2, 0, 1),
...                               (3, 0, 2)],
...                  last=[(1, 0, 0), (2, 0, 1), (3, 0, 2), (2, 0, 1), (3, 0, 2), (3, 0, 2)])
>>> skip = AfterMatchSkip("PAST_LAST_EVENT", key=(), window=None, order=("t",))
>>> kept, held, points = skip.select(rows, {}, horizon=None, final=True)
>>> kept["t"].tolist()
[[0, 1, 2]]
>>> skip = AfterMatchSkip("TO_NEXT_EVENT", key=(), window=None, order=("t",))
>>> skip.select(rows, {}, horizon=None, final=True)[0]["t"].tolist()
[[0, 1, 2], [1, 2], [2]]
"""

from __future__ import annotations

import numpy as np
import pandas as pd

FIRST = ("__f0", "__f1", "__f2")  # the first event's time (ticks), tie-break value, id
LAST = ("__l0", "__l1", "__l2")  # the last event's
PLAN = "__p"  # which plan of the program a held match belongs to
HIDDEN = (*FIRST, *LAST, PLAN)


def with_keys(rows: pd.DataFrame, first, last, plan: int = 0) -> pd.DataFrame:
    """`rows` with the processing-order keys of their first and last events."""
    out = rows.copy()
    for i, name in enumerate(FIRST):
        out[name] = [k[i] for k in first]
    for i, name in enumerate(LAST):
        out[name] = [k[i] for k in last]
    out[PLAN] = plan
    return out


def _order(value):
    """A comparable form of a tie-break value (nulls sort first, as processing order)."""
    if value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NA:
        return (0,)
    return (1, value)


def _key(row, names) -> tuple:
    t, tie, ident = (row[n] for n in names)
    return (int(t), _order(tie), ident)


class AfterMatchSkip:
    """The selection of one plan: `mode` PAST_LAST_EVENT or TO_NEXT_EVENT."""

    def __init__(self, mode: str, key: tuple[str, ...], window: int | None, order):
        self.mode = mode
        self.key = tuple(key)
        self.window = window
        self.order = tuple(order)

    def select(self, held: pd.DataFrame, points: dict, horizon: int | None, final: bool):
        """(kept rows, rows still undecided, skip points) from the held candidates.

        `points` maps a partition's key values to its skip point (an event's key);
        `horizon`: no event before it will come; `final`: the input has ended."""
        if not len(held):
            return held.iloc[:0], held, points
        rows = held.reset_index(drop=True)
        records = rows.to_dict("records")
        index = list(range(len(records)))
        for name in reversed(self.order):  # output order, then longest, then first event
            index.sort(key=lambda i, n=name: _sortable(records[i][n]))
        index.sort(key=lambda i: _key(records[i], LAST), reverse=True)
        index.sort(key=lambda i: (*(_sortable(records[i][k]) for k in self.key),
                                  _key(records[i], FIRST)))  # fmt: skip
        kept, waiting = [], []
        blocked: set = set()
        for i in index:
            row = records[i]
            part = tuple(row[k] for k in self.key)
            if part in blocked:
                waiting.append(i)
                continue
            first = _key(row, FIRST)
            point = points.get(part)
            if point is not None and first <= point:
                continue  # skipped
            if not final and not self._known(first[0], horizon):
                blocked.add(part)  # matches starting here may still come
                waiting.append(i)
                continue
            kept.append(i)
            points[part] = _key(row, LAST) if self.mode == "PAST_LAST_EVENT" else first
        return rows.iloc[sorted(kept)], rows.iloc[sorted(waiting)], points

    def _known(self, first_time: int, horizon: int | None) -> bool:
        """Whether every match starting at `first_time` has been found."""
        return (
            self.window is not None and horizon is not None and first_time + self.window < horizon
        )


def _sortable(value):
    if isinstance(value, list | tuple | np.ndarray):
        return tuple(_sortable(v) for v in value)
    return _order(value)


def prune_points(points: dict, horizon: int | None, window: int | None) -> dict:
    """Skip points no future candidate can start before or at (they no longer matter): a
    candidate found later ends at `horizon` or after, so it starts after horizon - window,
    possibly at an earlier event still in the window, which a point keeps skipped."""
    if horizon is None or window is None:
        return points
    return {k: v for k, v in points.items() if v[0] > horizon - window - 1}
