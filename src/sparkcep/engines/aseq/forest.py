"""A-Seq's prefix forest (aseq-online-aggregation.md §4): the patterns of several queries
as paths of prefix trees, shared where they share a prefix (§4.1) or, with chop-connect,
chopped into pieces that are paths elsewhere (§4.2)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import NamedTuple

from sparkcep.engines.aseq.combine import Channel, channel, window_of
from sparkcep.plan import Plan
from sparkcep.prep.mask import Signatures

# Chop-connect's cost rule (docs/aggregation.md). A query is a candidate for a cut where
# the tail it shares with another query has at least CHOP_MIN_STEPS steps; whether it is
# cut is decided at run time from the input's type counts (CHOP_RULE "counts"): a cut
# saves the counter updates of the tail's steps from every START of the chopped query,
# and costs a connect that goes through the tail's (START, end) bundles and the snapshot
# pairs (head START, tail START), plus, once per shared tail, collecting its bundles. Each
# is estimated as pairs of events of two types within a window (count x count x
# window / time span), in units of one counter update; CHOP_CONNECT and CHOP_COLLECT are
# what one bundle or snapshot pair costs, measured on the replayed stock trades
# (benchmarks/results/aseq.md). CHOP_RULE "always" cuts every candidate (tests use it to
# exercise the connects).
CHOP_MIN_STEPS = 2
CHOP_RULE = "counts"
CHOP_CONNECT = 1.2  # a connect's cost per tail bundle or snapshot pair, in counter updates
CHOP_COLLECT = 3.5  # collecting a shared tail's (START, end) bundles, per bundle, once
CHOP_JOIN = 5.0  # a connect joined per (head START, end) (MIN/MAX, float sums, multi-connect)


@dataclass
class TypeCounts:
    """What the cost rule reads of an input: the events with each signature bit, the time
    span they cover (ticks), and the attributes whose values are floats."""

    events: dict[int, int]
    span: int
    float_attrs: frozenset[str] = frozenset()

    def share(self, window: int) -> float:
        """The share of the pairs of events (one before the other) that fit a window."""
        return min(window / max(self.span, 1), 0.5)


@dataclass
class CutEstimate:
    """A candidate cut of query `query` at step `found` of its steps [0, end): what it
    saves, what its connect costs and what collecting its tail costs (shared by every
    query cut at the same tail), in counter updates, and whether it is made."""

    query: int
    found: int
    end: int
    tail: tuple
    saving: float
    connect: float
    collect: float
    cut: bool = False

    def text(self) -> str:
        verdict = "cut" if self.cut else "left whole"
        return (
            f"{verdict}: a cut saves ~{self.saving:,.0f} counter updates, its connect "
            f"costs ~{self.connect:,.0f} (+{self.collect:,.0f} for the shared tail, once)"
        )


@dataclass
class Node:
    parent: int  # -1 for a root
    kind: str  # "pos" (a positive component) or "neg" (the negations of a gap)
    bits: tuple[int, ...]  # unified component bits: one for pos, the negated ones for neg
    key: tuple  # identity used for sharing
    window: int = 0  # longest window of the queries using the node


@dataclass
class Piece:
    """A stretch of a query's pattern that is one path of the forest."""

    nodes: list[int]  # path from its root to its end


class NodeValues(NamedTuple):
    """Values the counters add up at a forest node: the attribute `attr` of the events
    with the unified component bit `bit`, when they bind node `node`."""

    node: int
    bit: int
    attr: str


class ChannelSource(NamedTuple):
    """Where a query's channel is counted: in its piece `piece`, as `values`."""

    piece: int
    values: NodeValues


@dataclass
class QueryPlan:
    """How one query is computed: pieces connected in turn, and where its channels come from."""

    plan: Plan
    pieces: list[Piece]
    channel_source: dict[Channel, ChannelSource] = field(default_factory=dict)


