"""Hypothesis strategies: random FUNNEL queries, and random MATCH_RECOGNIZE queries over the columns of `streams()`
(id, type, ts, v, k, seq): random patterns (quantifiers greedy and reluctant, alternation,
PERMUTE, anchors, exclusions nested too, empty patterns), DEFINE conditions that read the current row
only and ones that read the match so far, MEASURES with RUNNING/FINAL, CLASSIFIER()
navigated every way (PREV/NEXT/FIRST/LAST, RUNNING/FINAL) in MEASURES and DEFINE, every ROWS PER
MATCH and AFTER MATCH SKIP mode, SUBSET, PARTITION BY, WITHIN, and no ORDER BY (input order)."""

from __future__ import annotations

from hypothesis import strategies as st

VARS = ("A", "B", "C")
ROW_LOCAL = (
    "type = '{x}'",
    "v > 1",
    "v <= 2",
    "v < PREV(v)",
    "{x}.v >= PREV({x}.v, 2)",
    "NEXT(v) > v",
    "v IS NULL",
    "CLASSIFIER() = 'A'",
    "type IN ('A', 'B')",
    "v + 1 > PREV(v)",
    "NOT (seq = 0)",
)
HISTORY = (
    "v >= FIRST(A.v)",
    "v > A.v",
    "COUNT({x}.*) <= 2",
    "SUM(v) < 8",
    "LAST(B.v, 1) IS NULL",
    "CLASSIFIER(U) = 'A'",
    "MATCH_NUMBER() > 1",
    "PREV(CLASSIFIER()) = 'A'",
    "AVG(U.v) > 1",
    "FIRST(CLASSIFIER()) = 'A'",
    "PREV(LAST(A.v), 1) < v",
    "COUNT(v) >= COUNT(*) - 1",
    "NEXT(CLASSIFIER()) IS NULL",
    "PREV(CLASSIFIER(U), 2) = 'C'",
    "NEXT(FIRST(CLASSIFIER()), 1) = 'B'",
    "LAST(CLASSIFIER(), 1) != 'A'",
    "v IN (2, FIRST(A.v), NULL)",
    "{x}.v NOT IN (1, PREV({x}.v))",
    "MAX(B.seq) = 3 OR LAST(C.v) > 2",
)
MEASURES = (
    "MATCH_NUMBER() AS mno",
    "CLASSIFIER() AS cls",
    "FIRST(A.v) AS fa",
    "LAST(v, 1) AS lv",
    "RUNNING COUNT(*) AS rc",
    "FINAL COUNT(*) AS fc",
    "FINAL LAST(B.id) AS lb",
    "SUM(U.v) AS su",
    "PREV(v) AS pv",
    "NEXT(FIRST(A.v)) AS nf",
    "FINAL AVG(v) AS av",
    "MAX(B.v) - MIN(A.v) AS d",
    "CLASSIFIER(U) AS cu",
    "COUNT(C.*) AS nc",
    "FIRST(id, 1) AS second_id",
    "coalesce(B.v, -1) AS bv",
    "NEXT(CLASSIFIER()) AS ncls",
    "PREV(CLASSIFIER(), 2) AS pcls",
    "NEXT(RUNNING FIRST(CLASSIFIER()), 2) AS nfcls",
    "PREV(FINAL LAST(CLASSIFIER())) AS plcls",
    "NEXT(FINAL LAST(CLASSIFIER())) AS nlcls",
    "FINAL LAST(CLASSIFIER(), 1) AS flcls",
    "NEXT(CLASSIFIER(U)) AS nucls",
    "FIRST(CLASSIFIER(B)) AS fbcls",
)


@st.composite
def patterns(draw, depth: int = 0) -> str:
    kind = draw(st.integers(0, 9)) if depth < 3 else 0
    if kind <= 3:
        text = draw(st.sampled_from(VARS))
    elif kind == 4:
        parts = draw(st.lists(patterns(depth=depth + 1), min_size=2, max_size=3))
        text = "(" + " | ".join(parts) + ")"
    elif kind == 5:
        parts = draw(st.lists(patterns(depth=depth + 1), min_size=2, max_size=3))
        text = "(" + " ".join(parts) + ")"
    elif kind == 6:
        parts = draw(st.lists(st.sampled_from(VARS), min_size=2, max_size=3))
        text = "PERMUTE(" + ", ".join(parts) + ")"
    elif kind == 7:
        inner = draw(patterns(depth=depth + 1))
        if draw(st.booleans()):  # an exclusion inside an exclusion
            inner = f"{draw(st.sampled_from(VARS))} {{- {inner} -}}"
        text = "{- " + inner + " -}"
    elif kind == 8:
        text = draw(st.sampled_from(["^", "$", "()"]))
    else:
        text = "(" + draw(patterns(depth=depth + 1)) + ")"
    if text not in ("^", "$") and draw(st.integers(0, 2)) == 0:
        text += draw(
            st.sampled_from(["*", "+", "?", "{2}", "{1,}", "{,2}", "{0,2}", "{2,3}", "{0}"])
        )
        if draw(st.integers(0, 2)) == 0:
            text += "?"
    return text


