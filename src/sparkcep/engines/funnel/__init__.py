"""`funnel`: FUNNEL SEQ(s1, ..., sk) WHERE [key] WITHIN w — how far each key gets.

Per key, a row each time it reaches a further step (a chain of events of steps 1..j, in
order, within the window), counted with prefix counters (`counters.FunnelCounters`):
no chain is enumerated. `sparkcep.funnel_local` and `sparkcep.funnel` turn the rows into
the furthest step of each key and the number of keys that reached each step.

>>> import pandas as pd
>>> from sparkcep import funnel_local
>>> clicks = pd.DataFrame({
...     "user": ["u1", "u1", "u1", "u2", "u2", "u3"],
...     "type": ["visit", "cart", "pay", "visit", "cart", "visit"],
...     "ts": [0, 10, 20, 5, 4000, 7]})
>>> per_key, per_step = funnel_local(
...     clicks, "FUNNEL SEQ(visit a, cart b, pay c) WHERE [user] WITHIN 1 h", time_unit="s")
>>> per_key
  user  step reached
0   u1     3       c
1   u2     1       a
2   u3     1       a
>>> per_step
   step reached  keys
0     1       a     3
1     2       b     1
2     3       c     1
"""

from __future__ import annotations

from sparkcep.engines.base import Engine
from sparkcep.engines.funnel.counters import FunnelCounters
from sparkcep.engines.funnel.program import FunnelProgram, FunnelState
from sparkcep.plan.extensions import FunnelSpec

__all__ = ["FunnelCounters", "FunnelEngine", "FunnelProgram", "FunnelState"]


class FunnelEngine(Engine):
    """FUNNEL queries: per key, the steps reached (prefix counters, no enumeration)."""

    name = "funnel"
    summary = "funnel steps per key with prefix counters (latest chain start per step)"
    examples = (
        "FUNNEL SEQ(A a, B b, C c) WHERE [k] WITHIN 6",
        "FUNNEL SEQ(A a, ANY b, C c) WHERE [k] AND b.v > 1 WITHIN 4 ORDER BY ts, seq",
        "FUNNEL SEQ(A a, B b) WITHIN 3",
    )
    holds_matches = False  # per key, the latest start of each step
    crowded_example = "FUNNEL SEQ(A a, B b, C c) WITHIN 10"

    def applies_to(self, plan) -> bool:
        return isinstance(plan.spec, FunnelSpec)

    def reason(self, plan) -> str | None:
        if not isinstance(plan.spec, FunnelSpec):
            return "it answers FUNNEL queries"
        return None

    def job_key(self, plan) -> tuple:
        return ("funnel", id(plan))

    def compile(self, plans, names, options) -> FunnelProgram:
        return FunnelProgram(plans, names, options)
