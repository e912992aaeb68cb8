"""Skip-till-next confidence for l >= 4 (`NextChain`: folding, states of the shared
spoilers along the chain, the window at the end) against the general pass
(`NextConfidence._general`: the point-match enumeration where Θ sets share an event), on
random signatures whose components overlap, so that one event is often a spoiler of two
or more gaps."""

from __future__ import annotations

import itertools
from unittest import mock

import numpy as np
from helpers import examples
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from sparkcep.engines.imprecise import confidence
from sparkcep.engines.imprecise.bounds import ValidBounds
from sparkcep.engines.imprecise.candidates import nelt_holds, theta_pairs
from sparkcep.engines.imprecise.confidence import NextChain, NextConfidence, in_unit_range
from sparkcep.engines.imprecise.events import IntervalEvents, Pattern

MASKS = {4: [15, 15, 15, 1, 2, 4, 8, 3, 6, 12, 14], 5: [31, 31, 31, 1, 2, 4, 8, 16, 6, 24, 28]}


@st.composite
def overlapping_chains(draw):
    """Events with intervals of up to 7 points (pmfs with zeros now and then), most of
    which can take every component, l = 4 or 5, a window of 3..22, and up to 40
    signatures of SEQ(c1, ..., cl) that have valid intervals and pass NELT."""
    length = draw(st.sampled_from([4, 4, 5]))
    n = draw(st.integers(length, 9))
    width = draw(st.integers(1, 7))
    lo = np.sort(np.array(draw(st.lists(st.integers(0, 14), min_size=n, max_size=n))))
    hi = lo + np.array(draw(st.lists(st.integers(0, width - 1), min_size=n, max_size=n)))
    mask = np.array(draw(st.lists(st.sampled_from(MASKS[length]), min_size=n, max_size=n)))
    pmf = None
    if draw(st.booleans()):
        pmf = []
        for a, b in zip(lo.tolist(), hi.tolist()):
            weights = draw(
                st.lists(st.sampled_from([0, 1, 2, 5]), min_size=b - a + 1, max_size=b - a + 1)
            )
            pmf.append(np.array(weights, float) if any(weights) else np.ones(b - a + 1))
    events = IntervalEvents.from_arrays(lo, hi, mask, pmf=pmf)
    window = draw(st.integers(3, 22))
    bits = tuple(1 << j for j in range(length))
    names = tuple(f"c{j}" for j in range(length))
    pattern = Pattern(bits, window, True, ((),) * length, names, width)
    idx = [t for t in itertools.permutations(range(n), length)
           if all(mask[e] & b for e, b in zip(t, bits))]  # fmt: skip
    idx = np.array(idx, dtype=np.int64).reshape(-1, length)
    assume(len(idx))
    vlb, _, vub, ok = ValidBounds.three_pass(events.lo[idx], events.hi[idx], window)
    ok &= nelt_holds(events, pattern, idx)
    assume(ok.any())
    keep = np.flatnonzero(ok)[:40]
    return events, pattern, idx[keep], vlb[keep], vub[keep]


def _shared_events(events, pattern, idx, vlb, vub) -> int:
    """(signature, event) pairs with the event in two or more Θ sets."""
    keys = [
        set(zip(a.tolist(), x.tolist()))
        for a, x in (
            theta_pairs(events, pattern, idx, vlb, vub, j) for j in range(1, pattern.length)
        )
    ]
    counts: dict = {}
    for k in keys:
        for key in k:
            counts[key] = counts.get(key, 0) + 1
    return sum(c > 1 for c in counts.values())


@settings(
    max_examples=examples(120),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(overlapping_chains(), st.sampled_from([confidence.MAX_ACTIVE, 1, 0]))
def test_next_chain_equals_the_enumeration(case, max_active):
    events, pattern, idx, vlb, vub = case
    assume(_shared_events(events, pattern, idx, vlb, vub))  # the case the fast path is for
    general = NextConfidence(events, pattern)._general
    calls = []

    def fallback(*args):  # signatures with more than MAX_ACTIVE events open at once
        calls.append(len(args[0]))
        return general(*args)

    with mock.patch.object(confidence, "MAX_ACTIVE", max_active):
        fast = NextChain(events, pattern, fallback)(idx, vlb, vub)
    want = general(idx, vlb, vub)
    if max_active == confidence.MAX_ACTIVE:
        assert not calls  # every signature took the fast path
        with mock.patch.object(confidence, "CHAIN_CELLS", 1):  # one signature a batch
            alone = NextChain(events, pattern, fallback)(idx, vlb, vub)
        assert all((x == y).all() for x, y in zip(fast, alone))  # bit for bit
    got_conf, want_conf = (in_unit_range(events, pattern, idx, c[0]) for c in (fast, want))
    positive = want_conf > 0
    assert ((got_conf > 0) == positive).all()  # the same matches
    assert (fast[1] == want[1])[positive].all() and (fast[2] == want[2])[positive].all()
    np.testing.assert_allclose(got_conf, want_conf, rtol=0, atol=1e-12)


def test_next_confidence_takes_the_chain_for_four_components():
    """A four-component signature whose middle events overlap a spoiler of two gaps:
    NextConfidence answers through NextChain, not the general pass, with its value."""
    ev = IntervalEvents.from_arrays([0, 2, 3, 6, 2], [3, 6, 6, 9, 7], [1, 2, 4, 8, 6])
    pattern = Pattern((1, 2, 4, 8), 12, True, ((),) * 4, ("a", "b", "c", "d"), 5)
    idx = np.array([[0, 1, 2, 3]])
    vlb, _, vub, ok = ValidBounds.three_pass(ev.lo[idx], ev.hi[idx], 12)
    assert ok.all() and _shared_events(ev, pattern, idx, vlb, vub)
    want = NextConfidence(ev, pattern)._general(idx, vlb, vub)
    with mock.patch.object(NextConfidence, "_general", side_effect=AssertionError("general pass")):
        got = NextConfidence(ev, pattern)(idx, vlb, vub)
    assert 0 < got[0][0] < 1
    assert (got[1], got[2]) == (want[1], want[2])
    np.testing.assert_allclose(got[0], want[0], rtol=0, atol=1e-12)
