"""Analysis: `ast.Query` + the input's schema -> `Plan`, the one description every engine runs.

The plan splits WHERE into conjuncts and files each one where an engine needs it:

- *local* conjuncts (one variable, element-wise) go into the component's filter, evaluated
  before the engine sees the event (in Spark, in the JVM);
- *bind* conjuncts are checked when their latest variable binds;
- *element* conjuncts are checked on each element of a Kleene variable;
- *closure* conjuncts (aggregates of a Kleene variable) when that variable is complete;
- *negation* conjuncts (they mention a negated variable) decide which events forbid a match.

It also derives the partition key (docs/semantics.md, "Partitions and the key"), the
window in ticks of the time column, and the RETURN columns with their kinds. Expression
checks are in `typecheck`, the AGG clause in `aggregates`.
"""

from __future__ import annotations

import re

from sparkcep.errors import QueryError, missing_column
from sparkcep.language import ast
from sparkcep.language.forms import is_match_recognize
from sparkcep.language.parser import parse, parse_file
from sparkcep.plan.aggregates import AggregateClauses
from sparkcep.plan.ayac import AyacClauses
from sparkcep.plan.episodes import EpisodeClauses
from sparkcep.plan.extensions import NativeExtensions
from sparkcep.plan.intervals import IntervalClauses
from sparkcep.plan.model import (
    STRATEGIES,
    Condition,
    NegationCheck,
    Options,
    Plan,
    PlanComponent,
    ReturnColumn,
    relative_span,
)
from sparkcep.plan.sets import EventSetClauses
from sparkcep.plan.typecheck import TypeChecker
from sparkcep.schema import Kind
from sparkcep.timeunits import TIME_UNITS, window_ticks


def analyze(
    query: ast.Query | str,
    schema: dict[str, Kind] | None = None,
    options: Options | None = None,
) -> Plan:
    """Check a query against the input's columns and build its plan.

    `schema` maps column names to kinds; without it, attribute names and types are not
    checked (as for `sparkcep explain QUERY` without data).

    >>> plan = analyze("PATTERN SEQ(A a, B b, C c) WHERE [k] AND a.v < b.v WITHIN 5",
    ...                {"ts": "int", "type": "string", "k": "int", "v": "float"})
    >>> plan.key, plan.window, plan.strategy
    (('k',), 5, 'SKIP_TILL_ANY_MATCH')
    >>> [(c.kind, c.stage, ast.to_text(c.expr)) for c in plan.conditions]
    [('bind', 1, '(a.v < b.v)')]
    """
    if isinstance(query, str) and is_match_recognize(query):
        return _analyze_match_recognize(query, schema, options or Options())
    if isinstance(query, str):
        query = parse(query)
    return _Analyzer(query, schema, options or Options()).run()


