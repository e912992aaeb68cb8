"""FUNNEL queries as a program: per key, a row each time a further step is reached.

The rows are `(key, step, reached, ts)`: key k reached step `step` (its variable
`reached`) at time `ts`, the earliest time a chain of that many steps completed within the
window. So the furthest step of a key is its last row, and the number of keys that
reached a step is the number of rows of that step (`sparkcep.funnel_local` gives both).
The state is, per key, the funnel's prefix counters (`counters.FunnelCounters`): one
start time per step and the furthest step. It is kept for the whole stream (a key that
came back would otherwise be counted again).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from sparkcep.engines.base import Program
from sparkcep.engines.funnel.counters import FunnelCounters
from sparkcep.engines.output import QUERY, OutputColumn
from sparkcep.engines.state import state_class
from sparkcep.errors import QueryError
from sparkcep.language import ast
from sparkcep.prep.table import build_table

FAR = "__far"
STARTS = "__s"


@state_class
@dataclass
class FunnelState:
    keys: pd.DataFrame | None = None  # per key: FAR and one STARTS<j> per step
    latest: int | None = None


class FunnelProgram(Program):
    """FUNNEL queries keyed alike (one row per key and step reached)."""

    engine = "funnel"

    def __init__(self, plans, names, options):
        super().__init__(plans, names, options)
        if len(self.plans) != 1:
            raise QueryError("FUNNEL queries run one program each")
        self.plan = plan = self.plans[0]
        if plan.conditions:
            expr = plan.conditions[0].expr
            raise QueryError(
                "a FUNNEL condition is about one step; this one ties steps by something other "
                f"than the key ({ast.to_text(expr)})",
                plan.text,
                expr.span,
            )
        self.steps = plan.spec.steps
        self.window = plan.window

    @property
    def reach(self) -> tuple[int | None, int | None]:
        return None, None  # a key's steps add up over the whole stream

    @property
    def output(self) -> tuple[OutputColumn, ...]:
        cols = [OutputColumn(QUERY, "string")] if self.names else []
        cols += [OutputColumn(k, like=k) for k in self.plan.key]
        cols += [OutputColumn("step", "int"), OutputColumn("reached", "string")]
        cols.append(OutputColumn("ts", like=self.options.time_col))
        return tuple(cols)

    @property
    def order(self) -> tuple[str, ...]:
        return (*([QUERY] if self.names else []), *self.plan.key, "step")

    @property
    def label(self) -> str:
        return "rows"

    def describe(self) -> list[tuple[str, str]]:
        steps = " -> ".join(self.steps)
        return [
            ("funnel", f"{steps}: per key, a row when it reaches a further step"),
            ("path", "prefix counters: per key one start time per step, no chain is built"),
        ]

    # ---- running
    def new_state(self) -> FunnelState:
        return FunnelState()

    def process(self, state: FunnelState, events: pd.DataFrame, *, owned=None) -> pd.DataFrame:
        ticks = self.check_time_order(events, state.latest)
        if not len(events):
            return self.empty(events)
        top = int(ticks.max())
        state.latest = top if state.latest is None else max(state.latest, top)
        table = build_table(
            events,
            mask=self.signatures.plan_mask(self.plan, self.mask(events)),
            segment_cols=self.segments_of(events),
            time_col=self.options.time_col,
            tiebreak=self.tiebreak,
            attributes=(),
        )
        known = self._load(state)
        key_cols = list(self.plan.key)
        out_rows, out_keys = [], []
        ts, order, mask = table.ts.tolist(), table.order.tolist(), table.mask.tolist()
        bounds = np.flatnonzero(np.r_[True, table.segment[1:] != table.segment[:-1]]).tolist()
        if not len(table):
            bounds = []
        for lo, hi in zip(bounds, [*bounds[1:], len(table)]):
            first = events.iloc[table.row[lo]]
            key = tuple(first[k] for k in key_cols)
            counters = known.get(key) or FunnelCounters(len(self.steps), self.window)
            for step, at in counters.feed(ts[lo:hi], order[lo:hi], mask[lo:hi]):
                out_rows.append(table.row[lo + at])
                out_keys.append(step)
            counters.expire(state.latest + 1)
            known[key] = counters
        self._store(state, known, events)
        if not out_rows:
            return self.empty(events)
        picked = events.iloc[np.asarray(out_rows, dtype=np.int64)].reset_index(drop=True)
        rows = {k: picked[k].to_numpy() for k in key_cols}
        rows["step"] = pd.array(out_keys, dtype="Int64")
        rows["reached"] = [self.steps[s - 1] for s in out_keys]
        rows["ts"] = picked[self.options.time_col].to_numpy()
        out = pd.DataFrame(rows)
        if self.names:
            out.insert(0, QUERY, self.names[0])
        return out

    def advance(self, state: FunnelState, to: int) -> pd.DataFrame:
        known = self._load(state)
        for counters in known.values():
            counters.expire(to)
        self._store(state, known, state.keys)
        return self.empty(state.keys)

    def flush(self, state: FunnelState) -> pd.DataFrame:
        return self.empty(state.keys)

    def is_empty(self, state: FunnelState) -> bool:
        return state.keys is None or not len(state.keys)

    # ---- state as a table
    def _load(self, state: FunnelState) -> dict:
        frame = state.keys
        if frame is None or not len(frame):
            return {}
        key_cols = list(self.plan.key)
        keys = frame[key_cols].itertuples(index=False, name=None) if key_cols else [()] * len(frame)
        starts = [frame[f"{STARTS}{j}"].tolist() for j in range(len(self.steps))]
        out = {}
        for i, (key, far) in enumerate(zip(keys, frame[FAR].tolist())):
            values = [None if pd.isna(col[i]) else int(col[i]) for col in starts]
            out[tuple(key)] = FunnelCounters(len(self.steps), self.window, values, int(far))
        return out

    def _store(self, state: FunnelState, known: dict, like: pd.DataFrame | None):
        if not known:
            state.keys = None
            return
        keys = list(known)
        data = {}
        for i, k in enumerate(self.plan.key):
            dtype = like[k].dtype if like is not None and k in like else object
            data[k] = pd.Series([key[i] for key in keys], dtype=dtype)
        data[FAR] = np.array([known[k].furthest for k in keys], dtype=np.int64)
        for j in range(len(self.steps)):
            data[f"{STARTS}{j}"] = pd.array([known[k].starts[j] for k in keys], dtype="Int64")
        state.keys = pd.DataFrame(data)
