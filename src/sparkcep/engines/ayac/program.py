"""The `ayac` engine as a program: probabilistic detection over batches of a partition.

State is the tail of the stream a path can still reach (events newer than the latest
time minus the window), each with the upper bounds u it got when it arrived (its PAQ
entries), and the latest time seen. Each batch is processed with that tail: the new
events are enqueued (their bounds computed against the PAQs), and every new event that
binds the last positive starts backward match generation. A path is reported once, by
the batch holding its last event (matches always end with an observed positive, §4.2),
so `advance` and `flush` only let old events go.

The key (equalities over every component) partitions the stream, so each partition has
its own queues: the paper's hashed PAQs (§5.2).

With `ayac_rows="events"` the paths of one complex event — those ending at the same
observed last event — become one row: the most probable path, the event's probability
(the largest of its paths') and `paths`, how many paths reached the threshold
(`events_of`; docs/ayac.md says why the largest and not a sum).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from sparkcep.engines.ayac.automaton import SkipAutomaton
from sparkcep.engines.ayac.generate import (
    SLACK,
    ArrivalBounds,
    MatchGenerator,
    Paths,
    path_resolver,
)
from sparkcep.engines.ayac.queues import NegativeQueue
from sparkcep.engines.base import Program
from sparkcep.engines.output import QUERY, OutputColumn, merged_output, sort_rows
from sparkcep.engines.state import state_class
from sparkcep.errors import SparkcepError
from sparkcep.expressions import evaluate
from sparkcep.plan import Plan
from sparkcep.prep.table import MASK, build_table, frame_ticks

NEW = "__new"  # marks the rows of the current batch
SEGMENT = "__ayac_segment"  # a hash of an event's partition (which queues it belongs to)
MISSING = "missing"
PROBABILITY = "probability"
PATHS = "paths"  # with ayac_rows="events": the number of paths of the complex event
ROWS = ("paths", "events")  # the values of the ayac_rows option


def bound_column(plan_index: int, pos: int) -> str:
    """The buffer column holding the arrival bound u of plan `plan_index`'s positive `pos`."""
    return f"__ayac_u{plan_index}_{pos}"


@state_class
@dataclass
class AyacState:
    buffer: pd.DataFrame | None = None  # events a path can still reach, with their bounds
    latest: int | None = None  # latest time seen, in ticks


def plan_output(plan: Plan, id_col: str, rows: str = "paths") -> tuple[OutputColumn, ...]:
    time_col = plan.options.time_col
    cols = [OutputColumn("start", like=time_col), OutputColumn("end", like=time_col)]
    cols += [OutputColumn(k, like=k) for k in plan.key]
    cols += [OutputColumn(c.var, like=id_col) for c in plan.positives]
    cols += [OutputColumn(MISSING, "string", is_list=True), OutputColumn(PROBABILITY, "float")]
    if rows == "events":
        cols.append(OutputColumn(PATHS, "int"))
    cols += [OutputColumn(r.name, r.kind, r.is_list) for r in plan.returns]
    return tuple(cols)


def plan_order(plan: Plan) -> tuple[str, ...]:
    return (*plan.key, "end", "start", *[c.var for c in plan.positives])


