"""The compiled DirectMatch of the benchmarks (benchmarks/episodes_direct.py) against the
product's DirectMatch (Python: window.DirectMatch, cbr.CBR): the same occurrences, in the
same order, and the same rejected instances, on random rule sets and streams (ties, gaps
in time, many rules over few symbols, batches fed in pieces, a small output buffer)."""

from __future__ import annotations

import numpy as np
import pytest
from compiled_episode_cases import cases, feed
from hypothesis import HealthCheck, given, settings

from sparkcep.engines.episodes.matcher import _kernel
from sparkcep.engines.registry import engines
from sparkcep.plan import Options, plan_queries

pytestmark = pytest.mark.skipif(_kernel() is None, reason="needs numba")
direct = pytest.importorskip("benchmarks.episodes_direct")

OPTIONS = Options(id_col="id")
COLUMNS = {"type": "string", "ts": "int", "id": "int"}


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
    expected, expected_seg = feed(python, types, ticks, cuts)
    got, got_seg = feed(compiled, types, ticks, cuts)
    assert got == expected  # the same occurrences in the same order
    assert got_seg.rejected == expected_seg.rejected


def test_the_paper_example_occurs_once():
    """Figure 3's stream and the traffic rule: O2 only (cbr.py's example)."""
    plans, names = plan_queries(
        ["EPISODE (W w, X x, Y y; w -> y, x -> y) WITHIN 10 PREDICT Z WITHIN 15"],
        COLUMNS, OPTIONS,
    )  # fmt: skip
    program = direct.direct_program(plans, names, OPTIONS)
    found, _ = feed(program, list("XWXYY"), np.array([0, 2, 3, 5, 7], np.int64), [])
    assert [ids for _, ids, _, _ in found] == [[1, 2, 3]]
