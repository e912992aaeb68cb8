"""Analysis: `ast.Query` + the input's schema -> `Plan`, the one description every engine runs.

The plan splits WHERE into conjuncts and files each one where an engine needs it:

- *local* conjuncts (one variable, element-wise) go into the component's filter, evaluated
  before the engine sees the event (in Spark, in the JVM);
- *bind* conjuncts are checked when their latest variable binds;
- *element* conjuncts are checked on each element of a Kleene variable;
- *closure* conjuncts (aggregates of a Kleene variable) when that variable is complete;
- *negation* conjuncts (they mention a negated variable) decide which events forbid a match.

It also derives the partition key (docs/semantics.md, "Partitions and the key"), the
window in ticks of the time column, and the output columns with their kinds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sparkcep.errors import QueryError
from sparkcep.language import ast
from sparkcep.language.parser import parse
from sparkcep.schema import NUMERIC, Kind, comparable, kind_of_value
from sparkcep.timeunits import TIME_UNITS, window_ticks

STRATEGIES = ("STRICT_CONTIGUITY", "SKIP_TILL_NEXT_MATCH", "SKIP_TILL_ANY_MATCH")
AGGREGATES = ("count", "sum", "avg", "min", "max", "first", "last")
SCALAR_FUNCTIONS = ("abs",)


@dataclass(frozen=True)
class Options:
    """How events are read: which columns hold time, type and id, and the time unit."""

    time_col: str = "ts"
    type_col: str = "type"
    id_col: str | None = None
    time_unit: str | None = None  # unit of an integer time column: ns, us, ms or s
    tiebreak: str | None = None  # --tiebreak col, same as ORDER BY ts, col


@dataclass(frozen=True)
class PlanComponent:
    index: int  # position in SEQ(...); also the component's bit in the event bitmask
    var: str
    event_type: str | None  # None = ANY
    negated: bool
    kleene: bool
    pos: int | None  # index among positive components
    gap: int | None  # for a negated component: 0 = before the first positive, k = after last
    local: tuple[ast.Expr, ...] = ()  # conjuncts on this component alone, element-wise
    span: ast.Span = field(default_factory=ast.Span.unknown, compare=False, repr=False)

    @property
    def bit(self) -> int:
        return 1 << self.index


@dataclass(frozen=True)
class Condition:
    """A conjunct that relates several variables, filed where an engine checks it."""

    expr: ast.Expr
    kind: str  # "bind" | "element" | "closure"
    stage: int  # index of the positive component at which it is checked
    variables: frozenset[str]
    forall: frozenset[str]  # earlier Kleene variables referenced element-wise (checked ∀)
    has_prev: bool = False


@dataclass(frozen=True)
class NegationCheck:
    component: PlanComponent
    conditions: tuple[ast.Expr, ...]  # conjuncts mentioning the negated variable, not local
    stage: int | None  # check right after this positive binds; None: on the complete match

    @property
    def gap(self) -> int:
        return self.component.gap  # type: ignore[return-value]


@dataclass(frozen=True)
class OutputColumn:
    name: str
    expr: ast.Expr
    kind: Kind
    is_list: bool  # a Kleene element reference: one value per element


@dataclass(frozen=True)
class AggItem:
    """One aggregate of AGG: count, or sum/avg/min/max of a positive variable's attribute."""

    name: str
    func: str  # count | sum | avg | min | max
    var: str | None = None
    attr: str | None = None
    kind: Kind = "int"


AGG_FUNCTIONS = ("count", "sum", "avg", "min", "max")


@dataclass(frozen=True)
class AggregateNeed:
    """A running aggregate an engine must carry for a Kleene variable."""

    var: str
    func: str
    attr: str | None


