"""Brute-force oracle for MATCH_RECOGNIZE, written from the standard's definitions (SQL:2016
row pattern recognition, as docs/match_recognize.md states them after Trino's
documentation), not from the engine.

- Rows are partitioned and ordered; each partition is scanned from its first row: at the
  current row the *preferred* match is looked for by backtracking over the pattern in
  preferment order (alternatives left to right, PERMUTE's permutations in lexicographic
  order, a greedy quantifier tries one more iteration first, a reluctant one tries to stop
  first; an unbounded quantifier does not start an iteration after an empty one once it
  has done max(min, 1) iterations). The first complete match found is the match.
- A row may be mapped to a variable when its DEFINE is TRUE with the row so mapped, in the
  match so far (running semantics), and within the window.
- After a match the scan goes on as AFTER MATCH SKIP says; after no match or an empty match
  at the next row. Output rows follow ROWS PER MATCH.

Only `sparkcep.language.match_recognize` (the parser) is used from the package.
"""

from __future__ import annotations

import math
from itertools import permutations

from sparkcep.language import ast
from sparkcep.language import match_recognize as mr

__all__ = ["SkipFailure", "oracle_columns", "oracle_match_recognize"]


class SkipFailure(Exception):
    """AFTER MATCH SKIP TO FIRST/LAST v found no v, or would resume at the match's start."""


def _null(value):
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


# ---- expressions, from the definitions ------------------------------------------------------


class _Match:
    """A match (or a match so far): partition rows, its start, labels, and positions."""

    def __init__(self, rows, start, labels, mn, sets):
        self.rows, self.start, self.labels, self.mn, self.sets = rows, start, labels, mn, sets
        self.end = start + len(labels) - 1

    def label(self, pos):
        """CLASSIFIER() of partition row `pos`: its variable if the row is in the match
        (so far: in DEFINE the match ends at the current row), else null."""
        if self.start <= pos <= self.end:
            return self.labels[pos - self.start]
        return None

    def mapped(self, var, upto):
        """Rows of the match up to `upto` mapped to `var` (every row for None)."""
        allowed = None if var is None else self.sets[var]
        return [
            p
            for p in range(self.start, min(upto, self.end) + 1)
            if allowed is None or self.labels[p - self.start] in allowed
        ]


def _var_of(expr):
    for node in mr.walk(expr):
        if isinstance(node, mr.Column | mr.Classifier):
            return node.var
    return None


def _sql_cmp(op, a, b):
    if a is None or b is None:
        return None
    return {
        "=": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b,
    }[op]  # fmt: skip


def _arith(op, a, b):
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
    r = math.fmod(a, b)  # the sign of the dividend
    return int(r) if isinstance(a, int) and isinstance(b, int) else r


def _logic(op, a, b):
    if op == "and":
        if a is False or b is False:
            return False
        return None if a is None or b is None else True
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def _ops(expr, sub):
    """Operators over values computed by `sub` (for both kinds of evaluation)."""
    if isinstance(expr, ast.Literal):
        return expr.value
    if isinstance(expr, ast.BinOp):
        a, b = sub(expr.left), sub(expr.right)
        if expr.op in ("and", "or"):
            return _logic(expr.op, a, b)
        if expr.op in ("=", "!=", "<", "<=", ">", ">="):
            return _sql_cmp(expr.op, a, b)
        return _arith(expr.op, a, b)
    if isinstance(expr, ast.Not):
        a = sub(expr.operand)
        return None if a is None else not a
    if isinstance(expr, ast.Negate):
        a = sub(expr.operand)
        return None if a is None else -a
    if isinstance(expr, mr.IsNull):
        a = sub(expr.operand)
        return (a is not None) if expr.negated else (a is None)
    if isinstance(expr, ast.InList):
        a = sub(expr.operand)
        if a is None:
            return None
        values = [v.value for v in expr.values]
        if a in values:
            hit = True
        elif None in values:
            return None
        else:
            hit = False
        return not hit if expr.negated else hit
    if isinstance(expr, ast.Call) and expr.name == "abs":
        a = sub(expr.args[0])
        return None if a is None else abs(a)
    if isinstance(expr, ast.Call) and expr.name == "coalesce":
        for arg in expr.args:
            a = sub(arg)
            if a is not None:
                return a
        return None
    raise ValueError(f"unsupported {expr!r}")


def _at_row(expr, m: _Match, pos):
    """An expression inside a navigation or aggregate, at partition row `pos`."""
    if isinstance(expr, mr.Column):
        return _null(m.rows[pos].get(expr.name))
    if isinstance(expr, mr.Classifier):
        return m.label(pos)
    if isinstance(expr, mr.MatchNumber):
        return m.mn
    return _ops(expr, lambda e: _at_row(e, m, pos))