class _Analyzer(
    TypeChecker,
    AggregateClauses,
    AyacClauses,
    EventSetClauses,
    EpisodeClauses,
    IntervalClauses,
    NativeExtensions,
):
    def __init__(self, query: ast.Query, schema: dict[str, Kind] | None, options: Options):
        self.query = query
        self.text = query.text
        self.schema = dict(schema) if schema is not None else None
        self.options = options
        self.warnings: list[str] = []
        self.equivalences: list[str] = []  # attributes of [attr] conjuncts, as written

    def error(self, message: str, span: ast.Span | None = None) -> QueryError:
        return QueryError(message, self.text, self._relative(span))

    def _relative(self, span: ast.Span | None) -> ast.Span | None:
        return relative_span(self.query, span)

    def _source(self, span: ast.Span) -> str:
        """The text of the query where `span` points."""
        rel = self._relative(span)
        if rel is None or rel.line <= 0:
            return ""
        lines = self.text.splitlines(keepends=True)
        start = sum(len(x) for x in lines[: rel.line - 1]) + rel.column - 1
        end = sum(len(x) for x in lines[: rel.end_line - 1]) + rel.end_column - 1
        return self.text[start:end]

    # ---- driver
    def run(self) -> Plan:
        q = self.query
        if q.episode is not None:
            return self._episode_plan()
        self._check_aggregate_clauses()
        self._check_columns_exist()
        comps = self._components()
        self.comps = {c.var: c for c in comps}
        self.positive_vars = [c.var for c in comps if not c.negated]
        strategy, where = self._strategy()
        window = self._window(comps)
        tiebreak = self._tiebreak()
        conjs = self._expand(where) + self._group_equalities()
        for expr in conjs:
            self._check_expr(expr, allow_var=False)
            kind = self._type(expr)
            if kind not in ("bool", "unknown"):
                raise self.error(
                    f"a condition must be true or false, but this is a {kind}", expr.span
                )
        # GROUP BY partitions the stream by definition, whatever the equalities say.
        key = tuple(dict.fromkeys([*q.group_by, *self._key(conjs, comps)]))
        local: dict[str, list[ast.Expr]] = {c.var: [] for c in comps}
        conditions: list[Condition] = []
        negation_conds: dict[str, list[ast.Expr]] = {c.var: [] for c in comps if c.negated}
        key_conditions: list[ast.Expr] = []
        for expr in conjs:
            if _key_equality(expr, key):
                # Implied by partitioning on the key (rows with a null key are dropped).
                key_conditions.append(expr)
            else:
                self._place_conjunct(expr, local, conditions, negation_conds)
        comps = [PlanComponent(**{**c.__dict__, "local": tuple(local[c.var])}) for c in comps]
        negations = tuple(
            NegationCheck(c, tuple(negation_conds[c.var]), self._negation_stage(c, negation_conds))
            for c in comps
            if c.negated
        )
        self._check_edge_negations(negations, window)
        returns = self._returns()
        spec = self._aggregate_spec() or self._funnel_spec()
        window, spec = self._event_set_clauses(window, spec, strategy)
        spec = self._ayac_spec(comps, window, strategy) or spec
        spec = self._interval_spec(spec, window)
        if window is None:
            self.warnings.append(
                "the query has no WITHIN window: state is not bounded, and without a key "
                "the whole input is matched in one partition"
            )
        return Plan(
            query=q,
            options=self.options,
            components=tuple(comps),
            conditions=tuple(conditions),
            negations=negations,
            key=key,
            key_conditions=tuple(key_conditions),
            window=window,
            strategy=strategy,
            tiebreak=tiebreak,
            returns=returns,
            time_kind=self._time_kind(),
            schema=dict(self.schema or {}),
            warnings=tuple(self.warnings),
            spec=spec,
            **self._extension_fields(),
        )

    def _check_edge_negations(self, negations, window):
        for n in negations:
            if n.gap in (0, len(self.positive_vars)) and window is None:
                where_ = "start" if n.gap == 0 else "end"
                raise self.error(
                    f"a negation at the {where_} of the pattern needs a WITHIN window "
                    f"(it forbids events within the window before the first or after the "
                    f"last event)",
                    n.component.span,
                )

    # ---- pieces
    def _check_columns_exist(self):
        if self.schema is None:
            return
        opts = self.options
        # all ANY, or symbols from SYMBOL: no type column needed
        type_col = opts.type_col if names_types(self.query) else None
        for role, col in (("time", opts.time_col), ("type", type_col), ("id", opts.id_col)):
            if col is not None and col not in self.schema:
                raise QueryError(missing_column(role, col, self.schema))

    def _components(self) -> list[PlanComponent]:
        seen: set[str] = set()
        out: list[PlanComponent] = []
        positives = 0
        for i, c in enumerate(self.query.components):
            if c.var in seen:
                raise self.error(f"variable '{c.var}' is used twice", c.span)
            seen.add(c.var)
            out.append(
                PlanComponent(
                    index=i,
                    var=c.var,
                    event_type=c.event_type,
                    negated=c.negated,
                    kleene=c.kleene,
                    pos=None if c.negated else positives,
                    gap=positives if c.negated else None,
                    span=c.span,
                )
            )
            positives += not c.negated
        if positives == 0:
            raise self.error(
                "a pattern needs at least one positive (not negated) component",
                self.query.components[0].span,
            )
        if len(out) > 62:
            raise self.error("a pattern may have at most 62 components", self.query.span)
        return out

    def _strategy(self) -> tuple[str, ast.Expr | None]:
        """STRATEGY clause, or SASE's skip_till_any_match(a, b, c) written in WHERE."""
        q = self.query
        strategy, span = q.strategy, q.strategy_span
        if strategy is not None:
            strategy = strategy.upper()
            if strategy not in STRATEGIES:
                raise self.error(
                    f"unknown strategy '{q.strategy}' (use {', '.join(STRATEGIES)})", span
                )
        kept = []
        for expr in ast.conjuncts(q.where):
            if isinstance(expr, ast.Call) and expr.name.upper() in STRATEGIES:
                named = expr.name.upper()
                if strategy is not None and strategy != named:
                    raise self.error(
                        f"the strategy is given twice: {strategy} and {named}", expr.span
                    )
                strategy = named
            else:
                kept.append(expr)
        where = None
        for expr in kept:
            where = expr if where is None else ast.BinOp("and", where, expr, span=expr.span)
        return strategy or "SKIP_TILL_ANY_MATCH", where

    def _time_kind(self) -> Kind:
        if self.schema is None:
            return "unknown"
        return self.schema[self.options.time_col]

    def _window(self, comps) -> int | None:
        within = self.query.within
        if within is None:
            return None
        if within.amount <= 0:
            raise self.error("the window must be longer than zero", within.span)
        kind = self._time_kind()
        unit = self.options.time_unit
        if unit is not None and unit not in TIME_UNITS:
            raise QueryError(f"unknown time unit '{unit}' (use {', '.join(TIME_UNITS)})")
        if kind == "timestamp":
            if within.unit is None:
                raise self.error(
                    f"the time column '{self.options.time_col}' holds timestamps: give the "
                    f"window a unit, e.g. WITHIN {_number_text(within.amount)} s",
                    within.span,
                )
            return window_ticks(within.amount, within.unit, "us")
        if kind in ("int", "unknown"):
            if within.unit is not None and unit is None:
                if kind == "unknown":
                    return window_ticks(within.amount, within.unit, "s")
                raise self.error(
                    f"the time column '{self.options.time_col}' holds plain integers: give "
                    f"their unit (--time-unit ms|s|us|ns, or time_unit=...) or write the "
                    f"window as a bare number",
                    within.span,
                )
            return window_ticks(within.amount, within.unit, unit)
        raise QueryError(
            f"the time column '{self.options.time_col}' holds {kind} values; it must hold "
            f"integers or timestamps"
        )

    def _tiebreak(self) -> str | None:
        q = self.query
        tiebreak = self.options.tiebreak
        if q.order_by:
            if q.order_by[0] != self.options.time_col:
                raise self.error(
                    f"ORDER BY must start with the time column '{self.options.time_col}' "
                    f"(ORDER BY {self.options.time_col}, col orders equal times by col)",
                    q.order_span,
                )
            if len(q.order_by) > 2:
                raise self.error("ORDER BY takes the time column and one more", q.order_span)
            if len(q.order_by) == 2:
                if tiebreak is not None and tiebreak != q.order_by[1]:
                    raise self.error(
                        f"ORDER BY says '{q.order_by[1]}' but --tiebreak says '{tiebreak}'",
                        q.order_span,
                    )
                tiebreak = q.order_by[1]
        if tiebreak is not None and self.schema is not None and tiebreak not in self.schema:
            raise self.error(f"the tie-break column '{tiebreak}' is not in the input", q.order_span)
        return tiebreak

    def _expand(self, where: ast.Expr | None) -> list[ast.Expr]:
        """Top-level conjuncts, with [attr] written out as equalities over all components."""
        out: list[ast.Expr] = []
        for expr in ast.conjuncts(where):
            if isinstance(expr, ast.Equivalence):
                # Every component shares attr, which also makes it a key attribute (even for
                # a single component, whose Kleene elements must then share it too).
                self.equivalences.append(expr.attr)
                first = self.comps[self.positive_vars[0]]
                # checked here: one component gets no equality below to check it in
                self._check_attr(ast.AttrRef(first.var, expr.attr, span=expr.span))
                for other in self.comps.values():
                    if other is first:
                        continue
                    out.append(
                        ast.BinOp(
                            "=",
                            ast.AttrRef(first.var, expr.attr, span=expr.span),
                            ast.AttrRef(other.var, expr.attr, span=expr.span),
                            span=expr.span,
                        )
                    )
            else:
                for node in ast.walk(expr):
                    if isinstance(node, ast.Equivalence):
                        raise self.error(
                            "[attr] stands alone as a condition joined with AND", node.span
                        )
                out.append(expr)
        return out

    # ---- expression checks and types
    def _place_conjunct(self, expr, local, conditions, negation_conds):
        refs = self._refs(expr)
        names = refs.all
        negated = [v for v in names if self.comps[v].negated]
        for v in refs.aggregate & (refs.element | refs.prev):
            if self.comps[v].kleene:
                raise self.error(
                    f"this condition mixes elements of '{v}' ({v}.attr) with an aggregate "
                    f"over all of them; split it, or compare with prev() or an aggregate only",
                    expr.span,
                )
        if len(negated) > 1:
            raise self.error(
                f"a condition may mention one negated variable, and this one mentions "
                f"{' and '.join(sorted(negated))}",
                expr.span,
            )
        if negated:
            n = negated[0]
            others = names - {n}
            if not others:
                local[n].append(expr)
                return
            for v in others:
                if self.comps[v].kleene and v in refs.element:
                    raise self.error(
                        f"a negation condition can refer to the Kleene variable '{v}' only "
                        f"through an aggregate, e.g. max({v}.x)",
                        expr.span,
                    )
            negation_conds[n].append(expr)
            return
        if len(names) == 1 and not refs.prev and not refs.aggregate:
            (v,) = names
            local[v].append(expr)
            return
        if not names:
            # A condition on constants alone: false means no event can start a match.
            local[self.positive_vars[0]].append(expr)
            return
        latest = max(names, key=lambda v: self.comps[v].pos)
        comp = self.comps[latest]
        forall = frozenset(v for v in refs.element if self.comps[v].kleene and v != latest)
        if comp.kleene and latest in (refs.element | refs.prev):
            kind = "element"
        elif comp.kleene:
            kind = "closure"
        else:
            kind = "bind"
        conditions.append(
            Condition(expr, kind, comp.pos, frozenset(names), forall, bool(refs.prev))
        )

    def _negation_stage(self, comp: PlanComponent, negation_conds) -> int | None:
        """After which positive a middle negation can be checked; None: at the end."""
        k = len(self.positive_vars)
        if comp.gap in (0, k):
            return None
        stage = comp.gap
        for expr in negation_conds[comp.var]:
            refs = self._refs(expr)
            for v in refs.all - {comp.var}:
                pc = self.comps[v]
                if pc.kleene:
                    return None
                stage = max(stage, pc.pos)
        if self.comps[self.positive_vars[stage]].kleene and stage != comp.gap:
            return None
        return stage

    # ---- key
    def _key(self, conjs: list[ast.Expr], comps: list[PlanComponent]) -> tuple[str, ...]:
        """Key attributes: equalities tie every positive, and every negation to them."""
        equalities: list[tuple[str, str, str]] = []  # (attr, var, var)
        for expr in conjs:
            if (
                isinstance(expr, ast.BinOp)
                and expr.op == "="
                and isinstance(expr.left, ast.AttrRef)
                and isinstance(expr.right, ast.AttrRef)
                and expr.left.attr == expr.right.attr
                and expr.left.var != expr.right.var
            ):
                equalities.append((expr.left.attr, expr.left.var, expr.right.var))
        positives = [c.var for c in comps if not c.negated]
        negated = [c.var for c in comps if c.negated]
        key: list[str] = []
        written = [a for a, _, _ in equalities] + self.equivalences
        for attr in dict.fromkeys(written):
            if attr in self.equivalences:
                key.append(attr)
                continue
            edges = [(x, y) for a, x, y in equalities if a == attr]
            positive_edges = [(x, y) for x, y in edges if x in positives and y in positives]
            classes = _classes(positives, positive_edges)
            if len(set(classes.values())) != 1:
                continue
            everything = _classes(positives + negated, edges)
            anchor = everything[positives[0]]
            if all(everything[n] == anchor for n in negated):
                key.append(attr)
        return tuple(key)

    # ---- outputs
    def _returns(self) -> tuple[ReturnColumn, ...]:
        names = {"start", "end", *self.positive_vars}
        out: list[ReturnColumn] = []
        for item in self.query.returns:
            expr = item.expr
            if isinstance(expr, ast.VarRef) and item.alias is None:
                if expr.var not in self.comps:
                    raise self.error(f"unknown variable '{expr.var}'", expr.span)
                if self.comps[expr.var].negated:
                    raise self.error(f"'{expr.var}' is negated: no event is bound to it", expr.span)
                continue  # every positive variable's ids are in the output already
            self._check_expr(expr, allow_var=False)
            refs = self._refs(expr)
            for v in refs.all:
                if self.comps[v].negated:
                    raise self.error(f"'{v}' is negated: no event is bound to it", expr.span)
            if refs.prev:
                raise self.error("prev() cannot be returned, only used in WHERE", expr.span)
            kleene_elements = [v for v in refs.element if self.comps[v].kleene]
            if len(kleene_elements) > 1:
                raise self.error(
                    "a returned value may refer to the elements of one Kleene variable",
                    expr.span,
                )
            for v in refs.aggregate & refs.element:
                if self.comps[v].kleene:
                    raise self.error(
                        f"this value mixes elements of '{v}' with an aggregate of them",
                        expr.span,
                    )
            name = item.alias or _column_name(self._source(expr.span) or ast.to_text(expr))
            if name in names:
                raise self.error(
                    f"the output already has a column '{name}': name this one with AS",
                    item.span,
                )
            names.add(name)
            out.append(ReturnColumn(name, expr, self._type(expr), bool(kleene_elements)))
        return tuple(out)