class AyacProgram(Program):
    """Probabilistic pattern queries (one or several, keyed alike).

    >>> import pandas as pd
    >>> from sparkcep.plan import Options, analyze
    >>> options = Options(id_col="id")
    >>> q = "PATTERN SEQ(A a, B b, C c) WITHIN 10 MISSING RATE 0.1 DELAY b UNIFORM(0, 8) THRESHOLD 0.02"
    >>> program = AyacProgram([analyze(q, None, options)], [None], options)
    >>> stream = pd.DataFrame({"type": ["A", "C"], "ts": [1, 5], "id": [0, 1]})
    >>> program.run(stream)[["a", "b", "c", "missing", "probability"]]
       a     b  c missing  probability
    0  0  <NA>  1     [b]         0.05
    """

    engine = "ayac"

    def __init__(self, plans, names, options):
        super().__init__(plans, names, options)
        self.rows = options.ayac_rows
        if self.rows not in ROWS:
            raise SparkcepError(f"ayac_rows is paths or events, not '{self.rows}'")
        if self.rows == "events":
            for plan in self.plans:
                named = [c.var for c in plan.components] + [r.name for r in plan.returns]
                if PATHS in named:
                    raise plan.error(
                        f"'{PATHS}' is an output column of ayac_rows=events: name it differently",
                        plan.span_of(PATHS),
                    )
        self.automata = [SkipAutomaton(p) for p in self.plans]
        self._output = self._merged_output()

    # ---- what the program needs and gives
    @property
    def reach(self) -> tuple[int | None, int | None]:
        """A match is anchored by its last event and looks back one window."""
        windows = [p.window for p in self.plans]
        return max(windows), 0  # type: ignore[type-var]

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
            lambda plan: plan_output(plan, self.id_col or "", self.rows), self.plans, self.names
        )

    def empty(self, frame: pd.DataFrame | None = None) -> pd.DataFrame:
        key = None if frame is None else tuple(
            str(frame[c.like].dtype) if c.like in frame else None for c in self.output
        )  # fmt: skip
        cache = self.__dict__.setdefault("_empties", {})
        if key not in cache:
            cache[key] = super().empty(frame)
        return cache[key].copy()

    def describe(self) -> list[tuple[str, str]]:
        from sparkcep.engines.ayac.describe import describe_plan

        return describe_plan(self.plans[0], self.automata[0])

    # ---- running
    def new_state(self) -> AyacState:
        return AyacState()

    def process(self, state: AyacState, events: pd.DataFrame, *, owned=None) -> pd.DataFrame:
        ticks = self.check_time_order(events, state.latest)
        if len(ticks):
            top = int(ticks.max())
            state.latest = top if state.latest is None else max(state.latest, top)
        # The component bitmask and a hash of the partition, once per event: they stay
        # with the event in the state.
        frame = events.assign(**{NEW: True, MASK: self.mask(events)})
        cols = self.segments_of(events)
        if cols:
            frame[SEGMENT] = pd.util.hash_pandas_object(events[cols], index=False).to_numpy()
        if owned is not None:
            frame = frame.assign(__owned=np.asarray(owned, dtype=bool))
        rest = None
        if state.buffer is not None and len(state.buffer):
            old, rest = self._touched(state.buffer, frame)
            old = old.assign(**{NEW: False})
            if owned is not None:
                old = old.assign(__owned=False)
            frame = self.in_order(pd.concat([old, frame], ignore_index=True))
        else:
            frame = frame.reset_index(drop=True)
        outs = []
        for i, plan in enumerate(self.plans):
            out = self._match(i, plan, frame)
            if self.names is not None and len(out):
                out.insert(0, QUERY, self.names[i])
            outs.append(out)
        result = self.concat(outs, frame)
        if len([o for o in outs if len(o)]) > 1:
            result = sort_rows(result, self.order)
        kept = self._pruned(state, frame.drop(columns=[c for c in (NEW, "__owned") if c in frame]))
        if rest is not None and len(rest):
            kept = pd.concat([self._pruned(state, rest), kept], ignore_index=True)
        state.buffer = kept
        return result

    def _touched(self, buffer: pd.DataFrame, frame: pd.DataFrame):
        """The kept events of the partitions this batch has events in, and the others:
        only the former can take part in a path with a new event (hashed queues, §5.2)."""
        cols = self.segments_of(frame)
        if not cols or SEGMENT not in buffer.columns:
            return buffer, None
        mine = np.isin(buffer[SEGMENT].to_numpy(), frame[SEGMENT].to_numpy())
        if mine.all():
            return buffer, None
        return buffer[mine], buffer[~mine]

    def advance(self, state: AyacState, to: int) -> pd.DataFrame:
        """Time reaches `to` with no earlier event to come: events a path can no longer
        reach leave the state (no match waits for time: each ends on an event)."""
        empty = self.empty(state.buffer)
        if state.buffer is None or (state.latest is not None and to <= state.latest):
            return empty
        state.latest = to
        state.buffer = self._pruned(state, state.buffer)
        return empty

    def flush(self, state: AyacState) -> pd.DataFrame:
        return self.empty(state.buffer)

    def is_empty(self, state: AyacState) -> bool:
        return state.buffer is None or not len(state.buffer)

    def _pruned(self, state: AyacState, frame: pd.DataFrame) -> pd.DataFrame:
        """The events a path can still reach: within the window of the latest time."""
        if state.latest is None or not len(frame):
            return frame
        ticks = frame_ticks(frame, self.options.time_col)
        keep = ticks > state.latest - max(p.window for p in self.plans)
        keep &= self.mask(frame) != 0
        if keep.all():
            return frame
        return frame[keep].reset_index(drop=True)

    # ---- one plan over the frame
    def _match(self, i: int, plan: Plan, frame: pd.DataFrame) -> pd.DataFrame:
        nfa = self.automata[i]
        table = build_table(
            frame,
            mask=self.signatures.plan_mask(plan, self.mask(frame)),
            segment_cols=self.segments_of(frame),
            time_col=self.options.time_col,
            tiebreak=self.tiebreak,
            attributes=plan.engine_attributes(),
        )
        if not len(table):
            return self.empty(frame)
        rows = table.row
        new = frame[NEW].to_numpy(dtype=bool)[rows]
        stored = []
        for p in range(nfa.k):
            name = bound_column(i, p)
            if name in frame.columns:
                stored.append(frame[name].to_numpy(dtype=np.float64)[rows])
            else:
                stored.append(np.full(len(rows), np.nan))
        bounds, queues = ArrivalBounds(nfa, table).compute(stored, new)
        for p, u in enumerate(bounds):  # the PAQ entries, kept with the events
            column = np.full(len(frame), np.nan)
            if bound_column(i, p) in frame.columns:
                column = frame[bound_column(i, p)].to_numpy(dtype=np.float64).copy()
            column[rows] = u
            frame[bound_column(i, p)] = column
        last = nfa.positives[-1].index
        ends = new & ((table.mask >> last) & 1 == 1) & (bounds[-1] >= nfa.threshold * (1 - SLACK))
        if "__owned" in frame.columns:
            ends &= frame["__owned"].to_numpy(dtype=bool)[rows]
        ends = np.flatnonzero(ends)
        if not len(ends):
            return self.empty(frame)
        negatives = {}
        for comp in plan.negated:
            at = np.flatnonzero((table.mask >> comp.index) & 1 == 1)
            negatives[comp.index] = NegativeQueue(
                table.segment[at], table.order[at], table.ts[at], index=at
            )
        paths = MatchGenerator(nfa, table, queues, negatives, self.budget).run(ends)
        if not len(paths):
            return self.empty(frame)
        counts = None
        if self.rows == "events":
            paths, counts = events_of(paths)
        return self._rows(plan, frame, table, paths, counts)

    def _rows(
        self, plan: Plan, frame: pd.DataFrame, table, paths: Paths, counts=None
    ) -> pd.DataFrame:
        row = table.row
        bind = paths.bind
        k = bind.shape[1]
        first_pos = np.argmax(bind >= 0, axis=1)
        first = bind[np.arange(len(bind)), first_pos]
        time = frame[self.options.time_col]
        out: dict[str, object] = {
            "start": time.iloc[row[first]].to_numpy(),
            "end": time.iloc[row[paths.end]].to_numpy(),
        }
        for key in plan.key:
            out[key] = frame[key].iloc[row[paths.end]].to_numpy()
        ids = frame[self.id_col]
        for p, comp in enumerate(plan.positives):
            out[comp.var] = _ids(ids, np.where(bind[:, p] >= 0, row[np.maximum(bind[:, p], 0)], -1))
        names = [c.var for c in plan.positives]
        code = ((bind < 0).astype(np.int64) << np.arange(k, dtype=np.int64)).sum(axis=1)
        lists = {int(c): [names[p] for p in range(k) if c >> p & 1] for c in np.unique(code)}
        out[MISSING] = [lists[c].copy() for c in code.tolist()]
        out[PROBABILITY] = paths.score.astype(np.float64)
        if counts is not None:
            out[PATHS] = pd.array(counts, dtype="Int64")
        if plan.returns:
            resolve = path_resolver(table, {c.var: c.pos for c in plan.positives}, bind)
            for col in plan.returns:
                value = evaluate(col.expr, resolve, len(bind))
                out[col.name] = _typed(value.to_list(), col.kind)
        return sort_rows(pd.DataFrame(out), plan_order(plan))