@dataclass(frozen=True)
class Plan:
    query: ast.Query
    options: Options
    components: tuple[PlanComponent, ...]
    conditions: tuple[Condition, ...]
    negations: tuple[NegationCheck, ...]
    key: tuple[str, ...]
    key_conditions: tuple[ast.Expr, ...]  # equalities the partitioning guarantees
    window: int | None  # exclusive, in ticks of the time column
    strategy: str
    tiebreak: str | None
    returns: tuple[OutputColumn, ...]
    running: tuple[AggregateNeed, ...]  # Kleene aggregates an engine carries
    time_kind: Kind
    schema: dict[str, Kind] = field(default_factory=dict, compare=False)
    warnings: tuple[str, ...] = ()
    group_by: tuple[str, ...] = ()
    agg: tuple[AggItem, ...] = ()  # AGG items; empty for a pattern query
    agg_path: str | None = None  # "counters" (A-Seq) or "enumeration" (nfa + aggregation)
    agg_reason: str = ""

    @property
    def is_aggregate(self) -> bool:
        return bool(self.agg)

    @property
    def positives(self) -> tuple[PlanComponent, ...]:
        return tuple(c for c in self.components if not c.negated)

    @property
    def negated(self) -> tuple[PlanComponent, ...]:
        return tuple(c for c in self.components if c.negated)

    @property
    def engine(self) -> str:
        if not self.agg:
            return "nfa"
        return "aseq" if self.agg_path == "counters" else "nfa + aggregation"

    @property
    def has_trailing_negation(self) -> bool:
        return any(n.gap == len(self.positives) for n in self.negations)

    @property
    def text(self) -> str:
        return self.query.text

    def component(self, var: str) -> PlanComponent:
        for c in self.components:
            if c.var == var:
                return c
        raise KeyError(var)

    def engine_attributes(self) -> tuple[str, ...]:
        """Attribute columns the engine reads (local conjuncts are evaluated before it)."""
        names: list[str] = []
        exprs = [c.expr for c in self.conditions]
        exprs += [e for n in self.negations for e in n.conditions]
        exprs += [r.expr for r in self.returns]
        for expr in exprs:
            for node in ast.walk(expr):
                if isinstance(node, ast.AttrRef) and node.attr not in names:
                    names.append(node.attr)
        for item in self.agg:
            if item.attr is not None and item.attr not in names:
                names.append(item.attr)
        for name in self.key:
            if name not in names:
                names.append(name)
        return tuple(names)

    def output_columns(self) -> list[tuple[str, Kind, bool]]:
        """(name, kind, is_list) of every output column; ids have kind 'id'."""
        if self.agg:
            cols = [("ts", self.time_kind, False)]
            cols += [(g, self.schema.get(g, "unknown"), False) for g in self.group_by]
            return cols + [(a.name, a.kind, False) for a in self.agg]
        cols: list[tuple[str, Kind, bool]] = [
            ("start", self.time_kind, False),
            ("end", self.time_kind, False),
        ]
        cols += [(k, self.schema.get(k, "unknown"), False) for k in self.key]
        cols += [(c.var, "id", c.kleene) for c in self.positives]  # type: ignore[misc]
        cols += [(r.name, r.kind, r.is_list) for r in self.returns]
        return cols


# ---- analysis ------------------------------------------------------------------------


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
    if isinstance(query, str):
        query = parse(query)
    return _Analyzer(query, schema, options or Options()).run()


@dataclass
class _Refs:
    """How a conjunct refers to variables."""

    element: set[str] = field(default_factory=set)  # v.attr outside aggregates
    prev: set[str] = field(default_factory=set)  # prev(v.attr)
    aggregate: set[str] = field(default_factory=set)  # agg(v.attr), count(v)

    @property
    def all(self) -> set[str]:
        return self.element | self.prev | self.aggregate


