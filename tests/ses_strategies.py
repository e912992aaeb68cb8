"""Hypothesis strategies for event set patterns over the columns of `strategies.streams()`
(id, type, ts, v, k, seq)."""

from __future__ import annotations

from hypothesis import strategies as st


@st.composite
def ses_queries(draw, select: str | None = None, max_vars: int = 4, max_size: int = 2):
    """A random event set pattern: sets of typed or untyped variables, `v+`, conditions
    with prev() and aggregates, a window (sometimes INCLUSIVE), a selection."""
    n_sets = draw(st.integers(1, 3))
    sizes = [draw(st.integers(1, max_size)) for _ in range(n_sets)]
    while sum(sizes) > max_vars:
        sizes[sizes.index(max(sizes))] -= 1
    names = iter("abcd")
    sets, variables, plus = [], [], []
    for size in sizes:
        items = []
        for _ in range(size):
            var = next(names)
            kind = draw(st.sampled_from(["A", "B", "C", "", ""]))
            is_plus = len(plus) < 2 and draw(st.integers(0, 2)) == 0
            variables.append(var)
            if is_plus:
                plus.append(var)
            items.append(f"{kind}{'+' if is_plus else ''} {var}" if kind else var + "+" * is_plus)
        sets.append("{" + ", ".join(items) + "}")
    conds = []
    for var in variables:
        if draw(st.integers(0, 3)) == 0:
            op, bound = draw(st.sampled_from([("<", 3), ("<=", 2), (">", 1), ("!=", 2)]))
            conds.append(f"{var}.v {op} {bound}")
        elif draw(st.integers(0, 5)) == 0:
            conds.append(f"{var}.type != '{draw(st.sampled_from('ABCD'))}'")
    for var in plus:
        if draw(st.integers(0, 1)) == 0:
            conds.append(f"prev({var}.v) {draw(st.sampled_from(['<', '<=', '!=']))} {var}.v")
        if draw(st.integers(0, 5)) == 0:
            conds.append(draw(st.sampled_from([f"count({var}) <= 2", f"sum({var}.v) >= 2"])))
    if len(variables) >= 2 and draw(st.integers(0, 2)) == 0:
        x, y = draw(st.permutations(variables))[:2]
        conds.append(f"{x}.v {draw(st.sampled_from(['<', '<=', '=', '!=']))} {y}.v")
    if draw(st.integers(0, 2)) == 0:
        conds.append("[k]")
    query = "PATTERN SEQ(" + ", ".join(sets) + ")"
    if conds:
        query += " WHERE " + " AND ".join(conds)
    if draw(st.integers(0, 9)) > 0:
        query += f" WITHIN {draw(st.integers(1, 5))}"
        if draw(st.booleans()):
            query += " INCLUSIVE"
    if select is None:
        select = draw(st.sampled_from(["ALL", "EARLIEST MAXIMAL", "EARLIEST MAXIMAL", None]))
    if select is None and all(size == 1 for size in sizes):
        select = "ALL"  # sets of one and no SELECT would be a plain (nfa) query
    if select is not None:
        query += f" SELECT {select}"
    if draw(st.integers(0, 4)) == 0:
        query += " ORDER BY ts, seq"
    returns = []
    if plus and draw(st.integers(0, 2)) == 0:
        returns.append(draw(st.sampled_from([f"{plus[0]}.v", f"sum({plus[0]}.v) AS s"])))
    if draw(st.integers(0, 3)) == 0:
        returns.append(f"{variables[0]}.v AS first_v")
    if returns:
        query += " RETURN " + ", ".join(returns)
    return query


def all_queries(max_size: int = 2):
    """Event set patterns with SELECT ALL (what the join tree answers); `max_size=1`:
    sets of one variable, which mean what plain components mean."""
    return ses_queries(select="ALL", max_size=max_size)


def _windowable(query: str) -> bool:
    from sparkcep.language.parser import parse

    return not parse(query).components[0].negated


@st.composite
def windowed_queries(draw):
    """Plain pattern queries that can run behind match windows (nfa-windows): no
    strict contiguity, no negation before the first event."""
    from strategies import queries

    query = draw(queries().filter(_windowable))
    return query.replace("STRICT_CONTIGUITY", "SKIP_TILL_NEXT_MATCH")


@st.composite
def plain_set_queries(draw):
    """Earliest and maximal matches of plain variables, one type each, with local
    conditions only (what `chain.EarliestChain` answers for every window at once)."""
    types = draw(st.permutations("ABCD"))[: draw(st.integers(1, 4))]
    sets, current = [], []
    for i, t in enumerate(types):
        current.append(f"{t} {'abcd'[i]}")
        if draw(st.booleans()):
            sets.append(current)
            current = []
    if current:
        sets.append(current)
    conds = [f"{'abcd'[i]}.v != 2" for i in range(len(types)) if draw(st.integers(0, 3)) == 0]
    if draw(st.booleans()):
        conds.append("[k]")
    query = "PATTERN SEQ(" + ", ".join("{" + ", ".join(s) + "}" for s in sets) + ")"
    if conds:
        query += " WHERE " + " AND ".join(conds)
    query += f" WITHIN {draw(st.integers(1, 5))} SELECT EARLIEST MAXIMAL"
    if draw(st.integers(0, 3)) == 0:
        query += " RETURN a.v AS av"
    return query
