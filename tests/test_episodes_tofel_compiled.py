"""The compiled ToFel of the benchmarks (benchmarks/episodes_tofel.py) against the
product's ToFel (Python: tofel.ToFel driven by matcher.Matcher): the same occurrences, in
the same order, the same held partial matches and no rejected instances, on random rule
sets and streams (ties, gaps in time, many rules over few symbols, batches fed in pieces,
a small output buffer)."""

from __future__ import annotations

import numpy as np
import pytest
from compiled_episode_cases import cases, feed
from hypothesis import HealthCheck, given, settings

from sparkcep.engines.episodes.matcher import _kernel
from sparkcep.engines.registry import engines
from sparkcep.plan import Options, plan_queries

pytestmark = pytest.mark.skipif(_kernel() is None, reason="needs numba")
tofel = pytest.importorskip("benchmarks.episodes_tofel")

OPTIONS = Options(id_col="id")
COLUMNS = {"type": "string", "ts": "int", "id": "int"}


def _held(program, seg) -> dict:
    """The compiled matches as the Python ToFel holds them: first rule -> per ideal."""
    c = program.matcher.compiled
    held = getattr(seg, "_tofel", None)
    out = {}
    for p, members in enumerate(c.members):
        if held is None:
            break
        k = c.v_off[p + 1] - c.v_off[p]
        matches = [
            tuple(held.h_pos[c.h_off[p] + a * k : c.h_off[p] + (a + 1) * k].tolist())
            if held.h_min[x] >= 0 else ()
            for a, x in enumerate(range(c.i_off[p], c.i_off[p + 1]))
        ]  # fmt: skip
        if any(matches):
            out[members[0]] = matches
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_the_compiled_tofel_equals_the_python_tofel(case):
    rules, types, ticks, cuts, small_output = case
    plans, names = plan_queries(rules, COLUMNS, OPTIONS)
    python = engines()["tofel"].compile(plans, names, OPTIONS)
    assert python.matcher.compiled is None  # the product's ToFel: Python
    assert python.matcher.algorithm == "tofel"
    compiled = tofel.tofel_program(plans, names, OPTIONS)
    if small_output:  # room for one instant's occurrences and a few more: FULL, called again
        c = compiled.matcher.compiled
        c.out_pred = np.empty(len(c.members) + 3, np.int64)
        c.out_pos = np.empty((len(c.out_pred), c.max_v), np.int64)
    expected, python_seg = feed(python, types, ticks, cuts)
    got, compiled_seg = feed(compiled, types, ticks, cuts)
    assert got == expected  # the same occurrences in the same order
    assert compiled_seg.rejected == python_seg.rejected == {}
    # the same partial matches held, per ideal (a predicate's first rule)
    leads = {members[0] for members in python.rules.predicates}
    kept = {r: m for r, m in python_seg.kept.items() if r in leads and any(m)}
    assert _held(compiled, compiled_seg) == kept


def test_the_paper_example_occurs_once():
    """Figure 3's stream and the traffic rule: O2 only (cbr.py's example)."""
    plans, names = plan_queries(
        ["EPISODE (W w, X x, Y y; w -> y, x -> y) WITHIN 10 PREDICT Z WITHIN 15"],
        COLUMNS, OPTIONS,
    )  # fmt: skip
    for program in (engines()["tofel"].compile(plans, names, OPTIONS),
                    tofel.tofel_program(plans, names, OPTIONS)):  # fmt: skip
        found, _ = feed(program, list("XWXYY"), np.array([0, 2, 3, 5, 7], np.int64), [])
        assert [ids for _, ids, _, _ in found] == [[1, 2, 3]]


def test_tofels_example_fires_once():
    """tofel.py's example: A -> B -> C within 5 over A B A B C C: (2, 3, 4) only."""
    plans, names = plan_queries(
        ["EPISODE (A a, B b, C c; a -> b, b -> c) WITHIN 5 PREDICT D WITHIN 5"],
        COLUMNS, OPTIONS,
    )  # fmt: skip
    program = tofel.tofel_program(plans, names, OPTIONS)
    found, _ = feed(program, list("ABABCC"), np.arange(6, dtype=np.int64), [])
    assert [ids for _, ids, _, _ in found] == [[2, 3, 4]]
