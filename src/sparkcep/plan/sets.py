"""Event set patterns (match-windows.md §3): `SEQ({c, p+}, {b})`, `SELECT`, `INCLUSIVE`.

A query with an event set of two or more variables, or with SELECT, gets a `SesSpec` on
`plan.spec`: the sets in order, the selection (all matches, Definition 2, or the
earliest and maximal ones, §3) and whether the window was written INCLUSIVE. Without
sets or SELECT the query is what it always was (a set of one variable is a plain
component), so its plan has no spec and its engine is unchanged.

`WITHIN w INCLUSIVE` means `last.ts - first.ts <= w`; the plan keeps the exclusive form
every engine reads, `w + 1` ticks (ticks are integers).
"""

from __future__ import annotations

from dataclasses import dataclass

from sparkcep.errors import QueryError

PRUNINGS = ("none", "f", "fp", "fpc")  # the match-window prunings, --prune
SELECTIONS = ("all", "earliest maximal")


@dataclass(frozen=True)
class SesSpec:
    """What an event set pattern adds to its plan.

    `sets` lists each set's variables in the order written; `select` is "all" or
    "earliest maximal"; `inclusive` says the window was written INCLUSIVE.
    """

    sets: tuple[tuple[str, ...], ...]
    select: str = "all"
    inclusive: bool = False
    what = "event sets or SELECT"  # for the reason other engines give

    def set_of(self, var: str) -> int:
        for i, members in enumerate(self.sets):
            if var in members:
                return i
        raise KeyError(var)


def prune_level(options) -> str:
    """The prunings a run asks for (`--prune`); default: all of them."""
    level = getattr(options, "prune", None) or "fpc"
    if level not in PRUNINGS:
        raise QueryError(f"unknown --prune '{level}' (use {', '.join(PRUNINGS)})")
    return level


class EventSetClauses:
    """Event sets, SELECT and INCLUSIVE (mixed into the analyzer, which provides `query`,
    `options` and `error`)."""

    def _event_set_clauses(self, window: int | None, spec, strategy: str):
        """The window (one tick longer when INCLUSIVE) and the spec (a `SesSpec` for a
        pattern with sets or SELECT)."""
        q = self.query
        prune_level(self.options)
        if q.inclusive and q.within is None:
            raise self.error(
                "INCLUSIVE belongs to a window: write WITHIN 15 days INCLUSIVE", q.inclusive_span
            )
        if q.inclusive and window is not None:
            window += 1
        has_sets = any(c.in_set is not None for c in q.components)
        if not has_sets and q.select is None:
            return window, spec
        what = "event sets" if has_sets else "SELECT"
        if spec is not None:  # an AGG query's, or a FUNNEL's (which has no AGG items)
            clause, span = ("AGG", q.aggregates[0].span) if q.aggregates else ("FUNNEL", q.span)
            raise self.error(f"{clause} cannot be combined with {what}", span)
        for c in q.components:
            if c.negated:
                raise self.error(f"a pattern with {what} cannot have negations", c.span)
        if strategy != "SKIP_TILL_ANY_MATCH":
            span = q.strategy_span if q.strategy is not None else q.span
            raise self.error(
                f"a pattern with {what} selects its matches with SELECT ALL or SELECT "
                f"EARLIEST MAXIMAL, not STRATEGY {strategy}",
                span,
            )
        sets: list[list[str]] = []
        last: int | None = None
        for c in q.components:
            if c.in_set is None or c.in_set != last:
                sets.append([])
            sets[-1].append(c.var)
            last = c.in_set
        spec = SesSpec(tuple(tuple(s) for s in sets), q.select or "all", q.inclusive)
        return window, spec
