"""`ses`: sequenced event set patterns behind match windows (match-windows.md).

A pattern is a sequence of *sets* of variables, `SEQ({c, p+}, {b})`: the variables of a
set match in any order, the sets in sequence, `v+` binds one or more events in time
order, and every event of a match lies within the window (Definition 2). `SELECT ALL`
gives every match, `SELECT EARLIEST MAXIMAL` the earliest and maximal ones (§3).

Matching goes through match windows (`sparkcep.prep.match_windows`): events are
filtered, partitioned by the attributes equalities tie every variable to, buffered in
one window per event, and the matcher is called only for complete windows that pass the
necessary match conditions. Three matchers can stand behind the windows:

- `ses` (`matcher.SesMatcher`): the SES automaton, for event set patterns;
- `jointree` (`jointree.JoinTreeMatcher`): a ZStream join tree, every match
  (`--algorithm jointree`, the paper's second matcher);
- `nfa-windows`: the `nfa` engine's matcher behind the windows (`--algorithm
  nfa-windows`), for the plain pattern queries nfa answers.

The chemotherapy example (Q1, Fig. 1), for patient 2:

>>> import pandas as pd
>>> from sparkcep import match_local
>>> chemo = pd.DataFrame({
...     "PID": [2, 2, 2, 2, 2, 2, 2, 2], "L": list("BPDCPPBB"),
...     "V": [10100, 88, 84, 1320, 98, 88, 4000, 4900],
...     "T": [6, 8, 9, 10, 11, 15, 18, 19], "id": [4, 5, 6, 7, 8, 10, 12, 13]})
>>> q1 = '''PATTERN SEQ({c, p+}, {b})
...         WHERE c.L = 'C' AND p.L = 'P' AND b.L = 'B'
...           AND c.PID = p.PID AND p.PID = b.PID AND prev(p.V) < p.V
...         WITHIN 15 INCLUSIVE SELECT EARLIEST MAXIMAL'''
>>> match_local(chemo, q1, time_col="T", type_col="L", id_col="id")
   start  end  PID  c       p   b
0      8   18    2  7  [5, 8]  12
1     10   18    2  7     [8]  12
"""

from __future__ import annotations

from sparkcep.engines.base import Engine
from sparkcep.engines.ses.jointree import JoinTreeMatcher
from sparkcep.engines.ses.matcher import SesMatcher
from sparkcep.engines.ses.program import (
    JoinTreeProgram,
    NfaWindowsProgram,
    SesProgram,
    WindowedProgram,
    WindowState,
)
from sparkcep.plan.sets import SesSpec

__all__ = [
    "JoinTreeEngine",
    "JoinTreeMatcher",
    "NfaWindowsEngine",
    "SesEngine",
    "SesMatcher",
    "WindowState",
    "WindowedProgram",
]


class SesEngine(Engine):
    """Event set patterns (sets, `v+`, SELECT) behind match windows."""

    name = "ses"
    summary = "SES automaton behind match windows (filter, partition, necessary conditions)"
    examples = (
        "PATTERN SEQ({A a, B+ b}, {C c}) WHERE [k] AND prev(b.v) < b.v WITHIN 4 INCLUSIVE "
        "SELECT EARLIEST MAXIMAL RETURN sum(b.v) AS s",
        "PATTERN SEQ({A a, b}, C c) WHERE a.v <= c.v AND b.type != 'D' WITHIN 3 SELECT ALL "
        "RETURN b.v AS bv",
    )
    crowded_example = "PATTERN SEQ({A a}, {B b}) WITHIN 1000 SELECT ALL"

    def applies_to(self, plan) -> bool:
        return isinstance(plan.spec, SesSpec)

    def reason(self, plan) -> str | None:
        if not isinstance(plan.spec, SesSpec):
            return "it answers event set patterns (SEQ({a, b+}, ...) or SELECT)"
        return None

    def compile(self, plans, names, options) -> SesProgram:
        return SesProgram(plans, names, options)


def _plain_reason(plan) -> str | None:
    """Why a plain pattern query cannot go behind match windows (None: it can)."""
    if plan.spec is not None and not isinstance(plan.spec, SesSpec):
        return "it answers pattern queries, and this one has " + getattr(plan.spec, "what", "AGG")
    if plan.strategy == "STRICT_CONTIGUITY":
        return "strict contiguity needs every event, and windows filter them"
    if any(n.gap == 0 for n in plan.negations):
        return "a negation before the first event lies outside the match window"
    return None


class JoinTreeEngine(Engine):
    """Every match by a ZStream join tree behind match windows (--algorithm jointree)."""

    name = "jointree"
    summary = "ZStream join tree behind match windows: every match"
    examples = (
        "PATTERN SEQ({A a, B+ b}, {C c}) WHERE [k] AND prev(b.v) < b.v WITHIN 4 SELECT ALL",
    )
    crowded_example = "PATTERN SEQ({A a}, {B b}) WITHIN 1000 SELECT ALL"

    def applies_to(self, plan) -> bool:
        return isinstance(plan.spec, SesSpec)

    def reason(self, plan) -> str | None:
        why = _plain_reason(plan)
        if why is not None:
            return why
        if isinstance(plan.spec, SesSpec) and plan.spec.select != "all":
            return "a join tree gives every match (SELECT ALL), not the earliest and maximal"
        if plan.negations:
            return "a join tree here has no negation"
        if plan.strategy != "SKIP_TILL_ANY_MATCH":
            return "a join tree gives every match (skip-till-any-match)"
        return None

    def compile(self, plans, names, options) -> JoinTreeProgram:
        return JoinTreeProgram(plans, names, options)


class NfaWindowsEngine(Engine):
    """The nfa matcher behind match windows (--algorithm nfa-windows)."""

    name = "nfa-windows"
    summary = "nfa behind match windows (filter, partition, necessary conditions)"
    examples = (
        "PATTERN SEQ(A a, B+ b[], !D x) WHERE prev(b.v) <= b.v WITHIN 5 RETURN sum(b.v) AS s",
    )
    crowded_example = "PATTERN SEQ(A a, B b) WITHIN 1000"

    def applies_to(self, plan) -> bool:
        return plan.spec is None

    def reason(self, plan) -> str | None:
        if plan.spec is not None:
            return "it answers plain pattern queries, and this one has " + getattr(
                plan.spec, "what", "AGG"
            )
        return _plain_reason(plan)

    def compile(self, plans, names, options) -> NfaWindowsProgram:
        return NfaWindowsProgram(plans, names, options)
