"""AGG queries as a program over batches: A-Seq's prefix counters, or enumeration.

Queries that partition the stream alike run together. A-Seq queries share one prefix
forest (prefix sharing, or chop-connect) and keep, between batches, only their prefix
counters: one row of counts per START event still inside the window, with the key of
its partition, and no event. Queries the counters cannot express (and every query under
`twostep`, the paper's baseline) enumerate their matches with the pattern matcher and
keep the events of the last window. Chop-connect pieces cannot carry counters from one
batch to the next: with `--sharing chop` a program answers one whole input (batch runs);
streams share prefixes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from sparkcep.engines.aseq.combine import (
    LONG_AGO,
    Contributions,
    Triggers,
    channels_of,
    combine,
)
from sparkcep.engines.aseq.connect import piece_contributions, query_contributions
from sparkcep.engines.aseq.counters import CarryRows, PrefixCounters
from sparkcep.engines.aseq.forest import Forest, TypeCounts
from sparkcep.engines.aseq.twostep import enumerate_contributions
from sparkcep.engines.base import Program
from sparkcep.engines.output import QUERY, OutputColumn
from sparkcep.engines.state import state_class
from sparkcep.errors import SparkcepError
from sparkcep.language import ast
from sparkcep.plan import Plan
from sparkcep.prep.layout import RANGE
from sparkcep.prep.table import EventTable, build_table, frame_ticks, segment_firsts

SHARING = ("chop", "prefix", "none")
EMIT_WORDS = {
    "match": "only at the events where new matches of the group end (EMIT ON MATCH; "
    "EMIT EVERY TRIGGER: at each such event, count 0 too)",
    "every trigger": "at each such event, also where no match ends (EMIT EVERY TRIGGER)",
}
NEW = "__new"


def _new_stats() -> dict:
    """What a run measured: the most prefix counters alive at once and the (START, event)
    updates (A-Seq), the partial matches built and the most alive at once (enumeration),
    and the matches aggregated."""
    return {
        "peak_counters": 0, "updates": 0, "partial_matches": 0, "peak_partial": 0, "matches": 0
    }  # fmt: skip


@state_class
@dataclass
class AggregateState:
    carry: dict[int, CarryRows] = field(default_factory=dict)  # root -> START rows
    buffer: pd.DataFrame | None = None  # events of the last window (enumerated queries)
    latest: int | None = None
    closed: bool = False  # chop-connect ran: there are no counters to continue from
    stats: dict = field(default_factory=_new_stats)


@dataclass
class Batch:
    """A batch's events as a query sees them: the frame, its table, the key of each of the
    table's segments, the places of the output group columns in a key, and which rows may
    report (`owned`, None: all)."""

    frame: pd.DataFrame
    table: EventTable
    segment_keys: list[tuple]
    group_pos: list[int]
    owned: np.ndarray | None


def counters_reason(plan: Plan) -> str | None:
    """None when A-Seq's prefix counters can answer `plan`; otherwise why not."""
    k = len(plan.positives)
    reasons = []
    if plan.strategy != "SKIP_TILL_ANY_MATCH":
        reasons.append(f"the strategy is {plan.strategy} (counters count every combination)")
    if any(c.kleene for c in plan.components):
        reasons.append("a Kleene closure")
    if any(n.gap in (0, k) for n in plan.negations):
        reasons.append("a negation at the start or the end")
    if any(n.conditions for n in plan.negations):
        reasons.append("a negation condition that refers to other variables")
    if plan.conditions:
        cross = ", ".join(ast.to_text(c.expr) for c in plan.conditions)
        reasons.append(f"conditions across variables other than equality keys ({cross})")
    return "; ".join(reasons) or None


