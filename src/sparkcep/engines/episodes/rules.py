"""Episode rules compiled together: one symbol table, each rule's DAG as index lists,
the rules grouped by predicate, and the indexes an arriving event is looked up in (the
predicates a symbol can end, for CBS-Tree and DirectMatch; every vertex of a symbol, for
ToFel)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sparkcep.plan import Plan
from sparkcep.plan.episodes import EpisodeSpec


@dataclass(frozen=True)
class Rule:
    """One rule over symbol ids: vertex i has symbol `symbols[i]`."""

    name: str | None
    symbols: tuple[int, ...]
    succ: tuple[tuple[int, ...], ...]
    pred: tuple[tuple[int, ...], ...]
    topological: tuple[int, ...]  # every edge forward
    retrieval: tuple[int, ...]  # reverse topological order: sinks first (Algorithm 1)
    sinks: tuple[int, ...]
    window: int  # predicate window, ticks (t_e − t_s < window)
    rule_window: int  # ticks: the consequent is predicted in (t_e, t_s + rule_window)
    predict: str
    confidence: float | None


class RuleSet:
    """The rules of one program.

    >>> from sparkcep.plan import analyze
    >>> plans = [analyze("EPISODE (W w, X x, Y y; w -> y, x -> y) WITHIN 10 PREDICT Z WITHIN 15"),
    ...          analyze("EPISODE (X x, Z z; x -> z) WITHIN 5 PREDICT W WITHIN 5")]
    >>> rules = RuleSet(plans, ["traffic", "other"])
    >>> rules.symbols, rules.by_sink, rules.max_window
    (['W', 'X', 'Y', 'Z'], {2: (0,), 3: (1,)}, 10)
    >>> rules[0].retrieval, rules[0].sinks
    ((2, 1, 0), (2,))
    >>> sorted(rules.ordered_pairs)  # W, X before Y; X before Z (either way round)
    [(0, 2), (1, 2), (1, 3), (2, 0), (2, 1), (3, 1)]

    Rules that differ only in what they predict share a predicate (mine-rules writes one
    rule per consequent):

    >>> rules = RuleSet([analyze("EPISODE (X x, Y y; x -> y) WITHIN 5 PREDICT Z WITHIN 9"),
    ...                  analyze("EPISODE (Y y, X x) WITHIN 5 PREDICT Z WITHIN 9"),
    ...                  analyze("EPISODE (X a, Y b; a -> b) WITHIN 5 PREDICT W WITHIN 5")],
    ...                 ["xy_z", "yx_z", "xy_w"])
    >>> rules.predicates, rules.predicate_of, rules.predicates_by_sink
    ([(0, 2), (1,)], (0, 1, 0), {1: (0, 1), 0: (1,)})
    """

    def __init__(self, plans: Sequence[Plan], names: Sequence[str | None]):
        self.symbols: list[str] = []
        self.codes: dict[str, int] = {}
        self.rules: list[Rule] = []
        sink_lists: dict[int, list[int]] = {}
        vertex_lists: dict[int, list[tuple[int, int]]] = {}
        for r, (plan, name) in enumerate(zip(plans, names)):
            spec: EpisodeSpec = plan.spec  # type: ignore[assignment]
            symbols = tuple(self.code(s) for s in spec.symbols)
            topological = spec.topological()
            rule = Rule(
                name=name, symbols=symbols, succ=spec.successors(), pred=spec.predecessors(),
                topological=topological, retrieval=tuple(reversed(topological)),
                sinks=spec.sinks(), window=int(plan.window), rule_window=spec.rule_window,
                predict=spec.predict, confidence=spec.confidence,
            )  # fmt: skip
            self.rules.append(rule)
            for v in rule.sinks:
                sink_lists.setdefault(symbols[v], []).append(r)
            for v, s in enumerate(symbols):
                vertex_lists.setdefault(s, []).append((r, v))
        # Symbol pairs some rule puts in order (a path u -> ... -> v), both ways round: two
        # such events at one instant can never both be in an occurrence, an order of
        # equal times (a tie-break) could change that. Other ties change nothing.
        self.ordered_pairs: set[tuple[int, int]] = set()
        for rule in self.rules:
            for u in rule.topological:
                for v in _after(rule.succ, u):
                    a, b = rule.symbols[u], rule.symbols[v]
                    self.ordered_pairs |= {(a, b), (b, a)}
        self.by_sink = {s: tuple(dict.fromkeys(rs)) for s, rs in sink_lists.items()}
        self._group_by_predicate()
        self.by_vertex = {s: tuple(vs) for s, vs in vertex_lists.items()}
        self.max_window = max(r.window for r in self.rules)
        self.windows = sorted({r.window for r in self.rules})

    def code(self, symbol: str) -> int:
        """The id of a symbol (added when new)."""
        if symbol not in self.codes:
            self.codes[symbol] = len(self.symbols)
            self.symbols.append(symbol)
        return self.codes[symbol]

    def __getitem__(self, r: int) -> Rule:
        return self.rules[r]

    def __len__(self) -> int:
        return len(self.rules)

    def _group_by_predicate(self) -> None:
        """`predicates`: the rules of each distinct predicate (symbols, edges and window),
        in rule order, the predicates in the order of their first rule; `predicate_of`:
        each rule's predicate; `predicates_by_sink`: the predicates a symbol can end.

        Rules with one predicate have the same occurrences and rejected instances (what
        they predict plays no part in either), so CBR runs once per predicate and each
        occurrence it finds is a row of every one of its rules. mine-rules writes one rule
        per consequent: 2,522 rules mined from the traffic detectors have 183 predicates."""
        index: dict[tuple, int] = {}
        members: list[list[int]] = []
        predicate_of = []
        for r, rule in enumerate(self.rules):
            # The edges as successor lists decide everything else CBR reads (predecessors,
            # sinks; any topological order retrieves the same occurrence).
            p = index.setdefault((rule.symbols, rule.succ, rule.window), len(index))
            if p == len(members):
                members.append([])
            members[p].append(r)
            predicate_of.append(p)
        self.predicates: list[tuple[int, ...]] = [tuple(rs) for rs in members]
        self.predicate_of: tuple[int, ...] = tuple(predicate_of)
        self.predicates_by_sink: dict[int, tuple[int, ...]] = {
            s: tuple(dict.fromkeys(predicate_of[r] for r in rs)) for s, rs in self.by_sink.items()
        }

    def triggered(self, symbols) -> list[int]:
        """The predicates a set of arriving symbols can end (a sink's symbol arrived), in
        order."""
        found: set[int] = set()
        for s in symbols:
            found.update(self.predicates_by_sink.get(s, ()))
        return sorted(found)


def _after(succ: tuple[tuple[int, ...], ...], u: int) -> set[int]:
    """The vertices a path leads to from u."""
    seen: set[int] = set()
    todo = list(succ[u])
    while todo:
        v = todo.pop()
        if v not in seen:
            seen.add(v)
            todo.extend(succ[v])
    return seen
