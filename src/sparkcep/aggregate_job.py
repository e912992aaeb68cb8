"""Running AGG queries over one table of events: A-Seq counters or enumeration, then rows.

Used by the local runner and, per Spark partition, by the Spark runner. Several queries
run together when they partition the stream the same way; with `sharing`, A-Seq shares
their counters (prefix tree, chop-connect). `algorithm="twostep"` enumerates every
match with nfa and aggregates afterwards (the paper's baseline).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from sparkcep.engines.aggregation import (
    Contributions,
    Triggers,
    channels_of,
    combine,
    enumerate_contributions,
)
from sparkcep.engines.aseq import Forest, PrefixCounters, query_contributions
from sparkcep.errors import SparkcepError
from sparkcep.events import MASK, build_table, components_mask
from sparkcep.plan import Plan

ALGORITHMS = ("aseq", "twostep")
SHARING = ("chop", "prefix", "none")


@dataclass
class AggregateJob:
    """AGG queries that partition the stream alike, run over the same events."""

    plans: list[Plan]
    names: list[str | None]
    algorithm: str = "aseq"
    sharing: str = "prefix"

    def __post_init__(self):
        if self.algorithm not in ALGORITHMS:
            raise SparkcepError(f"the algorithm is aseq or twostep, not '{self.algorithm}'")
        if self.sharing not in SHARING:
            raise SparkcepError(f"sharing is chop, prefix or none, not '{self.sharing}'")
        first = self.plans[0]
        for plan in self.plans[1:]:
            if plan.key != first.key or plan.tiebreak != first.tiebreak:
                raise SparkcepError("queries run together must partition the stream alike")
        self.counter_plans = [
            i
            for i, p in enumerate(self.plans)
            if self.algorithm == "aseq" and p.agg_path == "counters"
        ]
        self.forest = (
            Forest([self.plans[i] for i in self.counter_plans], self.sharing)
            if self.counter_plans
            else None
        )

    @property
    def key(self) -> tuple[str, ...]:
        return self.plans[0].key

    @property
    def group_by(self) -> tuple[str, ...]:
        return self.plans[0].group_by

    def attributes(self) -> list[str]:
        names: list[str] = []
        for plan in self.plans:
            for a in plan.engine_attributes():
                if a not in names:
                    names.append(a)
        return names

    def components(self):
        """Everything an event is tested for, for one pushed-down filter."""
        comps = list(self.forest.signatures) if self.forest else []
        for i, plan in enumerate(self.plans):
            if i not in self.counter_plans:
                comps += list(plan.components)
        return comps

    def run(
        self,
        frame: pd.DataFrame,
        id_col: str,
        *,
        sorted_: bool = False,
        segment_cols: list[str] | None = None,
        owned: np.ndarray | None = None,
        split_col: str | None = None,
    ) -> pd.DataFrame:
        """Output rows of every query: `owned` (bool per frame row) limits which trigger
        events report (a Spark time range reports those inside it); `split_col` (the
        range) separates copies of the stream whose matches must not be added up."""
        self._split_col = split_col
        self.stats = {"peak_counters": 0, "partial_matches": 0, "peak_partial": 0, "matches": 0}
        outs = []
        segments = list(self.key) if segment_cols is None else segment_cols
        if self.forest is not None:
            plan0 = self.plans[self.counter_plans[0]]
            framed = frame.copy()
            if MASK not in framed.columns or len(self.plans) != len(self.counter_plans):
                framed[MASK] = components_mask(
                    self.forest.signatures, plan0.options.type_col, framed
                )
            table = build_table(
                plan0, framed, id_col, sorted_=sorted_, segment_cols=segments,
                attributes=self.attributes(),
            )  # fmt: skip
            counters = PrefixCounters(self.forest, table) if len(table) else None
            if counters is not None:
                self.stats["peak_counters"] = counters.peak_counters
            for qp, i in zip(self.forest.queries, self.counter_plans):
                plan = self.plans[i]
                if counters is None:
                    contribs = Contributions.empty(channels_of(plan))
                else:
                    contribs = query_contributions(counters, qp)
                    self.stats["matches"] += int(np.sum(contribs.count))
                last_bit = qp.pieces[-1].nodes[-1]
                bit = self.forest.nodes[last_bit].bits[0]
                outs.append((i, self._rows(plan, framed, table, contribs, 1 << bit, owned, id_col)))
        for i, plan in enumerate(self.plans):
            if i in self.counter_plans:
                continue
            own = frame.drop(columns=[MASK]) if MASK in frame.columns else frame
            table = build_table(
                plan, own, id_col, sorted_=sorted_, segment_cols=segments,
                attributes=self.attributes(),
            )  # fmt: skip
            contribs = (
                enumerate_contributions(plan, table, stats=self.stats)
                if len(table)
                else Contributions.empty(channels_of(plan))
            )
            outs.append(
                (i, self._rows(plan, frame, table, contribs, plan.positives[-1].bit, owned, id_col))
            )
        return query_rows(outs, self.names)

    def _rows(self, plan, frame, table, contribs, trigger_bit, owned, id_col) -> pd.DataFrame:
        split = [self._split_col] if getattr(self, "_split_col", None) else []
        group_of_segment = _groups([*split, *plan.group_by], frame, table)
        pos = np.flatnonzero(table.mask & trigger_bit)
        if owned is not None and len(pos):
            pos = pos[owned[table.row[pos]]]
        trig = Triggers(pos, table.ts[pos], group_of_segment[table.segment[pos]])
        cgroup = group_of_segment[contribs.segment] if len(contribs) else np.zeros(0, np.int64)
        values = combine(plan, contribs, trig, cgroup) if len(pos) else {}
        return trigger_rows(plan, frame, table, pos, trig.group, values)


def _groups(cols: list[str], frame: pd.DataFrame, table) -> np.ndarray:
    """Output group of each segment: its values of `cols` (GROUP BY, and the Spark time
    range); one group without them."""
    nseg = int(table.segment.max()) + 1 if len(table) else 0
    if not cols or not nseg:
        return np.zeros(nseg, dtype=np.int64)
    first = np.full(nseg, -1, dtype=np.int64)
    idx = np.arange(len(table))[::-1]
    first[table.segment[idx]] = idx  # the first event of each segment
    keys = frame.iloc[table.row[first]][cols].astype(object)
    if len(cols) > 1:
        codes = pd.MultiIndex.from_frame(keys).factorize(sort=True)[0]
    else:
        codes = pd.factorize(keys.iloc[:, 0], sort=True)[0]
    return np.asarray(codes, dtype=np.int64)


def _typed(values: np.ndarray, item):
    if item.func == "count" or (item.kind == "int" and item.func in ("sum", "min", "max")):
        ints = [None if v is None else int(v) for v in values]
        if any(v is not None and abs(v) >= 2**63 for v in ints):
            return pd.array(ints, dtype=object)  # exact beyond 64 bits
        return pd.array(ints, dtype="Int64")
    return pd.array([np.nan if v is None else float(v) for v in values], dtype="float64")


def query_rows(outs: list[tuple[int, pd.DataFrame]], names: list) -> pd.DataFrame:
    """The rows of each query in query order, with a `query` column when there are
    several queries or the one query has a name."""
    frames = []
    for i, rows in sorted(outs, key=lambda x: x[0]):
        if len(names) > 1 or names[i] is not None:
            rows.insert(0, "query", names[i] or f"q{i + 1}")
        frames.append(rows)
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]


def trigger_rows(plan, frame, table, pos, groups, values) -> pd.DataFrame:
    """One output row per trigger event (table positions `pos`), in (group, ts, position)
    order: its time, group columns and aggregate values."""
    rows = table.row[pos]
    out = {"ts": frame[plan.options.time_col].to_numpy()[rows]}
    for g in plan.group_by:
        out[g] = frame[g].to_numpy()[rows]
    for item in plan.agg:
        out[item.name] = _typed(values.get(item.name, np.zeros(0)), item)
    result = pd.DataFrame(out)
    if not len(result):
        return empty_rows(plan, frame)
    order = np.lexsort((pos, table.ts[pos], groups))
    return result.iloc[order].reset_index(drop=True)


def empty_rows(plan: Plan, frame: pd.DataFrame | None) -> pd.DataFrame:
    cols = {
        "ts": pd.Series([], dtype=object if frame is None else frame[plan.options.time_col].dtype)
    }
    for g in plan.group_by:
        cols[g] = pd.Series([], dtype=object if frame is None else frame[g].dtype)
    for item in plan.agg:
        dtype = (
            "Int64"
            if item.func == "count" or (item.kind == "int" and item.func != "avg")
            else "float64"
        )
        cols[item.name] = pd.Series([], dtype=dtype)
    return pd.DataFrame(cols)


class AggregateOperator:
    """AGG queries as an incremental operator (docs/aggregation.md): `process(batch)`
    returns the rows of the batch's trigger events, `flush()` nothing more.

    A-Seq queries keep only their prefix counters between batches — one row of counts
    per START event still inside the window, with the key of its partition — and no
    event. Queries answered by enumeration keep the events of the last window. Sharing
    is at most `prefix` here (chop-connect runs in batch jobs).

    >>> import pandas as pd, pickle
    >>> from sparkcep.plan import analyze
    >>> stream = pd.DataFrame({"type": list("ABCACBDCAD"), "ts": range(1, 11), "id": range(10)})
    >>> plan = analyze("PATTERN SEQ(A a, B b, C c, D d) AGG COUNT WITHIN 7",
    ...                {"type": "string", "ts": "int", "id": "int"})
    >>> op = AggregateOperator([plan], id_col="id")
    >>> op.process(stream.iloc[:7]).values.tolist()
    [[7, 2]]
    >>> op = pickle.loads(pickle.dumps(op))
    >>> op.process(stream.iloc[7:]).values.tolist()
    [[10, 1]]
    """

    def __init__(self, plans: list[Plan], *, id_col: str, names=None, sharing: str = "prefix"):
        self.job = AggregateJob(
            plans,
            list(names or [None] * len(plans)),
            "aseq",
            "none" if sharing == "none" else "prefix",
        )
        self.id_col = id_col
        self.carry: dict = {}
        self.buffer: pd.DataFrame | None = None  # events of the last window (enumeration)
        self.latest: int | None = None

    def process(self, batch: pd.DataFrame) -> pd.DataFrame:
        from sparkcep.engines.aseq import PrefixCounters, piece_contributions
        from sparkcep.events import time_ticks

        job = self.job
        plan0 = job.plans[0]
        ticks = time_ticks(batch[plan0.options.time_col])
        if len(ticks):
            if self.latest is not None and ticks.min() < self.latest:
                raise SparkcepError("a partition's events must arrive in time order")
            self.latest = int(ticks.max())
        outs = []
        if job.forest is not None and len(batch):
            framed = batch.copy()
            framed[MASK] = components_mask(job.forest.signatures, plan0.options.type_col, framed)
            table = build_table(
                plan0, framed, self.id_col, segment_cols=list(job.key), attributes=job.attributes()
            )
        if job.forest is not None and len(batch) and not len(table):
            # Nothing here for the counters; only time moved on.
            self.carry = {
                root: _take_rows(rows, rows.start_ts > self.latest - job.forest.nodes[root].window)
                for root, rows in self.carry.items()
            }
        elif job.forest is not None and len(batch):
            keys = _segment_keys(framed, table, list(job.key))
            counters = PrefixCounters(job.forest, table, self.carry, keys)
            for qp, i in zip(job.forest.queries, job.counter_plans):
                plan = job.plans[i]
                end = qp.pieces[-1].nodes[-1]
                fresh = piece_contributions(counters, qp)
                before = self._carried(counters, qp, end)
                contribs = Contributions.concat([before[0], fresh])
                ckeys = np.concatenate([before[1], _objects([keys[s] for s in fresh.segment])])
                bit = 1 << job.forest.nodes[end].bits[0]
                outs.append((i, self._rows(plan, framed, table, contribs, ckeys, bit, keys)))
            # Keep the START rows still inside the window.
            self.carry = {}
            for root, rows in counters.final.items():
                w = job.forest.nodes[root].window
                keep = rows.start_ts > self.latest - w
                self.carry[root] = _take_rows(rows, keep)
        for i, plan in enumerate(job.plans):
            if i in job.counter_plans:
                continue
            outs.append((i, self._enumerated(plan, batch)))
        if self.buffer is not None or any(
            i not in job.counter_plans for i in range(len(job.plans))
        ):
            self._keep_window(batch)
        if not outs:
            return empty_rows(plan0, batch if len(batch) else None)
        return query_rows(outs, job.names)

    def flush(self) -> pd.DataFrame:
        return empty_rows(self.job.plans[0], None)

    def advance(self, to: int) -> pd.DataFrame:
        """Time reaches `to` (ticks): forget the START rows and events that expired."""
        if self.latest is not None and to <= self.latest:
            return self.flush()
        self.latest = to
        if self.job.forest is not None:
            self.carry = {
                root: _take_rows(rows, rows.start_ts > to - self.job.forest.nodes[root].window)
                for root, rows in self.carry.items()
            }
        if self.buffer is not None:
            self._keep_window(self.buffer.iloc[:0])
        return self.flush()

    def is_empty(self) -> bool:
        no_rows = all(not len(rows.start_ts) for rows in self.carry.values())
        return no_rows and (self.buffer is None or not len(self.buffer))

    # ----
    def _carried(self, counters, qp, end):
        """Matches counted before this batch, as contributions that ended long ago."""
        root = qp.pieces[0].nodes[0]
        rows = self.carry.get(root)
        channels = list(qp.channel_source)
        if rows is None or not len(rows.start_ts):
            return Contributions.empty(channels), np.zeros(0, dtype=object)
        sub = counters._subtree(root)
        j = sub.index(end)
        n = len(rows.start_ts)
        c = Contributions(
            np.full(n, -1, dtype=np.int64),
            rows.start_ts,
            np.full(n, np.iinfo(np.int64).min // 4, dtype=np.int64),
            rows.cnt[:, j],
        )
        for ch, (_, node, bit) in qp.channel_source.items():
            key = (node, bit, ch.split(".", 1)[1])
            s, nn, mn, mx = rows.chans[key]
            c.sums[ch], c.nonnull[ch], c.mins[ch], c.maxs[ch] = (
                s[:, j],
                nn[:, j],
                mn[:, j],
                mx[:, j],
            )
        return c, rows.key

    def _rows(self, plan, frame, table, contribs, ckeys, trigger_bit, seg_keys):
        positions = [list(self.job.key).index(g) for g in plan.group_by]

        def group_of(key):
            return tuple(key[p] for p in positions)

        groups = {}
        trig_pos = np.flatnonzero(table.mask & trigger_bit)
        tgroups = np.array(
            [
                groups.setdefault(group_of(seg_keys[s]), len(groups))
                for s in table.segment[trig_pos]
            ],
            dtype=np.int64,
        )
        cgroup = np.array([groups.get(group_of(k), -1) for k in ckeys], dtype=np.int64)
        keep = np.flatnonzero(cgroup >= 0)
        contribs = _take_contribs(contribs, keep)
        trig = Triggers(trig_pos, table.ts[trig_pos], tgroups)
        values = combine(plan, contribs, trig, cgroup[keep]) if len(trig_pos) else {}
        return trigger_rows(plan, frame, table, trig_pos, tgroups, values)

    def _enumerated(self, plan, batch):
        frame = batch if self.buffer is None else pd.concat([self.buffer, batch], ignore_index=True)
        frame = frame.reset_index(drop=True)
        table = build_table(
            plan,
            frame,
            self.id_col,
            segment_cols=list(self.job.key),
            attributes=self.job.attributes(),
        )
        contribs = (
            enumerate_contributions(plan, table)
            if len(table)
            else Contributions.empty(channels_of(plan))
        )
        old = 0 if self.buffer is None else len(self.buffer)
        owned = np.zeros(len(frame), dtype=bool)
        owned[old:] = True
        job = AggregateJob([plan], [None], "twostep", "none")
        job._split_col = None
        return job._rows(plan, frame, table, contribs, plan.positives[-1].bit, owned, self.id_col)

    def _keep_window(self, batch):
        from sparkcep.events import time_ticks

        frame = batch if self.buffer is None else pd.concat([self.buffer, batch], ignore_index=True)
        windows = [p.window for p in self.job.plans]
        if any(w is None for w in windows) or self.latest is None:
            self.buffer = frame.reset_index(drop=True)
            return
        ticks = time_ticks(frame[self.job.plans[0].options.time_col])
        self.buffer = frame[ticks > self.latest - max(windows)].reset_index(drop=True)


def _objects(items: list) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    for i, item in enumerate(items):
        out[i] = item
    return out


def _segment_keys(frame: pd.DataFrame, table, key: list[str]) -> list[tuple]:
    nseg = int(table.segment.max()) + 1 if len(table) else 0
    first = np.full(nseg, -1, dtype=np.int64)
    idx = np.arange(len(table))[::-1]
    first[table.segment[idx]] = idx
    if not key:
        return [()] * nseg
    values = frame.iloc[table.row[first]][key].itertuples(index=False, name=None)
    return [tuple(v) for v in values]


def _take_rows(rows, keep):
    from sparkcep.engines.aseq import CarryRows

    return CarryRows(
        rows.key[keep], rows.start_ts[keep], rows.cnt[keep],
        {ch: tuple(a[keep] for a in arrays) for ch, arrays in rows.chans.items()},
    )  # fmt: skip


def _take_contribs(c: Contributions, idx: np.ndarray) -> Contributions:
    return Contributions(
        c.segment[idx], c.start[idx], c.end[idx], c.count[idx],
        {k: v[idx] for k, v in c.sums.items()}, {k: v[idx] for k, v in c.nonnull.items()},
        {k: v[idx] for k, v in c.mins.items()}, {k: v[idx] for k, v in c.maxs.items()},
    )  # fmt: skip
