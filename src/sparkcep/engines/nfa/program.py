"""The `nfa` engine as a program: pattern queries over batches of a partition's events.

State is the tail of the stream that can still take part in a match (events newer than
the latest time minus the window) and the latest time seen. Each batch is matched
together with that tail; a match is reported by the batch holding its last event, or,
with a negation at the end, once time passes its window (`advance`, `flush`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from sparkcep.engines.base import Program
from sparkcep.engines.nfa.matcher import PatternMatcher
from sparkcep.engines.nfa.rows import match_rows, plan_order, plan_output
from sparkcep.engines.nfa.skip import FIRST, HIDDEN, LAST, PLAN, AfterMatchSkip, prune_points
from sparkcep.engines.nfa.timeouts import timeout_rows
from sparkcep.engines.output import QUERY, OutputColumn, merged_output, sort_rows
from sparkcep.engines.state import state_class
from sparkcep.plan import STRATEGIES
from sparkcep.prep.table import build_table, frame_ticks, stack_frames

NEW = "__new"  # marks the rows of the current batch in the matched frame


@state_class
@dataclass
class NfaState:
    buffer: pd.DataFrame | None = None  # events that can still take part in a match
    latest: int | None = None  # latest time seen, in ticks
    held: pd.DataFrame | None = None  # AFTER MATCH SKIP: matches not decided yet
    points: dict = field(default_factory=dict)  # AFTER MATCH SKIP: plan -> key -> skip point


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
        self._skips = {
            i: AfterMatchSkip(p.skip, p.key, p.window, plan_order(p))
            for i, p in enumerate(self.plans)
            if p.skip is not None
        }

    @property
    def reach(self) -> tuple[int | None, int | None]:
        if self._skips or self._timeouts:  # they depend on what came before: no ranges
            return None, None
        return super().reach

    @property
    def _timeouts(self) -> list[int]:
        return [i for i, p in enumerate(self.plans) if p.timeouts]

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
        return merged_output(
            lambda plan: plan_output(plan, self.id_col or ""), self.plans, self.names
        )

    def describe(self) -> list[tuple[str, str]]:
        lines = [("strategy", STRATEGY_WORDS[p.strategy]) for p in self.plans[:1]]
        for p in self.plans[:1]:
            if p.skip is not None:
                lines.append(("skip", SKIP_WORDS[p.skip]))
            if p.timeouts:
                lines.append(("timeouts", "also the partial matches nothing extends, when their "
                              "window closes (timeout, reached)"))  # fmt: skip
        return lines

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
            frame = self.in_order(stack_frames([state.buffer.assign(**{NEW: False}), frame]))
        else:
            frame = frame.reset_index(drop=True)
        starts = None
        if owned is not None:
            starts = np.ones(len(frame), dtype=bool)
            starts[frame[NEW].to_numpy()] = owned
        out = self._match(frame, frame[NEW].to_numpy(), (previous, state.latest), starts)
        if self._timeouts:
            out = self._with_timeouts(out, frame, previous, state.latest)
        self._prune(state, frame.drop(columns=[NEW]))
        return self._skipped(state, out, state.latest + 1 if state.latest is not None else None)

    def advance(self, state: NfaState, to: int) -> pd.DataFrame:
        """Time reaches `to` (ticks) with no event before it to come (a watermark): the
        trailing-negation matches whose window closed are reported, the rest expires."""
        if state.buffer is None or (state.latest is not None and to <= state.latest):
            return self._skipped(state, self.empty(state.buffer), to)
        out = self.empty(state.buffer)
        if self._trailing and len(state.buffer):
            out = self._match(state.buffer, None, (state.latest, to), None, trailing_only=True)
        if self._timeouts and len(state.buffer):
            out = self._with_timeouts(out, state.buffer, state.latest, to)
        state.latest = to
        self._prune(state, state.buffer)
        return self._skipped(state, out, to)

    def flush(self, state: NfaState) -> pd.DataFrame:
        out = self.empty(state.buffer)
        if state.buffer is not None and len(state.buffer):
            if self._trailing:
                out = self._match(state.buffer, None, (state.latest, None), None, True)
            if self._timeouts:
                out = self._with_timeouts(out, state.buffer, state.latest, None)
        return self._skipped(state, out, None, final=True)

    def count(self, events: pd.DataFrame, *, owned=None) -> int:
        """`run`'s rows counted by the matcher, not built (the same process and flush).
        AFTER MATCH SKIP and OUTPUT TIMEOUTS choose or add rows from built ones: with
        them, the rows are built and counted."""
        if self._skips or self._timeouts:
            return super().count(events, owned=owned)
        ticks = self.check_time_order(events, None)
        if not len(ticks):
            return 0
        latest = int(ticks.max())
        frame = events.reset_index(drop=True)
        n = self._count(frame, None, (None, latest), owned)
        if self._trailing:  # what `flush` releases
            n += self._count(self._window_tail(frame, latest), None, (latest, None), None, True)
        return n

    def _count(self, frame, ends, released, starts, trailing_only=False) -> int:
        runs = self._plan_runs(frame, ends, released, starts, trailing_only)
        return sum(matcher.count(**args) for _, _, _, matcher, args in runs)

    # ---- OUTPUT TIMEOUTS
    def _with_timeouts(self, out: pd.DataFrame, frame, after, upto) -> pd.DataFrame:
        """`out` and the partial matches that timed out in (after, upto] (timeouts.py)."""
        frame = frame.drop(columns=[NEW], errors="ignore")
        mask = self.mask(frame)
        parts = [out]
        for i in self._timeouts:
            plan = self.plans[i]
            table = build_table(
                frame,
                mask=self.signatures.plan_mask(plan, mask),
                segment_cols=self.segments_of(frame),
                time_col=self.options.time_col,
                tiebreak=self.tiebreak,
                attributes=plan.engine_attributes(),
                keep_unmatched=plan.strategy == "STRICT_CONTIGUITY",
            )
            rows = timeout_rows(plan, frame, table, after, upto, self.id_col or "", self.budget)
            if len(rows) and self.names is not None:
                rows.insert(0, QUERY, self.names[i])
            parts.append(rows)
        result = self.concat(parts, frame)
        return sort_rows(result, self.order) if len(result) > 1 else result

    def is_empty(self, state: NfaState) -> bool:
        no_skips = (state.held is None or not len(state.held)) and not any(state.points.values())
        return (state.buffer is None or not len(state.buffer)) and no_skips

    @property
    def keys_together(self) -> bool:
        """The matcher runs each key (segment) of a frame apart, and the buffer keeps
        what the latest time of all keys leaves in the window: what a later event of any
        key, which comes after that time, can still match. AFTER MATCH SKIP's held rows
        are per key and stay per key."""
        return not self._skips

    def idle_until(self, state: NfaState) -> int | None:
        """Without trailing negation, timeouts or skips, advancing only forgets events:
        nothing happens until the newest buffered event leaves the window."""
        windows = [p.window for p in self.plans]
        if self._trailing or self._timeouts or self._skips or any(w is None for w in windows):
            return None
        if state.buffer is None or not len(state.buffer):
            return None
        ticks = frame_ticks(state.buffer, self.options.time_col)
        return int(ticks.max()) + int(max(windows))  # type: ignore[type-var]

    # ---- AFTER MATCH SKIP
    def _skipped(self, state: NfaState, rows: pd.DataFrame, horizon, final=False):
        """Rows of plans with AFTER MATCH SKIP wait until they can be decided (skip.py)."""
        if not self._skips:
            return rows
        mine = rows[PLAN].notna().to_numpy() if PLAN in rows.columns else np.zeros(len(rows), bool)
        held = rows[mine]
        if state.held is not None and len(state.held):
            held = pd.concat([_as_lists(state.held), held], ignore_index=True)
        kept, waiting = [rows[~mine].drop(columns=list(HIDDEN), errors="ignore")], []
        for i, skip in self._skips.items():
            candidates = held[held[PLAN] == i] if PLAN in held.columns else held.iloc[:0]
            points = state.points.get(i, {})
            chosen, rest, points = skip.select(candidates, points, horizon, final)
            state.points[i] = prune_points(points, horizon, skip.window) if not final else {}
            kept.append(chosen.drop(columns=list(HIDDEN), errors="ignore"))
            waiting.append(rest)
        rest = [w for w in waiting if len(w)]
        state.held = pd.concat(rest, ignore_index=True) if rest else None
        out = self.concat([k for k in kept if len(k)], rows)
        return sort_rows(out, self.order) if len(out) > 1 else out.reset_index(drop=True)

    def _order_keys(self, i: int, frame, table, matches) -> dict:
        """The processing-order keys of each match's first and last events (skip.py)."""
        ticks = frame_ticks(frame, self.options.time_col)
        tie = frame[self.tiebreak].to_numpy(dtype=object) if self.tiebreak else None
        ids = frame[self.id_col].to_numpy()
        out: dict = {PLAN: np.full(len(matches), i)}
        for names, pos in ((FIRST, matches.first), (LAST, matches.last)):
            rows = table.row[pos]
            out[names[0]] = ticks[rows]
            out[names[1]] = tie[rows] if tie is not None else np.zeros(len(rows), dtype=np.int64)
            out[names[2]] = ids[rows]
        return out

    # ----
    @property
    def _trailing(self) -> bool:
        return any(p.has_trailing_negation for p in self.plans)

    def _plan_runs(self, frame, ends, released, starts, trailing_only=False):
        """Per plan with candidate events in `frame` (with a negation at the end only,
        when `trailing_only`: what a closing window releases): (i, plan, table, its
        matcher, the arguments of its run)."""
        mask = self.mask(frame)
        for i, plan in enumerate(self.plans):
            if trailing_only and not plan.has_trailing_negation:
                continue
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
            # AFTER MATCH SKIP chooses among all the candidates: the runner caps rows
            budget = replace(self.budget, max_matches=None) if i in self._skips else self.budget
            matcher = PatternMatcher(plan, table, budget)
            args = {
                "starts": None if starts is None else starts[rows],
                "ends": None if ends is None else ends[rows],
                "released": released if plan.has_trailing_negation else None,
            }
            yield i, plan, table, matcher, args

    def _match(self, frame, ends, released, starts, trailing_only=False) -> pd.DataFrame:
        outs = []
        for i, plan, table, matcher, args in self._plan_runs(
            frame, ends, released, starts, trailing_only
        ):
            matches = matcher.run(**args)
            if not len(matches):
                continue
            extra = self._order_keys(i, frame, table, matches) if i in self._skips else None
            out = match_rows(plan, frame, table, matches, self.id_col, extra)
            if self.names is not None:
                out.insert(0, QUERY, self.names[i])
            outs.append(out)
        result = self.concat(outs, frame)
        if len(outs) > 1:
            result = sort_rows(result, self.order)
        return result

    def _prune(self, state: NfaState, frame: pd.DataFrame):
        state.buffer = self._window_tail(frame, state.latest)

    def _window_tail(self, frame: pd.DataFrame, latest: int | None) -> pd.DataFrame:
        """The events of `frame` a later event can still match, once time is `latest`."""
        windows = [p.window for p in self.plans]
        if any(w is None for w in windows) or latest is None:
            return frame
        ticks = frame_ticks(frame, self.options.time_col)
        return frame[ticks > latest - max(windows)].reset_index(drop=True)


def _as_lists(frame: pd.DataFrame) -> pd.DataFrame:
    """Kleene id columns as lists again (stored state reads them back as arrays)."""
    out = frame.copy()
    for col in out.columns:
        if out[col].dtype == object and any(isinstance(v, np.ndarray) for v in out[col]):
            out[col] = [v.tolist() if isinstance(v, np.ndarray) else v for v in out[col]]
    return out


SKIP_WORDS = {
    "PAST_LAST_EVENT": "AFTER MATCH SKIP PAST LAST EVENT: per key, leftmost then longest "
    "matches that do not overlap",
    "TO_NEXT_EVENT": "AFTER MATCH SKIP TO NEXT EVENT: per key, the longest match of each first "
    "event",
}
STRATEGY_WORDS = {
    "SKIP_TILL_ANY_MATCH": "skip-till-any-match (every combination)",
    "SKIP_TILL_NEXT_MATCH": "skip-till-next-match (each run takes the next relevant event)",
    "STRICT_CONTIGUITY": "strict contiguity (events of a match are adjacent in their partition)",
}
assert set(STRATEGY_WORDS) == set(STRATEGIES)
