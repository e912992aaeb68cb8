"""Hypothesis strategy: random probabilistic queries over the columns of `streams()`
(type, ts, v, k, seq, id), for the ayac engine and its oracle."""

from __future__ import annotations

from hypothesis import strategies as st

TYPES = "ABC"


@st.composite
def ayac_queries(draw, max_positives: int = 3):
    """SEQ of 1-4 components (negations anywhere but at the end), local and cross
    conditions (coalesce defaults too), a window, miss rates, delay laws, a threshold."""
    n = draw(st.integers(1, 4))
    comps = []
    for i in range(n):
        negated = i < n - 1 and draw(st.integers(0, 3)) == 0
        kind = draw(st.sampled_from(TYPES + "*")) if draw(st.integers(0, 5)) == 0 else TYPES[i % 3]
        comps.append({"var": "abcd"[i], "type": kind, "negated": negated})
    positives = [c for c in comps if not c["negated"]][-max_positives:]
    comps = [c for c in comps if c["negated"] or c in positives]
    negated = [c for c in comps if c["negated"]]
    conds: list[str] = []
    for c in comps:
        if c["type"] == "*" or draw(st.integers(0, 4)) == 0:
            op, bound = draw(st.sampled_from([("<", 3), ("<=", 2), (">", 1), (">=", 2), ("!=", 2)]))
            conds.append(f"{c['var']}.v {op} {bound}")
    if len(positives) >= 2 and draw(st.integers(0, 2)) == 0:
        x, y = draw(st.permutations(positives))[:2]
        conds.append(f"{x['var']}.v {draw(st.sampled_from(['<', '<=', '>=', '!=']))} {y['var']}.v")
    if len(positives) >= 2 and draw(st.integers(0, 3)) == 0:
        x, y = positives[0]["var"], positives[-1]["var"]
        conds.append(f"{y}.v = coalesce({x}.v, {y}.v)")
    for m in negated:
        if draw(st.integers(0, 2)) == 0:
            conds.append(f"{m['var']}.v = {draw(st.sampled_from(positives))['var']}.v")
    if draw(st.integers(0, 2)) == 0:
        conds.append("[k]")
    window = draw(st.integers(2, 8))
    text = "PATTERN SEQ(" + ", ".join(
        ("!" if c["negated"] else "") + ("ANY" if c["type"] == "*" else c["type"]) + " " + c["var"]
        for c in comps
    ) + ")"  # fmt: skip
    if conds:
        text += " WHERE " + " AND ".join(conds)
    text += f" WITHIN {window}"
    if draw(st.integers(0, 4)) == 0:
        text += " ORDER BY ts, seq"
    if draw(st.booleans()):
        text += f" MISSING RATE {draw(st.sampled_from([0.05, 0.1, 0.3, 0.5, 0.8]))}"
    else:
        rates = [f"{c['var']} {draw(st.sampled_from([0.0, 0.1, 0.4, 0.7]))}" for c in comps]
        text += " MISSING RATE " + ", ".join(rates)
    delays = []
    for c in comps:
        if c is positives[0] or draw(st.integers(0, 2)) == 0:
            continue
        law = draw(st.sampled_from(["u", "u2", "e", "n"]))
        if law == "u":
            delays.append(f"{c['var']} UNIFORM({draw(st.integers(1, 10))})")
        elif law == "u2":
            lo = draw(st.integers(0, 3))
            delays.append(f"{c['var']} UNIFORM({lo}, {lo + draw(st.integers(1, 5))})")
        elif law == "e":
            delays.append(f"{c['var']} EXPONENTIAL({draw(st.sampled_from([0.5, 1, 2, 5]))})")
        else:
            delays.append(f"{c['var']} NORMAL({draw(st.integers(1, 4))}, 1.5)")
    if delays:
        text += " DELAY " + ", ".join(delays)
    text += f" THRESHOLD {draw(st.sampled_from([0.0, 0.01, 0.05, 0.1, 0.3, 0.6]))}"
    if positives and draw(st.integers(0, 5)) == 0:
        text += f" RETURN {positives[0]['var']}.v AS first_v"
    return text
