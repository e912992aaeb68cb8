"""Local conditions -> Spark column expressions, so filtering happens in the JVM.

The semantics match `sparkcep.expressions` (SQL null logic, `/` and `%` give null on a
zero divisor), so the event bitmask is the same whether pandas or Spark computes it.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from sparkcep.expressions import TIME_POINTS
from sparkcep.language import ast

_COMPARE = {
    "=": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}
_ARITHMETIC = {
    "+": F.try_add,
    "-": F.try_subtract,
    "*": F.try_multiply,
    "/": F.try_divide,
    "%": F.try_mod,
}


# The Spark twin of each scalar function of sparkcep.functions (same null rules).
FUNCTIONS = {
    "abs": F.abs,
    "lower": F.lower,
    "upper": F.upper,
    "length": F.char_length,
    "startswith": F.startswith,
    "endswith": F.endswith,
    "contains": F.contains,
    "like": lambda s, p: F.like(s, p),
    "coalesce": F.coalesce,
}

# Functions of a list column (sparkcep.expressions.LIST_FUNCTIONS): programs' row checks.
_LIST_FUNCTIONS = {
    "cardinality": F.size,
    "list_sum": lambda c: F.aggregate(
        c, F.lit(0.0).cast("double"), lambda acc, x: acc + x.cast("double")
    ),
    "list_min": lambda c: F.array_min(c).cast("double"),
}


def to_column(expr: ast.Expr) -> Column:
    """A local (one-variable, element-wise) expression as a Spark Column."""
    if isinstance(expr, ast.Literal):
        return F.lit(expr.value)
    if isinstance(expr, ast.AttrRef):
        return F.col(f"`{expr.attr}`")
    if isinstance(expr, ast.Call) and expr.name in _LIST_FUNCTIONS:
        return _LIST_FUNCTIONS[expr.name](to_column(expr.args[0]))
    if isinstance(expr, ast.Call) and expr.name == TIME_POINTS:  # exact below 2^53 us
        micros = F.unix_micros(to_column(expr.args[0]))
        return F.floor(micros / F.lit(expr.args[1].value)).cast("long")
    if isinstance(expr, ast.Call) and expr.name in FUNCTIONS:
        return FUNCTIONS[expr.name](*[to_column(a) for a in expr.args])
    if isinstance(expr, ast.Negate):
        return F.negative(to_column(expr.operand))
    if isinstance(expr, ast.Not):
        return ~to_column(expr.operand)
    if isinstance(expr, ast.InList):
        hit = to_column(expr.operand).isin([v.value for v in expr.values])
        return ~hit if expr.negated else hit
    if isinstance(expr, ast.BinOp):
        left, right = to_column(expr.left), to_column(expr.right)
        if expr.op == "and":
            return left & right
        if expr.op == "or":
            return left | right
        if expr.op in _COMPARE:
            return _COMPARE[expr.op](left, right)
        return _ARITHMETIC[expr.op](left, right)
    raise TypeError(f"not a local expression: {expr!r}")


def component_condition(comp, type_col: str) -> Column:
    """True where an event can match `comp` (a component or signature): its type and
    local conditions hold."""
    cond = (
        F.lit(True) if comp.event_type is None else F.col(f"`{type_col}`") == F.lit(comp.event_type)
    )
    for expr in comp.local:
        cond = cond & to_column(expr)
    return F.coalesce(cond, F.lit(False))


def mask_column(components, type_col: str) -> Column:
    """The bitmask of components (or signatures) each event can match."""
    mask = F.lit(0).cast("long")
    for comp in components:
        mask = mask + F.when(component_condition(comp, type_col), F.lit(comp.bit)).otherwise(
            F.lit(0)
        )
    return mask


def filter_column(components, type_col: str) -> Column:
    """The pushed-down filter: the event can match some component."""
    cond = F.lit(False)
    for comp in components:
        cond = cond | component_condition(comp, type_col)
    return cond
