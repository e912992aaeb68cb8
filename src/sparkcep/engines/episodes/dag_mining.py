"""Parallel and DAG predicates for `mine-rules` (docs/episodes.md, "Parallel and DAG
predicates"): the episodes themselves, their minimal occurrences, and the candidates of
the next level.

An episode here is a set of distinct symbols with a partial order: `a < b` means the
event of a is at an earlier instant than that of b; symbols the order leaves apart may
be at one instant (events of equal time and tie-break are unordered, as the engine has
them). A *serial* episode orders every pair, a *parallel* one none.

An episode travels as a tuple of strings (the kernel's predicates, joined by `SEP` in
Spark rows): a serial one as its symbols in order, as `mining.py` always had them; any
other as its symbols in a canonical topological order followed by one string, `ORDER`
and the edges of its transitive reduction (`"\x1e0<2,1<2"`), or `ORDER` alone for a
parallel episode.

>>> e = Episode.of(["Y", "W", "X"], [("W", "Y"), ("X", "Y")])
>>> e.key()
('W', 'X', 'Y', '\\x1e0<2,1<2')
>>> Episode.from_key(e.key()) == e, e.is_serial, Episode.of(["B", "A"], []).key()
(True, False, ('A', 'B', '\\x1e'))
>>> Episode.of(["B", "A"], [("B", "A")]).key()  # serial: the symbols in order
('B', 'A')
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

ORDER = "\x1e"  # starts the edges element of a non-serial episode's key
SHAPES = ("serial", "parallel", "dag")


@dataclass(frozen=True)
class Episode:
    """Distinct symbols and the pairs (a, b) with a before b (transitively closed)."""

    symbols: frozenset[str]
    before: frozenset[tuple[str, str]]

    @classmethod
    def of(cls, symbols: Iterable[str], pairs: Iterable[tuple[str, str]]) -> Episode:
        """The episode with these symbols, ordered by these pairs and what they imply."""
        symbols = frozenset(symbols)
        closed = set(pairs)
        while True:
            more = {(a, d) for a, b in closed for c, d in closed if b == c} - closed
            if not more:
                break
            closed |= more
        if any(a == b for a, b in closed):
            raise ValueError("the pairs make a cycle")
        return cls(symbols, frozenset(closed))

    @classmethod
    def from_key(cls, key: Sequence[str]) -> Episode:
        if key and key[-1].startswith(ORDER):
            names = key[:-1]
            pairs = []
            for edge in filter(None, key[-1][len(ORDER) :].split(",")):
                u, v = edge.split("<")
                pairs.append((names[int(u)], names[int(v)]))
            return cls.of(names, pairs)
        return cls.of(key, itertools.pairwise(key))

    @property
    def is_serial(self) -> bool:
        n = len(self.symbols)
        return len(self.before) == n * (n - 1) // 2

    @property
    def is_parallel(self) -> bool:
        return not self.before

    def order(self) -> list[str]:
        """The symbols in topological order, ties by symbol (so one order per episode)."""
        left, out = set(self.symbols), []
        while left:
            first = min(s for s in left if not any((p, s) in self.before for p in left))
            out.append(first)
            left.remove(first)
        return out

    def edges(self) -> list[tuple[int, int]]:
        """The transitive reduction as index pairs into `order()`."""
        names = self.order()
        at = {s: i for i, s in enumerate(names)}
        cover = [
            (a, b)
            for a, b in self.before
            if not any((a, c) in self.before and (c, b) in self.before for c in self.symbols)
        ]
        return sorted((at[a], at[b]) for a, b in cover)

    def key(self) -> tuple[str, ...]:
        names = self.order()
        if self.is_serial:
            return tuple(names)
        return (*names, ORDER + ",".join(f"{u}<{v}" for u, v in self.edges()))

    def without(self, symbol: str) -> Episode:
        """The sub-episode on the other symbols (the order they had)."""
        return Episode(
            self.symbols - {symbol},
            frozenset(p for p in self.before if symbol not in p),
        )

    def has_shape(self, shapes: str) -> bool:
        """Whether `--shapes` takes it: serial, parallel, or dag (every shape)."""
        if shapes == "parallel":
            return self.is_parallel
        return shapes == "dag" or self.is_serial


def is_serial_key(key: Sequence[str]) -> bool:
    return not (key and key[-1].startswith(ORDER))


@dataclass
class Level:
    """The candidates of one level, and whether the cap left some out."""

    candidates: list[tuple[str, ...]]
    capped: bool


def next_level(
    frequent: Sequence[tuple[str, ...]], symbols: Sequence[str], limit: int, shapes: str
) -> Level:
    """Candidates with one symbol more than the frequent predicates of this level, of the
    given shapes, at most `limit`.

    A serial candidate γ·x needs γ frequent and x a frequent symbol (the serial rule of
    `mining.extend`; support by minimal occurrences cannot grow when a serial episode
    loses its first or last symbol). Any other candidate needs every sub-episode with
    one symbol less frequent (Apriori, Mannila et al.). Each frequent episode β is joined
    with each frequent symbol x it lacks, x placed after a down-closed part of β and
    before an up-closed one (each of the first before each of the second in β),
    unordered with the rest.

    >>> level = next_level([("A",), ("B",)], ["A", "B"], 10, "dag")
    >>> level.candidates, level.capped
    ([('A', 'B'), ('A', 'B', '\\x1e'), ('B', 'A')], False)
    >>> next_level([("A",), ("B",)], ["A", "B"], 2, "dag").capped
    True
    """
    known = {Episode.from_key(k) for k in frequent}
    frequent_symbols = set(symbols)
    seen: set[Episode] = set()
    out: list[tuple[str, ...]] = []
    for beta in sorted(known, key=lambda e: e.key()):
        for x in symbols:
            if x in beta.symbols:
                continue
            for alpha in _joins(beta, x):
                if alpha in seen or not alpha.has_shape(shapes):
                    continue
                seen.add(alpha)
                if not _supported(alpha, known, frequent_symbols):
                    continue
                if len(out) == limit:
                    return Level(sorted(out), True)
                out.append(alpha.key())
    return Level(sorted(out), False)


def _joins(beta: Episode, x: str) -> list[Episode]:
    """β with x added: after some of β (a down-closed set), before some (up-closed)."""
    names = sorted(beta.symbols)
    found = []
    for places in itertools.product((-1, 0, 1), repeat=len(names)):  # x before, apart, after
        after = {s for s, p in zip(names, places) if p == 1}  # the symbols x comes after
        ahead = {s for s, p in zip(names, places) if p == -1}  # those it comes before
        if any((b, a) in beta.before for a in after for b in names if b not in after):
            continue  # `after` is not down-closed
        if any((a, b) in beta.before for a in ahead for b in names if b not in ahead):
            continue  # `ahead` is not up-closed
        if any((a, b) not in beta.before for a in after for b in ahead):
            continue  # x between them would order a pair β leaves apart
        pairs = [*beta.before, *((a, x) for a in after), *((x, b) for b in ahead)]
        found.append(Episode.of([*names, x], pairs))
    return found


def _supported(alpha: Episode, known: set[Episode], symbols: set[str]) -> bool:
    if alpha.is_serial:
        last = alpha.order()[-1]
        return alpha.without(last) in known and last in symbols
    return all(alpha.without(s) in known for s in alpha.symbols)


def latest_occurrences(instants: list[np.ndarray], succ: list[list[int]], ends: np.ndarray):
    """For each end instant e: the latest occurrence within [., e] of the episode whose
    vertex v takes an instant of `instants[v]` (sorted) before those of its successors
    `succ[v]`; unordered vertices may share an instant. Returns (start, end) arrays, −1
    where there is none.

    The latest instant of each vertex, sinks first, each before its successors' (the
    componentwise latest assignment: the latest of two occurrences, vertex by vertex, is
    one), gives the latest start.

    >>> a, b = np.array([0, 2]), np.array([1])
    >>> latest_occurrences([a, b], [[1], []], np.array([1, 3]))  # A -> B
    (array([0, 0]), array([1, 1]))
    """
    k = len(instants)
    t: list[np.ndarray | None] = [None] * k
    done: set[int] = set()
    while len(done) < k:
        for v in range(k):
            if v in done or any(w not in done for w in succ[v]):
                continue
            bound = ends if not succ[v] else np.min([t[w] for w in succ[v]], axis=0) - 1
            i = np.searchsorted(instants[v], bound, side="right") - 1
            found = (i >= 0) & (bound >= 0)
            t[v] = np.where(found, instants[v][np.maximum(i, 0)], -(2**40))
            done.add(v)
    stack = np.stack(t)  # type: ignore[arg-type]
    start, end = stack.min(axis=0), stack.max(axis=0)
    missing = start < 0
    return np.where(missing, -1, start), np.where(missing, -1, end)


def minimal_intervals(
    instants: list[np.ndarray], succ: list[list[int]], sinks: Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    """The minimal occurrences' (start, end) instants, by start.

    An occurrence ends at a sink's instant. [s, e] is minimal when the latest occurrence
    up to e starts at s and ends at e, and none up to an earlier end starts at s (the
    latest start never decreases with e)."""
    ends = np.unique(np.concatenate([instants[v] for v in sinks]))
    start, end = latest_occurrences(instants, succ, ends)
    ok = (start >= 0) & (end == ends)
    start, end = start[ok], end[ok]
    keep = np.ones(len(start), dtype=bool)
    keep[1:] = start[1:] != start[:-1]
    return start[keep], end[keep]
