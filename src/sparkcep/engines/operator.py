"""The incremental operator interface shared by every engine.

An operator is fed time-sorted batches of *one partition* and returns output rows:
`process(batch) -> DataFrame`, `flush() -> DataFrame`. Its state is plain data that
pickles, so the same operator runs in-process, inside `applyInPandas`, and inside
stateful Structured Streaming. `process_many` is a convenience over several batches.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sparkcep.engines.nfa import find_matches
from sparkcep.errors import DataError
from sparkcep.events import MASK, build_table, component_mask, time_ticks
from sparkcep.output import empty_output, output_frame
from sparkcep.plan import Plan


class PatternOperator:
    """The `nfa` engine as an incremental operator over one partition.

    State is the tail of the stream that can still take part in a match (events newer
    than the latest time minus the window) and the latest time seen. Each batch is
    matched together with that tail; a match is reported by the batch holding its last
    event, or, with a negation at the end, by the batch in which time passes its
    window (`flush` reports the rest).

    >>> import pandas as pd, pickle
    >>> from sparkcep.plan import analyze
    >>> stream = pd.DataFrame({"type": list("ABAB"), "ts": [1, 2, 3, 4], "id": [0, 1, 2, 3]})
    >>> plan = analyze("PATTERN SEQ(A a, B b) WITHIN 10", {"type": "string", "ts": "int", "id": "int"})
    >>> op = PatternOperator(plan, id_col="id")
    >>> op.process(stream.iloc[:3])[["a", "b"]].values.tolist()
    [[0, 1]]
    >>> op = pickle.loads(pickle.dumps(op))
    >>> op.process(stream.iloc[3:])[["a", "b"]].values.tolist()
    [[0, 3], [2, 3]]
    """

    def __init__(self, plan: Plan, *, id_col: str, max_matches: int | None = None):
        self.plan = plan
        self.id_col = id_col
        self.max_matches = max_matches
        self.buffer: pd.DataFrame | None = None
        self.latest: int | None = None  # latest time seen, in ticks

    def process(self, batch: pd.DataFrame) -> pd.DataFrame:
        plan = self.plan
        batch = batch.copy()
        if MASK not in batch.columns:
            batch[MASK] = component_mask(plan, batch)
        ticks = time_ticks(batch[plan.options.time_col])
        if len(ticks) and (
            np.any(np.diff(ticks) < 0) or (self.latest is not None and ticks[0] < self.latest)
        ):
            raise DataError("a partition's events must arrive in time order")
        previous = self.latest
        if len(ticks):
            self.latest = int(ticks[-1])
        old = 0 if self.buffer is None else len(self.buffer)
        frame = batch if self.buffer is None else pd.concat([self.buffer, batch], ignore_index=True)
        frame = frame.reset_index(drop=True)
        out = self._match(frame, emit_from_row=old, released=(previous, self.latest))
        self._prune(frame)
        return out

    def flush(self) -> pd.DataFrame:
        if self.buffer is None or not len(self.buffer) or not self.plan.has_trailing_negation:
            return self._empty()
        return self._match(self.buffer, emit_from_row=0, released=(self.latest, None))

    def advance(self, to: int) -> pd.DataFrame:
        """Time reaches `to` (ticks) with no more events before it (a watermark): report
        the trailing-negation matches whose window closed, and forget what expired."""
        out = self._empty()
        if self.buffer is None or (self.latest is not None and to <= self.latest):
            return out
        if self.plan.has_trailing_negation and len(self.buffer):
            out = self._match(self.buffer, emit_from_row=0, released=(self.latest, to))
        self.latest = to
        self._prune(self.buffer)
        return out

    def is_empty(self) -> bool:
        return self.buffer is None or not len(self.buffer)

    def process_many(self, batches) -> pd.DataFrame:
        outs = [self.process(b) for b in batches] + [self.flush()]
        return pd.concat(outs, ignore_index=True)

    # ----
    def _match(self, frame: pd.DataFrame, emit_from_row: int, released) -> pd.DataFrame:
        table = build_table(self.plan, frame, self.id_col, sorted_=True)
        if not len(table):
            return self._empty(frame)
        emit_from = int(np.searchsorted(table.row, emit_from_row))
        if not self.plan.has_trailing_negation:
            released = None
        matches = find_matches(
            self.plan, table, emit_from=emit_from, released=released, max_matches=self.max_matches
        )
        return output_frame(self.plan, frame, table, matches, self.id_col)

    def _prune(self, frame: pd.DataFrame):
        w = self.plan.window
        if w is None or self.latest is None:
            self.buffer = frame
            return
        ticks = time_ticks(frame[self.plan.options.time_col])
        self.buffer = frame[ticks > self.latest - w].reset_index(drop=True)

    def _empty(self, frame: pd.DataFrame | None = None) -> pd.DataFrame:
        frame = frame if frame is not None else self.buffer
        return empty_output(self.plan, frame, self.id_col)
