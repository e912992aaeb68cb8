"""DEFINE and MEASURES expressions, compiled for the row pattern matcher.

A DEFINE condition is split on its top-level ANDs. A conjunct that reads only the
current row (and rows a fixed number of rows away: `price < PREV(price)`, `B.v > 3` in
B's definition) is *row-local*: it is computed for every row at once with numpy, before
matching. The others read the match so far (`price <= A.price`, `COUNT(B.*) < 5`,
`FIRST(A.v)`): they become closures over a *view* of one thread's match, evaluated row by
row. MEASURES are closures over a view of the complete match.

A view answers: `nav(kind, S, n, upto)` (the n-th first or last row mapped to a variable
in S among rows up to `upto`, with its label), `label_at(pos, upto)`, `aggregate(i,
upto)`, `mn` (MATCH_NUMBER), `cols` (the columns as lists, nulls as None) and the
partition's rows `lo` .. `n` - 1 in them.
Values follow SQL: nulls propagate, comparisons with a null are unknown, AND/OR are
three-valued, `x / 0` and `x % 0` are null, `/` divides exactly, `%` keeps the sign of
the dividend.
"""

from __future__ import annotations

import math
import operator
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from sparkcep.expressions import Vec, _arithmetic, _logic
from sparkcep.language import ast
from sparkcep.language import match_recognize as mr

UNKNOWN = object()  # the label of a row is not at hand: look it up

_CMP = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_VCMP = {
    "=": np.equal,
    "!=": np.not_equal,
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
}


# ---- scalar SQL operations ------------------------------------------------------------------


def sql_and(a, b):
    if a is False or b is False:
        return False
    if a is None or b is None:
        return None
    return True


def sql_or(a, b):
    if a is True or b is True:
        return True
    if a is None or b is None:
        return None
    return False


def sql_arith(op: str, a, b):
    if a is None or b is None:
        return None
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if b == 0:
        return None
    if op == "/":
        return a / b
    if isinstance(a, int) and isinstance(b, int):
        r = abs(a) % abs(b)
        return r if a >= 0 else -r
    return math.fmod(a, b)


def sql_in(value, values: list, negated: bool):
    if value is None:
        return None
    known = [v for v in values if v is not None]
    if value in known:
        hit = True
    elif len(known) < len(values):
        hit = None
    else:
        hit = False
    if hit is None:
        return None
    return not hit if negated else hit


# ---- aggregates -----------------------------------------------------------------------------


@dataclass(frozen=True)
class AggSpec:
    """An aggregate of the query: over rows mapped to `members` (None: every row)."""

    func: str
    members: frozenset[int] | None
    arg: Callable | None  # (view, pos, label, upto) -> value; None: count rows
    final: bool


def agg_start(func: str):
    return 0 if func == "count" else None if func in ("min", "max") else (0, 0)


def agg_add(func: str, state, value, counts_rows: bool):
    if func == "count":
        return state + (1 if counts_rows or value is not None else 0)
    if value is None:
        return state
    if func == "min":
        return value if state is None or value < state else state
    if func == "max":
        return value if state is None or value > state else state
    return (state[0] + value, state[1] + 1)


def agg_value(func: str, state):
    if func in ("count", "min", "max"):
        return state
    total, nn = state
    if not nn:
        return None
    return total / nn if func == "avg" else total


# ---- views of a match -----------------------------------------------------------------------


class MatchView:
    """A complete (or prefix of a) match: rows start..end of a partition with their labels."""

    def __init__(self, seg, labels: list[int], start: int, mn: int, aggs):
        self.cols = seg.cols
        self.lo, self.n = seg.lo, seg.n
        self.labels = labels
        self.start = start
        self.end = start + len(labels) - 1
        self.cur = self.end
        self.mn = mn
        self._aggs = aggs
        self._positions: dict = {}
        self._running: dict = {}

    def positions(self, members):
        found = self._positions.get(members)
        if found is None:
            s = self.start
            found = [s + i for i, lab in enumerate(self.labels) if lab in members]
            self._positions[members] = found
        return found

    def nav(self, kind: str, members, n: int, upto: int):
        if upto < self.start:
            return None
        if members is None:
            pos = upto - n if kind == "last" else self.start + n
            if pos < self.start or pos > upto:
                return None
            return pos, self.labels[pos - self.start]
        pos_list = self.positions(members)
        if kind == "last":
            i = bisect_right(pos_list, upto) - 1 - n
            if i < 0:
                return None
        else:
            if n >= len(pos_list) or pos_list[n] > upto:
                return None
            i = n
        pos = pos_list[i]
        return pos, self.labels[pos - self.start]

    def label_at(self, pos: int, upto: int):
        # A row's label is its variable in the match, also past the current row (running
        # semantics bound which rows FIRST/LAST see, not what a row was mapped to).
        if self.start <= pos <= self.end:
            return self.labels[pos - self.start]
        return None

    def aggregate(self, i: int, upto: int):
        running = self._running.get(i)
        if running is None:
            running = self._running[i] = self._running_values(self._aggs[i])
        if upto < self.start:
            return agg_value(self._aggs[i].func, agg_start(self._aggs[i].func))
        return running[min(upto, self.end) - self.start]

    def _running_values(self, spec: AggSpec) -> list:
        state = agg_start(spec.func)
        out = []
        for i, lab in enumerate(self.labels):
            pos = self.start + i
            if spec.members is None or lab in spec.members:
                value = None if spec.arg is None else spec.arg(self, pos, lab, pos)
                state = agg_add(spec.func, state, value, spec.arg is None)
            out.append(agg_value(spec.func, state))
        return out


