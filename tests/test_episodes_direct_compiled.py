"""The compiled DirectMatch of the benchmarks (benchmarks/episodes_direct.py) against the
product's DirectMatch (Python: window.DirectMatch, cbr.CBR): the same occurrences, in the
same order, and the same rejected instances, on random rule sets and streams (ties, gaps
in time, many rules over few symbols, batches fed in pieces, a small output buffer)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparkcep.engines.episodes.matcher import _kernel
from sparkcep.engines.episodes.window import Segment
from sparkcep.engines.registry import engines
from sparkcep.plan import Options, plan_queries

pytestmark = pytest.mark.skipif(_kernel() is None, reason="needs numba")
direct = pytest.importorskip("benchmarks.episodes_direct")

OPTIONS = Options(id_col="id")
COLUMNS = {"type": "string", "ts": "int", "id": "int"}


@st.composite
def rule_sets(draw):
    symbols = "ABCDEFG"[: draw(st.integers(2, 7))]
    rules = []
    for r in range(draw(st.integers(1, 40))):
        k = draw(st.integers(1, min(5, len(symbols))))
        vertices = draw(st.permutations(symbols))[:k]
        edges = [(u, w) for u in range(k) for w in range(u + 1, k) if draw(st.integers(0, 2)) == 0]
        window = draw(st.sampled_from([1, 2, 3, 5, 8, 13, 40, 90]))
        vs = ", ".join(f"{s} v{i}" for i, s in enumerate(vertices))
        es = ", ".join(f"v{u} -> v{w}" for u, w in edges)
        rules.append(
            f"RULE r{r}: EPISODE ({vs}{'; ' + es if es else ''}) WITHIN {window} "
            f"PREDICT Z WITHIN {window}"
        )
    return symbols, rules


@st.composite
def cases(draw):
    symbols, rules = draw(rule_sets())
    n = draw(st.integers(1, 400))
    steps = draw(st.lists(st.sampled_from([0, 0, 1, 1, 1, 2, 7, 30]), min_size=n, max_size=n))
    ticks = np.cumsum([0, *steps[1:]]).astype(np.int64)
    types = draw(st.lists(st.sampled_from(symbols + "Q"), min_size=n, max_size=n))  # Q: no rule
    cuts = sorted(set(draw(st.lists(st.integers(1, n), max_size=4))))
    return rules, types, ticks, cuts, draw(st.booleans())


def _feed(program, types, ticks, cuts):
    codes = np.array([program.rules.codes.get(t, -1) for t in types], np.int64)
    keep = np.flatnonzero(codes >= 0)
    codes, ticks, ids = codes[keep], ticks[keep], keep.astype(np.int64)
    new = np.ones(len(codes), bool)
    new[1:] = ticks[1:] != ticks[:-1]
    # pieces of whole instants, as `EpisodeProgram.process` feeds them
    starts = set(np.flatnonzero(new).tolist())
    pieces = [0, *[c for c in cuts if c in starts and c < len(codes)], len(codes)]
    seg, found = Segment(), []
    for a, b in itertools.pairwise(pieces):
        if a < b:
            got = program.matcher.feed(seg, codes[a:b], ticks[a:b], new[a:b], ticks[a:b], ids[a:b])
            found += [(f.rules, f.ids.tolist(), int(f.start_time), int(f.end_time)) for f in got]
    return found, seg.rejected


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_the_compiled_directmatch_equals_the_python_directmatch(case):
    rules, types, ticks, cuts, small_output = case
    plans, names = plan_queries(rules, COLUMNS, OPTIONS)
    python = engines()["directmatch"].compile(plans, names, OPTIONS)
    assert python.matcher.compiled is None  # the product's DirectMatch: Python
    compiled = direct.direct_program(plans, names, OPTIONS)
    if small_output:  # room for one instant's occurrences and a few more: FULL, called again
        c = compiled.matcher.compiled
        c.out_pred = np.empty(len(c.members) + 3, np.int64)
        c.out_pos = np.empty((len(c.out_pred), c.max_v), np.int64)
    expected, expected_rejected = _feed(python, types, ticks, cuts)
    got, got_rejected = _feed(compiled, types, ticks, cuts)
    assert got == expected  # the same occurrences in the same order
    assert got_rejected == expected_rejected


def test_the_paper_example_occurs_once():
    """Figure 3's stream and the traffic rule: O2 only (cbr.py's example)."""
    plans, names = plan_queries(
        ["EPISODE (W w, X x, Y y; w -> y, x -> y) WITHIN 10 PREDICT Z WITHIN 15"],
        COLUMNS, OPTIONS,
    )  # fmt: skip
    program = direct.direct_program(plans, names, OPTIONS)
    found, _ = _feed(program, list("XWXYY"), np.array([0, 2, 3, 5, 7], np.int64), [])
    assert [ids for _, ids, _, _ in found] == [[1, 2, 3]]
