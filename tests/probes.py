"""Probe engines: tiny programs that use every feature of the `Program` contract, whose
rows a few lines of plain Python compute straight from the input (`oracle`), so that the
runners (local, Spark batch, streaming) can be checked without any real engine.

The probe: for each event a query sees, one row with the ids of the events of its segment
just before it in processing order (segment, time, tie-break, id) within `before` ticks,
and those just after it within `after` ticks (None: all of them). A row is given when no
later event can change it: by `advance` once time reaches its time + `after`, else by
`flush`; only an owned event (Spark's time ranges) gives one. Switches make it see every
event (`keep_unmatched`), hold a bucket of keys in one state (`keys_together`), say when
it may be left alone (`idle_until`), and reject rows whose `v` is negative (`row_checks`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from sparkcep.engines.base import Engine, Program, RowCheck
from sparkcep.engines.output import QUERY, OutputColumn
from sparkcep.language import ast as qast

NEGATIVE = "v is negative"


@dataclass(frozen=True)
class Switches:
    keep_unmatched: bool = False
    keys_together: bool = False
    lazy: bool = False  # idle_until: the time of its next row (else None: every watermark)
    checks: bool = False  # a row check: v >= 0
    after: int | str | None = "window"  # ticks seen after an event ("window": the WITHIN)


class ProbeEngine(Engine):
    def __init__(self, name: str, **switches):
        self.name = name  # type: ignore[misc]
        self.switches = Switches(**switches)

    def reason(self, plan):
        return None

    def compile(self, plans, names, options):
        return ProbeProgram(plans, names, options, self.switches)

    def job_key(self, plan):
        """Unkeyed queries with a window and without one run apart (time ranges or one
        partition); the others together."""
        return (plan.key, plan.tiebreak, not plan.key and plan.window is None)


def plan_after(plan, switches: Switches) -> int | None:
    return plan.window if switches.after == "window" else switches.after  # type: ignore[return-value]


class ProbeProgram(Program):
    engine = "probe"

    def __init__(self, plans, names, options, switches: Switches):
        super().__init__(plans, names, options)
        self.switches = switches
        self.keep_unmatched = switches.keep_unmatched
        self.windows = [(p.window, plan_after(p, switches)) for p in self.plans]

    @property
    def reach(self):
        befores, afters = zip(*self.windows)
        return (
            None if None in befores else max(befores),
            None if None in afters else max(afters),
        )

    @property
    def output(self):
        head = [OutputColumn(QUERY, "string")] if self.names else []
        keys = [OutputColumn(k, like=k) for k in self.segment_cols]
        ids = self.id_col
        return (
            *head,
            *keys,
            OutputColumn("event", like=ids),
            OutputColumn("time", like=self.options.time_col),
            OutputColumn("earlier", is_list=True, like=ids),
            OutputColumn("later", is_list=True, like=ids),
        )

    @property
    def order(self):
        return (*([QUERY] if self.names else []), *self.segment_cols, "time", "event")

    @property
    def keys_together(self) -> bool:
        return self.switches.keys_together

    def row_checks(self):
        if not self.switches.checks:
            return ()
        holds = qast.BinOp(">=", qast.AttrRef("e", "v"), qast.Literal(0))
        return (RowCheck(holds, NEGATIVE),)

    # ---- running: the state is plain data (streams store it with engines.state)
    def new_state(self):
        return {"events": [], "latest": None}

    def process(self, state, events, *, owned=None):
        ticks = self.check_time_order(events, state["latest"])
        if not len(events):
            return self.empty(events)
        state["latest"] = int(ticks.max())

        def values(cols):  # a missing key as None (pandas' NA is not equal to itself)
            return list(zip(*[[None if pd.isna(x) else x for x in events[c]] for c in cols]))

        segs = values(self.segments_of(events)) or [()] * len(events)
        keys = values(self.segment_cols) or [()] * len(events)
        times = events[self.options.time_col]
        stamps = pd.api.types.is_datetime64_any_dtype(times.dtype)
        times = times.to_numpy(dtype="datetime64[ns]").astype(np.int64) if stamps else times
        mask = self.mask(events)
        seen = [
            np.ones(len(events), bool)
            if self.keep_unmatched
            else self.signatures.plan_mask(p, mask) != 0
            for p in self.plans
        ]
        for i, (seg, key, tick, id_, time) in enumerate(
            zip(segs, keys, ticks.tolist(), events[self.id_col].tolist(), times.tolist())
        ):
            state["events"].append(
                {
                    "seg": list(seg),
                    "key": list(key),
                    "tick": tick,
                    "id": int(id_),
                    "time": int(time),
                    "stamp": stamps,
                    "owned": True if owned is None else bool(owned[i]),
                    "seen": [bool(s[i]) for s in seen],
                    "done": [not s[i] for s in seen],
                }
            )
        return self.empty(events)

    def advance(self, state, to):
        return self._rows(state, to)

    def flush(self, state):
        return self._rows(state, None)

    def is_empty(self, state):
        return not state["events"]

    def idle_until(self, state):
        """The first time at which advancing gives a row or forgets an event."""
        if not self.switches.lazy:
            return None
        horizon = self._horizon()
        times = []
        for e in state["events"]:
            for (_, after), done in zip(self.windows, e["done"]):
                if not done and after is not None:
                    times.append(e["tick"] + after)
            if all(e["done"]) and horizon is not None:
                times.append(e["tick"] + horizon)
        return min(times) if times else None

    def _horizon(self) -> int | None:
        """Ticks after which an event is in no row nor list any more (None: never)."""
        return None if None in self.reach else max(self.reach)

    def _rows(self, state, to):
        """The rows of the events whose `after` ticks have passed (`to`; None: all), then
        without the events no later row needs."""
        events = state["events"]
        rows = []
        for q, (before, after) in enumerate(self.windows):
            for i, e in enumerate(events):
                if e["done"][q] or (to is not None and (after is None or e["tick"] + after > to)):
                    continue
                e["done"][q] = True
                if not e["owned"]:
                    continue
                same = [j for j, f in enumerate(events) if f["seg"] == e["seg"] and f["seen"][q]]
                earlier = [
                    events[j]["id"]
                    for j in same
                    if j < i and (before is None or e["tick"] - events[j]["tick"] < before)
                ]
                later = [
                    events[j]["id"]
                    for j in same
                    if j > i and (after is None or events[j]["tick"] - e["tick"] < after)
                ]
                rows.append((q, e, earlier, later))
        horizon = self._horizon()
        if to is None:
            state["events"] = []
        elif horizon is not None:
            state["events"] = [
                e for e in events if not (all(e["done"]) and e["tick"] + horizon <= to)
            ]
        return self._frame(rows)

    def _frame(self, rows):
        empty = self.empty(None)
        if not rows:
            return empty
        cols = {}
        if self.names:
            cols[QUERY] = [self.names[q] for q, *_ in rows]
        for k, name in enumerate(self.segment_cols):
            cols[name] = [e["key"][k] for _, e, *_ in rows]
        cols["event"] = pd.array([e["id"] for _, e, *_ in rows], dtype="Int64")
        times = [e["time"] for _, e, *_ in rows]
        cols["time"] = (
            pd.to_datetime(times, unit="ns") if rows[0][1]["stamp"] else pd.array(times, "Int64")
        )
        cols["earlier"] = [earlier for *_, earlier, _ in rows]
        cols["later"] = [later for *_, later in rows]
        return pd.DataFrame(cols)


# ---- the oracle: the same rows from the whole input, in plain Python ---------------------


def oracle(
    frame: pd.DataFrame,
    plans: list[tuple[str | None, set[str] | None, int | None, int | None]],
    *,
    key: str | None = None,
    tiebreak: str | None = None,
    checks: bool = False,
) -> tuple[list[tuple], list[int]]:
    """(rows, rejected ids) of a probe over `frame` (columns id, type, ts, and k, v, seq as
    used). `plans`: (name, the types it sees or None for all, before, after). A row is
    (name, key value or None, id, ts, earlier ids, later ids), sorted as the output."""
    events = frame.to_dict("records")
    rejected = [e["id"] for e in events if checks and not (e["v"] is not None and e["v"] >= 0)]
    events = [e for e in events if e["id"] not in set(rejected)]
    if key is not None:  # a row without its key is in no partition
        events = [e for e in events if not pd.isna(e[key])]

    def ticks(e):
        t = e["ts"]
        return int(t.value // 1000) if isinstance(t, pd.Timestamp) else int(t)

    def place(e):  # processing order
        return (e[key] if key else 0, ticks(e), e[tiebreak] if tiebreak else 0, e["id"])

    rows = []
    for name, types, before, after in plans:
        seen = sorted((e for e in events if types is None or e["type"] in types), key=place)
        for e in seen:
            same = [f for f in seen if key is None or f[key] == e[key]]
            pos = next(i for i, f in enumerate(same) if f is e)
            earlier = [
                f["id"] for f in same[:pos] if before is None or ticks(e) - ticks(f) < before
            ]
            later = [
                f["id"] for f in same[pos + 1 :] if after is None or ticks(f) - ticks(e) < after
            ]
            rows.append((name, e[key] if key else None, e["id"], e["ts"], earlier, later))
    rows.sort(key=lambda r: (r[0] or "", r[1] if key else 0, r[3], r[2]))
    return rows, sorted(rejected)


def as_rows(frame: pd.DataFrame, key: str | None = None) -> list[tuple]:
    """A probe's output frame as oracle rows (plain Python values), in its order."""
    out = []
    for r in frame.to_dict("records"):
        out.append(
            (
                r.get(QUERY),
                r[key] if key else None,
                int(r["event"]),
                r["time"] if isinstance(r["time"], pd.Timestamp) else int(r["time"]),
                [int(x) for x in r["earlier"]],
                [int(x) for x in r["later"]],
            )
        )
    return out
