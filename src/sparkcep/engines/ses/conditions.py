"""The WHERE conditions of an event set pattern, evaluated on one binding at a time.

A binding maps each variable to the positions of its events in the `EventTable` (one
for a plain variable, one or more in sequence for `v+`). Definition 2's interpretation,
as docs/semantics.md states it for the whole language:

- a property of `v` holds for every bound event (those are the local conditions: the
  component bitmask already says which events satisfy them);
- a relationship `x.A φ y.A` holds for every combination of the events bound to x and y;
- `prev(v.A) φ v.A` holds for every pair of consecutive events of v (not on its first);
- `count(v)`, `sum/avg/min/max/first/last(v.A)` aggregate the events of v.

Values follow SQL, as `sparkcep.expressions` computes them column-wise: a comparison with
a null is unknown, and a condition holds only when it is TRUE.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from sparkcep.language import ast
from sparkcep.plan import AGGREGATES, Plan

Binding = dict[str, list[int]]


@dataclass(frozen=True)
class Conjunct:
    """A condition on several variables, with how it refers to them."""

    expr: ast.Expr
    variables: frozenset[str]
    elements: tuple[str, ...]  # + variables referred to element by element (or by prev)
    prevs: frozenset[str]  # + variables under prev()
    final: bool  # refers to an aggregate of a + variable: checked on the complete binding


def _refs(expr: ast.Expr) -> tuple[set[str], set[str], set[str]]:
    """(element references, prev references, aggregated variables) of an expression."""
    element: set[str] = set()
    prev: set[str] = set()
    aggregate: set[str] = set()

    def visit(node: ast.Expr, inside: bool) -> None:
        if isinstance(node, ast.AttrRef):
            (aggregate if inside else element).add(node.var)
        elif isinstance(node, ast.VarRef):
            aggregate.add(node.var)
        elif isinstance(node, ast.Call):
            if node.name == "prev" and not inside:
                prev.add(node.args[0].var)  # type: ignore[union-attr]
                return
            for arg in node.args:
                visit(arg, inside or node.name in AGGREGATES)
        elif isinstance(node, ast.BinOp):
            visit(node.left, inside)
            visit(node.right, inside)
        elif isinstance(node, ast.Not | ast.Negate | ast.InList):
            visit(node.operand, inside)

    visit(expr, False)
    return element, prev, aggregate


def conjunct(expr: ast.Expr, kleene: set[str]) -> Conjunct:
    element, prev, aggregate = _refs(expr)
    elements = tuple(sorted(v for v in element | prev if v in kleene))
    return Conjunct(
        expr,
        frozenset(element | prev | aggregate),
        elements,
        frozenset(prev & kleene),
        any(v in kleene for v in aggregate),
    )


class Conditions:
    """A plan's cross-variable conditions over a table's attribute columns.

    `columns` maps attribute names to Python lists (None for null) indexed by table
    position.

    >>> from sparkcep.plan import analyze
    >>> plan = analyze("PATTERN SEQ({c, p+}, {b}) WHERE c.v < b.v AND prev(p.v) < p.v")
    >>> conds = Conditions(plan, {"v": [1, 5, 7, 9]})
    >>> conds.holds({"c": [0], "p": [1, 2], "b": [3]})
    True
    >>> conds.holds({"c": [0], "p": [2, 1], "b": [3]})   # 7 then 5 is not increasing
    False
    """

    def __init__(self, plan: Plan, columns: dict[str, list]):
        self.plan = plan
        self.columns = columns
        self.kleene = {c.var for c in plan.positives if c.kleene}
        self.conjuncts = [conjunct(c.expr, self.kleene) for c in plan.conditions]
        self.any_final = any(c.final for c in self.conjuncts)
        # Conjuncts to check when v gets an element (not the final ones).
        self.on_element = {
            v: [c for c in self.conjuncts if not c.final and v in c.variables]
            for v in (x.var for x in plan.positives)
        }

    def stable(self, var: str) -> str | None:
        """How an event that fits `var` now fits it once more is bound: "always" (no
        prev() on it, no condition with the elements of another + variable and no
        condition on an aggregate anywhere), "neighbours" (the same but with prev(): it
        depends on its neighbours in var only), or None (it depends on more)."""
        if self.any_final:
            return None
        for c in self.conjuncts:
            if var in c.elements and len(c.elements) > 1:
                return None
        if any(var in c.prevs for c in self.conjuncts):
            return "neighbours"
        return "always"

    # ---- checks
    def holds(self, binding: Binding) -> bool:
        """Every conjunct on a complete binding."""
        return all(self._all_combinations(c, binding, None) for c in self.conjuncts)

    def holds_final(self, binding: Binding) -> bool:
        return all(self._all_combinations(c, binding, None) for c in self.conjuncts if c.final)

    def fits(self, var: str, binding: Binding, bound: set[str] | frozenset[str]) -> bool:
        """The conjuncts that the newest element of `var` completes: those whose variables
        are all in `bound`, for every combination that includes that element."""
        newest = len(binding[var]) - 1
        for c in self.on_element[var]:
            if not c.variables <= bound:
                continue
            if not self._all_combinations(c, binding, (var, newest)):
                return False
        return True

    def _all_combinations(self, c: Conjunct, binding: Binding, fixed) -> bool:
        ranges = []
        for v in c.elements:
            lo = 1 if v in c.prevs else 0
            if fixed is not None and v == fixed[0]:
                ranges.append([fixed[1]] if fixed[1] >= lo else [])
            else:
                ranges.append(range(lo, len(binding[v])))
        for choice in itertools.product(*ranges):
            value = self.evaluate(c.expr, binding, dict(zip(c.elements, choice)))
            if value is None or not value:
                return False
        return True

    # ---- values
    def evaluate(self, expr: ast.Expr, binding: Binding, choice: dict[str, int]):
        """The value of `expr` (None for null); `choice` picks the element of each +
        variable that element references read."""
        if isinstance(expr, ast.Literal):
            return expr.value
        if isinstance(expr, ast.AttrRef):
            return self.columns[expr.attr][binding[expr.var][choice.get(expr.var, 0)]]
        if isinstance(expr, ast.Call):
            return self._call(expr, binding, choice)
        if isinstance(expr, ast.BinOp):
            if expr.op in ("and", "or"):
                return _logic(
                    expr.op,
                    self.evaluate(expr.left, binding, choice),
                    self.evaluate(expr.right, binding, choice),
                )
            left = self.evaluate(expr.left, binding, choice)
            right = self.evaluate(expr.right, binding, choice)
            if left is None or right is None:
                return None
            return _binary(expr.op, left, right)
        if isinstance(expr, ast.Not):
            value = self.evaluate(expr.operand, binding, choice)
            return None if value is None else not value
        if isinstance(expr, ast.Negate):
            value = self.evaluate(expr.operand, binding, choice)
            return None if value is None else -value
        if isinstance(expr, ast.InList):
            value = self.evaluate(expr.operand, binding, choice)
            if value is None:
                return None
            hit = any(value == v.value for v in expr.values)
            return not hit if expr.negated else hit
        raise TypeError(f"cannot evaluate {expr!r}")

    def _call(self, expr: ast.Call, binding: Binding, choice: dict[str, int]):
        if expr.name == "abs":
            value = self.evaluate(expr.args[0], binding, choice)
            return None if value is None else abs(value)
        arg = expr.args[0]
        positions = binding[arg.var]  # type: ignore[union-attr]
        if expr.name == "prev":
            return self.columns[arg.attr][positions[choice[arg.var] - 1]]  # type: ignore[union-attr]
        if expr.name == "count":
            return len(positions)
        values = [self.columns[arg.attr][p] for p in positions]  # type: ignore[union-attr]
        if expr.name == "first":
            return values[0]
        if expr.name == "last":
            return values[-1]
        present = [v for v in values if v is not None]
        if not present:
            return None
        if expr.name == "sum":
            return _sum(present)
        if expr.name == "avg":
            return float(_sum(present)) / len(present)
        return min(present) if expr.name == "min" else max(present)

    def value(self, column, binding: Binding):
        """A RETURN column's value: a list over the elements of its + variable, or one."""
        if not column.is_list:
            return self.evaluate(column.expr, binding, {})
        element, prev, _ = _refs(column.expr)
        var = next(v for v in sorted(element | prev) if v in self.kleene)
        return [self.evaluate(column.expr, binding, {var: i}) for i in range(len(binding[var]))]


def _sum(values: list):
    total = values[0]
    for v in values[1:]:
        total = total + v
    return total


def _logic(op: str, a, b):
    a_true, b_true = a is not None and bool(a), b is not None and bool(b)
    a_false, b_false = a is not None and not a, b is not None and not b
    if op == "and":
        return False if a_false or b_false else (True if a_true and b_true else None)
    return True if a_true or b_true else (False if a_false and b_false else None)


def _binary(op: str, left, right):
    if op == "=":
        return left == right
    if op == "!=":
        return left != right
    if op == "<":
        return left < right
    if op == "<=":
        return left <= right
    if op == ">":
        return left > right
    if op == ">=":
        return left >= right
    if op == "+":
        return left + right
    if op == "-":
        return left - right
    if op == "*":
        return left * right
    if right == 0:  # x / 0 and x % 0 are null, as Spark's try_divide
        return None
    if op == "/":
        return float(left) / float(right)
    if op == "%":
        if isinstance(left, int) and isinstance(right, int):
            rest = abs(left) % abs(right)
            return rest if left >= 0 else -rest  # the sign of the dividend, as SQL
        return math.fmod(left, right)
    raise ValueError(op)
