"""MATCH_RECOGNIZE text -> `MrQuery` dataclasses (grammar: `match_recognize.lark`).

The SQL form is told from the native language by its text: `SELECT ... MATCH_RECOGNIZE`
(`language.forms.is_match_recognize`). Syntax errors point at line and column, as the native parser's do.
What the clauses mean, and the standard's restrictions, are checked by
`sparkcep.plan.match_recognize`.

>>> q = parse_match_recognize('''SELECT * FROM trades MATCH_RECOGNIZE (
...   PARTITION BY stock_id ORDER BY time_ms
...   MEASURES LAST(b.price) AS bottom
...   PATTERN (a b+? c{2,})
...   DEFINE b AS b.price < PREV(b.price)
... ) WITHIN 10 s''')
>>> q.partition_by, q.order_by[0].name, q.rows, q.skip.mode, q.within.unit
(('stock_id',), 'time_ms', 'one', 'past_last', 's')
>>> pattern_text(q.pattern)
'A B+? C{2,}'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache, lru_cache
from importlib.resources import files

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedInput

from sparkcep.errors import QueryError
from sparkcep.language import ast
from sparkcep.language.parser import MAX_DEPTH as _MAX_DEPTH
from sparkcep.language.parser import (
    UNITS,
    _check_depth,
    _literal_number,
    _missing_paren,
    _offset_span,
    _span,
    _syntax_error,
    _tokens_before,
    _too_deep,
)
from sparkcep.language.parser import _number as _sized_number

# ---- row patterns ------------------------------------------------------------------------


@dataclass(frozen=True)
class PatternNode:
    span: ast.Span = field(
        compare=False, repr=False, kw_only=True, default_factory=ast.Span.unknown
    )


@dataclass(frozen=True)
class PVar(PatternNode):
    """A primary pattern variable: one row its DEFINE condition holds for."""

    name: str


@dataclass(frozen=True)
class Concat(PatternNode):
    items: tuple[PatternNode, ...]  # () is the empty pattern


@dataclass(frozen=True)
class Alt(PatternNode):
    items: tuple[PatternNode, ...]  # the leftmost that matches is preferred


@dataclass(frozen=True)
class Quant(PatternNode):
    node: PatternNode
    min: int
    max: int | None  # None: unbounded
    greedy: bool = True


@dataclass(frozen=True)
class Anchor(PatternNode):
    kind: str  # "^" partition start, "$" partition end


@dataclass(frozen=True)
class Exclude(PatternNode):
    node: PatternNode  # matched as a group; its rows are left out of ALL ROWS PER MATCH


@dataclass(frozen=True)
class Permute(PatternNode):
    items: tuple[PatternNode, ...]


def pattern_text(node: PatternNode) -> str:
    """A pattern as it would be written: it parses back to the same pattern (a group
    keeps its parentheses inside a concatenation, an alternation or a quantifier).

    >>> q = parse_match_recognize("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts "
    ...     "PATTERN (ADM Z*? (CRP Z*? LAC | LAC Z*? CRP) Z*? REL) DEFINE ADM AS true)")
    >>> pattern_text(q.pattern)
    'ADM Z*? (CRP Z*? LAC | LAC Z*? CRP) Z*? REL'
    """
    if isinstance(node, PVar):
        return node.name
    if isinstance(node, Anchor):
        return node.kind
    if isinstance(node, Concat):
        return " ".join(_grouped(i, Concat | Alt) for i in node.items) if node.items else "()"
    if isinstance(node, Alt):
        return " | ".join(_grouped(i, Alt) for i in node.items)
    if isinstance(node, Exclude):
        return "{- " + pattern_text(node.node) + " -}"
    if isinstance(node, Permute):
        return "PERMUTE(" + ", ".join(pattern_text(i) for i in node.items) + ")"
    if isinstance(node, Quant):
        return _grouped(node.node, Concat | Alt | Quant) + _quantifier_text(node)
    raise TypeError(node)


def _grouped(node: PatternNode, kinds) -> str:
    """A part of a larger pattern, in parentheses when it is of `kinds` (those that would
    otherwise merge into the larger one or bind differently)."""
    text = pattern_text(node)
    return f"({text})" if isinstance(node, kinds) and text != "()" else text


def _quantifier_text(q: Quant) -> str:
    known = {(0, None): "*", (1, None): "+", (0, 1): "?"}
    text = known.get((q.min, q.max))
    if text is None:
        if q.max == q.min:
            text = f"{{{q.min}}}"
        else:
            text = f"{{{q.min},{'' if q.max is None else q.max}}}"
    return text + ("" if q.greedy else "?")


def pattern_variables(node: PatternNode) -> list[str]:
    """Primary variables in order of first appearance."""
    out: list[str] = []

    def visit(n):
        if isinstance(n, PVar):
            if n.name not in out:
                out.append(n.name)
        elif isinstance(n, Concat | Alt | Permute):
            for i in n.items:
                visit(i)
        elif isinstance(n, Quant | Exclude):
            visit(n.node)

    visit(node)
    return out


# ---- expressions (beside ast.Literal, BinOp, Not, Negate, InList and Call) ------------------


@dataclass(frozen=True)
class Column(ast.Expr):
    """`A.price` (rows mapped to A, or to a SUBSET) or `price` (var None: every row)."""

    var: str | None
    name: str


@dataclass(frozen=True)
class Nav(ast.Expr):
    """Navigation: PREV/NEXT (physical: rows of the partition) or FIRST/LAST (logical:
    rows of the match mapped to the argument's variable), `offset` rows away."""

    func: str  # prev | next | first | last
    arg: ast.Expr
    offset: int
    running: bool | None = None  # RUNNING / FINAL written before FIRST or LAST


@dataclass(frozen=True)
class Agg(ast.Expr):
    """An aggregate over the rows of the match mapped to a variable (all rows: None)."""

    func: str  # count | sum | avg | min | max
    arg: ast.Expr | None  # None: count(*) or count(A.*)
    var: str | None = None  # of count(A.*)
    running: bool | None = None


@dataclass(frozen=True)
class Classifier(ast.Expr):
    var: str | None = None


@dataclass(frozen=True)
class MatchNumber(ast.Expr):
    pass


@dataclass(frozen=True)
class IsNull(ast.Expr):
    operand: ast.Expr
    negated: bool = False


NAVIGATIONS = ("prev", "next", "first", "last")
AGGREGATES = ("count", "sum", "avg", "min", "max")
SCALARS = ("abs", "coalesce")


def walk(expr: ast.Expr):
    """`expr` and every sub-expression, depth first."""
    yield expr
    for child in children(expr):
        yield from walk(child)


def children(expr: ast.Expr) -> tuple[ast.Expr, ...]:
    if isinstance(expr, ast.BinOp):
        return (expr.left, expr.right)
    if isinstance(expr, ast.Not | ast.Negate | ast.InList | IsNull):
        return (expr.operand,)
    if isinstance(expr, ast.Call):
        return expr.args
    if isinstance(expr, Nav):
        return (expr.arg,)
    if isinstance(expr, Agg):
        return () if expr.arg is None else (expr.arg,)
    return ()


def expr_text(expr: ast.Expr) -> str:
    """An expression as it would be written."""
    if isinstance(expr, Column):
        name = expr.name if expr.name.isidentifier() else f'"{expr.name}"'
        return name if expr.var is None else f"{expr.var}.{name}"
    if isinstance(expr, Nav):
        sem = "" if expr.running is None else ("RUNNING " if expr.running else "FINAL ")
        default = 1 if expr.func in ("prev", "next") else 0
        off = "" if expr.offset == default else f", {expr.offset}"
        return f"{sem}{expr.func.upper()}({expr_text(expr.arg)}{off})"
    if isinstance(expr, Agg):
        sem = "" if expr.running is None else ("RUNNING " if expr.running else "FINAL ")
        if expr.arg is None:
            inner = "*" if expr.var is None else f"{expr.var}.*"
        else:
            inner = expr_text(expr.arg)
        return f"{sem}{expr.func.upper()}({inner})"
    if isinstance(expr, Classifier):
        return f"CLASSIFIER({expr.var or ''})"
    if isinstance(expr, MatchNumber):
        return "MATCH_NUMBER()"
    if isinstance(expr, IsNull):
        return f"{expr_text(expr.operand)} IS {'NOT ' if expr.negated else ''}NULL"
    if isinstance(expr, ast.Literal) and expr.value is None:
        return "NULL"
    if isinstance(expr, ast.BinOp):
        op = expr.op.upper() if expr.op in ast.LOGIC else expr.op
        return f"({expr_text(expr.left)} {op} {expr_text(expr.right)})"
    if isinstance(expr, ast.Not):
        return f"NOT {expr_text(expr.operand)}"
    if isinstance(expr, ast.Negate):
        return f"-{expr_text(expr.operand)}"
    if isinstance(expr, ast.InList):
        items = ", ".join(expr_text(v) for v in expr.values)
        return f"{expr_text(expr.operand)} {'NOT IN' if expr.negated else 'IN'} ({items})"
    if isinstance(expr, ast.Call):
        return f"{expr.name}({', '.join(expr_text(a) for a in expr.args)})"
    return ast.to_text(expr)


# ---- the query ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Named:
    """A name as written, with where it was written (PARTITION BY, SELECT, SUBSET, ...)."""

    name: str
    span: ast.Span = field(compare=False, repr=False, default_factory=ast.Span.unknown)


@dataclass(frozen=True)
class OrderItem:
    name: str
    descending: bool = False
    span: ast.Span = field(compare=False, repr=False, default_factory=ast.Span.unknown)


@dataclass(frozen=True)
class Measure:
    expr: ast.Expr
    name: str
    span: ast.Span = field(compare=False, repr=False, default_factory=ast.Span.unknown)


@dataclass(frozen=True)
class SelectItem:
    name: str
    alias: str | None
    span: ast.Span = field(compare=False, repr=False, default_factory=ast.Span.unknown)


@dataclass(frozen=True)
class Skip:
    mode: str  # past_last | next_row | first | last
    var: str | None = None
    span: ast.Span = field(compare=False, repr=False, default_factory=ast.Span.unknown)


@dataclass(frozen=True)
class Subset:
    name: str
    members: tuple[str, ...]
    span: ast.Span = field(compare=False, repr=False, default_factory=ast.Span.unknown)


@dataclass(frozen=True)
class Definition:
    var: str
    expr: ast.Expr
    span: ast.Span = field(compare=False, repr=False, default_factory=ast.Span.unknown)


@dataclass(frozen=True)
class MrQuery:
    source: str  # FROM name
    select: tuple[SelectItem, ...] | None  # None: SELECT *
    partition_by: tuple[str, ...]
    order_by: tuple[OrderItem, ...]
    measures: tuple[Measure, ...]
    rows: str  # one | all
    empty: str  # show | omit | unmatched (ALL ROWS PER MATCH)
    skip: Skip
    pattern: PatternNode
    subsets: tuple[Subset, ...]
    defines: tuple[Definition, ...]
    within: ast.Duration | None
    partition_spans: tuple[ast.Span, ...] = field(default=(), compare=False, repr=False)
    clause_spans: dict = field(default_factory=dict, compare=False, repr=False)
    text: str = field(default="", compare=False, repr=False)
    span: ast.Span = field(compare=False, repr=False, default_factory=ast.Span.unknown)


# ---- parsing -----------------------------------------------------------------------------


@cache
def _lark() -> Lark:
    grammar = files("sparkcep.language").joinpath("match_recognize.lark").read_text()
    return Lark(grammar, parser="lalr", propagate_positions=True, maybe_placeholders=True)


@lru_cache(maxsize=256)  # an immutable value: a text parsed before is not parsed again
def parse_match_recognize(text: str) -> MrQuery:
    """Parse one `SELECT ... MATCH_RECOGNIZE (...)` query."""
    if not text.strip():
        raise QueryError("the query is empty", text, ast.Span(1, 1, 1, 2))
    try:
        tree = _lark().parse(text)
    except UnexpectedInput as error:
        raise _unclosed_pattern(text) or _syntax_error(text, error, _lark()) from None
    _check_depth(tree, text)  # the limits of language/parser.py: no RecursionError
    try:
        query = _ToMr(text).transform(tree)
    except Exception as error:  # lark wraps errors raised inside the transformer
        inner = getattr(error, "orig_exc", error)
        if isinstance(inner, QueryError):
            raise inner from None
        raise
    _check_expr_depth(query, text)
    return query


def _unclosed_pattern(text: str) -> QueryError | None:
    """`PATTERN (A B DEFINE ...`: inside a pattern every word is a variable, so the
    parser fails only at the end; a clause keyword inside PATTERN's parentheses shows
    where its ')' is missing."""
    tokens = _tokens_before(text, len(text))
    words = [text[a:b].upper() for a, b in tokens]
    for i in range(len(tokens) - 1):
        if words[i] == "PATTERN" and words[i + 1] == "(":
            depth = 0
            for j in range(i + 1, len(tokens)):
                depth += {"(": 1, ")": -1}.get(words[j], 0)
                if depth == 0:
                    return None
                if words[j] in ("SUBSET", "DEFINE", "WITHIN") and j > i + 2:
                    return _missing_paren(
                        text, _offset_span(text, *tokens[j]), tokens[j][0],
                        f"{words[j]} cannot be inside PATTERN (...)",
                    )  # fmt: skip
    return None


def _check_expr_depth(query: MrQuery, text: str) -> None:
    """Each MEASURES and DEFINE expression is at most MAX_DEPTH deep (a chain of AND/OR
    folds into one level per operand), walked without recursion."""
    stack = [(item.expr, 1) for item in (*query.measures, *query.defines)]
    while stack:
        expr, depth = stack.pop()
        if depth > _MAX_DEPTH:
            raise _too_deep(text, expr.span)
        stack += [(child, depth + 1) for child in children(expr)]


def _name(token) -> str:
    text = str(token)
    return text[1:-1] if text[:1] in ('"', "`") else text


def _number(text: str) -> int | float:
    return _sized_number(text)  # more than 19 digits: a float, never int()'s digit limit


def _spanned(a: ast.Span, b: ast.Span) -> ast.Span:
    return ast.Span(a.line, a.column, b.end_line, b.end_column)


@v_args(meta=True)
class _ToMr(Transformer):
    def __init__(self, text: str):
        super().__init__()
        self.text = text

    def _error(self, message: str, span: ast.Span) -> QueryError:
        return QueryError(message, self.text, span)

    # ---- the query
    def start(self, meta, children):
        return children[0]

    def select(self, meta, children):
        select, source, _alias, body, _alias2, within = children
        if within is not None and body["within"] is not None:
            raise self._error("WITHIN is given twice", within.span)
        return MrQuery(
            source=str(source),
            select=select,
            within=within if within is not None else body.pop("within"),
            text=self.text,
            span=_span(meta),
            **{k: v for k, v in body.items() if k != "within"},
        )

    def select_all(self, meta, children):
        return None

    def select_items(self, meta, children):
        return tuple(children)

    def select_item(self, meta, children):
        name, alias = children
        return SelectItem(_name(name), None if alias is None else _name(alias), _span(meta))

    def table_alias(self, meta, children):
        return children[-1]

    def body(self, meta, children):
        partition, order, measures, rows, skip, pattern, within, subsets, defines = children
        rows_mode, empty = rows[:2] if rows is not None else ("one", "show")
        spans = {}
        for name, value in (("rows", rows), ("skip", skip)):
            if value is not None:
                spans[name] = value[-1] if name == "rows" else value.span
        return {
            "partition_by": tuple(n.name for n in partition or ()),
            "partition_spans": tuple(n.span for n in partition or ()),
            "order_by": tuple(order or ()),
            "measures": tuple(measures or ()),
            "rows": rows_mode,
            "empty": empty,
            "skip": skip or Skip("past_last"),
            "pattern": pattern,
            "within": within,
            "subsets": tuple(subsets or ()),
            "defines": tuple(defines),
            "clause_spans": spans,
        }

    def partition(self, meta, children):
        return [Named(_name(c), _span(c)) for c in children]

    def order(self, meta, children):
        return list(children)

    def order_item(self, meta, children):
        name, direction = children
        desc = direction is not None and direction.type == "DESC"
        return OrderItem(_name(name), desc, _span(meta))

    def measures(self, meta, children):
        return list(children)

    def measure(self, meta, children):
        expr, name = children
        return Measure(expr, _name(name), _span(meta))

    def one_row(self, meta, children):
        return ("one", "show", _span(meta))

    def all_rows(self, meta, children):
        return ("all", children[0] or "show", _span(meta))

    def show_empty(self, meta, children):
        return "show"

    def omit_empty(self, meta, children):
        return "omit"

    def with_unmatched(self, meta, children):
        return "unmatched"

    def after_match(self, meta, children):
        skip = children[0]
        return Skip(skip.mode, skip.var, _span(meta))

    def skip_past_last(self, meta, children):
        return Skip("past_last")

    def skip_next_row(self, meta, children):
        return Skip("next_row")

    def skip_first(self, meta, children):
        return Skip("first", str(children[0]).upper())

    def skip_last(self, meta, children):
        return Skip("last", str(children[-1]).upper())

    def pattern(self, meta, children):
        return children[0]

    def within(self, meta, children):
        return children[0]

    def duration(self, meta, children):
        amount, unit = children
        return self._duration(float(amount) if "." in amount else _number(str(amount)), unit, meta)

    def interval(self, meta, children):
        text, unit = children
        value = str(text)[1:-1].strip()
        try:
            amount = _number(value)
        except ValueError:
            raise self._error(
                "INTERVAL takes a number, e.g. INTERVAL '10' SECOND", _span(text)
            ) from None
        return self._duration(amount, unit, meta)

    def _duration(self, amount, unit, meta) -> ast.Duration:
        unit_name = None
        if unit is not None:
            unit_name = UNITS.get(str(unit).lower())
            if unit_name is None:
                raise self._error(
                    f"unknown time unit '{unit}' (use ms, s, min, h or days)", _span(unit)
                )
        return ast.Duration(amount, unit_name, span=_span(meta))

    def subset(self, meta, children):
        return list(children)

    def subset_item(self, meta, children):
        name, *members = children
        return Subset(str(name).upper(), tuple(str(m).upper() for m in members), _span(meta))

    def define(self, meta, children):
        return list(children)

    def definition(self, meta, children):
        var, expr = children
        return Definition(str(var).upper(), expr, _span(meta))

    # ---- row patterns
    def alternation(self, meta, children):
        if len(children) == 1:
            return children[0]
        return Alt(tuple(children), span=_span(meta))

    def concatenation(self, meta, children):
        if len(children) == 1:
            return children[0]
        return Concat(tuple(children), span=_span(meta))

    def quantified(self, meta, children):
        node, quantifier = children
        if quantifier is None:
            return node
        low, high, greedy = quantifier
        if high is not None and low > high:
            raise self._error(
                f"the quantifier {{{low},{high}}} has its lower bound above its upper bound",
                _span(meta),
            )
        return Quant(node, low, high, greedy, span=_span(meta))

    def variable(self, meta, children):
        return PVar(str(children[0]).upper(), span=_span(meta))

    def group(self, meta, children):
        return children[0]

    def start_anchor(self, meta, children):
        return Anchor("^", span=_span(meta))

    def end_anchor(self, meta, children):
        return Anchor("$", span=_span(meta))

    def exclusion(self, meta, children):
        return Exclude(children[1], span=_span(meta))

    def permute(self, meta, children):
        return Permute(tuple(children), span=_span(meta))

    def quantifier(self, meta, children):
        (low, high), reluctant = children
        return low, high, reluctant is None

    def star(self, meta, children):
        return 0, None

    def plus(self, meta, children):
        return 1, None

    def optional(self, meta, children):
        return 0, 1

    def exactly(self, meta, children):
        n = self._count(children[0])
        return n, n

    def between_bounds(self, meta, children):
        low, high = children
        return (0 if low is None else self._count(low)), (
            None if high is None else self._count(high)
        )

    def _count(self, token) -> int:
        text = str(token)
        if not text.isdigit():
            raise self._error("a quantifier bound is a whole number", _span(token))
        if len(text) > 6:  # int() refuses 4,300 digits; the plan's size check needs less
            raise self._error(
                "a quantifier bound this large unrolls the pattern past 20,000 steps",
                _span(token),
            )
        return int(text)

    # ---- expressions
    def or_(self, meta, children):
        return self._fold("or", children)

    def and_(self, meta, children):
        return self._fold("and", children)

    def _fold(self, op, children):
        result = children[0]
        for child in children[1:]:
            result = ast.BinOp(op, result, child, span=_spanned(result.span, child.span))
        return result

    def not_(self, meta, children):
        return ast.Not(children[0], span=_span(meta))

    def compare(self, meta, children):
        left, op, right = children
        op = {"<>": "!=", "==": "="}.get(str(op), str(op))
        return ast.BinOp(op, left, right, span=_span(meta))

    def in_list(self, meta, children):
        return _in_list(children[0], tuple(children[1:]), False, _span(meta))

    def not_in_list(self, meta, children):
        return _in_list(children[0], tuple(children[2:]), True, _span(meta))

    def between(self, meta, children):
        value, low, high = children
        span = _span(meta)
        return ast.BinOp(
            "and", ast.BinOp(">=", value, low, span=span), ast.BinOp("<=", value, high, span=span),
            span=span,
        )  # fmt: skip

    def is_null(self, meta, children):
        return IsNull(children[0], False, span=_span(meta))

    def is_not_null(self, meta, children):
        return IsNull(children[0], True, span=_span(meta))

    def binop(self, meta, children):
        left, op, right = children
        return ast.BinOp(str(op), left, right, span=_span(meta))

    def negate(self, meta, children):
        operand = children[0]
        value = operand.value if isinstance(operand, ast.Literal) else None
        if isinstance(value, int | float) and not isinstance(value, bool):
            return ast.Literal(-value, span=_span(meta))
        return ast.Negate(operand, span=_span(meta))

    def plain_column(self, meta, children):
        return Column(None, _name(children[0]), span=_span(meta))

    def qualified_column(self, meta, children):
        var, name = children
        return Column(str(var).upper(), _name(name), span=_span(meta))

    def star_argument(self, meta, children):
        return _Star(None, _span(meta))

    def variable_star(self, meta, children):
        return _Star(str(children[0]).upper(), _span(meta))

    def semantics(self, meta, children):
        word, call = children
        running = str(word).upper() == "RUNNING"
        if isinstance(call, Nav) and call.func in ("first", "last"):
            return Nav(call.func, call.arg, call.offset, running, span=_span(meta))
        if isinstance(call, Agg):
            return Agg(call.func, call.arg, call.var, running, span=_span(meta))
        raise self._error(
            f"{str(word).upper()} goes before FIRST, LAST or an aggregate (count, sum, avg, "
            "min, max)",
            _span(meta),
        )

    def call(self, meta, children):
        name, *args = children
        args = [a for a in args if a is not None]
        fname = str(name).lower()
        span = _span(meta)
        stars = [a for a in args if isinstance(a, _Star)]
        if stars and (fname != "count" or len(args) != 1):
            raise self._error("'*' is an argument of count only: count(*) or count(A.*)", span)
        if fname in NAVIGATIONS:
            return self._navigation(fname, args, span)
        if fname in AGGREGATES:
            if len(args) != 1 and not (fname == "count" and not args):
                raise self._error(f"{fname}() takes one argument", span)
            if not args:
                return Agg("count", None, None, span=span)
            if isinstance(args[0], _Star):
                return Agg("count", None, args[0].var, span=span)
            return Agg(fname, args[0], span=span)
        if fname == "classifier":
            if len(args) > 1 or (args and not _is_name(args[0])):
                raise self._error("CLASSIFIER takes no argument or a pattern variable", span)
            return Classifier(args[0].name.upper() if args else None, span=span)
        if fname == "match_number":
            if args:
                raise self._error("MATCH_NUMBER takes no argument", span)
            return MatchNumber(span=span)
        if fname in SCALARS:
            if fname == "abs" and len(args) != 1:
                raise self._error("abs() takes one argument", span)
            if fname == "coalesce" and not args:
                raise self._error("coalesce() takes one or more arguments", span)
            return ast.Call(fname, tuple(args), span=span)
        known = ", ".join(n.upper() for n in (*NAVIGATIONS, *AGGREGATES, *SCALARS))
        raise self._error(
            f"unknown function '{name}' (known: {known}, CLASSIFIER, MATCH_NUMBER)", _span(name)
        )

    def _navigation(self, fname, args, span) -> Nav:
        if not 1 <= len(args) <= 2:
            raise self._error(f"{fname.upper()} takes a value and an optional offset", span)
        default = 1 if fname in ("prev", "next") else 0
        offset = default
        if len(args) == 2:
            off = args[1]
            if not (
                isinstance(off, ast.Literal)
                and isinstance(off.value, int)
                and not isinstance(off.value, bool)
                and off.value >= 0
            ):
                raise self._error(
                    f"the offset of {fname.upper()} is a whole number, 0 or more", off.span
                )
            offset = off.value
        return Nav(fname, args[0], offset, span=span)

    def number(self, meta, children):
        return ast.Literal(_literal_number(children[0], self.text), span=_span(meta))

    def string(self, meta, children):
        return ast.Literal(str(children[0])[1:-1].replace("''", "'"), span=_span(meta))

    def true(self, meta, children):
        return ast.Literal(True, span=_span(meta))

    def false(self, meta, children):
        return ast.Literal(False, span=_span(meta))

    def null(self, meta, children):
        return ast.Literal(None, span=_span(meta))


def _in_list(operand, values, negated: bool, span) -> ast.Expr:
    """`x IN (...)`: a list of literals stays one test (computed for every row at once);
    with expressions (`IN (300, LAST(A.v))`) it is what the standard defines it as,
    `x = a OR x = b ...` (NOT IN: the negation), with SQL's null logic."""
    if all(isinstance(v, ast.Literal) for v in values):
        return ast.InList(operand, values, negated, span=span)
    test = ast.BinOp("=", operand, values[0], span=span)
    for value in values[1:]:
        test = ast.BinOp("or", test, ast.BinOp("=", operand, value, span=span), span=span)
    return ast.Not(test, span=span) if negated else test


@dataclass(frozen=True)
class _Star:
    var: str | None
    span: ast.Span


def _is_name(expr) -> bool:
    return isinstance(expr, Column) and expr.var is None


def token_span(token: Token) -> ast.Span:
    return _span(token)
