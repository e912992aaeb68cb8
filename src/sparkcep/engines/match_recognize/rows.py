"""Output rows of MATCH_RECOGNIZE, as the standard defines them for each ROWS PER MATCH mode.

- ONE ROW PER MATCH: per match (an empty one too) the PARTITION BY columns and the
  measures, computed at the match's last row (RUNNING and FINAL agree there).
- ALL ROWS PER MATCH: per row of a match, except rows of an exclusion {- -}, the PARTITION
  BY and ORDER BY columns, the measures (RUNNING at that row, FINAL at the last) and the
  other input columns. An empty match gives one row (its starting row's columns) unless
  OMIT EMPTY MATCHES; WITH UNMATCHED ROWS adds each row in no match, measures null.
- Empty match: references and navigation are null, CLASSIFIER() is null, aggregates are
  over no row (count 0), MATCH_NUMBER() is the match's number.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sparkcep.budget import CELL_BYTES, Meter
from sparkcep.engines.match_recognize.expressions import EmptyView, MatchView

MATCH, EMPTY, UNMATCHED = "match", "empty", "unmatched"


class RowCollector:
    """Gathers the source row and the measures of each output row, counted on `meter`
    (the program's budget)."""

    def __init__(self, query, meter: Meter):
        self.q = query
        self.meter = meter
        self.row_bytes = (2 + len(query.spec.output)) * CELL_BYTES
        self.source: list[int] = []  # the row whose input columns an output row has
        self.values: list[list] = [[] for _ in query.measures]

    def __len__(self) -> int:
        return len(self.source)

    def add(self, seg, kind: str, start: int, labels=(), bounds=(), mn: int = 0):
        """An output of partition `seg`: a match, an empty match or an unmatched row."""
        q = self.q
        if kind == UNMATCHED:
            self._row(start, [None] * len(q.measures))
            return
        if kind == EMPTY:
            view = EmptyView(seg, mn, q.compiler.aggs)
            self._row(start, [f(view) for _, f in q.measures])
            return
        view = MatchView(seg, list(labels), start, mn, q.compiler.aggs)
        if q.spec.rows == "one":
            self._row(start, [f(view) for _, f in q.measures])
            return
        excluded = _excluded(bounds)
        for pos in range(start, start + len(labels)):
            if excluded and any(a <= pos < b for a, b in excluded):
                continue
            view.cur = pos
            self._row(pos, [f(view) for _, f in q.measures])

    def _row(self, source: int, values: list):
        self.meter.hold(self.row_bytes, matches=1)
        self.source.append(source)
        for column, value in zip(self.values, values):
            column.append(value)

    def frame(self, rows: pd.DataFrame) -> pd.DataFrame:
        """The output rows, from `rows` (the events the positions index)."""
        picked = rows.iloc[np.asarray(self.source, dtype=np.int64)].reset_index(drop=True)
        measures = {name: values for (name, _), values in zip(self.q.measures, self.values)}
        out = {}
        for col in self.q.spec.output:
            if col.source == "measure":
                out[col.name] = typed(measures[col.ref], col.kind)
                if col.kind == "timestamp" and col.like in rows:  # the input's resolution
                    out[col.name] = out[col.name].astype(rows[col.like].dtype)
            else:
                out[col.name] = picked[col.ref].to_numpy()
        return pd.DataFrame(out)


def _excluded(bounds) -> list[tuple[int, int]]:
    return [(bounds[i], bounds[i + 1]) for i in range(0, len(bounds) - 1, 2)]


def typed(values: list, kind: str):
    """Measure values (timestamps as microseconds) as a column of their kind."""
    if kind == "int":
        return pd.array(values, dtype="Int64")
    if kind == "float":
        return pd.array([np.nan if v is None else v for v in values], dtype="float64")
    if kind == "bool":
        return pd.array(values, dtype="boolean")
    if kind == "timestamp":
        return pd.to_datetime(pd.array(values, dtype="Int64"), unit="us")
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out
