"""The compiled CBS-Tree's search (kernel.find) against its definition: the latest
position p in [lt, rt], among the `cap` newest of the positions pushed, whose event is e
(brute force over the pushed symbols). Any capacity (not only powers of two), the ring
wrapped many times, intervals that wrap around the ring, intervals reaching before the
oldest held position or beyond the alphabet's first word (symbols >= 64); and the tree
kept by `insert` (the path stops early) equal to the one `build` makes from the ring."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkcep.engines.episodes.matcher import _kernel

pytestmark = pytest.mark.skipif(_kernel() is None, reason="needs numba")


def _latest(pushed, cap, e, lt, rt):
    oldest = max(0, len(pushed) - cap)
    return max((p for p in range(max(lt, oldest), rt + 1) if pushed[p] == e), default=-1)


@settings(max_examples=300, deadline=None)
@given(
    cap=st.integers(1, 40),
    n_symbols=st.sampled_from([1, 2, 3, 70, 130]),
    data=st.data(),
)
def test_find_is_the_latest_instance_in_the_interval(cap, n_symbols, data):
    kernel = _kernel()
    pushed = data.draw(st.lists(st.integers(0, n_symbols - 1), min_size=1, max_size=5 * cap + 3))
    tree = kernel.Tree(cap, n_symbols)
    ring = np.full(cap, -1, np.int32)
    for p, e in enumerate(pushed):
        kernel.insert(cap, tree.bits, p, e, ring[p % cap] if p >= cap else -1)
        ring[p % cap] = e
    built = np.full_like(tree.bits, 7)
    kernel.build(cap, built, ring, len(pushed))
    assert (built == tree.bits).all()
    count = len(pushed)
    for _ in range(20):
        e = data.draw(st.integers(0, n_symbols - 1))
        rt = data.draw(st.integers(max(0, count - cap - 2), count - 1))
        lt = data.draw(st.integers(rt - cap - 2, rt + 1))
        assert kernel.find(cap, count, tree.bits, e, lt, rt) == _latest(pushed, cap, e, lt, rt)


def test_find_on_the_paper_s_figure():
    # Figure 4/5 of the paper: 7 leaves, (A,1) (B,2) (A,3) (C,4) (D,5) (C,6) (B,7) (D,8)
    # (times here are positions, time - 1). Example 1: the latest B within [2, 8] is (B, 7);
    # the Case_4 walk-through: the latest C within [2, 8] is (C, 6).
    kernel = _kernel()
    A, B, C, D = range(4)
    tree = kernel.Tree(7, 4)
    ring = np.full(7, -1, np.int32)
    for p, e in enumerate([A, B, A, C, D, C, B, D]):
        kernel.insert(7, tree.bits, p, e, ring[p % 7] if p >= 7 else -1)
        ring[p % 7] = e
    assert kernel.find(7, 8, tree.bits, B, 1, 7) + 1 == 7
    assert kernel.find(7, 8, tree.bits, C, 1, 7) + 1 == 6
    assert kernel.find(7, 8, tree.bits, A, 1, 7) + 1 == 3
    assert kernel.find(7, 8, tree.bits, A, 3, 7) == -1  # (A, 1) has left the tree anyway