class AggregateProgram(Program):
    """AGG queries keyed alike, by A-Seq counters where they can (`algorithm="aseq"`) and
    by enumeration otherwise (every query with `algorithm="twostep"`).

    >>> import pandas as pd
    >>> from sparkcep.plan import Options, analyze
    >>> options = Options(id_col="id")
    >>> plan = analyze("PATTERN SEQ(A a, B b, C c, D d) AGG COUNT WITHIN 7", None, options)
    >>> program = AggregateProgram([plan], [None], options, "aseq")
    >>> stream = pd.DataFrame({"type": list("ABCACBDCAD"), "ts": range(1, 11), "id": range(10)})
    >>> state = program.new_state()
    >>> program.process(state, stream.iloc[:7]).values.tolist()
    [[7, 2]]
    >>> program.process(state, stream.iloc[7:]).values.tolist()
    [[10, 1]]
    """

    def __init__(self, plans, names, options, algorithm: str):
        super().__init__(plans, names, options)
        if options.sharing not in SHARING:
            raise SparkcepError(f"sharing is chop, prefix or none, not '{options.sharing}'")
        self.engine = algorithm  # type: ignore[misc]
        first = self.plans[0]
        for plan in self.plans[1:]:
            if (plan.key, plan.tiebreak, plan.aggregate.group_by) != (
                first.key, first.tiebreak, first.aggregate.group_by
            ):  # fmt: skip
                raise SparkcepError("queries run together must partition the stream alike")
        self.group_by = first.aggregate.group_by
        self.partition_cols = self.group_by
        self.counter_plans = [
            i
            for i, p in enumerate(self.plans)
            if algorithm == "aseq" and counters_reason(p) is None
        ]
        counted = [self.plans[i] for i in self.counter_plans]
        self.forest = Forest(counted, options.sharing, self.signatures) if counted else None
        self.chopped = self.forest is not None and any(
            len(qp.pieces) > 1 for qp in self.forest.queries
        )
        self._output = self._merged_output()

    @property
    def reach(self) -> tuple[int | None, int | None]:
        before, _ = super().reach
        return before, 0  # a row reports matches that ended by its trigger

    @property
    def output(self) -> tuple[OutputColumn, ...]:
        return self._output

    @property
    def order(self) -> tuple[str, ...]:
        return (*([QUERY] if self.names else []), *self.group_by, "ts")

    @property
    def label(self) -> str:
        return "rows"

    def _merged_output(self) -> tuple[OutputColumn, ...]:
        cols = [OutputColumn(QUERY, "string")] if self.names else []
        cols.append(OutputColumn("ts", like=self.options.time_col))
        cols += [OutputColumn(g, like=g) for g in self.group_by]
        seen = set()
        for plan in self.plans:
            for item in plan.aggregate.items:
                if item.name not in seen:
                    seen.add(item.name)
                    cols.append(OutputColumn(item.name, item.output_kind))
        return tuple(cols)

    def describe(self) -> list[tuple[str, str]]:
        lines = []
        for i, plan in enumerate(self.plans):
            if i in self.counter_plans:
                path = "A-Seq prefix counters: no match is built"
            elif self.engine == "twostep":
                path = "two-step (the baseline): every match is enumerated, then aggregated"
            else:
                path = "matches are enumerated by nfa, then aggregated, because of " + str(
                    counters_reason(plan)
                )
            lines.append(("path", path))
            lines.append(("rows", EMIT_WORDS[plan.aggregate.emit]))
        if self.forest is not None and len(self.plans) > 1:
            lines += [("sharing", text) for text in self.forest.describe()]
        if self.forest is not None and self.forest.sharing == "chop" and len(self.plans) > 1:
            forest = self.forest
            if forest.rule == "always":
                rule = f"chop-connect cuts a query where the tail it shares has {forest.min_tail} "
                rule += "steps or more (every such tail: the cost rule set aside)"
            else:
                rule = (
                    "chop-connect cuts a query where the tail it shares has "
                    f"{forest.min_tail} steps or more and, by the input's type counts "
                    "(decided at run time, when the whole input is there), the counter "
                    "updates the cut saves exceed what its connect costs (estimated; "
                    "docs/aggregation.md)"
                )
            lines.append(("sharing", rule))
        return lines

    # ---- running
    def new_state(self) -> AggregateState:
        return AggregateState()

    def process(self, state: AggregateState, events: pd.DataFrame, *, owned=None) -> pd.DataFrame:
        if state.closed:
            raise SparkcepError(
                "chop-connect sharing answers a whole input at once: a stream shares "
                "prefixes (--sharing prefix)"
            )
        ticks = self.check_time_order(events, state.latest)
        if not len(events):
            return self.empty(events)
        state.latest = (
            int(ticks.max()) if state.latest is None else max(state.latest, int(ticks.max()))
        )
        seg_cols = self.segments_of(events)
        ranged = RANGE in seg_cols
        group_pos = [seg_cols.index(g) for g in ([RANGE] if ranged else []) + list(self.group_by)]
        outs: list[tuple[int, pd.DataFrame]] = []
        if self.forest is not None:
            outs += self._counted(state, events, seg_cols, group_pos, owned)
        for i, plan in enumerate(self.plans):
            if i not in self.counter_plans:
                outs.append((i, self._enumerated(state, plan, events, seg_cols, group_pos, owned)))
        if len(self.counter_plans) < len(self.plans):
            self._keep_window(state, events)
        return self._query_rows(outs, events)

    def advance(self, state: AggregateState, to: int) -> pd.DataFrame:
        """Time reaches `to` (ticks): forget the START rows and events that expired."""
        if state.latest is None or to > state.latest:
            state.latest = to
            self._expire(state)
            if state.buffer is not None:
                self._keep_window(state, state.buffer.iloc[:0])
        return self.empty(state.buffer)

    def flush(self, state: AggregateState) -> pd.DataFrame:
        return self.empty(state.buffer)

    def is_empty(self, state: AggregateState) -> bool:
        no_rows = all(not len(rows) for rows in state.carry.values())
        return no_rows and (state.buffer is None or not len(state.buffer))

    # ---- A-Seq queries
    def _counted(self, state, events, seg_cols, group_pos, owned):
        forest = self.forest
        table = self._table(events, self.mask(events), seg_cols, keep_all=False)
        if not len(table):
            self._expire(state)  # nothing for the counters here; only time moved on
            return []
        batch = Batch(events, table, _segment_keys(events, table, seg_cols), group_pos, owned)
        if forest.pending:  # chop-connect's cuts, decided by this input's counts
            forest = self._decide_cuts(table)
            state.stats["chop"] = forest.describe()
        counters = PrefixCounters(forest, table, state.carry, batch.segment_keys)
        state.stats["peak_counters"] = max(
            state.stats.get("peak_counters", 0), counters.peak_counters
        )
        state.stats["updates"] = state.stats.get("updates", 0) + counters.updates
        outs = []
        for index, (qp, i) in enumerate(zip(forest.queries, self.counter_plans)):
            end = qp.pieces[-1].nodes[-1]
            if len(qp.pieces) > 1:
                fresh = query_contributions(counters, qp)
                before, before_keys = Contributions.empty(channels_of(qp.plan)), _objects([])
            else:
                fresh = piece_contributions(counters, qp, index)
                before, before_keys = _carried(
                    state.carry.get(qp.pieces[0].nodes[0]), counters, qp, end
                )
            state.stats["matches"] = state.stats.get("matches", 0) + fresh.matches()
            contribs = Contributions.concat([before, fresh])
            bit = 1 << forest.nodes[end].bits[0]
            outs.append((i, self._rows(qp.plan, batch, contribs, before_keys, bit)))
        if self.chopped:
            state.closed = True
        state.carry = dict(counters.final)
        self._expire(state)
        return outs

    def _decide_cuts(self, table: EventTable) -> Forest:
        """The forest whose cuts this input's type counts allow (chop-connect answers a
        whole input at once: its counts are known before the counters run)."""
        old = self.forest
        bits = {bit for node in old.nodes for bit in node.bits}
        events = {bit: int(np.count_nonzero((table.mask >> bit) & 1)) for bit in bits}
        span = int(table.ts.max()) - int(table.ts.min()) + 1 if len(table) else 1
        floats = frozenset(
            attr for attr, col in table.columns.items() if col.values.dtype.kind == "f"
        )
        counted = [self.plans[i] for i in self.counter_plans]
        self.forest = Forest(
            counted,
            "chop",
            self.signatures,
            counts=TypeCounts(events, span, floats),
            min_tail=old.min_tail,
            rule=old.rule,
        )
        self.chopped = any(len(qp.pieces) > 1 for qp in self.forest.queries)
        return self.forest

    def _expire(self, state: AggregateState):
        if self.forest is None or state.latest is None:
            return
        state.carry = {
            root: rows.expire(state.latest, self.forest.nodes[root].window)
            for root, rows in state.carry.items()
        }

    # ---- enumerated queries
    def _enumerated(self, state, plan, events, seg_cols, group_pos, owned):
        frame = events.assign(**{NEW: True})
        if state.buffer is not None and len(state.buffer):
            frame = self.in_order(pd.concat([state.buffer.assign(**{NEW: False}), frame]))
        else:
            frame = frame.reset_index(drop=True)
        new = frame[NEW].to_numpy()
        mask = self.signatures.plan_mask(plan, self.mask(frame))
        table = self._table(
            frame, mask, seg_cols, keep_all=plan.strategy == "STRICT_CONTIGUITY", plan=plan
        )
        if len(table):
            contribs = enumerate_contributions(plan, table, self.budget, stats=state.stats)
        else:
            contribs = Contributions.empty(channels_of(plan))
        trigger_owned = new.copy()
        if owned is not None:
            trigger_owned[new] = owned
        batch = Batch(frame, table, _segment_keys(frame, table, seg_cols), group_pos, trigger_owned)
        return self._rows(plan, batch, contribs, [], plan.positives[-1].bit)

    def _keep_window(self, state: AggregateState, events: pd.DataFrame):
        frame = events
        if state.buffer is not None and len(state.buffer):
            frame = self.in_order(pd.concat([state.buffer, events]))
        windows = [p.window for p in self.plans]
        if any(w is None for w in windows) or state.latest is None:
            state.buffer = frame.reset_index(drop=True)
            return
        ticks = frame_ticks(frame, self.options.time_col)
        state.buffer = frame[ticks > state.latest - max(windows)].reset_index(drop=True)

    # ---- rows
    def _table(self, frame, mask, seg_cols, keep_all, plan=None) -> EventTable:
        attributes = self.attributes() if plan is None else plan.engine_attributes()
        return build_table(
            frame,
            mask=mask,
            segment_cols=seg_cols,
            time_col=self.options.time_col,
            tiebreak=self.tiebreak,
            attributes=attributes,
            keep_unmatched=keep_all,
        )

    def _rows(self, plan, batch: Batch, contribs, carried_keys, trigger_bit):
        """One row per trigger (an event that can bind the last positive) of this batch.

        The first `len(carried_keys)` contributions were carried from earlier batches
        (their partitions' keys are given); the others come from the batch's segments."""
        table = batch.table
        pos = np.flatnonzero(table.mask & trigger_bit)
        if batch.owned is not None and len(pos):
            pos = pos[batch.owned[table.row[pos]]]
        if not len(pos):
            return self.empty(batch.frame)
        nsegments, ncarried = len(batch.segment_keys), len(carried_keys)
        if batch.group_pos:
            keys = [*batch.segment_keys, *carried_keys]
            groups = [tuple(k[p] for p in batch.group_pos) for k in keys]
            codes = pd.factorize(_objects(groups))[0].astype(np.int64)
        else:
            codes = np.zeros(nsegments + ncarried, dtype=np.int64)
        segment_code = codes[:nsegments]
        trigger_group = segment_code[table.segment[pos]]
        contribution_group = np.concatenate(
            [codes[nsegments:], segment_code[contribs.segment[ncarried:]]]
        )
        triggers = Triggers(pos, table.ts[pos], trigger_group)
        values, ended = combine(plan, contribs, triggers, contribution_group)
        order = np.lexsort((pos, table.ts[pos], trigger_group))
        if plan.aggregate.emit == "match":  # only where the trigger's instant ends matches
            order = order[(ended > 0)[order]]
        rows = table.row[pos[order]]  # each column taken in output order once
        out = {"ts": batch.frame[self.options.time_col].to_numpy()[rows]}
        for g in self.group_by:
            out[g] = batch.frame[g].to_numpy()[rows]
        for item in plan.aggregate.items:
            out[item.name] = _typed(values.get(item.name, np.zeros(0))[order], item)
        return pd.DataFrame(out)

    def _query_rows(self, outs: list[tuple[int, pd.DataFrame]], frame) -> pd.DataFrame:
        frames = []
        for i, rows in sorted(outs, key=lambda x: x[0]):
            if self.names is not None and len(rows):
                rows.insert(0, QUERY, self.names[i])
            frames.append(rows)
        return self.concat(frames, frame)


