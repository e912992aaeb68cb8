"""MATCH_RECOGNIZE queries -> `Plan` with a `MatchRecognizeSpec` (docs/match_recognize.md).

What the runners need comes out as in any plan: the partition key (PARTITION BY), the time
column and tie-break (ORDER BY), the window (WITHIN). The rest — pattern, DEFINE,
MEASURES, SUBSET, rows per match, skip — is the spec the `match_recognize` engine reads.

The standard's restrictions are checked here, each with the line and column of what they
point at: variables and columns exist, navigation (PREV/NEXT/FIRST/LAST) and aggregates
refer to one variable, logical navigation only inside physical, no navigation inside an
aggregate, FINAL only in MEASURES, no exclusion with WITH UNMATCHED ROWS, and the like.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sparkcep.errors import QueryError, missing_column
from sparkcep.inputs import ORDER_COL
from sparkcep.language import ast
from sparkcep.language import match_recognize as mr
from sparkcep.language.forms import is_match_recognize

__all__ = ["MatchRecognizeSpec", "analyze_match_recognize", "is_match_recognize", "query_options"]
from sparkcep.plan.model import Options, Plan
from sparkcep.schema import NUMERIC, Kind, comparable, kind_of_value
from sparkcep.timeunits import TIME_UNITS, window_ticks

MAX_PROGRAM = 20_000  # instructions of the compiled pattern ({n,m} bounds are unrolled)


@dataclass(frozen=True)
class MrMeasure:
    name: str
    expr: ast.Expr
    kind: Kind
    like: str | None = None  # the input column whose type it has (a bare navigation)


@dataclass(frozen=True)
class MrColumn:
    """One output column: where its values come from (partition | order | measure | input)."""

    name: str
    source: str
    ref: str  # the input column, or the measure's name
    kind: Kind = "unknown"
    like: str | None = None


@dataclass(frozen=True)
class MatchRecognizeSpec:
    """What a MATCH_RECOGNIZE query adds to the plan; the engine compiles it."""

    query: mr.MrQuery
    variables: tuple[str, ...]  # primary pattern variables, in order of appearance
    subsets: dict[str, tuple[str, ...]]
    defines: dict[str, ast.Expr]
    measures: tuple[MrMeasure, ...]
    partition: tuple[str, ...]
    rows: str  # one | all
    empty: str  # show | omit | unmatched
    skip: mr.Skip
    output: tuple[MrColumn, ...]

    @property
    def pattern(self) -> mr.PatternNode:
        return self.query.pattern

    def members(self, var: str | None) -> frozenset[str] | None:
        """The primary variables a name stands for (None: every row of the match)."""
        if var is None:
            return None
        return frozenset(self.subsets.get(var, (var,)))


NO_ORDER_BY = (
    "no ORDER BY: rows are matched in the order of the input (a file's row order; a Spark "
    "DataFrame's as Spark gives it, which only an ORDER BY makes certain)"
)


def query_options(text, options: Options) -> Options:
    """The options a query text needs: for MATCH_RECOGNIZE, the time column and tie-break
    come from ORDER BY (without one, the input's row order: ORDER_COL, which the runners
    add) and rows have no type column; other texts keep `options`."""
    if not isinstance(text, str) or not is_match_recognize(text):
        return options
    query = mr.parse_match_recognize(text)
    order = query.order_by
    if not order:
        return replace(options, time_col=ORDER_COL, tiebreak=None, type_col=None)
    tiebreak = order[1].name if len(order) > 1 else options.tiebreak
    return replace(options, time_col=order[0].name, tiebreak=tiebreak, type_col=None)


def analyze_match_recognize(
    query: mr.MrQuery | str, schema: dict[str, Kind] | None, options: Options
) -> Plan:
    """Check a MATCH_RECOGNIZE query against the input's columns and build its plan.

    >>> plan = analyze_match_recognize('''SELECT * FROM t MATCH_RECOGNIZE (
    ...   PARTITION BY k ORDER BY ts MEASURES LAST(B.v) AS low
    ...   PATTERN (A B+) DEFINE B AS B.v < PREV(B.v)) WITHIN 10''', None, Options())
    >>> plan.key, plan.window, [c.name for c in plan.spec.output]
    (('k',), 10, ['k', 'low'])
    """
    if isinstance(query, str):
        query = mr.parse_match_recognize(query)
    return _MrAnalyzer(query, schema, options).run()


class _MrAnalyzer:
    def __init__(self, query: mr.MrQuery, schema: dict[str, Kind] | None, options: Options):
        self.q = query
        self.text = query.text
        self.schema = dict(schema) if schema is not None else None
        self.options = options
        self.warnings: list[str] = []

    def error(self, message: str, span: ast.Span | None = None) -> QueryError:
        return QueryError(message, self.text, span)

    # ---- driver
    def run(self) -> Plan:
        q = self.q
        self._check_columns_exist()
        time_col, tiebreak = self._order()
        for name, span in zip(q.partition_by, q.partition_spans):
            self._column(name, span)
        self.variables = tuple(mr.pattern_variables(q.pattern))
        self._check_pattern_size()
        self.subsets = self._subsets()
        self.defines = self._defines()
        measures = self._measures()
        self._check_skip()
        if q.rows == "all" and q.empty == "unmatched" and _has_exclusion(q.pattern):
            raise self.error(
                "a pattern exclusion {- ... -} cannot be used with ALL ROWS PER MATCH WITH "
                "UNMATCHED ROWS (the standard forbids it: an excluded row would be neither "
                "output nor unmatched)",
                _exclusion_span(q.pattern),
            )
        window = self._window()
        output = self._output(measures, time_col, tiebreak)
        if not output:
            raise self.error(
                "ONE ROW PER MATCH without PARTITION BY or MEASURES gives rows without columns: "
                "add MEASURES (e.g. MATCH_NUMBER() AS m)",
                q.span,
            )
        spec = MatchRecognizeSpec(
            query=q, variables=self.variables, subsets=self.subsets, defines=self.defines,
            measures=measures, partition=q.partition_by, rows=q.rows, empty=q.empty,
            skip=q.skip, output=output,
        )  # fmt: skip
        if not q.partition_by and (window is None or not rangeable(spec)):
            why = (
                ""
                if window is None
                else " (time ranges would not be exact: only with AFTER "
                "MATCH SKIP TO NEXT ROW and no MATCH_NUMBER, PREV, NEXT, ^ or $ does each "
                "row's match not depend on rows before its window)"
            )
            self.warnings.append(
                "no PARTITION BY: the whole input is one partition, matched in order by one "
                "worker" + why
            )
        return Plan(
            query=ast.Query(components=(), text=self.text, span=q.span),
            options=self.options,
            components=(),
            conditions=(),
            negations=(),
            key=q.partition_by,
            key_conditions=(),
            window=window,
            strategy="SKIP_TILL_ANY_MATCH",
            tiebreak=tiebreak,
            returns=(),
            time_kind=self._kind_of(time_col),
            schema=dict(self.schema or {}),
            warnings=tuple(self.warnings),
            spec=spec,
        )

    # ---- clauses
    def _check_columns_exist(self):
        if self.schema is None:
            return
        opts = self.options
        for role, col in (("time", opts.time_col), ("id", opts.id_col)):
            if col is not None and col != ORDER_COL and col not in self.schema:
                raise QueryError(missing_column(role, col, self.schema))

    def _column(self, name: str, span: ast.Span) -> Kind:
        if self.schema is not None and name not in self.schema:
            raise self.error(
                f"'{name}' is not a column of the input (columns: {', '.join(self.schema)})", span
            )
        return self._kind_of(name)

    def _kind_of(self, name: str) -> Kind:
        return "unknown" if self.schema is None else self.schema.get(name, "unknown")

    def _order(self) -> tuple[str, str | None]:
        q, opts = self.q, self.options
        if not q.order_by:
            if q.within is not None:
                raise self.error(
                    "WITHIN needs ORDER BY: the time column first (integers or timestamps), "
                    "then optionally one column that orders equal times",
                    q.within.span,
                )
            if opts.time_col != ORDER_COL:
                raise self.error(
                    f"no ORDER BY: rows are matched in input order, not by the time column "
                    f"'{opts.time_col}' of this run: add ORDER BY {opts.time_col}, or run the "
                    "query with sparkcep.match_recognize(_local) or 'sparkcep run', which take "
                    "the order from the query",
                    q.span,
                )
            self.warnings.append(NO_ORDER_BY)
            return ORDER_COL, None
        for item in q.order_by:
            if item.descending:
                raise self.error(
                    "ORDER BY ... DESC is not supported: rows are matched in time order",
                    item.span,
                )
            self._column(item.name, item.span)
        if len(q.order_by) > 2:
            raise self.error(
                "ORDER BY takes the time column and at most one more column (for equal times)",
                q.order_by[2].span,
            )
        first = q.order_by[0]
        if first.name != opts.time_col:
            raise self.error(
                f"ORDER BY {first.name}: the time column of this run is '{opts.time_col}'; "
                f"run the query with time_col='{first.name}' (--time {first.name}), as "
                "sparkcep.match_recognize and 'sparkcep run' do",
                first.span,
            )
        kind = self._kind_of(first.name)
        if kind not in ("int", "timestamp", "unknown"):
            raise self.error(
                f"ORDER BY {first.name}: the first ORDER BY column is the time, and it holds "
                f"{kind} values (integers or timestamps are needed)",
                first.span,
            )
        tiebreak = q.order_by[1].name if len(q.order_by) == 2 else opts.tiebreak
        if len(q.order_by) == 2 and opts.tiebreak not in (None, tiebreak):
            raise self.error(
                f"ORDER BY says '{tiebreak}' but --tiebreak says '{opts.tiebreak}'",
                q.order_by[1].span,
            )
        return first.name, tiebreak

    def _check_pattern_size(self):
        size = _program_size(self.q.pattern)
        if size > MAX_PROGRAM:
            raise self.error(
                f"the pattern compiles to {size:,} steps (quantifier bounds are unrolled); "
                f"keep it under {MAX_PROGRAM:,}",
                self.q.pattern.span,
            )

    def _subsets(self) -> dict[str, tuple[str, ...]]:
        out: dict[str, tuple[str, ...]] = {}
        for s in self.q.subsets:
            if s.name in self.variables:
                raise self.error(
                    f"SUBSET {s.name}: '{s.name}' is already a pattern variable", s.span
                )
            if s.name in out:
                raise self.error(f"SUBSET {s.name} is defined twice", s.span)
            for m in s.members:
                if m not in self.variables:
                    raise self.error(
                        f"SUBSET {s.name}: '{m}' is not a variable of the pattern "
                        f"({', '.join(self.variables) or 'none'})",
                        s.span,
                    )
            out[s.name] = tuple(dict.fromkeys(s.members))
        return out

    def _defines(self) -> dict[str, ast.Expr]:
        out: dict[str, ast.Expr] = {}
        for d in self.q.defines:
            if d.var in self.subsets:
                raise self.error(
                    f"DEFINE {d.var}: '{d.var}' is a SUBSET (a union of variables); DEFINE "
                    "defines primary pattern variables",
                    d.span,
                )
            if d.var not in self.variables:
                raise self.error(
                    f"DEFINE {d.var}: '{d.var}' does not appear in PATTERN "
                    f"({', '.join(self.variables) or 'no variables'})",
                    d.span,
                )
            if d.var in out:
                raise self.error(f"'{d.var}' is defined twice", d.span)
            kind = self._check(d.expr, "DEFINE")
            if kind not in ("bool", "unknown"):
                raise self.error(
                    f"DEFINE {d.var}: the condition must be true or false, but this is {_a(kind)}",
                    d.expr.span,
                )
            out[d.var] = d.expr
        return out

    def _measures(self) -> tuple[MrMeasure, ...]:
        out: list[MrMeasure] = []
        seen: set[str] = set()
        for m in self.q.measures:
            if m.name in seen:
                raise self.error(f"the measure '{m.name}' is defined twice", m.span)
            seen.add(m.name)
            kind = self._check(m.expr, "MEASURES")
            out.append(MrMeasure(m.name, m.expr, kind, _bare_column(m.expr)))
        return tuple(out)

    def _check_skip(self):
        skip = self.q.skip
        if skip.mode in ("first", "last"):
            known = (*self.variables, *self.subsets)
            if skip.var not in known:
                raise self.error(
                    f"AFTER MATCH SKIP TO {skip.mode.upper()} {skip.var}: '{skip.var}' is not "
                    f"a pattern variable or SUBSET ({', '.join(known) or 'none'})",
                    skip.span,
                )

    def _window(self) -> int | None:
        within = self.q.within
        if within is None:
            return None
        if within.amount <= 0:
            raise self.error("the window must be longer than zero", within.span)
        unit = self.options.time_unit
        if unit is not None and unit not in TIME_UNITS:
            raise QueryError(f"unknown time unit '{unit}' (use {', '.join(TIME_UNITS)})")
        kind = self._kind_of(self.options.time_col)
        if kind == "timestamp":
            if within.unit is None:
                raise self.error(
                    f"the time column '{self.options.time_col}' holds timestamps: give the "
                    "window a unit, e.g. WITHIN 10 s",
                    within.span,
                )
            return window_ticks(within.amount, within.unit, "us")
        if within.unit is not None and unit is None:
            if kind == "unknown":
                return window_ticks(within.amount, within.unit, "s")
            raise self.error(
                f"the time column '{self.options.time_col}' holds plain integers: give their "
                "unit (--time-unit ms|s|us|ns, or time_unit=...) or write the window as a bare "
                "number",
                within.span,
            )
        return window_ticks(within.amount, within.unit, unit)

    def _output(self, measures, time_col, tiebreak) -> tuple[MrColumn, ...]:
        q = self.q
        cols: list[MrColumn] = [MrColumn(p, "partition", p, like=p) for p in q.partition_by]
        if q.rows == "all":
            order = [c for c in (time_col, tiebreak) if c and c not in (*q.partition_by, ORDER_COL)]
            cols += [MrColumn(c, "order", c, like=c) for c in dict.fromkeys(order)]
        names = {c.name for c in cols}
        for m in measures:
            if m.name in names:
                raise self.error(
                    f"the output already has a column '{m.name}': give the measure another name",
                    next(x.span for x in q.measures if x.name == m.name),
                )
            names.add(m.name)
            cols.append(MrColumn(m.name, "measure", m.name, m.kind, m.like))
        if q.rows == "all":
            for c in self.schema or {}:
                if c not in names and c != ORDER_COL:
                    cols.append(MrColumn(c, "input", c, like=c))
                    names.add(c)
        if q.select is None:
            return tuple(cols)
        by_name = {c.name: c for c in cols}
        out: list[MrColumn] = []
        seen: set[str] = set()
        for item in q.select:
            if item.name not in by_name:
                if self.schema is None and q.rows == "all":
                    by_name[item.name] = MrColumn(item.name, "input", item.name, like=item.name)
                else:
                    raise self.error(
                        f"'{item.name}' is not an output column of MATCH_RECOGNIZE "
                        f"({', '.join(by_name)})",
                        item.span,
                    )
            name = item.alias or item.name
            if name in seen:
                raise self.error(f"the output already has a column '{name}'", item.span)
            seen.add(name)
            out.append(replace(by_name[item.name], name=name))
        return tuple(out)

    # ---- expressions
    def _check(self, expr: ast.Expr, clause: str) -> Kind:
        self._walk_check(expr, clause, inside=None)
        return self._type(expr)

    def _walk_check(self, expr: ast.Expr, clause: str, inside: str | None):
        """Names exist; navigation and aggregates nest as the standard allows."""
        if isinstance(expr, mr.Column):
            self._check_var(expr.var, expr.span)
            self._column(expr.name, expr.span)
            return
        if isinstance(expr, mr.Classifier):
            self._check_var(expr.var, expr.span)
            return
        if isinstance(expr, mr.MatchNumber):
            if inside in ("prev", "next", "first", "last"):
                raise self.error(
                    "MATCH_NUMBER() cannot be inside a navigation (it is the same on every row)",
                    expr.span,
                )
            return
        if isinstance(expr, mr.Nav):
            self._check_navigation(expr, clause, inside)
            return
        if isinstance(expr, mr.Agg):
            self._check_aggregate(expr, clause, inside)
            return
        for child in mr.children(expr):
            self._walk_check(child, clause, inside)

    def _check_var(self, var: str | None, span: ast.Span):
        if var is not None and var not in self.variables and var not in self.subsets:
            known = ", ".join((*self.variables, *self.subsets)) or "none"
            raise self.error(
                f"'{var}' is not a pattern variable or SUBSET (the query has {known})", span
            )

    def _check_navigation(self, nav: mr.Nav, clause: str, inside: str | None):
        name = nav.func.upper()
        if nav.running is False and clause == "DEFINE":
            raise self.error(
                "FINAL can only be used in MEASURES (DEFINE sees the match so far)", nav.span
            )
        if inside in ("count", "sum", "avg", "min", "max"):
            raise self.error(f"{name} cannot be used inside an aggregate", nav.span)
        if inside in ("first", "last"):
            raise self.error(
                f"{name} cannot be nested in FIRST or LAST (only FIRST/LAST in PREV/NEXT)",
                nav.span,
            )
        if inside in ("prev", "next") and nav.func in ("prev", "next"):
            raise self.error(f"{name} cannot be nested in PREV or NEXT", nav.span)
        inner_navs = [n for n in mr.walk(nav.arg) if isinstance(n, mr.Nav)]
        if inner_navs and (nav.func in ("first", "last") or inner_navs[0] is not nav.arg):
            raise self.error(
                "only FIRST or LAST may be nested in PREV or NEXT, as their whole argument, "
                "e.g. PREV(LAST(A.price), 2)",
                inner_navs[0].span,
            )
        self._walk_check(nav.arg, clause, nav.func)
        self._one_variable(nav.arg, f"{name}(...)", nav.span, need_reference=True)

    def _check_aggregate(self, agg: mr.Agg, clause: str, inside: str | None):
        name = agg.func.upper()
        if agg.running is False and clause == "DEFINE":
            raise self.error(
                "FINAL can only be used in MEASURES (DEFINE sees the match so far)", agg.span
            )
        if inside is not None:
            raise self.error(
                f"{name} cannot be used inside {inside.upper()} (aggregates do not nest, and "
                "navigation cannot contain one)",
                agg.span,
            )
        if agg.arg is None:
            self._check_var(agg.var, agg.span)
            return
        self._walk_check(agg.arg, clause, agg.func)
        self._one_variable(agg.arg, f"{name}(...)", agg.span, need_reference=False)

    def _one_variable(self, expr, what: str, span, need_reference: bool):
        refs = [n for n in mr.walk(expr) if isinstance(n, mr.Column | mr.Classifier)]
        if need_reference and not refs:
            raise self.error(
                f"{what} needs a column or CLASSIFIER() in its argument, e.g. LAST(A.price)",
                span,
            )
        variables = {r.var for r in refs}
        if len(variables) > 1:
            named = ", ".join(sorted(v or "every row" for v in variables))
            raise self.error(
                f"{what} must refer to one pattern variable (or SUBSET, or to every row with "
                f"unprefixed columns), and this refers to {named}",
                span,
            )

    def _type(self, expr: ast.Expr) -> Kind:
        if isinstance(expr, ast.Literal):
            return "unknown" if expr.value is None else kind_of_value(expr.value)
        if isinstance(expr, mr.Column):
            return self._kind_of(expr.name)
        if isinstance(expr, mr.Nav):
            return self._type(expr.arg)
        if isinstance(expr, mr.Agg):
            return self._aggregate_type(expr)
        if isinstance(expr, mr.Classifier):
            return "string"
        if isinstance(expr, mr.MatchNumber):
            return "int"
        if isinstance(expr, mr.IsNull):
            self._type(expr.operand)
            return "bool"
        return self._operator_type(expr)

    def _operator_type(self, expr: ast.Expr) -> Kind:
        if isinstance(expr, ast.Not):
            self._want(expr.operand, ("bool",), "NOT needs a condition")
            return "bool"
        if isinstance(expr, ast.Negate):
            return self._want(expr.operand, NUMERIC, "cannot negate")
        if isinstance(expr, ast.InList):
            kind = self._type(expr.operand)
            value_kind = kind_of_value(expr.values[0].value)
            if len({("float" if kind_of_value(v.value) == "int" else kind_of_value(v.value))
                    for v in expr.values}) > 1:  # fmt: skip
                raise self.error("the values of an IN list must have one type", expr.span)
            if not comparable(kind, value_kind):
                raise self.error(
                    f"cannot compare {_a(kind)} with a list of {value_kind} values", expr.span
                )
            return "bool"
        if isinstance(expr, ast.Call):
            kinds = [self._type(a) for a in expr.args]  # once each: nesting is not 2^depth
            if expr.name == "abs":
                if kinds[0] not in (*NUMERIC, "unknown"):
                    raise self.error(f"abs() needs a number {_a(kinds[0])}", expr.args[0].span)
                return kinds[0]
            known = [k for k in kinds if k != "unknown"]
            for k in known[1:]:
                if not comparable(known[0], k):
                    raise self.error("coalesce() takes values of one type", expr.span)
            return "float" if "float" in known else (known[0] if known else "unknown")
        if isinstance(expr, ast.BinOp):
            return self._binop_type(expr)
        raise self.error("unsupported expression", expr.span)

    def _aggregate_type(self, agg: mr.Agg) -> Kind:
        if agg.func == "count":
            if agg.arg is not None:
                self._type(agg.arg)
            return "int"
        kind = self._type(agg.arg)
        if agg.func in ("sum", "avg") and kind not in (*NUMERIC, "unknown"):
            raise self.error(f"{agg.func}() needs numbers, not {kind}", agg.span)
        if agg.func == "avg":
            return "float"
        return kind

    def _binop_type(self, expr: ast.BinOp) -> Kind:
        if expr.op in ast.LOGIC:
            for side in (expr.left, expr.right):
                self._want(side, ("bool",), f"{expr.op.upper()} joins conditions, and this is")
            return "bool"
        left, right = self._type(expr.left), self._type(expr.right)
        if expr.op in ast.COMPARISONS:
            if not comparable(left, right):
                raise self.error(
                    f"cannot compare {_a(left)} with {_a(right)}: "
                    f"{mr.expr_text(expr.left)} {expr.op} {mr.expr_text(expr.right)}",
                    expr.span,
                )
            return "bool"
        for side, kind in ((expr.left, left), (expr.right, right)):  # typed once: not 2^depth
            if kind not in (*NUMERIC, "unknown"):
                raise self.error(
                    f"arithmetic '{expr.op}' needs numbers, and this is {_a(kind)}", side.span
                )
        if expr.op == "/" or "float" in (left, right):
            return "float"
        if "unknown" in (left, right):
            return "unknown"
        return "int"

    def _want(self, expr: ast.Expr, kinds, message: str) -> Kind:
        kind = self._type(expr)
        if kind not in (*kinds, "unknown"):
            raise self.error(f"{message} {_a(kind)}", expr.span)
        return kind


def _a(kind: str) -> str:
    return ("an " if kind[0] in "aeiou" else "a ") + kind


def _bare_column(expr: ast.Expr) -> str | None:
    """The input column a measure returns unchanged (A.price, LAST(A.price), PREV(price))."""
    while isinstance(expr, mr.Nav):
        expr = expr.arg
    return expr.name if isinstance(expr, mr.Column) else None


def _has_exclusion(node) -> bool:
    return _exclusion_span(node) is not None


def _exclusion_span(node) -> ast.Span | None:
    if isinstance(node, mr.Exclude):
        return node.span
    if isinstance(node, mr.Concat | mr.Alt | mr.Permute):
        for item in node.items:
            span = _exclusion_span(item)
            if span is not None:
                return span
    if isinstance(node, mr.Quant):
        return _exclusion_span(node.node)
    return None


def _program_size(node) -> int:
    """Instructions the pattern compiles to (as the engine unrolls it)."""
    if isinstance(node, mr.PVar | mr.Anchor):
        return 1
    if isinstance(node, mr.Concat):
        return sum(_program_size(i) for i in node.items)
    if isinstance(node, mr.Alt):
        return sum(_program_size(i) + 2 for i in node.items)
    if isinstance(node, mr.Exclude):
        return _program_size(node.node) + 2
    if isinstance(node, mr.Permute):
        import math

        n = len(node.items)
        inner = sum(_program_size(i) for i in node.items)
        return math.factorial(n) * (inner + 2) if n < 10 else MAX_PROGRAM + 1
    if isinstance(node, mr.Quant):
        inner = _program_size(node.node) + 1
        copies = node.min + (1 if node.max is None else node.max - node.min)
        return max(1, copies) * inner + 1
    raise TypeError(node)


def rangeable(spec: MatchRecognizeSpec) -> bool:
    """Whether an unpartitioned query may be cut into time ranges that overlap by the
    window: only when each row starts its own attempt (AFTER MATCH SKIP TO NEXT ROW), so
    that no attempt depends on where an earlier match ended, and an attempt reads nothing
    a range may lack (no MATCH_NUMBER, PREV, NEXT, ^ or $)."""
    if spec.skip.mode != "next_row":
        return False
    exprs = [*spec.defines.values(), *(m.expr for m in spec.measures)]
    for expr in exprs:
        for node in mr.walk(expr):
            if isinstance(node, mr.MatchNumber) or (
                isinstance(node, mr.Nav) and node.func in ("prev", "next")
            ):
                return False
    return not _has_anchors(spec.pattern)


def _has_anchors(node) -> bool:
    if isinstance(node, mr.Anchor):
        return True
    if isinstance(node, mr.Concat | mr.Alt | mr.Permute):
        return any(_has_anchors(i) for i in node.items)
    if isinstance(node, mr.Quant | mr.Exclude):
        return _has_anchors(node.node)
    return False
