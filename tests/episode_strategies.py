"""Hypothesis strategies for episode rules: random DAGs over the types of `streams()`."""

from __future__ import annotations

from episode_oracle import OracleRule
from hypothesis import strategies as st

SYMBOLS = "ABCD"


@st.composite
def dag(draw, max_vertices: int = 4):
    """(symbols, edges): distinct symbols, edges forward in a random topological order."""
    k = draw(st.integers(1, max_vertices))
    symbols = tuple(draw(st.permutations(SYMBOLS))[:k])
    topo = draw(st.permutations(range(k)))
    edges = tuple(
        (topo[a], topo[b])
        for a in range(k)
        for b in range(a + 1, k)
        if draw(st.integers(0, 2)) == 0
    )
    return symbols, edges


@st.composite
def rule_files(draw, max_rules: int = 3):
    """(text, rules, key, tiebreak): a file of rules that run as one program (they share
    the key and the tie-break), and the rules for the oracle."""
    key = draw(st.sampled_from([None, None, "k"]))
    tiebreak = draw(st.sampled_from([None, None, None, "seq"]))
    rules, texts = [], []
    for i in range(draw(st.integers(1, max_rules))):
        if rules and draw(st.integers(0, 3)) == 0:
            # Another consequent of an earlier rule's predicate, as mine-rules writes them.
            same = draw(st.sampled_from(rules))
            symbols, edges, window = same.symbols, same.edges, same.window
        else:
            symbols, edges = draw(dag())
            window = draw(st.integers(1, 6))
        rule_window = window + draw(st.integers(0, 4))
        predict = draw(st.sampled_from("WXYZ"))
        rule = OracleRule(f"r{i}", symbols, edges, window, rule_window, predict)
        rules.append(rule)
        texts.append(rule_text(rule, key, tiebreak))
    return "\n".join(texts), rules, key, tiebreak


def rule_text(rule: OracleRule, key: str | None, tiebreak: str | None) -> str:
    vertices = ", ".join(f"{s} v{j}" for j, s in enumerate(rule.symbols))
    edges = ", ".join(f"v{u} -> v{v}" for u, v in rule.edges)
    body = f"EPISODE ({vertices}{'; ' + edges if edges else ''})"
    if key:
        body += f" WHERE [{key}]"
    body += f" WITHIN {rule.window}"
    if tiebreak:
        body += f" ORDER BY ts, {tiebreak}"
    return f"RULE {rule.name}: {body} PREDICT {rule.predict} WITHIN {rule.rule_window};"


@st.composite
def episode_queries(draw):
    """A rule file's text (for the conformance suite's random queries)."""
    return draw(rule_files())[0]
