"""Skip-till-next confidence for l = 3 (`NextThree`: folding, phase expansion, the window
met at the middle component) against the general pass (`NextConfidence._general`: the
point-match enumeration where Θ sets share an event), on random signatures whose
components overlap, so that one event is often a spoiler of both gaps."""

from __future__ import annotations

import itertools
from unittest import mock

import numpy as np
import pandas as pd
from helpers import examples
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from sparkcep.engines.imprecise import confidence
from sparkcep.engines.imprecise.bounds import ValidBounds
from sparkcep.engines.imprecise.candidates import nelt_holds, theta_pairs
from sparkcep.engines.imprecise.confidence import NextConfidence, NextThree, in_unit_range
from sparkcep.engines.imprecise.events import IntervalEvents, Pattern


@st.composite
def overlapping_signatures(draw):
    """Events with intervals of up to 8 points (pmfs with zeros now and then), most of
    which can take every component, a window of 2..19, and every signature of
    SEQ(a, b, c) that has valid intervals and passes NELT."""
    n = draw(st.integers(3, 10))
    width = draw(st.integers(1, 8))
    lo = np.sort(np.array(draw(st.lists(st.integers(0, 12), min_size=n, max_size=n))))
    hi = lo + np.array(draw(st.lists(st.integers(0, width - 1), min_size=n, max_size=n)))
    mask = np.array(
        draw(st.lists(st.sampled_from([7, 7, 7, 1, 2, 4, 3, 6]), min_size=n, max_size=n))
    )
    pmf = None
    if draw(st.booleans()):
        pmf = []
        for a, b in zip(lo.tolist(), hi.tolist()):
            weights = draw(
                st.lists(st.sampled_from([0, 1, 2, 5]), min_size=b - a + 1, max_size=b - a + 1)
            )
            pmf.append(np.array(weights, float) if any(weights) else np.ones(b - a + 1))
    events = IntervalEvents.from_arrays(lo, hi, mask, pmf=pmf)
    window = draw(st.integers(2, 19))
    pattern = Pattern((1, 2, 4), window, True, ((), (), ()), ("a", "b", "c"), width)
    idx = [
        t
        for t in itertools.permutations(range(n), 3)
        if all(mask[e] & b for e, b in zip(t, (1, 2, 4)))
    ]
    idx = np.array(idx, dtype=np.int64).reshape(-1, 3)
    assume(len(idx))
    vlb, _, vub, ok = ValidBounds.three_pass(events.lo[idx], events.hi[idx], window)
    ok &= nelt_holds(events, pattern, idx)
    assume(ok.any())
    return events, pattern, idx[ok], vlb[ok], vub[ok]


def _shared_events(events, pattern, idx, vlb, vub) -> int:
    """(signature, event) pairs with the event in both Θ sets."""
    keys = [
        set(zip(a.tolist(), x.tolist()))
        for a, x in (theta_pairs(events, pattern, idx, vlb, vub, j) for j in (1, 2))
    ]
    return len(keys[0] & keys[1])


@settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(overlapping_signatures(), st.sampled_from([confidence.MAX_SHARED, 1, 0]))
def test_next_three_equals_the_enumeration(case, max_shared):
    events, pattern, idx, vlb, vub = case
    assume(_shared_events(events, pattern, idx, vlb, vub))  # the case the fast path is for
    general = NextConfidence(events, pattern)._general
    calls = []

    def fallback(*args):  # signatures with more than MAX_SHARED shared events
        calls.append(len(args[0]))
        return general(*args)

    with mock.patch.object(confidence, "MAX_SHARED", max_shared):
        fast = NextThree(events, pattern, fallback)(idx, vlb, vub)
    want = general(idx, vlb, vub)
    if max_shared == confidence.MAX_SHARED:
        assert not calls  # every signature took the fast path
    got_conf, want_conf = (in_unit_range(events, pattern, idx, c[0]) for c in (fast, want))
    positive = want_conf > 0
    assert ((got_conf > 0) == positive).all()  # the same matches
    assert (fast[1] == want[1])[positive].all() and (fast[2] == want[2])[positive].all()
    np.testing.assert_allclose(got_conf, want_conf, rtol=0, atol=1e-12)


def test_next_confidence_takes_the_fast_path_for_three_components():
    """Fig. 1 under skip-till-next (24/225), through NextThree and not the general pass."""
    ev = IntervalEvents.from_arrays([1, 3, 3, 4], [5, 5, 5, 8], [1, 4, 2, 4])
    pattern = Pattern((1, 2, 4), 4, True, ((), (), ()), ("a", "b", "c"), 4)
    idx, vlb, vub = np.array([[0, 2, 1]]), np.array([[1, 3, 4]]), np.array([[3, 4, 5]])
    with mock.patch.object(NextConfidence, "_general", side_effect=AssertionError("general pass")):
        conf, start, end = NextConfidence(ev, pattern)(idx, vlb, vub)
    assert (round(float(conf[0]) * 225, 9), int(start[0]), int(end[0])) == (24.0, 1, 5)


def test_selectivity_order_drops_out_of_date_events_when_the_last_component_is_rare():
    """Fig. 4(d)'s mechanism: E1 frequent, E3 rarer than one a window. Selectivity order
    lets E1's out-of-date events go without starting runs, so it tries far fewer events
    on the runs than any-state, with the same signatures."""
    from sparkcep.checks import compile_one
    from sparkcep.engines.imprecise import runs
    from sparkcep.plan import Options

    t = np.arange(3000)
    frame = pd.DataFrame({"id": t, "type": "E", "ts": t, "v": t % 1000 + 1})
    text = (
        "PATTERN SEQ(E a, E b, E c) WHERE a.v % 2 = 0 AND b.v % 15 = 0 AND c.v % 500 = 0 "
        "TIME BETWEEN ts - 5 AND ts + 5 WITHIN 100"
    )
    out, feeds = {}, {}
    for method in ("imprecise-anystate", "imprecise-selectivity"):
        program = compile_one(text, frame.iloc[:10], Options(id_col="id", algorithm=method))
        with mock.patch.object(
            runs.RunSet, "feed", autospec=True, side_effect=runs.RunSet.feed
        ) as f:
            out[method] = program.run(program.in_order(frame))
        feeds[method] = f.call_count
    cols = ["a", "b", "c", "confidence"]
    assert len(out["imprecise-anystate"]) > 100
    pd.testing.assert_frame_equal(
        out["imprecise-anystate"][cols], out["imprecise-selectivity"][cols]
    )
    assert feeds["imprecise-selectivity"] < 0.6 * feeds["imprecise-anystate"], feeds
