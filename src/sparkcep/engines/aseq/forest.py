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

# Chop-connect's cost rule: a query is cut only where the shared tail has at least this
# many steps. Connecting costs about as much as counting five steps of the tail per
# START. Measured on the replayed stock trades (benchmarks/results/aseq.md): cutting
# every shared tail ran at 0.63-0.97x unshared with tails of 2 to 4 steps, 1.03-1.40x
# with 5 to 8; where this rule cuts, 0.90-1.26x (docs/aggregation.md).
CHOP_MIN_STEPS = 7


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
        self, plans: list[Plan], sharing: str = "prefix", signatures: Signatures | None = None
    ):
        if sharing not in ("none", "prefix", "chop"):
            raise ValueError(f"sharing is none, prefix or chop, not {sharing!r}")
        self.sharing = sharing
        self.nodes: list[Node] = []
        self.signatures = signatures if signatures is not None else Signatures()
        self._node_index: dict[tuple, int] = {}
        steps = [self._steps(p, i) for i, p in enumerate(plans)]
        self.queries: list[QueryPlan] = []
        self.min_tail = CHOP_MIN_STEPS  # read when built: tests may lower it
        self.declined: dict[int, int] = {}  # query -> steps of a shared tail left uncut
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
            lines.append(line)
        return lines