def _carried(rows: CarryRows | None, counters: PrefixCounters, qp, end: int):
    """Matches counted before this batch, as contributions that ended long ago, and the
    keys of their partitions."""
    channels = list(qp.channel_source)
    if rows is None or not len(rows):
        return Contributions.empty(channels), _objects([])
    j = counters.subtree(qp.pieces[0].nodes[0]).index(end)
    n = len(rows)
    moments = {
        ch: rows.moments[source.values].take((slice(None), j))
        for ch, source in qp.channel_source.items()
    }
    contributions = Contributions(
        np.full(n, -1, dtype=np.int64),
        rows.start_ts,
        np.full(n, LONG_AGO, dtype=np.int64),
        rows.count[:, j],
        moments,
    )
    return contributions, rows.key


def _objects(items: list) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    for i, item in enumerate(items):  # (assigning a list of tuples would unpack them)
        out[i] = item
    return out


def _segment_keys(frame: pd.DataFrame, table: EventTable, cols: list[str]) -> list[tuple]:
    """The values of `cols` of each segment of `table` (its first event's)."""
    firsts = segment_firsts(table)
    if not cols:
        return [()] * len(firsts)
    values = frame.iloc[table.row[firsts]][cols].itertuples(index=False, name=None)
    return [tuple(v) for v in values]


def _typed(values: np.ndarray, item):
    if item.output_kind == "int" and values.dtype.kind in "iu":  # no null, within int64
        return pd.array(values.astype(np.int64, copy=False), dtype="Int64")
    if item.output_kind == "int":
        ints = [None if v is None else int(v) for v in values]
        if any(v is not None and abs(v) >= 2**63 for v in ints):
            return pd.array(ints, dtype=object)  # exact beyond 64 bits
        return pd.array(ints, dtype="Int64")
    return pd.array([np.nan if v is None else float(v) for v in values], dtype="float64")
