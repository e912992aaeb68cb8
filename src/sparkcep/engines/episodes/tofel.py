"""ToFel (Topological Forward Retrieval), the paper's baseline (its reference [4]).

What the CBS-Tree paper says of ToFel (§1, §4), and this follows: it finds the minimal
occurrences "by incrementally maintaining parts of the predicate occurrences, and thus
avoids scanning the stream backward"; each rule has its own filter, so its memory grows
with the number of rules; every arriving event that is a vertex of a rule is worked into
that rule's partial matches, whether or not they ever complete (the "false alarms"); and
an instance of a vertex is kept only when instances are kept for all its direct
predecessors. Reference [4] is not among the shared papers: the rest is a reconstruction.

The states of a rule's filter are the *ideals* of its DAG: the non-empty vertex sets
that hold every direct predecessor of their vertices (how far a topological order has
got). A partial match on an ideal maps its vertices to events of their symbols, the
tail of every edge to an earlier instant than its head; it is alive while its first
event is within the predicate window of now. For each ideal ToFel holds one partial
match: the vertex-wise latest of the alive ones, itself a partial match (the latest of
matches that keep the edges' order keeps it too), which every completion of the others
is dominated by. An arriving event of vertex v advances the match of every ideal that
lacks v and holds v's direct predecessors at earlier instants, to the ideal with v, and
starts {v} when v is a source. A match that becomes complete at instant t is the latest
occurrence ending at t (Definition 2: the vertex-wise latest of the occurrences ending
there). It is minimal, and fires, when it starts at a later instant than the previous
complete match: an occurrence it encloses would end earlier and start no earlier, and
each instant's latest occurrence starts no earlier than the last one's. There is no
retrieval: the occurrence is the completed match.
"""

from __future__ import annotations

from sparkcep.engines.episodes.rules import Rule, RuleSet
from sparkcep.engines.episodes.window import Segment

Shape = tuple[tuple[tuple[int, ...], ...], tuple[dict[int, int], ...], tuple[int, ...]]


