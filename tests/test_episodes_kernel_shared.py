"""The compiled CBS-Tree (kernel.py) against the Python CBS-Tree (tree.py, cbr.py: the
reference) on random streams and rule sets made to reach what the kernel's speed-ups
depend on: many rules over few symbols (more than `kernel.MEMO` different bounds asked
of one symbol at an instant, so the instant's shared answers are replaced), windows far
apart on a stream with gaps in time (a window's lower bound jumps by many positions at
once), several events per instant, and batches fed in pieces with the kernel's output
buffer made small (the kernel returns FULL and is called again; the rejected instances
are written back once per batch)."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from sparkcep.engines.episodes.matcher import Matcher, _kernel
from sparkcep.engines.episodes.window import Segment
from sparkcep.engines.registry import engines
from sparkcep.plan import Options, plan_queries

pytestmark = pytest.mark.skipif(_kernel() is None, reason="needs numba")

OPTIONS = Options(id_col="id")


def _rules(rng: random.Random, symbols: str, n: int) -> list[str]:
    out = []
    for r in range(n):
        k = rng.randint(1, min(5, len(symbols)))
        vertices = rng.sample(symbols, k)  # an episode's vertices have distinct symbols
        edges = sorted({(u, w) for u in range(k) for w in range(u + 1, k) if rng.random() < 0.4})
        window = rng.choice([2, 3, 5, 8, 13, 40, 90])
        vs = ", ".join(f"{s} v{i}" for i, s in enumerate(vertices))
        es = ", ".join(f"v{u} -> v{w}" for u, w in edges)
        out.append(
            f"RULE r{r}: EPISODE ({vs}{'; ' + es if es else ''}) WITHIN {window} "
            f"PREDICT Z WITHIN {window}"
        )
    return out


def _stream(rng: random.Random, symbols: str, n: int):
    ticks, t = [], 0
    for _ in range(n):
        t += rng.choice([0, 0, 1, 1, 1, 2, 7, 30]) if ticks else 0  # ties and gaps
        ticks.append(t)
    types = [rng.choice(symbols) for _ in range(n)]
    return types, np.array(ticks, np.int64)


def _feed(matcher: Matcher, codes, ticks, pieces, small_output: bool):
    if small_output:  # room for one instant's occurrences and a few more
        compiled = matcher.compiled
        n = len(compiled.members) + 3
        compiled.out_pred = np.empty(n, np.int64)
        compiled.out_pos = np.empty((n, compiled.max_v), np.int64)
    seg = Segment()
    new = np.ones(len(codes), bool)
    new[1:] = ticks[1:] != ticks[:-1]
    ids = np.arange(len(codes), dtype=np.int64)
    found = []
    for a, b in itertools.pairwise(pieces):
        got = matcher.feed(seg, codes[a:b], ticks[a:b], new[a:b], ticks[a:b], ids[a:b])
        found += [(f.rules, tuple(f.ids.tolist()), int(f.start_time), int(f.end_time)) for f in got]
    return sorted(found), seg.rejected


@pytest.mark.parametrize("seed", range(6))
def test_the_kernel_equals_the_python_tree(seed):
    rng = random.Random(seed)
    symbols = "ABCDEFGH"[: 3 + seed % 4]
    rules = _rules(rng, symbols, 80)
    types, ticks = _stream(rng, symbols, 700)
    plans, names = plan_queries(rules, {"type": "string", "ts": "int", "id": "int"}, OPTIONS)
    program = engines()["episodes"].compile(plans, names, OPTIONS)
    codes = np.array([program.rules.codes[t] for t in types], np.int64)
    # a batch holds whole instants (as `EpisodeProgram.process` feeds them)
    starts = [0, *[i for i in range(1, len(ticks)) if ticks[i] != ticks[i - 1]]]
    cuts = sorted(rng.sample(starts[1:], 6))
    pieces = [0, *cuts, len(ticks)]

    reference = Matcher(program.rules, "episodes")
    reference.compiled = None  # the Python CBS-Tree (DirectMatch until L events arrived)
    expected, expected_rejected = _feed(reference, codes, ticks, pieces, False)
    assert len(expected) > 200
    for small in (False, True):
        compiled = Matcher(program.rules, "episodes")
        assert compiled.compiled is not None
        got, rejected = _feed(compiled, codes, ticks, pieces, small)
        assert got == expected, small
        assert rejected == expected_rejected, small


def test_more_bounds_of_one_symbol_than_the_instant_keeps():
    # When T arrives, rule (A a, S s, T t; a -> s, s -> t) asks for the latest A before
    # the latest S: one bound per S, 11 of them for A at the same instant (> MEMO).
    others = "BCDEFGHIJKLM"
    assert len(others) - 1 > _kernel().MEMO
    rules = [
        f"RULE r{s}{t}: EPISODE (A a, {s} s, {t} t; a -> s, s -> t) WITHIN {w} PREDICT Z WITHIN {w}"
        for s in others
        for t, w in zip(others, (40, 55, 70, 90, 25, 60, 45, 80, 35, 65, 50, 75))
        if s != t
    ]
    rng = random.Random(5)
    types = [rng.choice("AAA" + others) for _ in range(1500)]
    ticks = np.arange(len(types), dtype=np.int64)
    plans, names = plan_queries(rules, {"type": "string", "ts": "int", "id": "int"}, OPTIONS)
    program = engines()["episodes"].compile(plans, names, OPTIONS)
    codes = np.array([program.rules.codes[t] for t in types], np.int64)
    reference = Matcher(program.rules, "episodes")
    reference.compiled = None
    pieces = [0, 700, len(types)]
    expected = _feed(reference, codes, ticks, pieces, False)
    assert len(expected[0]) > 1000
    for small in (False, True):
        assert _feed(Matcher(program.rules, "episodes"), codes, ticks, pieces, small) == expected
