"""Hypothesis strategies for interval times: small streams (with pmfs) and random pattern
queries with a TIME BETWEEN clause, over the columns of `strategies.streams()`."""

from __future__ import annotations

from hypothesis import strategies as st

TYPES = "ABC"


@st.composite
def interval_streams(draw, max_events: int = 7, pmf: bool = False):
    """Events with ids 0..n-1; times 0..5 with ties; v with a null now and then; k in
    {0, 1}; with `pmf`, a list of probabilities per event for TIME BETWEEN ts - 1 AND
    ts + 1 (some zero)."""
    n = draw(st.integers(min(3, max_events), max_events))
    events = []
    for i in range(n):
        event = {
            "id": i,
            "type": draw(st.sampled_from(TYPES + TYPES + "D")),
            "ts": draw(st.integers(0, 5)),
            "v": draw(st.one_of(st.integers(0, 3), st.none()) if i % 4 == 3 else st.integers(0, 3)),
            "k": draw(st.integers(0, 1)),
            "seq": draw(st.integers(0, 3)),
        }
        if pmf:
            weights = draw(st.lists(st.integers(0, 3), min_size=3, max_size=3))
            if not any(weights):
                weights[1] = 1
            total = sum(weights)
            probs = [w / total for w in weights]
            probs[-1] = 1.0 - sum(probs[:-1])  # sums to 1 within a rounding
            event["pmf"] = probs
        events.append(event)
    return events


@st.composite
def interval_queries(draw, max_components: int = 3, strategy: str | None = None, max_half: int = 1):
    """A random pattern over interval times: 1-3 components (a type, or ANY now and
    then), local and cross conditions on v, [k] sometimes, either strategy, a TIME
    BETWEEN ts - a AND ts + b clause (a, b in 0..max_half) and a window of 2..8."""
    n = draw(st.integers(1, max_components))
    variables = "abc"[:n]
    comps = []
    for i, var in enumerate(variables):
        kind = draw(st.sampled_from(TYPES + "*")) if draw(st.integers(0, 5)) == 0 else TYPES[i]
        comps.append(("ANY" if kind == "*" else kind) + " " + var)
    conds = []
    for var in variables:
        if draw(st.integers(0, 4)) == 0:
            op, bound = draw(st.sampled_from([("<", 3), ("<=", 1), (">", 0), (">=", 2), ("!=", 2)]))
            conds.append(f"{var}.v {op} {bound}")
    if n >= 2 and draw(st.integers(0, 2)) == 0:
        x, y = draw(st.permutations(list(variables)))[:2]
        op = draw(st.sampled_from(["<", "<=", ">", "=", "!="]))
        conds.append(f"{x}.v {op} {y}.v")
    if draw(st.integers(0, 3)) == 0:
        conds.append("[k]")
    where = f"WHERE {' AND '.join(conds)} " if conds else ""
    chosen = strategy or draw(st.sampled_from(["SKIP_TILL_ANY_MATCH", "SKIP_TILL_NEXT_MATCH"]))
    a, b = draw(st.integers(0, max_half)), draw(st.integers(0, max_half))
    window = draw(st.integers(2, 8))
    text = (
        f"PATTERN SEQ({', '.join(comps)}) {where}STRATEGY {chosen} "
        f"TIME BETWEEN ts - {a} AND ts + {b} WITHIN {window}"
    )
    if draw(st.integers(0, 4)) == 0:
        text += f" RETURN {variables[0]}.v AS x"
    return text