class Forest:
    """The prefix trees of a set of A-Seq queries (one path per query, or per piece)."""

    def __init__(
        self,
        plans: list[Plan],
        sharing: str = "prefix",
        signatures: Signatures | None = None,
        *,
        counts: TypeCounts | None = None,
        min_tail: int | None = None,
        rule: str | None = None,
    ):
        if sharing not in ("none", "prefix", "chop"):
            raise ValueError(f"sharing is none, prefix or chop, not {sharing!r}")
        self.sharing = sharing
        self.nodes: list[Node] = []
        self.signatures = signatures if signatures is not None else Signatures()
        self._node_index: dict[tuple, int] = {}
        steps = [self._steps(p, i) for i, p in enumerate(plans)]
        self.queries: list[QueryPlan] = []
        # read when built (tests and benchmarks may change them)
        self.min_tail = CHOP_MIN_STEPS if min_tail is None else min_tail
        self.rule = CHOP_RULE if rule is None else rule
        if self.rule not in ("counts", "always"):
            raise ValueError(f"the chop rule is counts or always, not {self.rule!r}")
        self.declined: dict[int, int] = {}  # query -> steps of a shared tail left uncut
        self.cuts: dict[int, list[tuple[int, int]]] = {}  # query -> (found, end) of its cuts
        self.counts = counts
        # The candidates' estimates (with counts), and the cuts they allow.
        self.estimates: dict[int, list[CutEstimate]] = {}
        self._allowed: set[tuple[int, int, int]] | None = None
        if sharing == "chop" and self.rule == "counts" and counts is not None:
            probe = Forest(plans, "chop", self.signatures, min_tail=self.min_tail, rule="always")
            self._allowed = self._decide(plans, steps, probe.cuts, counts)
        if sharing == "chop":
            # Patterns that can be chopped are laid out after the others, so their tails
            # find the paths the other queries create.
            order = sorted(range(len(plans)), key=lambda i: len(steps[i]))
        else:
            order = list(range(len(plans)))
        placed: dict[int, QueryPlan] = {}
        for i in order:
            placed[i] = self._place(plans[i], steps[i], i)
        self.queries = [placed[i] for i in range(len(plans))]

    @property
    def pending(self) -> bool:
        """Are the cuts candidates the input's counts will decide (no counts yet)?"""
        return self.sharing == "chop" and self.rule == "counts" and self.counts is None

    def _decide(self, plans, steps, candidates, counts: TypeCounts) -> set[tuple[int, int, int]]:
        """The cuts worth making, by the estimates (`self.estimates`): the candidates at a
        shared tail are cut when each saves more than its connect costs and together
        more than collecting the tail's bundles costs."""
        events = counts.events
        widest = max((window_of(p) for p in plans), default=0)

        def total(part) -> float:
            sigs = {sig for negs, sig, _ in part} | {n for negs, _, _ in part for n in negs}
            return float(sum(events.get(b, 0) for b in sigs))

        def pairs(first, last, window) -> float:
            return events.get(first, 0) * events.get(last, 0) * counts.share(window)

        by_tail: dict[tuple, list[CutEstimate]] = {}
        for i, cuts in candidates.items():
            plan = plans[i]
            share = counts.share(window_of(plan))
            joined_funcs = any(it.func in ("min", "max") for it in plan.aggregate.items) or any(
                it.func in ("sum", "avg") and it.attr in counts.float_attrs
                for it in plan.aggregate.items
            )
            for n, (found, end) in enumerate(cuts):
                head, tail = steps[i][:found], steps[i][found:end]
                starts = events.get(head[0][1], 0)
                whole, kept = total(steps[i][1:end]), total(head[1:])
                saving = starts * max(whole - kept, 0.0) * share
                tail_bundles = (
                    pairs(tail[0][1], tail[-1][1], widest)
                    if len(tail) > 1
                    else float(events.get(tail[0][1], 0))
                )
                snapshots = pairs(tail[0][1], head[0][1], window_of(plan))
                head_bundles = (
                    pairs(head[0][1], head[-1][1], window_of(plan)) if len(head) > 1 else starts
                )
                factor = CHOP_CONNECT * (CHOP_JOIN if joined_funcs or n > 0 else 1.0)
                connect = factor * (tail_bundles + snapshots + head_bundles)
                key = tuple((negs, sig) for negs, sig, _ in tail)
                estimate = CutEstimate(i, found, end, key, saving, connect,
                                       CHOP_COLLECT * tail_bundles)  # fmt: skip
                self.estimates.setdefault(i, []).append(estimate)
                by_tail.setdefault(key, []).append(estimate)
        allowed = set()
        for group in by_tail.values():
            gains = [e for e in group if e.saving > e.connect]
            if sum(e.saving - e.connect for e in gains) > max(
                (e.collect for e in group), default=0
            ):
                for e in gains:
                    e.cut = True
                    allowed.add((e.query, e.found, e.end))
        return allowed

    # Each positive component is a step; the negations of a gap ride on the next step.
    def _steps(self, plan: Plan, qi: int) -> list[tuple]:
        steps = []
        pending_neg: list[int] = []
        for comp in plan.components:
            sig = self._signature(comp)
            if comp.negated:
                pending_neg.append(sig)
                continue
            steps.append((tuple(sorted(set(pending_neg))), sig, comp))
            pending_neg = []
        return steps

    def _signature(self, comp) -> int:
        return self.signatures.of(comp)

    def _node(self, parent: int, kind: str, bits: tuple, owner: int, window: int) -> int:
        key = (parent, kind, bits) if self.sharing != "none" else (parent, kind, bits, owner)
        if key not in self._node_index:
            self._node_index[key] = len(self.nodes)
            self.nodes.append(Node(parent, kind, bits, key, window))
        idx = self._node_index[key]
        self.nodes[idx].window = max(self.nodes[idx].window, window)
        return idx

    def _path(self, steps, owner: int, window: int) -> list[int]:
        path: list[int] = []
        parent = -1
        for negs, sig, _ in steps:
            if negs and parent >= 0:
                parent = self._node(parent, "neg", negs, owner, window)
                path.append(parent)
            parent = self._node(parent, "pos", (sig,), owner, window)
            path.append(parent)
        return path

    def _root_path(self, steps) -> bool:
        """Is this sequence of steps already a path from a root of the forest?"""
        parent = -1
        for negs, sig, _ in steps:
            if negs and parent >= 0:
                key = (parent, "neg", negs)
                if key not in self._node_index:
                    return False
                parent = self._node_index[key]
            key = (parent, "pos", (sig,))
            if key not in self._node_index:
                return False
            parent = self._node_index[key]
        return True

    def _place(self, plan: Plan, steps, owner: int) -> QueryPlan:
        window = window_of(plan)
        cuts: list[int] = []  # step indices where a new piece starts
        if self.sharing == "chop":
            end = len(steps)
            while end > 1:
                # the longest tail steps[start:end] that is a path elsewhere (no negation
                # may sit at the cut)
                found = None
                for start in range(1, end):
                    if steps[start][0]:
                        continue
                    if self._root_path(steps[start:end]):
                        found = start
                        break
                if found is None:
                    break
                if end - found < self.min_tail:
                    self.declined[owner] = end - found
                    break
                if self._allowed is not None and (owner, found, end) not in self._allowed:
                    break  # the estimates say it does not pay (self.estimates)
                self.cuts.setdefault(owner, []).append((found, end))
                cuts.append(found)
                end = found
        bounds = [0, *sorted(cuts), len(steps)]
        pieces = []
        for lo, hi in itertools.pairwise(bounds):
            pieces.append(Piece(self._path(steps[lo:hi], owner, window)))
        qp = QueryPlan(plan, pieces)
        # Where each aggregated variable sits.
        step_of = {}
        for i, (_, sig, comp) in enumerate(steps):
            step_of[comp.var] = (i, sig)
        for item in plan.aggregate.items:
            if item.var is None:
                continue
            i, sig = step_of[item.var]
            piece = max(p for p, lo in enumerate(bounds[:-1]) if lo <= i)
            pos_nodes = [n for n in pieces[piece].nodes if self.nodes[n].kind == "pos"]
            node = pos_nodes[i - bounds[piece]]
            qp.channel_source[channel(item)] = ChannelSource(
                piece, NodeValues(node, sig, item.attr)
            )
        return qp

    def describe(self) -> list[str]:
        """Each query's pieces, for `explain`."""
        lines = []
        for i, qp in enumerate(self.queries):
            parts = []
            for piece in qp.pieces:
                names = []
                for n in piece.nodes:
                    node = self.nodes[n]
                    sig = ",".join(
                        str(self.signatures.items[b].event_type or "ANY") for b in node.bits
                    )
                    names.append(("!" if node.kind == "neg" else "") + sig)
                parts.append("(" + " ".join(names) + ")")
            line = " + ".join(parts)
            if i in self.declined:
                line += (
                    f" (a shared tail of {self.declined[i]} steps left uncut: "
                    f"chop-connect cuts from {self.min_tail})"
                )
            elif self.pending and len(qp.pieces) > 1:
                line += " (candidate cuts: the input's type counts decide at run time)"
            for estimate in self.estimates.get(i, []):
                line += f" ({estimate.text()})"
            lines.append(line)
        return lines