def evaluate(expr, m: _Match, cur: int):
    """An expression of DEFINE or MEASURES, at row `cur` of match `m` (running semantics
    for references without FINAL; FINAL sees the whole match)."""
    if isinstance(expr, mr.Column):
        rows = m.mapped(expr.var, cur)
        return _null(m.rows[rows[-1]].get(expr.name)) if rows else None
    if isinstance(expr, mr.Classifier):
        rows = m.mapped(expr.var, cur)
        return m.labels[rows[-1] - m.start] if rows else None
    if isinstance(expr, mr.MatchNumber):
        return m.mn
    if isinstance(expr, mr.Nav):
        return _navigate(expr, m, cur)
    if isinstance(expr, mr.Agg):
        upto = m.end if expr.running is False else cur
        var = expr.var if expr.arg is None else _var_of(expr.arg)
        rows = m.mapped(var, upto)
        if expr.arg is None:
            return len(rows)
        values = [_at_row(expr.arg, m, p) for p in rows]
        known = [v for v in values if v is not None]
        if expr.func == "count":
            return len(known)
        if not known:
            return None
        if expr.func == "sum":
            return sum(known)
        if expr.func == "avg":
            return sum(known) / len(known)
        return min(known) if expr.func == "min" else max(known)
    return _ops(expr, lambda e: evaluate(e, m, cur))


def _logical_row(nav, m, cur):
    upto = m.end if nav.running is False else cur
    rows = m.mapped(_var_of(nav.arg), upto)
    if nav.offset >= len(rows):
        return None
    return rows[nav.offset] if nav.func == "first" else rows[-1 - nav.offset]


def _navigate(nav: mr.Nav, m: _Match, cur: int):
    if nav.func in ("first", "last"):
        row = _logical_row(nav, m, cur)
        return None if row is None else _at_row(nav.arg, m, row)
    if isinstance(nav.arg, mr.Nav):
        base = _logical_row(nav.arg, m, cur)
        inner = nav.arg.arg
    else:
        rows = m.mapped(_var_of(nav.arg), cur)
        base, inner = (rows[-1] if rows else None), nav.arg
    if base is None:
        return None
    target = base - nav.offset if nav.func == "prev" else base + nav.offset
    if not 0 <= target < len(m.rows):
        return None
    return _at_row(inner, m, target)


# ---- matching: backtracking in preferment order --------------------------------------------


class _Matcher:
    def __init__(self, q: mr.MrQuery, rows, ticks, window, sets):
        self.q, self.rows, self.ticks, self.window, self.sets = q, rows, ticks, window, sets
        self.defines = {d.var: d.expr for d in q.defines}

    def find(self, start: int, mn: int):
        """The preferred match at `start`: (labels, exclusions), or None."""
        self.start, self.mn = start, mn
        for _, labels, excl in self.gen(self.q.pattern, start, (), ()):
            return labels, excl
        return None

    def row_fits(self, var, pos, labels) -> bool:
        if pos >= len(self.rows):
            return False
        if self.window is not None and self.ticks[pos] - self.ticks[self.start] >= self.window:
            return False
        expr = self.defines.get(var)
        if expr is None:
            return True
        m = _Match(self.rows, self.start, (*labels, var), self.mn, self.sets)
        return evaluate(expr, m, pos) is True

    def gen(self, node, pos, labels, excl):
        if isinstance(node, mr.PVar):
            if self.row_fits(node.name, pos, labels):
                yield pos + 1, (*labels, node.name), excl
        elif isinstance(node, mr.Anchor):
            if (node.kind == "^" and pos == 0) or (node.kind == "$" and pos == len(self.rows)):
                yield pos, labels, excl
        elif isinstance(node, mr.Concat):
            yield from self.seq(list(node.items), pos, labels, excl)
        elif isinstance(node, mr.Alt):
            for item in node.items:
                yield from self.gen(item, pos, labels, excl)
        elif isinstance(node, mr.Permute):
            for order in permutations(range(len(node.items))):
                yield from self.seq([node.items[i] for i in order], pos, labels, excl)
        elif isinstance(node, mr.Exclude):
            for p2, l2, e2 in self.gen(node.node, pos, labels, excl):
                yield p2, l2, (*e2, (pos, p2))
        elif isinstance(node, mr.Quant):
            yield from self.repeat(node, pos, labels, excl, 0, False)
        else:
            raise TypeError(node)

    def seq(self, items, pos, labels, excl):
        if not items:
            yield pos, labels, excl
            return
        for p2, l2, e2 in self.gen(items[0], pos, labels, excl):
            yield from self.seq(items[1:], p2, l2, e2)

    def repeat(self, q: mr.Quant, pos, labels, excl, count, last_empty):
        may_stop = count >= q.min
        may_go = q.max is None or count < q.max
        if q.max is None and count >= max(q.min, 1) and last_empty:
            may_go = False  # no iteration after an empty one, beyond the copies

        def again():
            if may_go:
                for p2, l2, e2 in self.gen(q.node, pos, labels, excl):
                    yield from self.repeat(q, p2, l2, e2, count + 1, p2 == pos)

        def stop():
            if may_stop:
                yield pos, labels, excl

        for choice in (again, stop) if q.greedy else (stop, again):
            yield from choice()


# ---- the whole query --------------------------------------------------------------------------


