"""Episode rules (`RULE name: EPISODE (...) WITHIN ... PREDICT ... WITHIN ...`): the
analysis that gives a plan its `EpisodeSpec` (docs/episodes.md).

A rule is not a SEQ: its vertices form a directed acyclic graph, each vertex is a
*symbol* (the event's type, or `SYMBOL expr` computed from its columns), and the rule
predicts a consequent symbol within the rule window. The plan's components are the
vertices (so `explain` and the runners see what an event must be to take part); the
rest is in `plan.spec`, which the episode engines read.

>>> from sparkcep.plan import analyze
>>> plan = analyze('''EPISODE (W w, X x, Y y; w -> y, x -> y) WITHIN 10
...                   PREDICT Z WITHIN 15''')
>>> spec = plan.spec
>>> spec.symbols, spec.edges, spec.sinks(), plan.window, spec.rule_window
(('W', 'X', 'Y'), ((0, 2), (1, 2)), (2,), 10, 15)
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sparkcep.language import ast
from sparkcep.plan.model import Plan, PlanComponent

# Functions SYMBOL may use: name -> (fewest, most arguments; None = any number).
SYMBOL_FUNCTIONS: dict[str, tuple[int, int | None]] = {
    "concat": (1, None),
    "string": (1, 1),
    "lower": (1, 1),
    "upper": (1, 1),
    "floor": (1, 1),
    "ceil": (1, 1),
    "round": (1, 1),
    "abs": (1, 1),
}


@dataclass(frozen=True)
class EpisodeSpec:
    """What an episode rule adds to its plan: the DAG over the vertices, the
    consequent and the rule window (in ticks), the confidence, and how an event's
    symbol is computed (`symbol` None: the type column)."""

    vertices: tuple[str, ...]  # variable names, as written
    symbols: tuple[str, ...]  # the symbol of each vertex (distinct)
    edges: tuple[tuple[int, int], ...]  # (u, v): the event of u precedes that of v
    predict: str
    rule_window: int
    confidence: float | None = None
    symbol: ast.Expr | None = None  # over the event's own columns (VarRef = a column)
    symbol_text: str = ""  # the SYMBOL expression as text ('' for the type column)

    def successors(self) -> tuple[tuple[int, ...], ...]:
        out: list[list[int]] = [[] for _ in self.vertices]
        for u, v in self.edges:
            out[u].append(v)
        return tuple(tuple(x) for x in out)

    def predecessors(self) -> tuple[tuple[int, ...], ...]:
        out: list[list[int]] = [[] for _ in self.vertices]
        for u, v in self.edges:
            out[v].append(u)
        return tuple(tuple(x) for x in out)

    def sinks(self) -> tuple[int, ...]:
        """Vertices without an edge out of them."""
        return tuple(i for i, s in enumerate(self.successors()) if not s)

    def topological(self) -> tuple[int, ...]:
        """The vertices with every edge going forward (Kahn; ties by written order)."""
        preds = [len(p) for p in self.predecessors()]
        succs = self.successors()
        ready = [i for i, n in enumerate(preds) if n == 0]
        order: list[int] = []
        while ready:
            u = ready.pop(0)
            order.append(u)
            for v in succs[u]:
                preds[v] -= 1
                if preds[v] == 0:
                    ready.append(v)
        return tuple(order)

    def attributes(self) -> list[str]:
        """Columns the SYMBOL expression reads."""
        if self.symbol is None:
            return []
        return [n.var for n in ast.walk(self.symbol) if isinstance(n, ast.VarRef)]


def bind_symbol(expr: ast.Expr, var: str) -> ast.Expr:
    """The SYMBOL expression with its columns read from `var` (`sensor` -> `w.sensor`)."""
    if isinstance(expr, ast.VarRef):
        return ast.AttrRef(var, expr.var, span=expr.span)
    if isinstance(expr, ast.Call):
        return replace(expr, args=tuple(bind_symbol(a, var) for a in expr.args))
    if isinstance(expr, ast.BinOp):
        return replace(expr, left=bind_symbol(expr.left, var), right=bind_symbol(expr.right, var))
    if isinstance(expr, ast.Negate):
        return replace(expr, operand=bind_symbol(expr.operand, var))
    return expr


class EpisodeClauses:
    """Analysis of episode rules (mixed into the analyzer, which provides `query`,
    `schema`, `options`, `error`, `_window`, `_tiebreak`, `_expand`, `_time_kind` and
    `_check_columns_exist`)."""

    def _episode_plan(self) -> Plan:
        q = self.query
        episode = q.episode
        self._check_columns_exist()
        vertices = episode.vertices
        self._episode_vertices(vertices)
        edges = self._episode_edges(episode, [v.var for v in vertices])
        symbol = self._episode_symbol()
        comps = [
            PlanComponent(
                index=i,
                var=v.var,
                event_type=v.event_type if symbol is None else None,
                negated=False,
                kleene=False,
                pos=i,
                gap=None,
                span=v.span,
                local=() if symbol is None else (_symbol_equals(symbol, v),),
            )
            for i, v in enumerate(vertices)
        ]
        self.comps = {c.var: c for c in comps}
        self.positive_vars = [c.var for c in comps]
        if q.within is None:
            raise self.error(
                "an episode rule needs WITHIN (its predicate window: the events of an "
                "occurrence lie within it)",
                episode.span,
            )
        if q.predict is None:
            raise self.error(
                "an episode rule needs PREDICT symbol WITHIN window (the consequent and "
                "the rule window)",
                episode.span,
            )
        window = self._window(comps)
        rule_window = self._episode_ticks(q.predict.within, comps)
        if rule_window < window:
            raise self.error(
                "the rule window (PREDICT ... WITHIN) is shorter than the predicate window: "
                "it spans the predicate and the consequent, so it is at least as long",
                q.predict.within.span,
            )
        confidence = self._episode_confidence()
        key_conditions = self._episode_key()
        spec = EpisodeSpec(
            vertices=tuple(v.var for v in vertices),
            symbols=tuple(v.event_type for v in vertices),
            edges=edges,
            predict=q.predict.symbol,
            rule_window=rule_window,
            confidence=confidence,
            symbol=symbol,
            symbol_text="" if symbol is None else ast.to_text(symbol),
        )
        return Plan(
            query=q,
            options=self.options,
            components=tuple(comps),
            conditions=(),
            negations=(),
            key=tuple(dict.fromkeys(self.equivalences)),
            key_conditions=tuple(key_conditions),
            window=window,
            strategy="SKIP_TILL_ANY_MATCH",
            tiebreak=self._tiebreak(),
            returns=(),
            time_kind=self._time_kind(),
            schema=dict(self.schema or {}),
            warnings=tuple(self.warnings),
            spec=spec,
        )

    def _episode_vertices(self, vertices):
        seen_vars: set[str] = set()
        seen_symbols: dict[str, str] = {}
        for v in vertices:
            if v.var in seen_vars:
                raise self.error(f"variable '{v.var}' is used twice", v.span)
            seen_vars.add(v.var)
            if v.event_type in seen_symbols:
                raise self.error(
                    f"'{v.event_type}' is already the event of {seen_symbols[v.event_type]}: "
                    "the vertices of an episode are distinct events",
                    v.span,
                )
            seen_symbols[v.event_type] = v.var

    def _episode_edges(self, episode, names: list[str]) -> tuple[tuple[int, int], ...]:
        index = {n: i for i, n in enumerate(names)}
        succ: dict[int, set[int]] = {i: set() for i in range(len(names))}
        edges: list[tuple[int, int]] = []
        for edge in episode.edges:
            for name, span in ((edge.source, edge.source_span), (edge.target, edge.target_span)):
                if name not in index:
                    raise self.error(
                        f"'{name}' is not a vertex of the episode (vertices: {', '.join(names)})",
                        span,
                    )
            u, v = index[edge.source], index[edge.target]
            path = _path(succ, v, u)
            if path is not None:
                span = ast.Span(
                    edge.source_span.line, edge.source_span.column,
                    edge.target_span.end_line, edge.target_span.end_column,
                )  # fmt: skip
                cycle = " -> ".join(names[i] for i in [u, *path])
                raise self.error(
                    f"this edge closes a cycle ({cycle}): an episode is a directed acyclic graph",
                    span,
                )
            if v not in succ[u]:
                succ[u].add(v)
                edges.append((u, v))
        return tuple(edges)

    def _episode_symbol(self) -> ast.Expr | None:
        expr = self.query.symbol
        if expr is None:
            return None
        for node in ast.walk(expr):
            if isinstance(node, ast.VarRef):
                if self.schema is not None and node.var not in self.schema:
                    raise self.error(
                        f"'{node.var}' is not a column of the input (columns: "
                        f"{', '.join(self.schema)})",
                        node.span,
                    )
            elif isinstance(node, ast.AttrRef):
                raise self.error(
                    f"SYMBOL reads each event's own columns: write '{node.attr}', not "
                    f"'{node.var}.{node.attr}'",
                    node.span,
                )
            elif isinstance(node, ast.Call):
                self._symbol_call(node)
            elif isinstance(node, ast.BinOp) and node.op not in ast.ARITHMETIC:
                raise self.error(
                    "SYMBOL computes a value (columns, literals, + - * / %, and "
                    f"{', '.join(SYMBOL_FUNCTIONS)}), not a condition",
                    node.span,
                )
            elif not isinstance(node, ast.Literal | ast.Negate | ast.BinOp):
                raise self.error("SYMBOL computes a value, not a condition", node.span)
        return expr

    def _symbol_call(self, node: ast.Call):
        if node.name not in SYMBOL_FUNCTIONS:
            raise self.error(
                f"unknown function '{node.name}' in SYMBOL (known: {', '.join(SYMBOL_FUNCTIONS)})",
                node.span,
            )
        low, high = SYMBOL_FUNCTIONS[node.name]
        if len(node.args) < low or (high is not None and len(node.args) > high):
            many = f"{low}" if low == high else f"at least {low}"
            raise self.error(f"{node.name}() takes {many} argument(s)", node.span)

    def _episode_ticks(self, duration: ast.Duration, comps) -> int:
        """A duration in ticks of the time column, checked as WITHIN is."""
        saved = self.query
        self.query = replace(saved, within=duration)
        try:
            return self._window(comps)
        finally:
            self.query = saved

    def _episode_confidence(self) -> float | None:
        q = self.query
        if q.confidence is not None and not 0 <= q.confidence <= 1:
            raise self.error("CONFIDENCE is a probability, from 0 to 1", q.confidence_span)
        return q.confidence

    def _episode_key(self) -> list[ast.Expr]:
        """WHERE of a rule holds [attr] conjuncts only: they partition the stream."""
        for expr in ast.conjuncts(self.query.where):
            if not isinstance(expr, ast.Equivalence):
                raise self.error(
                    "the WHERE of an episode rule partitions the stream and takes [attr] "
                    "only (e.g. WHERE [sensor]); compute conditions into SYMBOL",
                    expr.span,
                )
            if self.schema is not None and expr.attr not in self.schema:
                raise self.error(
                    f"'{expr.attr}' is not a column of the input (columns: "
                    f"{', '.join(self.schema)})",
                    expr.span,
                )
        return self._expand(self.query.where)


def _symbol_equals(symbol: ast.Expr, vertex: ast.Component) -> ast.Expr:
    """`SYMBOL(v) = 'its symbol'`: the vertex's condition, as `explain` shows it."""
    return ast.BinOp(
        "=", bind_symbol(symbol, vertex.var), ast.Literal(vertex.event_type), span=vertex.span
    )


def _path(succ: dict[int, set[int]], start: int, goal: int) -> list[int] | None:
    """A path start -> ... -> goal along `succ` (vertices after start), or None."""
    if start == goal:
        return [goal]
    stack = [(start, [start])]
    seen = {start}
    while stack:
        node, path = stack.pop()
        for nxt in sorted(succ[node]):
            if nxt == goal:
                return [*path, goal]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, [*path, nxt]))
    return None
