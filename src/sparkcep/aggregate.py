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
    sharing: str = "chop"

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
            for qp, i in zip(self.forest.queries, self.counter_plans):
                plan = self.plans[i]
                if counters is None:
                    contribs = Contributions.empty(channels_of(plan))
                else:
                    contribs = query_contributions(counters, qp)
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
                enumerate_contributions(plan, table)
                if len(table)
                else Contributions.empty(channels_of(plan))
            )
            outs.append(
                (i, self._rows(plan, frame, table, contribs, plan.positives[-1].bit, owned, id_col))
            )
        outs.sort(key=lambda x: x[0])
        frames = []
        for i, rows in outs:
            if len(self.plans) > 1 or self.names[i] is not None:
                rows.insert(0, "query", self.names[i] or f"q{i + 1}")
            frames.append(rows)
        return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]

    def _rows(self, plan, frame, table, contribs, trigger_bit, owned, id_col) -> pd.DataFrame:
        split = [self._split_col] if getattr(self, "_split_col", None) else []
        group_of_segment = _groups([*split, *plan.group_by], frame, table)
        pos = np.flatnonzero(table.mask & trigger_bit)
        if owned is not None and len(pos):
            pos = pos[owned[table.row[pos]]]
        trig = Triggers(pos, table.ts[pos], group_of_segment[table.segment[pos]])
        values = combine(plan, contribs, trig, group_of_segment) if len(pos) else {}
        rows = table.row[pos]
        out = {"ts": frame[plan.options.time_col].to_numpy()[rows]}
        for g in plan.group_by:
            out[g] = frame[g].to_numpy()[rows]
        for item in plan.agg:
            out[item.name] = _typed(values.get(item.name, np.zeros(0)), item)
        result = pd.DataFrame(out)
        if not len(result):
            return empty_rows(plan, frame)
        order = np.lexsort((pos, table.ts[pos], trig.group))
        return result.iloc[order].reset_index(drop=True)


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
    if item.func == "count":
        return pd.array([int(v) for v in values], dtype="Int64")
    if item.kind == "int" and item.func in ("sum", "min", "max"):
        return pd.array([None if v is None else int(v) for v in values], dtype="Int64")
    return pd.array([np.nan if v is None else float(v) for v in values], dtype="float64")


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
