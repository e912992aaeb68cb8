"""What the tests of the compiled baselines share (benchmarks/episodes_direct.py,
episodes_tofel.py): random rule sets and streams, and a program fed in pieces."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import strategies as st

from sparkcep.engines.episodes.window import Segment


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
    # gaps in time, or many ties (more events within a window than the ring holds: GROW)
    gaps = [0, 0, 1, 1, 1, 2, 7, 30] if draw(st.booleans()) else [0, 0, 0, 1]
    steps = draw(st.lists(st.sampled_from(gaps), min_size=n, max_size=n))
    ticks = np.cumsum([0, *steps[1:]]).astype(np.int64)
    types = draw(st.lists(st.sampled_from(symbols + "Q"), min_size=n, max_size=n))  # Q: no rule
    cuts = sorted(set(draw(st.lists(st.integers(1, n), max_size=4))))
    return rules, types, ticks, cuts, draw(st.booleans())


def feed(program, types, ticks, cuts):
    """(occurrences, the segment): the program's matcher fed the stream in pieces of
    whole instants, cut at `cuts`."""
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
    return found, seg