def events_of(paths: Paths) -> tuple[Paths, np.ndarray]:
    """One path per complex event, and how many paths each event has.

    A complex event is the set of paths that end at the same observed event (`end`: the
    arrival at the last state that started their generation, §4.2); its probability is
    the largest of its paths' (each path's is a lower bound of the probability that at
    least one happened, and the paths are not exclusive: two complete paths of one event
    both score 1). Its row is the path with that probability; among equals, the one
    with the fewest inferred-missing components, then the latest events (compared from
    the first positive on), so the choice does not depend on how the input was split.

    >>> paths = Paths(np.array([5, 5, 5, 9]),
    ...               np.array([[0, -1, 5], [1, -1, 5], [-1, 3, 5], [-1, -1, 9]]),
    ...               np.array([0.2, 0.2, 0.1, 0.05]))
    >>> best, counts = events_of(paths)
    >>> best.bind.tolist(), best.score.tolist(), counts.tolist()
    ([[1, -1, 5], [-1, -1, 9]], [0.2, 0.05], [3, 1])
    """
    k = paths.bind.shape[1]
    missing = (paths.bind < 0).sum(axis=1)
    later = [-paths.bind[:, p] for p in reversed(range(k))]  # lexsort: last key first
    order = np.lexsort((*later, missing, -paths.score, paths.end))
    end = paths.end[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = end[1:] != end[:-1]
    starts = np.flatnonzero(first)
    counts = np.diff(np.append(starts, len(order)))
    return paths.take(order[starts]), counts


def _ids(ids: pd.Series, rows: np.ndarray):
    """The ids at frame rows (−1: none, null)."""
    none = rows < 0
    if pd.api.types.is_integer_dtype(ids.dtype) and not ids.hasnans:
        values = ids.to_numpy(dtype=np.int64)[np.maximum(rows, 0)]
        return pd.arrays.IntegerArray(values, none)
    values = ids.to_numpy(dtype=object)[np.maximum(rows, 0)]
    values[none] = None
    return values


def _typed(values: list, kind):
    if kind == "int":
        return pd.array(values, dtype="Int64")
    if kind == "float":
        return pd.array([np.nan if v is None else v for v in values], dtype="float64")
    if kind == "bool":
        return pd.array(values, dtype="boolean")
    if kind == "timestamp":
        return pd.to_datetime(pd.array(values, dtype="Int64"), unit="us")
    return values
