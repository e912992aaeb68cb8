"""The `nfa` engine as a program: pattern queries over batches of a partition's events.

State is the tail of the stream that can still take part in a match (events newer than
the latest time minus the window) and the latest time seen. Each batch is matched
together with that tail; a match is reported by the batch holding its last event, or,
with a negation at the end, once time passes its window (`advance`, `flush`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from sparkcep.engines.base import QUERY, OutputColumn, Program, sort_rows
from sparkcep.engines.nfa.matcher import PatternMatcher
from sparkcep.engines.nfa.rows import match_rows, plan_order, plan_output
from sparkcep.engines.state import state_class
from sparkcep.errors import QueryError
from sparkcep.plan import STRATEGIES
from sparkcep.prep.table import build_table, frame_ticks

NEW = "__new"  # marks the rows of the current batch in the matched frame


@state_class
@dataclass
class NfaState:
    buffer: pd.DataFrame | None = None  # events that can still take part in a match
    latest: int | None = None  # latest time seen, in ticks


class NfaProgram(Program):
    """Pattern queries (one or several, keyed alike) compiled for the nfa matcher.

    >>> import pandas as pd
    >>> from sparkcep.plan import Options, analyze
    >>> options = Options(id_col="id")
    >>> plan = analyze("PATTERN SEQ(A a, B b) WITHIN 10", None, options)
    >>> program = NfaProgram([plan], [None], options)
    >>> stream = pd.DataFrame({"type": list("ABAB"), "ts": [1, 2, 3, 4], "id": [0, 1, 2, 3]})
    >>> state = program.new_state()
    >>> program.process(state, stream.iloc[:3])[["a", "b"]].values.tolist()
    [[0, 1]]
    >>> program.process(state, stream.iloc[3:])[["a", "b"]].values.tolist()
    [[0, 3], [2, 3]]
    """

    engine = "nfa"

    def __init__(self, plans, names, options):
        super().__init__(plans, names, options)
        self.keep_unmatched = any(p.strategy == "STRICT_CONTIGUITY" for p in self.plans)
        self._output = self._merged_output()

    @property
    def output(self) -> tuple[OutputColumn, ...]:
        return self._output

    @property
    def order(self) -> tuple[str, ...]:
        first = plan_order(self.plans[0])
        if self.names is None:
            return first
        return (QUERY, *first[: len(self.plans[0].key)], "end", "start")

    def _merged_output(self) -> tuple[OutputColumn, ...]:
        cols: dict[str, OutputColumn] = {}
        if self.names is not None:
            cols[QUERY] = OutputColumn(QUERY, "string")
        for plan, name in zip(self.plans, self.names or [None] * len(self.plans)):
            for col in plan_output(plan, self.id_col or ""):
                seen = cols.setdefault(col.name, col)
                if seen != col:
                    raise QueryError(
                        f"queries run together give the column '{col.name}' different types "
                        f"(in {name}): name it differently in one of them"
                    )
        return tuple(cols.values())

    def describe(self) -> list[tuple[str, str]]:
        return [("strategy", STRATEGY_WORDS[p.strategy]) for p in self.plans[:1]]

    # ---- running
    def new_state(self) -> NfaState:
        return NfaState()

    def process(self, state: NfaState, events: pd.DataFrame, *, owned=None) -> pd.DataFrame:
        ticks = self.check_time_order(events, state.latest)
        previous = state.latest
        if len(ticks):
            state.latest = (
                int(ticks.max()) if state.latest is None else max(state.latest, int(ticks.max()))
            )
        frame = events.assign(**{NEW: True})
        if state.buffer is not None and len(state.buffer):
            frame = self.in_order(pd.concat([state.buffer.assign(**{NEW: False}), frame]))
        else:
            frame = frame.reset_index(drop=True)
        starts = None
        if owned is not None:
            starts = np.ones(len(frame), dtype=bool)
            starts[frame[NEW].to_numpy()] = owned
        out = self._match(frame, frame[NEW].to_numpy(), (previous, state.latest), starts)
        self._prune(state, frame.drop(columns=[NEW]))
        return out

    def advance(self, state: NfaState, to: int) -> pd.DataFrame:
        """Time reaches `to` (ticks) with no event before it to come (a watermark): the
        trailing-negation matches whose window closed are reported, the rest expires."""
        if state.buffer is None or (state.latest is not None and to <= state.latest):
            return self.empty(state.buffer)
        out = self.empty(state.buffer)
        if self._trailing and len(state.buffer):
            out = self._match(state.buffer, None, (state.latest, to), None)
        state.latest = to
        self._prune(state, state.buffer)
        return out

    def flush(self, state: NfaState) -> pd.DataFrame:
        if state.buffer is None or not len(state.buffer) or not self._trailing:
            return self.empty(state.buffer)
        return self._match(state.buffer, None, (state.latest, None), None)

    def is_empty(self, state: NfaState) -> bool:
        return state.buffer is None or not len(state.buffer)

    # ----
    @property
    def _trailing(self) -> bool:
        return any(p.has_trailing_negation for p in self.plans)

    def _match(self, frame, ends, released, starts) -> pd.DataFrame:
        mask = self.mask(frame)
        outs = []
        for i, plan in enumerate(self.plans):
            table = build_table(
                frame,
                mask=self.signatures.plan_mask(plan, mask),
                segment_cols=self.segments_of(frame),
                time_col=self.options.time_col,
                tiebreak=self.tiebreak,
                attributes=plan.engine_attributes(),
                keep_unmatched=plan.strategy == "STRICT_CONTIGUITY",
            )
            if not len(table):
                continue
            rows = table.row
            matcher = PatternMatcher(
                plan,
                table,
                max_matches=self.options.max_matches,
                memory_budget=self.options.memory_budget,
            )
            matches = matcher.run(
                starts=None if starts is None else starts[rows],
                ends=None if ends is None else ends[rows],
                released=released if plan.has_trailing_negation else None,
            )
            if not len(matches):
                continue
            out = match_rows(plan, frame, table, matches, self.id_col)
            if self.names is not None:
                out.insert(0, QUERY, self.names[i])
            outs.append(out)
        result = self.concat(outs, frame)
        if len(outs) > 1:
            result = sort_rows(result, self.order)
        return result

    def _prune(self, state: NfaState, frame: pd.DataFrame):
        windows = [p.window for p in self.plans]
        if any(w is None for w in windows) or state.latest is None:
            state.buffer = frame
            return
        ticks = frame_ticks(frame, self.options.time_col)
        state.buffer = frame[ticks > state.latest - max(windows)].reset_index(drop=True)


STRATEGY_WORDS = {
    "SKIP_TILL_ANY_MATCH": "skip-till-any-match (every combination)",
    "SKIP_TILL_NEXT_MATCH": "skip-till-next-match (each run takes the next relevant event)",
    "STRICT_CONTIGUITY": "strict contiguity (events of a match are adjacent in their partition)",
}
assert set(STRATEGY_WORDS) == set(STRATEGIES)