def oracle_columns(q: mr.MrQuery, input_columns: list[str]) -> list[tuple[str, str, str]]:
    """(output name, source, reference) of each output column."""
    cols = [(p, "partition", p) for p in q.partition_by]
    if q.rows == "all":
        for o in q.order_by:
            if o.name not in q.partition_by and o.name not in [c[0] for c in cols]:
                cols.append((o.name, "order", o.name))
    cols += [(m.name, "measure", m.name) for m in q.measures]
    if q.rows == "all":
        names = {c[0] for c in cols}
        cols += [(c, "input", c) for c in input_columns if c not in names]
    if q.select is None:
        return cols
    by_name = {c[0]: c for c in cols}
    return [(s.alias or s.name, *by_name[s.name][1:]) for s in q.select]


def _window(q: mr.MrQuery, time_unit):
    if q.within is None:
        return None
    nanos = {"ns": 1, "us": 10**3, "ms": 10**6, "s": 10**9, "min": 6 * 10**10,
             "h": 36 * 10**11, "days": 864 * 10**11}  # fmt: skip
    amount = q.within.amount
    if q.within.unit is not None:
        amount = amount * nanos[q.within.unit] / nanos[time_unit]
    return math.ceil(amount - 1e-9)


def oracle_match_recognize(
    rows: list[dict], text: str, *, id_col: str = "id", time_unit: str | None = None
) -> list[dict]:
    """The output rows of a MATCH_RECOGNIZE query over `rows` (dicts), in scan order."""
    q = mr.parse_match_recognize(text)
    sets = {v: {v} for v in mr.pattern_variables(q.pattern)}
    sets.update({s.name: set(s.members) for s in q.subsets})
    time_col = q.order_by[0].name if q.order_by else None  # None: the input's row order
    tie = q.order_by[1].name if len(q.order_by) > 1 else None
    window = _window(q, time_unit)
    columns = list(rows[0]) if rows else []
    out_cols = oracle_columns(q, columns)
    parts: dict = {}
    for r in rows:
        key = tuple(_null(r[c]) for c in q.partition_by)
        if any(k is None for k in key):
            continue  # a null PARTITION BY value: the row is rejected
        parts.setdefault(key, []).append(r)
    out = []
    for key in sorted(parts, key=lambda k: [(v is not None, v) for v in k]):
        part = parts[key]  # without ORDER BY, in input order (and no WITHIN)
        if time_col is not None:
            part.sort(key=lambda r: (r[time_col], _tie_key(r, tie), r[id_col]))
        ticks = [r[time_col] for r in part] if time_col is not None else None
        out += _scan(q, part, ticks, window, sets, out_cols)
    return out


def _tie_key(row, tie):
    if tie is None:
        return (0,)
    value = _null(row[tie])
    return (0,) if value is None else (1, value)


def _scan(q, part, ticks, window, sets, out_cols):
    matcher = _Matcher(q, part, ticks, window, sets)
    measures = {m.name: m.expr for m in q.measures}
    out, pos, mn, last_matched = [], 0, 0, -1
    show_empty = q.rows == "one" or q.empty != "omit"
    while pos < len(part):
        found = matcher.find(pos, mn + 1)
        if found is None:
            if q.rows == "all" and q.empty == "unmatched" and pos > last_matched:
                out.append(_row(out_cols, part[pos], {n: None for n in measures}))
            pos += 1
            continue
        labels, excl = found
        mn += 1
        m = _Match(part, pos, labels, mn, sets)
        if not labels:
            if show_empty:
                values = {n: _empty_value(e, mn, sets) for n, e in measures.items()}
                out.append(_row(out_cols, part[pos], values))
            pos += 1
            continue
        if q.rows == "one":
            values = {n: evaluate(e, m, m.end) for n, e in measures.items()}
            out.append(_row(out_cols, part[pos], values))
        else:
            for p in range(pos, m.end + 1):
                if any(a <= p < b for a, b in excl):
                    continue
                values = {n: evaluate(e, m, p) for n, e in measures.items()}
                out.append(_row(out_cols, part[p], values))
        last_matched = max(last_matched, m.end)
        pos = _next(q, m, sets)
    return out


def _next(q, m: _Match, sets) -> int:
    skip = q.skip
    if skip.mode == "past_last":
        return m.end + 1
    if skip.mode == "next_row":
        return m.start + 1
    hits = [m.start + i for i, lab in enumerate(m.labels) if lab in sets[skip.var]]
    if not hits:
        raise SkipFailure(f"no row mapped to {skip.var}")
    target = hits[0] if skip.mode == "first" else hits[-1]
    if target == m.start:
        raise SkipFailure("would skip to the first row of the match")
    return target


def _empty_value(expr, mn, sets):
    """A measure of an empty match: references null, aggregates over no row."""
    m = _Match([], 0, (), mn, sets)
    m.end = -1
    return evaluate(expr, m, -1)


def _row(out_cols, source: dict, values: dict) -> dict:
    row = {}
    for name, kind, ref in out_cols:
        row[name] = values[ref] if kind == "measure" else _null(source.get(ref))
    return row
