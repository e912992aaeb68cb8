"""Hypothesis strategies: small random event streams and random pattern queries."""

from __future__ import annotations

from hypothesis import strategies as st

TYPES = "ABC"
STRATEGY_NAMES = ("SKIP_TILL_ANY_MATCH", "SKIP_TILL_NEXT_MATCH", "STRICT_CONTIGUITY")


@st.composite
def streams(draw, max_events: int = 10, types: str = TYPES + "D"):
    """Events with ids 0..n-1 in arrival order; times with ties; some null attributes."""
    n = (
        draw(st.integers(0, max_events))
        if draw(st.integers(0, 9)) == 0
        else max_events - draw(st.integers(0, 3))
    )
    events = []
    for i in range(n):
        events.append(
            {
                "id": i,
                "type": draw(st.sampled_from(types)),
                "ts": draw(st.integers(0, 7)),
                "v": draw(
                    st.one_of(st.integers(0, 4), st.none()) if i % 4 == 3 else st.integers(0, 4)
                ),
                "k": draw(st.integers(0, 1)),
                "seq": draw(st.integers(0, 3)),
            }
        )
    return events


@st.composite
def components(draw):
    n = draw(st.integers(1, 4))
    comps = []
    for i in range(n):
        negated = draw(st.booleans()) if n > 1 and draw(st.integers(0, 3)) == 0 else False
        kleene = (not negated) and draw(st.integers(0, 3)) == 0
        kind = draw(st.sampled_from(TYPES + "*")) if draw(st.integers(0, 7)) == 0 else TYPES[i % 3]
        comps.append(
            {
                "var": "abcd"[i],
                "type": "ANY" if kind == "*" else kind,
                "negated": negated,
                "kleene": kleene,
            }
        )
    if all(c["negated"] for c in comps):
        comps[0]["negated"] = False
    return comps


def _component_text(c) -> str:
    text = ("!" if c["negated"] else "") + c["type"] + ("+" if c["kleene"] else "")
    return f"{text} {c['var']}" + ("[]" if c["kleene"] else "")


@st.composite
def queries(draw, strategy: str | None = None):
    """A random query text over the attributes v, k, seq of `streams()`."""
    comps = draw(components())
    positives = [c for c in comps if not c["negated"]]
    negated = [c for c in comps if c["negated"]]
    conds: list[str] = []
    for c in comps:
        if draw(st.integers(0, 4)) == 0:
            op, bound = draw(st.sampled_from([("<", 3), ("<=", 2), (">", 1), (">=", 2), ("!=", 2)]))
            conds.append(f"{c['var']}.v {op} {bound}")
        if draw(st.integers(0, 9)) == 0:
            conds.append(f"{c['var']}.v IN (1, 2, 3)")
    if len(positives) >= 2 and draw(st.integers(0, 2)) == 0:
        x, y = draw(st.permutations(positives))[:2]
        op = draw(st.sampled_from(["<", "<=", ">", "=", "!="]))
        if not (x["kleene"] and y["kleene"]):
            conds.append(f"{x['var']}.v {op} {y['var']}.v")
    if draw(st.integers(0, 2)) == 0:
        conds.append("[k]")
    elif len(positives) >= 2 and draw(st.integers(0, 4)) == 0:
        conds.append(f"{positives[0]['var']}.k = {positives[-1]['var']}.k")
    for c in positives:
        if c["kleene"]:
            if draw(st.booleans()):
                op = draw(st.sampled_from(["<", "<=", ">", "!="]))
                conds.append(f"prev({c['var']}.v) {op} {c['var']}.v")
            if draw(st.integers(0, 3)) == 0:
                fn = draw(st.sampled_from(["sum", "max", "min", "count", "avg"]))
                arg = c["var"] if fn == "count" else f"{c['var']}.v"
                conds.append(
                    f"{fn}({arg}) {draw(st.sampled_from(['<', '>=']))} {draw(st.integers(1, 5))}"
                )
            later = [
                p for p in positives if positives.index(p) > positives.index(c) and not p["kleene"]
            ]
            if later and draw(st.integers(0, 3)) == 0:
                conds.append(f"{later[0]['var']}.v >= {c['var']}.v")
    for n in negated:
        singles = [p for p in positives if not p["kleene"]]
        if singles and draw(st.integers(0, 2)) == 0:
            conds.append(f"{n['var']}.v = {draw(st.sampled_from(singles))['var']}.v")
    if strategy is None:
        strategy = draw(st.sampled_from(STRATEGY_NAMES))
    edge_negation = comps[0]["negated"] or comps[-1]["negated"]
    window = None
    if edge_negation or draw(st.integers(0, 4)) > 0:
        window = draw(st.integers(1, 9))
    text = f"PATTERN SEQ({', '.join(_component_text(c) for c in comps)})"
    if conds:
        text += " WHERE " + " AND ".join(conds)
    text += f" STRATEGY {strategy}"
    if window is not None:
        text += f" WITHIN {window}"
    if draw(st.integers(0, 3)) == 0:
        text += " ORDER BY ts, seq"
    returns = []
    for c in positives:
        if c["kleene"] and draw(st.integers(0, 3)) == 0:
            returns.append(f"sum({c['var']}.v) AS s_{c['var']}")
        elif not c["kleene"] and draw(st.integers(0, 5)) == 0:
            returns.append(f"{c['var']}.v * 2 AS w_{c['var']}")
    if returns:
        text += " RETURN " + ", ".join(returns)
    return text


@st.composite
def agg_queries(draw):
    n = draw(st.integers(1, 4))
    comps = []
    for i in range(n):
        negated = 0 < i < n - 1 and draw(st.integers(0, 3)) == 0
        comps.append(("!" if negated else "") + "ABC"[i % 3] + f" {'abcd'[i]}")
    positives = [c.split()[1] for c in comps if not c.startswith("!")]
    conds = []
    if draw(st.booleans()):
        conds.append("[k]")
    for c in comps:
        if draw(st.integers(0, 3)) == 0:
            conds.append(
                f"{c.split()[1]}.v {draw(st.sampled_from(['<', '>=', '!=']))} {draw(st.integers(1, 3))}"
            )
    if len(positives) > 1 and draw(st.integers(0, 4)) == 0:
        conds.append(f"{positives[0]}.v < {positives[-1]}.v")  # forces enumeration
    var = draw(st.sampled_from(positives))
    aggs = draw(st.lists(st.sampled_from(["COUNT", f"SUM({var}.v) AS s", f"AVG({var}.v) AS av",
                                          f"MIN({var}.v) AS mn", f"MAX({var}.v) AS mx"]),
                         min_size=1, max_size=3, unique=True))  # fmt: skip
    text = f"PATTERN SEQ({', '.join(comps)})"
    if conds:
        text += " WHERE " + " AND ".join(conds)
    if draw(st.booleans()):
        text += " GROUP BY k"
    text += " AGG " + ", ".join(aggs)
    text += f" WITHIN {draw(st.integers(1, 8))}"
    if draw(st.integers(0, 3)) == 0:
        text += " ORDER BY ts, seq"
    text += draw(st.sampled_from(["", "", " EMIT ON MATCH", " EMIT EVERY TRIGGER"]))
    return text


def events_frame(events: list[dict]):
    """A drawn stream as a DataFrame with fixed column types (even when empty)."""
    import pandas as pd

    df = pd.DataFrame(events, columns=["id", "type", "ts", "v", "k", "seq"])
    return df.astype(
        {
            "id": "int64",
            "ts": "int64",
            "type": "object",
            "v": "float64",
            "k": "int64",
            "seq": "int64",
        }
    )