class ToFel:
    """The forward partial matches of each rule, in each segment's `kept`: rule -> the
    latest match per ideal (`shape`: the full ideal last, holding the last complete
    one), each a tuple of positions per vertex (-1: not in the ideal), () for none.

    A -> B -> C within 5 ticks over A B A B C C (ticks 0 to 5): the second A and B
    replace the first ones; C at 4 completes the latest match, which fires; C at 5
    completes one with the same start, which encloses it, and does not fire.

    >>> from sparkcep.plan import analyze
    >>> rules = RuleSet([analyze("EPISODE (A a, B b, C c; a -> b, b -> c) WITHIN 5"
    ...                          " PREDICT D WITHIN 5")], ["abc"])
    >>> A, B, C = rules[0].symbols
    >>> seg = Segment.of([A, B, A, B, C, C], range(6))
    >>> tofel = ToFel(rules)
    >>> for p in range(6):
    ...     lows = {5: seg.lower(p - 5)}
    ...     fired = tofel.arrive(seg, [p], [seg.sym[p]], lows)
    ...     print(p, tofel.matches(seg, 0, lows[5]), fired)
    0 {(0,): (0,)} {}
    1 {(0,): (0,), (0, 1): (0, 1)} {}
    2 {(0,): (2,), (0, 1): (0, 1)} {}
    3 {(0,): (2,), (0, 1): (2, 3)} {}
    4 {(0,): (2,), (0, 1): (2, 3)} {0: (2, 3, 4)}
    5 {(0,): (2,), (0, 1): (2, 3)} {}
    """

    def __init__(self, rules: RuleSet):
        self.rules = rules
        shapes: dict[tuple, Shape] = {}
        self.shape = [shapes.setdefault(r.pred, _shape(r)) for r in rules.rules]
        self.window = [r.window for r in rules.rules]

    def arrive(self, seg: Segment, positions, symbols, lows) -> dict[int, tuple[int, ...]]:
        """The events of one instant arrive, at `positions`; `lows` maps each predicate
        window to its first position within it. Returns the rules that
        fire, each with the positions of its occurrence (in vertex order)."""
        # Matches grown at this instant, by (ideal, the vertices at this instant): a
        # vertex joins only those that hold none of its predecessors at this instant.
        grown: dict[int, dict[tuple[int, int], tuple[int, ...]]] = {}
        for p, s in zip(positions, symbols):
            for r, v in self.rules.by_vertex.get(s, ()):
                here = grown.setdefault(r, {})
                here.update(self._advance(seg.kept.get(r), here, r, v, p, lows[self.window[r]]))
        fired = {}
        for r, here in grown.items():
            if not here:
                continue
            full = len(self.shape[r][0]) - 1
            held = seg.kept.get(r)
            if held is None:
                held = seg.kept[r] = [()] * (full + 1)
            done: tuple[int, ...] = ()
            for (j, _), m in here.items():
                if j == full:
                    done = _latest(done, m)
                else:
                    held[j] = _latest(held[j], m)
            if done:
                last = held[full]
                if not last or min(last) < seg.first_of(min(done)):
                    fired[r] = done
                held[full] = done
        return fired

    def _advance(self, held, here, r: int, v: int, p: int, low: int) -> list:
        """Event p of rule r's vertex v advances the held matches (alive: first position
        >= low) and those grown at this instant: ((ideal, vertices now), match) each."""
        ideals, steps, preds = self.shape[r]
        bit = 1 << v
        new = []
        for i, j in steps[v].items():
            if i < 0:  # v is a source: a new match
                m = (-1,) * len(preds)
            elif held is None or not (m := held[i]):
                continue
            elif min(m[u] for u in ideals[i]) < low:
                held[i] = ()  # out of the window: dropped
                continue
            new.append(((j, bit), (*m[:v], p, *m[v + 1 :])))
        for (i, at), m in here.items():
            j = steps[v].get(i)
            if j is not None and not at & preds[v]:
                new.append(((j, at | bit), (*m[:v], p, *m[v + 1 :])))
        return new  # a later event of v: a later match, replacing the earlier one

    def matches(self, seg: Segment, r: int, low: int) -> dict[tuple[int, ...], tuple[int, ...]]:
        """The alive partial matches held for rule r (first position >= low): ideal (its
        vertices) -> their positions."""
        ideals = self.shape[r][0]
        out = {}
        for vertices, m in zip(ideals[:-1], seg.kept.get(r, ())):
            if m and min(m[u] for u in vertices) >= low:
                out[vertices] = tuple(m[u] for u in vertices)
        return out

    def prune(self, seg: Segment, low_of) -> None:
        """Drop the matches (and last occurrences) that fell out of their rule's window."""
        for r, held in list(seg.kept.items()):
            low = low_of(self.window[r])
            for i, vertices in enumerate(self.shape[r][0]):
                if held[i] and min(held[i][u] for u in vertices) < low:
                    held[i] = ()
            if not any(held):
                del seg.kept[r]


def _shape(rule: Rule) -> Shape:
    """The ideals of a rule's DAG (their vertices, by size; the full set last), each
    vertex's steps (ideal index, -1 for the empty one -> the index of it with the
    vertex) and each vertex's direct predecessors as a bit mask."""
    k = len(rule.symbols)
    preds = tuple(sum(1 << u for u in rule.pred[v]) for v in range(k))
    masks = [m for m in range(1, 1 << k) if all(preds[v] & ~m == 0 for v in range(k) if m >> v & 1)]
    masks.sort(key=lambda m: (m.bit_count(), m))
    index = {0: -1, **{m: i for i, m in enumerate(masks)}}
    steps = tuple(
        {index[m]: index[m | 1 << v] for m in index if not m >> v & 1 and preds[v] & ~m == 0}
        for v in range(k)
    )
    ideals = tuple(tuple(v for v in range(k) if m >> v & 1) for m in masks)
    return ideals, steps, preds


def _latest(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """The vertex-wise latest of two matches on one ideal (or b, when a is none)."""
    return tuple(map(max, a, b)) if a else b