class _Analyzer:
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
        # Spans are positions in the whole file; error text is this query's text.
        if span is None or span.line <= 0 or self.query.span.line <= 0:
            return span
        q = self.query.span
        shift_line = q.line - 1

        def col(line: int, column: int) -> int:
            return column - (q.column - 1) if line == q.line else column

        return ast.Span(
            span.line - shift_line,
            col(span.line, span.column),
            span.end_line - shift_line,
            col(span.end_line, span.end_column),
        )

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
        if q.group_by and not q.aggregates:
            raise self.error(
                "GROUP BY needs an AGG clause (AGG COUNT, SUM(v.x), ...)", q.group_span
            )
        if q.aggregates and q.returns:
            raise self.error(
                "a query has either AGG (aggregates over matches) or RETURN (one row per "
                "match), not both",
                q.returns[0].span,
            )
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
                self._file(expr, local, conditions, negation_conds)
        comps = [PlanComponent(**{**c.__dict__, "local": tuple(local[c.var])}) for c in comps]
        negations = tuple(
            NegationCheck(c, tuple(negation_conds[c.var]), self._negation_stage(c, negation_conds))
            for c in comps
            if c.negated
        )
        for n in negations:
            if n.gap in (0, len(self.positive_vars)) and window is None:
                where_ = "start" if n.gap == 0 else "end"
                raise self.error(
                    f"a negation at the {where_} of the pattern needs a WITHIN window "
                    f"(it forbids events within the window before the first or after the "
                    f"last event)",
                    n.component.span,
                )
        returns = self._returns()
        running = self._aggregates_needed(conditions, negations, returns)
        agg = self._agg_items()
        agg_path, agg_reason = self._agg_path(agg, comps, conditions, negations, strategy)
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
            running=running,
            time_kind=self._time_kind(),
            schema=dict(self.schema or {}),
            warnings=tuple(self.warnings),
            group_by=q.group_by,
            agg=agg,
            agg_path=agg_path,
            agg_reason=agg_reason,
        )

    # ---- pieces
    def _check_columns_exist(self):
        if self.schema is None:
            return
        opts = self.options
        for role, col in (("time", opts.time_col), ("type", opts.type_col), ("id", opts.id_col)):
            if col is not None and col not in self.schema:
                raise QueryError(
                    f"the {role} column '{col}' is not in the input "
                    f"(columns: {', '.join(self.schema)})"
                )

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
    def _check_expr(self, expr: ast.Expr, allow_var: bool, inside_agg: bool = False):
        for node in self._children_first(expr):
            if isinstance(node, ast.AttrRef):
                self._check_attr(node)
            elif isinstance(node, ast.VarRef):
                if node.var not in self.comps:
                    raise self.error(f"unknown variable '{node.var}'", node.span)
                if not allow_var:
                    raise self.error(
                        f"'{node.var}' is an event, not a value: write {node.var}.attribute",
                        node.span,
                    )
            elif isinstance(node, ast.Call):
                self._check_call(node)

    def _children_first(self, expr):
        """Walk, but do not descend into calls (their arguments are checked by _check_call)."""
        yield expr
        if isinstance(expr, ast.BinOp):
            yield from self._children_first(expr.left)
            yield from self._children_first(expr.right)
        elif isinstance(expr, ast.Not | ast.Negate):
            yield from self._children_first(expr.operand)
        elif isinstance(expr, ast.InList):
            yield from self._children_first(expr.operand)
            kinds = {kind_of_value(v.value) for v in expr.values}
            kinds = {"float" if k == "int" else k for k in kinds}
            if len(kinds) > 1:
                raise self.error("the values of an IN list must have one type", expr.span)

    def _check_attr(self, node: ast.AttrRef):
        if node.var not in self.comps:
            known = ", ".join(self.comps)
            raise self.error(f"unknown variable '{node.var}' (the pattern has {known})", node.span)
        if self.schema is not None and node.attr not in self.schema:
            raise self.error(
                f"'{node.attr}' is not a column of the input (columns: {', '.join(self.schema)})",
                node.span,
            )

    def _check_call(self, node: ast.Call):
        name = node.name
        if name == "prev":
            if len(node.args) != 1 or not isinstance(node.args[0], ast.AttrRef):
                raise self.error("prev() takes one attribute: prev(b.price)", node.span)
            arg = node.args[0]
            self._check_attr(arg)
            if not self.comps[arg.var].kleene:
                raise self.error(
                    f"prev() refers to the previous element of a Kleene variable, and "
                    f"'{arg.var}' is not one (write its type with '+')",
                    node.span,
                )
        elif name in AGGREGATES:
            if len(node.args) != 1:
                raise self.error(f"{name}() takes one argument: {name}(b.price)", node.span)
            arg = node.args[0]
            if isinstance(arg, ast.VarRef) and name == "count":
                if arg.var not in self.comps:
                    raise self.error(f"unknown variable '{arg.var}'", arg.span)
            elif isinstance(arg, ast.AttrRef):
                self._check_attr(arg)
            else:
                raise self.error(
                    f"{name}() takes an attribute of a variable, e.g. {name}(b.price)", arg.span
                )
        elif name in SCALAR_FUNCTIONS:
            if len(node.args) != 1:
                raise self.error(f"{name}() takes one argument", node.span)
            self._check_expr(node.args[0], allow_var=False)
        elif name.upper() in STRATEGIES:
            raise self.error(
                f"{name}(...) selects the strategy: write it as a condition of its own "
                f"joined with AND, or use STRATEGY {name.upper()}",
                node.span,
            )
        else:
            known = ", ".join(("prev", *AGGREGATES, *SCALAR_FUNCTIONS))
            raise self.error(f"unknown function '{name}' (known: {known})", node.span)

    def _attr_kind(self, attr: str) -> Kind:
        if self.schema is None:
            return "unknown"
        return self.schema.get(attr, "unknown")

    def _type(self, expr: ast.Expr) -> Kind:
        """The kind of an expression's value; raises on a type mismatch."""
        if isinstance(expr, ast.Literal):
            return kind_of_value(expr.value)
        if isinstance(expr, ast.AttrRef):
            return self._attr_kind(expr.attr)
        if isinstance(expr, ast.VarRef):
            return "unknown"
        if isinstance(expr, ast.Call):
            if expr.name == "count":
                return "int"
            arg_kind = self._type(expr.args[0])
            if expr.name in ("sum", "avg", "abs") and arg_kind not in (*NUMERIC, "unknown"):
                raise self.error(f"{expr.name}() needs numbers, not {arg_kind}", expr.span)
            if expr.name == "avg":
                return "float"
            return arg_kind
        if isinstance(expr, ast.Negate):
            kind = self._type(expr.operand)
            if kind not in (*NUMERIC, "unknown"):
                raise self.error(f"cannot negate a {kind}", expr.span)
            return kind
        if isinstance(expr, ast.Not):
            kind = self._type(expr.operand)
            if kind not in ("bool", "unknown"):
                raise self.error(f"NOT needs a condition, not a {kind}", expr.span)
            return "bool"
        if isinstance(expr, ast.InList):
            kind = self._type(expr.operand)
            value_kind = kind_of_value(expr.values[0].value)
            if not comparable(kind, value_kind):
                raise self.error(
                    f"cannot compare {_a(kind)} with a list of {value_kind} values", expr.span
                )
            return "bool"
        if isinstance(expr, ast.BinOp):
            left, right = self._type(expr.left), self._type(expr.right)
            if expr.op in ast.LOGIC:
                for side, kind in ((expr.left, left), (expr.right, right)):
                    if kind not in ("bool", "unknown"):
                        raise self.error(
                            f"{expr.op.upper()} joins conditions, and this is a {kind}",
                            side.span,
                        )
                return "bool"
            if expr.op in ast.COMPARISONS:
                if not comparable(left, right):
                    raise self.error(
                        f"cannot compare {_a(left)} with {_a(right)}: "
                        f"{ast.to_text(expr.left)} {expr.op} {ast.to_text(expr.right)}",
                        expr.span,
                    )
                return "bool"
            for side, kind in ((expr.left, left), (expr.right, right)):
                if kind not in (*NUMERIC, "unknown"):
                    raise self.error(
                        f"arithmetic '{expr.op}' needs numbers, and this is a {kind}", side.span
                    )
            if expr.op == "/" or "float" in (left, right):
                return "float"
            if "unknown" in (left, right):
                return "unknown"
            return "int"
        raise self.error("unsupported expression", expr.span)

    def _refs(self, expr: ast.Expr) -> _Refs:
        refs = _Refs()

        def visit(node, in_call: str | None):
            if isinstance(node, ast.AttrRef | ast.VarRef):
                if in_call == "prev":
                    refs.prev.add(node.var)
                elif in_call in AGGREGATES:
                    refs.aggregate.add(node.var)
                else:
                    refs.element.add(node.var)
            elif isinstance(node, ast.Call):
                inner = node.name if node.name in ("prev", *AGGREGATES) else in_call
                for arg in node.args:
                    visit(arg, inner)
            elif isinstance(node, ast.BinOp):
                visit(node.left, in_call)
                visit(node.right, in_call)
            elif isinstance(node, ast.Not | ast.Negate | ast.InList):
                visit(node.operand, in_call)

        visit(expr, None)
        return refs

    # ---- filing conjuncts
    def _file(self, expr, local, conditions, negation_conds):
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
    def _returns(self) -> tuple[OutputColumn, ...]:
        names = {"start", "end", *self.positive_vars}
        out: list[OutputColumn] = []
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
            out.append(OutputColumn(name, expr, self._type(expr), bool(kleene_elements)))
        return tuple(out)

    # ---- aggregation
    def _group_equalities(self) -> list[ast.Expr]:
        """GROUP BY g partitions the stream by g: every event of a match shares it."""
        q = self.query
        out = []
        for attr in q.group_by:
            if self.schema is not None and attr not in self.schema:
                raise self.error(
                    f"GROUP BY '{attr}' is not a column of the input (columns: "
                    f"{', '.join(self.schema)})",
                    q.group_span,
                )
            out += self._expand(ast.Equivalence(attr, span=q.group_span))
        return out

    def _agg_items(self) -> tuple[AggItem, ...]:
        items: list[AggItem] = []
        for item in self.query.aggregates:
            expr = item.expr
            if isinstance(expr, ast.VarRef) and expr.var.lower() == "count":
                func, var, attr = "count", None, None
            elif isinstance(expr, ast.Call) and expr.name in AGG_FUNCTIONS and len(expr.args) == 1:
                func = expr.name
                arg = expr.args[0]
                if func == "count" and isinstance(arg, ast.VarRef | ast.AttrRef):
                    var, attr = None, None
                elif isinstance(arg, ast.AttrRef):
                    self._check_attr(arg)
                    var, attr = arg.var, arg.attr
                else:
                    raise self.error(
                        f"{func.upper()} takes an attribute, e.g. {func.upper()}(c.price)",
                        expr.span,
                    )
            else:
                raise self.error(
                    "AGG takes COUNT, SUM(v.attr), AVG(v.attr), MIN(v.attr) or MAX(v.attr)",
                    expr.span,
                )
            kind: Kind = "int"
            if var is not None:
                comp = self.comps[var]
                if comp.negated:
                    raise self.error(f"'{var}' is negated: no event is bound to it", expr.span)
                if comp.kleene:
                    raise self.error(
                        f"{func.upper()} over the Kleene variable '{var}' is not supported; "
                        "aggregate a singleton variable",
                        expr.span,
                    )
                attr_kind = self._attr_kind(attr)
                if func in ("sum", "avg") and attr_kind not in (*NUMERIC, "unknown"):
                    raise self.error(f"{func.upper()} needs numbers, not {attr_kind}", expr.span)
                kind = "float" if func == "avg" else attr_kind
            name = item.alias or func
            if any(i.name == name for i in items) or name in ("ts", *self.query.group_by):
                raise self.error(
                    f"the output already has a column '{name}': name this one with AS", item.span
                )
            items.append(AggItem(name, func, var, attr, kind))
        return tuple(items)

    def _agg_path(self, agg, comps, conditions, negations, strategy) -> tuple[str | None, str]:
        """Can A-Seq's prefix counters answer the query, and if not, why."""
        if not agg:
            return None, ""
        k = len(self.positive_vars)
        reasons = []
        if strategy != "SKIP_TILL_ANY_MATCH":
            reasons.append(f"the strategy is {strategy} (counters count every combination)")
        if any(c.kleene for c in comps):
            reasons.append("a Kleene closure")
        if any(n.gap in (0, k) for n in negations):
            reasons.append("a negation at the start or the end")
        if any(n.conditions for n in negations):
            reasons.append("a negation condition that refers to other variables")
        if conditions:
            cross = ", ".join(ast.to_text(c.expr) for c in conditions)
            reasons.append(f"conditions across variables other than equality keys ({cross})")
        if reasons:
            return (
                "enumeration",
                "matches are enumerated by nfa, then aggregated, because of " + "; ".join(reasons),
            )
        return "counters", "A-Seq prefix counters: no match is built"

    def _aggregates_needed(self, conditions, negations, returns) -> tuple[AggregateNeed, ...]:
        exprs = [c.expr for c in conditions]
        exprs += [e for n in negations for e in n.conditions]
        exprs += [r.expr for r in returns]
        needs: list[AggregateNeed] = []
        for expr in exprs:
            for node in ast.walk(expr):
                if isinstance(node, ast.Call) and node.name in AGGREGATES:
                    arg = node.args[0]
                    attr = arg.attr if isinstance(arg, ast.AttrRef) else None
                    need = AggregateNeed(arg.var, node.name, attr)  # type: ignore[union-attr]
                    if need not in needs:
                        needs.append(need)
        return tuple(needs)


def _a(kind: str) -> str:
    return ("an " if kind[0] in "aeiou" else "a ") + kind


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