class EmptyView:
    """An empty match: every reference and navigation is null, aggregates are over no row."""

    def __init__(self, seg, mn: int, aggs):
        self.cols, self.lo, self.n, self.mn, self._aggs = seg.cols, seg.lo, seg.n, mn, aggs
        self.start = self.end = self.cur = -1

    def nav(self, kind, members, n, upto):
        return None

    def label_at(self, pos, upto):
        return None

    def aggregate(self, i, upto):
        return agg_value(self._aggs[i].func, agg_start(self._aggs[i].func))


# ---- the compiler -----------------------------------------------------------------------------


class ExpressionCompiler:
    """Compiles a query's expressions against its variables (label numbers) and SUBSETs."""

    def __init__(self, variables, subsets: dict[str, tuple[str, ...]]):
        self.variables = list(variables)
        self.index = {v: i for i, v in enumerate(self.variables)}
        self.sets: dict[str | None, frozenset[int] | None] = {None: None}
        for v in self.variables:
            self.sets[v] = frozenset([self.index[v]])
        for name, members in subsets.items():
            self.sets[name] = frozenset(self.index[m] for m in members)
        self.aggs: list[AggSpec] = []

    # ---- which variable an expression refers to
    def members_of(self, expr: ast.Expr):
        for node in mr.walk(expr):
            if isinstance(node, mr.Column | mr.Classifier):
                return self.sets[node.var]
        return None

    # ---- scalar closures: view -> value
    def scalar(self, expr: ast.Expr) -> Callable:
        if isinstance(expr, ast.Literal):
            value = expr.value
            return lambda v: value
        if isinstance(expr, mr.Column):
            return self._column(expr)
        if isinstance(expr, mr.Classifier):
            members = self.sets[expr.var]
            names = self.variables

            def classifier(v):
                hit = v.nav("last", members, 0, v.cur)
                return None if hit is None else names[hit[1]]

            return classifier
        if isinstance(expr, mr.MatchNumber):
            return lambda v: v.mn
        if isinstance(expr, mr.Nav):
            return self._navigation(expr)
        if isinstance(expr, mr.Agg):
            return self._aggregate(expr)
        return self._operation(expr, self.scalar, lambda f: lambda v: f(v))

    def _column(self, expr: mr.Column) -> Callable:
        members, name = self.sets[expr.var], expr.name

        def column(v):
            hit = v.nav("last", members, 0, v.cur)
            return None if hit is None else v.cols[name][hit[0]]

        return column

    def _navigation(self, nav: mr.Nav) -> Callable:
        if nav.func in ("first", "last"):
            members = self.members_of(nav.arg)
            inner = self.row(nav.arg)
            final, kind, n = nav.running is False, nav.func, nav.offset

            def logical(v):
                upto = v.end if final else v.cur
                hit = v.nav(kind, members, n, upto)
                return None if hit is None else inner(v, hit[0], hit[1], upto)

            return logical
        step = -nav.offset if nav.func == "prev" else nav.offset
        base = nav.arg if isinstance(nav.arg, mr.Nav) else None
        members = self.members_of(nav.arg)
        inner = self.row(base.arg if base is not None else nav.arg)
        final = base is not None and base.running is False
        kind, n = (base.func, base.offset) if base is not None else ("last", 0)

        def physical(v):
            upto = v.end if final else v.cur
            hit = v.nav(kind, members, n, upto)
            if hit is None:
                return None
            pos = hit[0] + step
            if pos < v.lo or pos >= v.n:  # beyond the partition
                return None
            return inner(v, pos, hit[1] if step == 0 else UNKNOWN, upto)

        return physical

    def _aggregate(self, agg: mr.Agg) -> Callable:
        members = self.sets[agg.var] if agg.arg is None else self.members_of(agg.arg)
        arg = None if agg.arg is None else self.row(agg.arg)
        index = len(self.aggs)
        final = agg.running is False
        self.aggs.append(AggSpec(agg.func, members, arg, final))
        return lambda v: v.aggregate(index, v.end if final else v.cur)

    # ---- row closures: (view, pos, label, upto) -> value, inside a navigation or aggregate
    def row(self, expr: ast.Expr) -> Callable:
        if isinstance(expr, ast.Literal):
            value = expr.value
            return lambda v, p, lab, upto: value
        if isinstance(expr, mr.Column):
            name = expr.name
            return lambda v, p, lab, upto: v.cols[name][p]
        if isinstance(expr, mr.Classifier):
            names = self.variables

            def classifier(v, p, lab, upto):
                if lab is UNKNOWN:
                    lab = v.label_at(p, upto)
                return None if lab is None else names[lab]

            return classifier
        if isinstance(expr, mr.MatchNumber):
            return lambda v, p, lab, upto: v.mn
        return self._operation(expr, self.row, lambda f: lambda v, p, lab, upto: f(v, p, lab, upto))

    def _operation(self, expr, compile_, wrap):
        """Operators, for either kind of closure (`compile_` compiles an operand)."""
        if isinstance(expr, ast.BinOp):
            left, right = compile_(expr.left), compile_(expr.right)
            if expr.op == "and":
                return _binary(sql_and, left, right)
            if expr.op == "or":
                return _binary(sql_or, left, right)
            if expr.op in _CMP:
                cmp = _CMP[expr.op]
                return _binary(
                    lambda a, b: None if a is None or b is None else cmp(a, b), left, right
                )
            op = expr.op
            return _binary(lambda a, b: sql_arith(op, a, b), left, right)
        if isinstance(expr, ast.Not):
            inner = compile_(expr.operand)
            return _unary(lambda a: None if a is None else not a, inner)
        if isinstance(expr, ast.Negate):
            return _unary(lambda a: None if a is None else -a, compile_(expr.operand))
        if isinstance(expr, mr.IsNull):
            negated = expr.negated
            return _unary(
                lambda a: (a is not None) if negated else (a is None), compile_(expr.operand)
            )
        if isinstance(expr, ast.InList):
            values = [x.value for x in expr.values]
            negated = expr.negated
            return _unary(lambda a: sql_in(a, values, negated), compile_(expr.operand))
        if isinstance(expr, ast.Call) and expr.name == "abs":
            return _unary(lambda a: None if a is None else abs(a), compile_(expr.args[0]))
        if isinstance(expr, ast.Call) and expr.name == "coalesce":
            return _coalesce([compile_(a) for a in expr.args])
        raise TypeError(f"cannot compile {expr!r}")

    # ---- row-local conjuncts, for every row at once
    def row_local(self, expr: ast.Expr, label: int, shift: int = 0) -> bool:
        """Whether a DEFINE conjunct of `label` reads only the current row's neighbourhood."""
        if isinstance(expr, mr.Agg | mr.MatchNumber):
            return False
        if isinstance(expr, mr.Column):
            members = self.sets[expr.var]
            return members is None or label in members
        if isinstance(expr, mr.Classifier):
            members = self.sets[expr.var]
            return shift == 0 and (members is None or label in members)
        if isinstance(expr, mr.Nav):
            if expr.func == "first":
                return False
            if expr.func == "last":
                return expr.offset == 0 and self.row_local(expr.arg, label, shift)
            step = -expr.offset if expr.func == "prev" else expr.offset
            return self.row_local(expr.arg, label, shift + step)
        return all(self.row_local(c, label, shift) for c in mr.children(expr))

    def vector(self, expr: ast.Expr, label: int, columns: dict[str, Vec], seg, shift=0) -> Vec:
        """A row-local expression for every row (`columns`; `seg`: each row's partition
        number, so that PREV and NEXT stay within it)."""
        n = len(seg)
        if isinstance(expr, ast.Literal):
            return _constant(expr.value, n)
        if isinstance(expr, mr.Column):
            return _shifted(columns[expr.name], shift, seg)
        if isinstance(expr, mr.Classifier):
            return _constant(self.variables[label], n)
        if isinstance(expr, mr.Nav):
            if expr.func == "last":
                return self.vector(expr.arg, label, columns, seg, shift)
            step = -expr.offset if expr.func == "prev" else expr.offset
            return self.vector(expr.arg, label, columns, seg, shift + step)
        if isinstance(expr, ast.BinOp):
            left = self.vector(expr.left, label, columns, seg, shift)
            right = self.vector(expr.right, label, columns, seg, shift)
            if expr.op in ("and", "or"):
                return _logic(expr.op, left, right)
            null = _or(left.null, right.null)
            if expr.op in _VCMP:
                with np.errstate(invalid="ignore"):
                    values = np.asarray(_VCMP[expr.op](left.values, right.values), dtype=bool)
                return Vec(values, null)
            return _arithmetic(expr.op, left, right, null)
        if isinstance(expr, ast.Not):
            inner = self.vector(expr.operand, label, columns, seg, shift)
            return Vec(~inner.values.astype(bool), inner.null)
        if isinstance(expr, ast.Negate):
            inner = self.vector(expr.operand, label, columns, seg, shift)
            return Vec(-inner.values, inner.null)
        if isinstance(expr, mr.IsNull):
            inner = self.vector(expr.operand, label, columns, seg, shift)
            nulls = inner.nulls()
            return Vec(~nulls if expr.negated else nulls.copy())
        if isinstance(expr, ast.InList):
            return _vector_in(self.vector(expr.operand, label, columns, seg, shift), expr)
        if isinstance(expr, ast.Call) and expr.name == "abs":
            inner = self.vector(expr.args[0], label, columns, seg, shift)
            return Vec(np.abs(inner.values), inner.null)
        if isinstance(expr, ast.Call) and expr.name == "coalesce":
            parts = [self.vector(a, label, columns, seg, shift) for a in expr.args]
            return _vector_coalesce(parts)
        raise TypeError(f"not a row-local expression: {expr!r}")