def _classes(nodes: list[str], edges: list[tuple[str, str]]) -> dict[str, str]:
    """Connected components: node -> representative."""
    parent = {n: n for n in nodes}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for x, y in edges:
        if x in parent and y in parent:
            parent[find(x)] = find(y)
    return {n: find(n) for n in nodes}


def _key_equality(expr: ast.Expr, key: tuple[str, ...]) -> bool:
    return (
        isinstance(expr, ast.BinOp)
        and expr.op == "="
        and isinstance(expr.left, ast.AttrRef)
        and isinstance(expr.right, ast.AttrRef)
        and expr.left.attr == expr.right.attr
        and expr.left.attr in key
        and expr.left.var != expr.right.var
    )


def _column_name(text: str) -> str:
    """`count(b)` -> `count_b`: runs of non-word characters become one `_`, none at the ends."""
    return "_".join(part for part in re.split(r"\W+", text) if part) or "value"


def _number_text(amount: float) -> str:
    """A window's amount as written (1, 2.5), without float overflow for huge integers."""
    if isinstance(amount, int) or float(amount).is_integer():
        return str(int(amount))
    return f"{amount:g}"


def plan_queries(
    queries, schema: dict[str, Kind] | None, options: Options
) -> tuple[list[Plan], list[str | None]]:
    """Plans and names of queries given as a text (one query, or a file of named
    queries), a list of texts, or plans."""
    items = [queries] if isinstance(queries, str | Plan) else list(queries)
    if not items:
        raise QueryError("no query to run")
    plans: list[Plan] = []
    names: list[str | None] = []
    for item in items:
        if isinstance(item, Plan):
            plans.append(item)
            names.append(item.name)
            continue
        if is_match_recognize(item):  # SELECT ... MATCH_RECOGNIZE (docs/match_recognize.md)
            plans.append(_analyze_match_recognize(item, schema, options))
            names.append(None)
            continue
        for query in parse_file(item):
            plans.append(analyze(query, schema, options))
            names.append(query.name)
    seen: set[str] = set()
    for name in names:
        if name is not None and name in seen:
            raise QueryError(f"query name '{name}' is used twice")
        if name is not None:
            seen.add(name)
    return plans, names


def _analyze_match_recognize(text: str, schema, options: Options) -> Plan:
    """SELECT ... MATCH_RECOGNIZE (its modules are imported for such a query only)."""
    from sparkcep.plan.match_recognize import analyze_match_recognize

    return analyze_match_recognize(text, schema, options)


def uses_types(queries) -> bool:
    """Whether any component of the queries names an event type (else, when every one
    is ANY, or an episode rule's SYMBOL gives its vertices' symbols, the input needs no
    type column)."""
    items = [queries] if isinstance(queries, str | Plan) else list(queries)
    for item in items:
        if isinstance(item, str) and is_match_recognize(item):
            continue  # MATCH_RECOGNIZE reads rows, which have no type
        parsed = [item.query] if isinstance(item, Plan) else parse_file(item)
        if any(names_types(q) for q in parsed):
            return True
    return False


def names_types(query: ast.Query) -> bool:
    """Whether a query's components are event types (not ANY, and not an episode rule's
    vertices whose symbols SYMBOL computes)."""
    return query.symbol is None and any(c.event_type is not None for c in query.components)
