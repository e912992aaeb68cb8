"""Brute-force oracle for pattern queries, written from docs/semantics.md only.

It enumerates every binding of the positive components (each non-empty increasing
subsequence for a Kleene component), keeps the *candidates* (types, order, window,
WHERE, negation, all within one partition of the key), then applies the selection
strategy exactly as the specification defines it.  It is meant to be slow and obviously correct: use it on streams of a
dozen events.

Only `sparkcep.language.parser` and `sparkcep.language.ast` are used from the package.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from dataclasses import dataclass, field
from itertools import combinations, pairwise, product
from typing import Any

from sparkcep.language import ast
from sparkcep.language.parser import parse

__all__ = ["key_attributes", "oracle_matches"]

AGGREGATES = ("count", "sum", "avg", "min", "max", "first", "last")
SCALARS = ("abs",)
STRATEGIES = ("SKIP_TILL_ANY_MATCH", "SKIP_TILL_NEXT_MATCH", "STRICT_CONTIGUITY")
UNIT_IN_MICROSECONDS = {
    "ns": 0.001, "us": 1, "ms": 1_000, "s": 1_000_000, "min": 60_000_000,
    "h": 3_600_000_000, "days": 86_400_000_000,
}  # fmt: skip


# ---- query analysis -----------------------------------------------------------------------


@dataclass
class Conjunct:
    expr: ast.Expr
    mentioned: set[str] = field(default_factory=set)  # every variable named in any way
    elem_vars: list[str] = field(default_factory=list)  # Kleene vars with element references
    prev_vars: set[str] = field(default_factory=set)  # Kleene vars under prev(...)
    agg_vars: set[str] = field(default_factory=set)  # vars under an aggregate
    pos_vars: set[str] = field(default_factory=set)
    neg_vars: set[str] = field(default_factory=set)


class _Analyzer:
    def __init__(self, components: tuple[ast.Component, ...]):
        self.by_var = {c.var: c for c in components}

    def kleene(self, var: str) -> bool:
        c = self.by_var[var]
        return c.kleene and not c.negated

    def check_var(self, var: str) -> None:
        if var not in self.by_var:
            raise ValueError(f"unknown variable '{var}'")

    def scan(self, expr: ast.Expr, info: Conjunct) -> None:
        if isinstance(expr, ast.Literal):
            return
        if isinstance(expr, ast.AttrRef):
            self.check_var(expr.var)
            info.mentioned.add(expr.var)
            if self.kleene(expr.var) and expr.var not in info.elem_vars:
                info.elem_vars.append(expr.var)
            return
        if isinstance(expr, ast.VarRef):
            raise ValueError(f"a bare variable '{expr.var}' can only be used in count()")
        if isinstance(expr, ast.Call):
            name, args = expr.name, expr.args
            if name == "prev":
                if len(args) != 1 or not isinstance(args[0], ast.AttrRef):
                    raise ValueError("prev() takes one argument v.attr")
                var = args[0].var
                self.check_var(var)
                if not self.kleene(var):
                    raise ValueError(f"prev() needs a Kleene variable, '{var}' is not one")
                info.mentioned.add(var)
                info.prev_vars.add(var)
                if var not in info.elem_vars:
                    info.elem_vars.append(var)
                return
            if name in AGGREGATES:
                if len(args) != 1:
                    raise ValueError(f"{name}() takes one argument")
                arg = args[0]
                if (isinstance(arg, ast.VarRef) and name == "count") or isinstance(
                    arg, ast.AttrRef
                ):
                    var = arg.var
                else:
                    raise ValueError(f"{name}() takes v.attr (or v for count)")
                self.check_var(var)
                info.mentioned.add(var)
                info.agg_vars.add(var)
                return
            if name in SCALARS:
                if len(args) != 1:
                    raise ValueError(f"{name}() takes one argument")
                self.scan(args[0], info)
                return
            raise ValueError(f"unknown function '{name}'")
        if isinstance(expr, ast.BinOp):
            if expr.op not in ast.COMPARISONS + ast.ARITHMETIC + ast.LOGIC:
                raise ValueError(f"unknown operator {expr.op}")
            self.scan(expr.left, info)
            self.scan(expr.right, info)
            return
        if isinstance(expr, ast.Not | ast.Negate):
            self.scan(expr.operand, info)
            return
        if isinstance(expr, ast.InList):
            self.scan(expr.operand, info)
            return
        if isinstance(expr, ast.Equivalence):
            raise ValueError("[attr] can only be a top-level conjunct of WHERE")
        raise ValueError(f"unsupported expression {expr!r}")

    def conjunct(self, expr: ast.Expr) -> Conjunct:
        info = Conjunct(expr)
        self.scan(expr, info)
        info.neg_vars = {v for v in info.mentioned if self.by_var[v].negated}
        info.pos_vars = info.mentioned - info.neg_vars
        mixed = {v for v in info.elem_vars if v in info.agg_vars}
        if mixed:
            raise ValueError(
                f"a conjunct mixes element references and aggregates of {sorted(mixed)}"
            )
        if len(info.neg_vars) > 1:
            raise ValueError(f"a conjunct mentions two negated variables {sorted(info.neg_vars)}")
        if info.neg_vars and info.elem_vars:
            raise ValueError(
                "a conjunct with a negated variable may mention Kleene variables only "
                "through aggregates"
            )
        return info


def _expand_equivalence(attr: str, components: tuple[ast.Component, ...]) -> list[ast.Expr]:
    """`[attr]` written out as `P1.attr = v.attr` for every other component `v` (negated ones
    included).  No self-equality and no prev() conjunct: `attr` is always a key attribute,
    so the partition rule gives every bound event the same non-null `attr`."""
    positives = [c for c in components if not c.negated]
    if not positives:
        return []
    anchor = positives[0]
    return [
        ast.BinOp("=", ast.AttrRef(anchor.var, attr), ast.AttrRef(c.var, attr))
        for c in components
        if c.var != anchor.var
    ]


def _where_exprs(query: ast.Query) -> list[ast.Expr]:
    """The top-level conjuncts of WHERE, with every `[attr]` written out."""
    out: list[ast.Expr] = []
    for c in ast.conjuncts(query.where):
        if isinstance(c, ast.Equivalence):
            out.extend(_expand_equivalence(c.attr, query.components))
        else:
            out.append(c)
    return out


def _equality(expr: ast.Expr) -> tuple[str, str, str] | None:
    """`(x, y, attr)` when `expr` is `x.attr = y.attr` with two different variables."""
    if (
        isinstance(expr, ast.BinOp)
        and expr.op == "="
        and isinstance(expr.left, ast.AttrRef)
        and isinstance(expr.right, ast.AttrRef)
        and expr.left.attr == expr.right.attr
        and expr.left.var != expr.right.var
    ):
        return expr.left.var, expr.right.var, expr.left.attr
    return None


def key_attributes(query: ast.Query | str) -> list[str]:
    """The key of "Partitions and the key".

    `attr` is a key attribute when the equalities between positive variables on `attr`
    put every positive component in one class (trivially so for a single positive
    component) and every negated component is joined to that class by an equality on
    `attr`.  Only attributes written in an equality conjunct or `[attr]` are considered,
    in the order they are first written.
    """
    if isinstance(query, str):
        query = parse(query)
    positives = [c.var for c in query.components if not c.negated]
    negated = [c.var for c in query.components if c.negated]
    if not positives:
        return []
    written: list[str] = []
    equalities: list[tuple[str, str, str]] = []
    for c in ast.conjuncts(query.where):
        if isinstance(c, ast.Equivalence):
            equalities.extend(_equality(e) for e in _expand_equivalence(c.attr, query.components))
            attr = c.attr
        elif (eq := _equality(c)) is not None:
            equalities.append(eq)
            attr = eq[2]
        else:
            continue
        if attr not in written:
            written.append(attr)

    def is_key(attr: str) -> bool:
        parent = {v: v for v in positives}

        def find(v):
            while parent[v] != v:
                v = parent[v]
            return v

        for x, y, a in equalities:
            if a == attr and x in parent and y in parent:
                parent[find(x)] = find(y)
        if len({find(v) for v in positives}) != 1:
            return False
        return all(
            any(
                a == attr and n in (x, y) and (x in parent or y in parent) for x, y, a in equalities
            )
            for n in negated
        )

    return [a for a in written if is_key(a)]


# ---- expression evaluation (SQL three-valued logic) ---------------------------------------


class _Ctx:
    def __init__(self, cur, prv, lists):
        self.cur = cur  # var -> event (singleton, negated, or the current Kleene element)
        self.prv = prv  # Kleene var -> previous element (None on the first element)
        self.lists = lists  # var -> list of events (aggregates)


def _truth(value):
    if value is None or isinstance(value, bool):
        return value
    raise ValueError(f"not a boolean: {value!r}")


def _check_comparable(a, b):
    if isinstance(a, str) != isinstance(b, str):
        raise ValueError(f"cannot compare {a!r} with {b!r}")


def _number(value):
    if isinstance(value, str):
        raise ValueError(f"not a number: {value!r}")
    return value


def _attr(event, attr):
    return event.get(attr)


def _eval(expr: ast.Expr, ctx: _Ctx):
    if isinstance(expr, ast.Literal):
        return expr.value
    if isinstance(expr, ast.AttrRef):
        return _attr(ctx.cur[expr.var], expr.attr)
    if isinstance(expr, ast.Call):
        name = expr.name
        if name == "prev":
            ref = expr.args[0]
            previous = ctx.prv.get(ref.var)
            return None if previous is None else _attr(previous, ref.attr)
        if name in AGGREGATES:
            arg = expr.args[0]
            events = ctx.lists[arg.var]
            if name == "count":
                return len(events)
            if name == "first":
                return _attr(events[0], arg.attr)
            if name == "last":
                return _attr(events[-1], arg.attr)
            values = [_attr(e, arg.attr) for e in events]
            values = [v for v in values if v is not None]
            if not values:
                return None
            if name == "sum":
                return sum(_number(v) for v in values)
            if name == "avg":
                return sum(_number(v) for v in values) / len(values)
            try:
                return min(values) if name == "min" else max(values)
            except TypeError as error:
                raise ValueError(str(error)) from None
        if name == "abs":
            value = _eval(expr.args[0], ctx)
            return None if value is None else abs(_number(value))
        raise ValueError(f"unknown function '{name}'")
    if isinstance(expr, ast.BinOp):
        op = expr.op
        left = _eval(expr.left, ctx)
        right = _eval(expr.right, ctx)
        if op == "and":
            a, b = _truth(left), _truth(right)
            if a is False or b is False:
                return False
            if a is True and b is True:
                return True
            return None
        if op == "or":
            a, b = _truth(left), _truth(right)
            if a is True or b is True:
                return True
            if a is False and b is False:
                return False
            return None
        if left is None or right is None:
            return None
        if op in ast.COMPARISONS:
            _check_comparable(left, right)
            try:
                return {
                    "=": lambda: left == right,
                    "!=": lambda: left != right,
                    "<": lambda: left < right,
                    "<=": lambda: left <= right,
                    ">": lambda: left > right,
                    ">=": lambda: left >= right,
                }[op]()
            except TypeError as error:
                raise ValueError(str(error)) from None
        a, b = _number(left), _number(right)
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if op == "/":
            return None if b == 0 else a / b
        if op == "%":
            if b == 0:
                return None
            if isinstance(a, int) and isinstance(b, int):
                r = abs(a) % abs(b)
                return -r if a < 0 else r
            return math.fmod(a, b)
        raise ValueError(f"unknown operator {op}")
    if isinstance(expr, ast.Not):
        value = _truth(_eval(expr.operand, ctx))
        return None if value is None else not value
    if isinstance(expr, ast.Negate):
        value = _eval(expr.operand, ctx)
        return None if value is None else -_number(value)
    if isinstance(expr, ast.InList):
        value = _eval(expr.operand, ctx)
        if value is None:
            return None
        found = False
        for literal in expr.values:
            _check_comparable(value, literal.value)
            if value == literal.value:
                found = True
        return (not found) if expr.negated else found
    raise ValueError(f"unsupported expression {expr!r}")


# ---- the oracle ---------------------------------------------------------------------------


class _Query:
    """The parsed query with everything the definitions need."""

    def __init__(self, text: str, time_col: str):
        try:
            query = parse(text)
        except Exception as error:  # syntax errors are the query's fault too
            raise ValueError(str(error)) from error
        self.query = query
        self.text = text
        if query.group_by or query.aggregates:
            raise NotImplementedError("GROUP BY / AGG are not defined in docs/semantics.md")
        comps = query.components
        names = [c.var for c in comps]
        if len(set(names)) != len(names):
            raise ValueError("a variable is declared twice")
        self.components = comps
        self.positives = [c for c in comps if not c.negated]
        if not self.positives:
            raise ValueError("the pattern needs at least one positive component")
        self.k = len(self.positives)
        self.pos_index = {c.var: i for i, c in enumerate(self.positives)}
        # negated components with their gap
        self.negations: list[tuple[ast.Component, int]] = []
        seen_positive = 0
        for c in comps:
            if c.negated:
                self.negations.append((c, seen_positive))
            else:
                seen_positive += 1
        strategy = (query.strategy or "SKIP_TILL_ANY_MATCH").upper()
        if strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {query.strategy}")
        self.strategy = strategy
        self.window = None
        if query.within is not None:
            amount, unit = query.within.amount, query.within.unit
            self.window = amount if unit is None else amount * UNIT_IN_MICROSECONDS[unit]
        for c, gap in self.negations:
            if gap in (0, self.k) and self.window is None:
                raise ValueError(f"negation '{c.var}' at the start or end needs WITHIN")
        self.tiebreak: tuple[str, ...] = ()
        if query.order_by:
            if query.order_by[0] != time_col:
                raise ValueError(f"ORDER BY must start with the time column '{time_col}'")
            if len(query.order_by) > 2:
                raise ValueError("ORDER BY takes the time column and at most one tie-break column")
            self.tiebreak = tuple(query.order_by[1:])
        analyzer = _Analyzer(comps)
        self.key = key_attributes(query)
        # Key equalities (`x.attr = y.attr` on a key attribute, `[attr]` written out) always
        # hold within a partition, which the oracle enforces directly: they are not
        # evaluated.  This is also why `P1.attr = n.attr` with a Kleene P1 and a negated n
        # is allowed when attr is a key attribute.
        self.conjuncts: list[Conjunct] = []
        for expr in _where_exprs(query):
            eq = _equality(expr)
            if eq is not None and eq[2] in self.key:
                for var in eq[:2]:
                    analyzer.check_var(var)
                if not (analyzer.by_var[eq[0]].negated and analyzer.by_var[eq[1]].negated):
                    continue
            self.conjuncts.append(analyzer.conjunct(expr))
        self.positive_conjuncts = [c for c in self.conjuncts if not c.neg_vars]
        # RETURN
        self.returns: list[tuple[str, Conjunct]] = []
        for item in query.returns:
            if isinstance(item.expr, ast.VarRef):
                analyzer.check_var(item.expr.var)
                if analyzer.by_var[item.expr.var].negated:
                    raise ValueError(f"RETURN names the negated variable '{item.expr.var}'")
                if item.alias is not None:
                    raise ValueError(f"RETURN {item.expr.var} cannot have an alias")
                continue  # already an output column
            info = Conjunct(item.expr)
            analyzer.scan(item.expr, info)
            if any(analyzer.by_var[v].negated for v in info.mentioned):
                raise ValueError("RETURN cannot mention a negated variable")
            if info.prev_vars:
                raise ValueError("RETURN cannot use prev()")
            mixed = {v for v in info.elem_vars if v in info.agg_vars}
            if mixed:
                raise ValueError(
                    f"a RETURN item mixes element references and aggregates of {sorted(mixed)}"
                )
            if len(info.elem_vars) > 1:
                raise ValueError("a RETURN item may have element references to one Kleene var")
            self.returns.append((item.alias or self._column_name(item), info))

    def _column_name(self, item: ast.OutputItem) -> str:
        """The item's source text, each run of non-word characters replaced by one `_`,
        none at either end."""
        span = item.span if item.span.line > 0 else item.expr.span
        if span.line > 0:
            lines = self.text.splitlines(keepends=True)
            start = sum(len(x) for x in lines[: span.line - 1]) + span.column - 1
            end = sum(len(x) for x in lines[: span.end_line - 1]) + span.end_column - 1
            source = self.text[start:end]
        else:
            source = ast.to_text(item.expr)
        return re.sub(r"\W+", "_", re.sub(r"^\W+|\W+$", "", source))


def _holds(c: Conjunct, lists: dict[str, list[dict]], fixed=None) -> bool:
    """Is conjunct `c` TRUE for every element (combination) of its Kleene element refs?

    `lists` binds every variable to its events; `fixed` pins Kleene variables to one
    element: var -> (element, previous element or None).
    """
    fixed = fixed or {}
    loop_vars = [v for v in c.elem_vars if v not in fixed]
    for v, (_, previous) in fixed.items():
        if v in c.prev_vars and previous is None:
            return True  # prev-conjuncts are not checked on the first element
    cur: dict[str, dict] = {}
    for v in c.mentioned:
        if v not in c.elem_vars:
            cur[v] = lists[v][0]
    for combo in product(*(range(len(lists[v])) for v in loop_vars)):
        if any(v in c.prev_vars and i == 0 for v, i in zip(loop_vars, combo)):
            continue
        prv: dict[str, dict | None] = {}
        for v, i in zip(loop_vars, combo):
            cur[v] = lists[v][i]
            prv[v] = lists[v][i - 1] if i > 0 else None
        for v, (element, previous) in fixed.items():
            cur[v] = element
            prv[v] = previous
        if _eval(c.expr, _Ctx(cur, prv, lists)) is not True:
            return False
    return True


def oracle_matches(
    query_text: str,
    events: list[dict],
    *,
    type_col: str = "type",
    time_col: str = "ts",
    id_col: str = "id",
) -> list[dict]:
    q = _Query(query_text, time_col)

    def ts(e):
        return e[time_col]

    def tie(e):
        return tuple((0,) if e.get(c) is None else (1, e.get(c)) for c in q.tiebreak)

    order = sorted(events, key=lambda e: (ts(e), tie(e), e[id_col]))
    pos = {e[id_col]: i for i, e in enumerate(order)}

    def P(e):
        return pos[e[id_col]]

    def prec(e, f):  # e ≺ f
        return (ts(e), tie(e)) < (ts(f), tie(f))

    def has_type(e, comp: ast.Component):
        return comp.event_type is None or e.get(type_col) == comp.event_type

    w = q.window

    def partition(e):
        """The key values of `e`; None (no partition) when one of them is null."""
        values = tuple(e.get(a) for a in q.key)
        return None if any(v is None for v in values) else values

    # ---- enumerate bindings: each singleton one event, each Kleene a non-empty subsequence
    options: list[list[tuple[dict, ...]]] = []
    for comp in q.positives:
        pool = [e for e in order if has_type(e, comp)]
        if comp.kleene:
            opts = [
                combo
                for n in range(1, len(pool) + 1)
                for combo in combinations(pool, n)
                if all(prec(x, y) for x, y in pairwise(combo))
            ]
        else:
            opts = [(e,) for e in pool]
        opts.sort(key=lambda opt: P(opt[0]))
        options.append(opts)
    starts = [[P(opt[0]) for opt in opts] for opts in options]

    def bindings(i, chosen, first):
        if i == q.k:
            yield list(chosen)
            return
        # e ≺ f implies P(e) < P(f): only options starting after the last event can follow
        begin = bisect_right(starts[i], P(chosen[-1][-1])) if chosen else 0
        for opt in options[i][begin:]:
            if chosen and not prec(chosen[-1][-1], opt[0]):
                continue
            head = first if first is not None else opt[0]
            if w is not None and ts(opt[-1]) - ts(head) >= w:
                continue  # times never decrease along a binding: no extension fits either
            chosen.append(opt)
            yield from bindings(i + 1, chosen, head)
            chosen.pop()

    def lists_of(binding):
        return {comp.var: list(opt) for comp, opt in zip(q.positives, binding)}

    def is_candidate(binding) -> bool:
        flat = [e for opt in binding for e in opt]
        first, last = flat[0], flat[-1]
        # 1. types
        for comp, opt in zip(q.positives, binding):
            if not opt or (not comp.kleene and len(opt) != 1):
                return False
            if not all(has_type(e, comp) for e in opt):
                return False
        # 2. order
        if not all(prec(x, y) for x, y in pairwise(flat)):
            return False
        # the key: every bound event in one partition (none when a key value is null)
        part = partition(first)
        if part is None or any(partition(e) != part for e in flat):
            return False
        # 3. window
        if w is not None and not ts(last) - ts(first) < w:
            return False
        # 4. WHERE
        lists = lists_of(binding)
        if not all(_holds(c, lists) for c in q.positive_conjuncts):
            return False
        # 5. negation
        for comp, gap in q.negations:
            mine = [c for c in q.conjuncts if comp.var in c.neg_vars]
            for e in order:
                if not has_type(e, comp) or partition(e) != part:
                    continue  # only events of the match's partition can forbid it
                if gap == 0:
                    inside = prec(e, first) and ts(e) > ts(last) - w
                elif gap == q.k:
                    inside = prec(last, e) and ts(e) < ts(first) + w
                else:
                    inside = prec(binding[gap - 1][-1], e) and prec(e, binding[gap][0])
                if not inside:
                    continue
                if all(_holds(c, {**lists, comp.var: [e]}) for c in mine):
                    return False
        return True

    # ---- strategies
    def roles(binding):
        """(event, positive index, element index) in pattern order."""
        return [(e, i, j) for i, opt in enumerate(binding) for j, e in enumerate(opt)]

    def eligible(e, i, j, binding) -> bool:
        comp = q.positives[i]
        if not has_type(e, comp) or partition(e) != partition(binding[0][0]):
            return False  # an event of another partition is never eligible
        allowed = {c.var for c in q.positives[: i + 1]}
        lists = {q.positives[x].var: list(binding[x]) for x in range(i)}
        if comp.kleene:
            earlier = list(binding[i][:j])
            lists[comp.var] = [*earlier, e]
            previous = earlier[-1] if earlier else None
            for c in q.positive_conjuncts:
                if (
                    c.pos_vars <= allowed
                    and comp.var in c.elem_vars
                    and not _holds(c, lists, {comp.var: (e, previous)})
                ):
                    return False
        else:
            lists[comp.var] = [e]
            for c in q.positive_conjuncts:
                if c.pos_vars <= allowed and comp.var in c.mentioned and not _holds(c, lists):
                    return False
        return True

    def next_match(binding) -> bool:
        flat = roles(binding)
        for (before, _, _), (e, i, j) in pairwise(flat):
            following = None
            for f in order[P(before) + 1 :]:
                if prec(before, f) and eligible(f, i, j, binding):
                    following = f
                    break
            if following is None or following[id_col] != e[id_col]:
                return False
        return True

    def strict(binding) -> bool:
        flat = [e for opt in binding for e in opt]
        for before, e in pairwise(flat):
            if not prec(before, e):
                return False
            part = partition(before)
            if part is None or partition(e) != part:
                return False
            between = order[P(before) + 1 : P(e)]
            if any(partition(f) == part for f in between):
                return False
        return True

    rows = []
    for binding in bindings(0, [], None):
        if not is_candidate(binding):
            continue
        if q.strategy == "SKIP_TILL_NEXT_MATCH" and not next_match(binding):
            continue
        if q.strategy == "STRICT_CONTIGUITY" and not strict(binding):
            continue
        rows.append((binding, _row(q, binding, ts, id_col)))

    def sort_key(item):
        binding, row = item
        keys = tuple((0,) if row[a] is None else (1, row[a]) for a in q.key)
        return (keys, row["end"], row["start"], tuple(P(e) for opt in binding for e in opt))

    rows.sort(key=sort_key)
    return [row for _, row in rows]


def _row(q: _Query, binding, ts, id_col) -> dict[str, Any]:
    flat = [e for opt in binding for e in opt]
    row: dict[str, Any] = {"start": ts(flat[0]), "end": ts(flat[-1])}
    for attr in q.key:
        row[attr] = flat[0].get(attr)
    lists = {}
    for comp, opt in zip(q.positives, binding):
        lists[comp.var] = list(opt)
        row[comp.var] = [e[id_col] for e in opt] if comp.kleene else opt[0][id_col]
    for name, info in q.returns:
        cur = {v: lists[v][0] for v in info.mentioned if v not in info.elem_vars}
        if info.elem_vars:  # element references of one Kleene variable: a list of values
            v = info.elem_vars[0]
            row[name] = [
                _eval(info.expr, _Ctx({**cur, v: element}, {}, lists)) for element in lists[v]
            ]
        else:
            row[name] = _eval(info.expr, _Ctx(cur, {}, lists))
    return row