@st.composite
def mr_queries(draw, *, allow_runtime_errors: bool = True) -> str:
    """A random MATCH_RECOGNIZE query text."""
    pattern = " ".join(draw(st.lists(patterns(), min_size=1, max_size=3)))
    if any(v not in pattern for v in VARS):
        pattern += " (A | B | C){0}"  # every variable is in the pattern (and matches nothing)
    rows = draw(st.sampled_from(["ONE", "ALL", "ALL SHOW", "ALL OMIT", "ALL UNMATCHED"]))
    if rows == "ALL UNMATCHED" and "{-" in pattern:
        rows = "ALL"
    skips = ["PAST LAST ROW", "TO NEXT ROW"]
    if allow_runtime_errors:
        skips += ["TO FIRST B", "TO LAST C", "TO U", "TO LAST U"]
    skip = draw(st.sampled_from(skips))
    defines = []
    for var in VARS:
        if draw(st.integers(0, 3)) == 0:
            continue
        conds = []
        for _ in range(draw(st.integers(1, 2))):
            pool = draw(st.sampled_from([ROW_LOCAL, ROW_LOCAL, HISTORY]))
            conds.append(draw(st.sampled_from(pool)).format(x=draw(st.sampled_from(VARS))))
        joiner = draw(st.sampled_from([" AND ", " OR "]))
        defines.append(f"{var} AS " + joiner.join(f"({c})" for c in conds))
    if not defines:
        defines.append("A AS v > 0")
    measures = draw(st.lists(st.sampled_from(MEASURES), max_size=4, unique=True))
    text = "SELECT * FROM s MATCH_RECOGNIZE ("
    partitioned = draw(st.booleans())
    if partitioned:
        text += "PARTITION BY k "
    elif rows == "ONE" and not measures:
        measures = ["MATCH_NUMBER() AS mno"]  # a row needs a column
    within = draw(st.integers(1, 6)) if draw(st.integers(0, 2)) > 0 else None
    orders = ["ts", "ts", "ts", "ts, seq"] + ([None] if within is None else [])
    order = draw(st.sampled_from(orders))
    if order:  # else the rows' input order (WITHIN needs a time)
        text += f"ORDER BY {order} "
    if measures:
        text += "MEASURES " + ", ".join(measures) + " "
    text += {
        "ONE": "ONE ROW PER MATCH ",
        "ALL": "ALL ROWS PER MATCH ",
        "ALL SHOW": "ALL ROWS PER MATCH SHOW EMPTY MATCHES ",
        "ALL OMIT": "ALL ROWS PER MATCH OMIT EMPTY MATCHES ",
        "ALL UNMATCHED": "ALL ROWS PER MATCH WITH UNMATCHED ROWS ",
    }[rows]
    text += f"AFTER MATCH SKIP {skip} "
    text += f"PATTERN ({pattern}) SUBSET U = (A, C) DEFINE " + ", ".join(defines) + ")"
    if within is not None:
        text += f" WITHIN {within}"
    return text


@st.composite
def funnel_queries(draw) -> str:
    n = draw(st.integers(1, 4))
    steps = [draw(st.sampled_from(["A", "B", "C", "ANY"])) + f" s{i}" for i in range(n)]
    conds = []
    if draw(st.booleans()):
        conds.append("[k]")
    for i in range(n):
        if draw(st.integers(0, 3)) == 0:
            conds.append(
                f"s{i}.v {draw(st.sampled_from(['<', '>=', '!=']))} {draw(st.integers(1, 3))}"
            )
    text = f"FUNNEL SEQ({', '.join(steps)})"
    if conds:
        text += " WHERE " + " AND ".join(conds)
    text += f" WITHIN {draw(st.integers(1, 8))}"
    if draw(st.integers(0, 3)) == 0:
        text += " ORDER BY ts, seq"
    return text