def _binary(f, left, right):
    return lambda *a: f(left(*a), right(*a))


def _unary(f, inner):
    return lambda *a: f(inner(*a))


def _coalesce(parts):
    def coalesce(*a):
        for part in parts:
            value = part(*a)
            if value is not None:
                return value
        return None

    return coalesce


def _or(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return a | b


def _constant(value, n: int) -> Vec:
    if value is None:
        return Vec(np.zeros(n, dtype=np.int64), np.ones(n, dtype=bool))
    if isinstance(value, str):
        arr = np.empty(n, dtype=object)
        arr[:] = value
        return Vec(arr)
    if isinstance(value, bool):
        return Vec(np.full(n, value, dtype=bool))
    if isinstance(value, int):
        return Vec(np.full(n, value, dtype=np.int64))
    return Vec(np.full(n, value, dtype=np.float64))


def _shifted(col: Vec, shift: int, seg: np.ndarray) -> Vec:
    """Row i gets row i + shift's value; rows beyond their partition get null."""
    n = len(col)
    if shift == 0:
        return col
    src = np.arange(n) + shift
    inside = (src >= 0) & (src < n)
    src = np.clip(src, 0, max(n - 1, 0))
    inside &= seg[src] == seg if n else inside
    values = col.values[src] if n else col.values
    return Vec(values, ~inside | col.nulls()[src] if n else np.zeros(0, bool))


def _vector_in(inner: Vec, expr: ast.InList) -> Vec:
    values = [x.value for x in expr.values]
    known = [v for v in values if v is not None]
    if not known:
        hit = np.zeros(len(inner), dtype=bool)
    elif isinstance(known[0], str):
        hit = np.isin(inner.values, np.array(known, dtype=object))
    else:
        hit = np.isin(inner.values, np.array(known))
    null = inner.nulls().copy()
    if len(known) < len(values):
        null |= ~hit  # x IN (.., NULL) is unknown when no value equals x
    if expr.negated:
        hit = ~hit
    return Vec(hit, null if null.any() else None)


def _vector_coalesce(parts: list[Vec]) -> Vec:
    values = parts[0].values.copy()
    null = parts[0].nulls().copy()
    if any(p.values.dtype == object for p in parts) or any(
        p.values.dtype.kind == "f" for p in parts
    ):
        values = values.astype(object if any(p.values.dtype == object for p in parts) else float)
    for part in parts[1:]:
        take = null & ~part.nulls()
        values[take] = part.values[take]
        null &= ~take
    return Vec(values, null if null.any() else None)
