"""Plain dataclasses built by the parser: the query as written, with source positions.

Nothing here knows about data or engines; `sparkcep.plan` turns a `Query` into a `Plan`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sparkcep.span import Span  # (errors point at one too)

# ---- expressions -------------------------------------------------------------------------


@dataclass(frozen=True)
class Expr:
    span: Span = field(compare=False, repr=False, kw_only=True, default_factory=Span.unknown)


@dataclass(frozen=True)
class Literal(Expr):
    value: Any  # int | float | str | bool


@dataclass(frozen=True)
class AttrRef(Expr):
    """`var.attr`: the attribute of the event bound to `var` (each element for a Kleene var)."""

    var: str
    attr: str


@dataclass(frozen=True)
class VarRef(Expr):
    """A bare variable: `a` in RETURN a, or `b` in count(b)."""

    var: str


@dataclass(frozen=True)
class Call(Expr):
    """`name(args)`: prev(b.x), count/sum/avg/min/max/first/last(b.x), abs(x), ..."""

    name: str  # lower case
    args: tuple[Expr, ...]


@dataclass(frozen=True)
class BinOp(Expr):
    """Arithmetic (+ - * / %), comparison (= != < <= > >=) or logic (and, or)."""

    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Not(Expr):
    operand: Expr


@dataclass(frozen=True)
class Negate(Expr):
    operand: Expr


@dataclass(frozen=True)
class InList(Expr):
    operand: Expr
    values: tuple[Literal, ...]
    negated: bool = False


@dataclass(frozen=True)
class Equivalence(Expr):
    """`[attr]`: every component of the pattern has the same value of `attr` (SASE)."""

    attr: str


COMPARISONS = ("=", "!=", "<", "<=", ">", ">=")
ARITHMETIC = ("+", "-", "*", "/", "%")
LOGIC = ("and", "or")


# ---- pattern ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Component:
    """One element of SEQ(...): `Type var`, `!Type var`, `Type+ var[]` or `ANY var`."""

    var: str
    event_type: str | None  # None means ANY
    negated: bool = False
    kleene: bool = False
    span: Span = field(compare=False, repr=False, default_factory=Span.unknown)
    # The position in SEQ(...) of the event set `{...}` of two or more variables this
    # component was written in; None for a component of its own (a set of one).
    in_set: int | None = None


@dataclass(frozen=True)
class Duration:
    amount: float
    unit: str | None  # normalised unit name (ms, s, min, h, days, us, ns) or None for bare
    span: Span = field(compare=False, repr=False, default_factory=Span.unknown)


@dataclass(frozen=True)
class OutputItem:
    """An item of RETURN or AGG: an expression and the column name it gets."""

    expr: Expr
    alias: str | None
    span: Span = field(compare=False, repr=False, default_factory=Span.unknown)


@dataclass(frozen=True)
class MissingRate:
    """`MISSING RATE 0.1` (var None: every component) or one item of `MISSING RATE x 0.05`."""

    var: str | None
    rate: float
    span: Span = field(compare=False, repr=False, default_factory=Span.unknown)


@dataclass(frozen=True)
class EpisodeEdge:
    """`u -> v` in an EPISODE: the event of u precedes the event of v."""

    source: str
    target: str
    source_span: Span = field(compare=False, repr=False, default_factory=Span.unknown)
    target_span: Span = field(compare=False, repr=False, default_factory=Span.unknown)


@dataclass(frozen=True)
class Episode:
    """`EPISODE (W w, X x, Y y; w -> y, x -> y)`: vertices (symbol and variable, kept
    as components) and the edges of the DAG (docs/episodes.md)."""

    vertices: tuple[Component, ...]
    edges: tuple[EpisodeEdge, ...] = ()
    span: Span = field(compare=False, repr=False, default_factory=Span.unknown)


@dataclass(frozen=True)
class DelayLaw:
    """One item of `DELAY z EXPONENTIAL(2 min)`: the law of z's gap from the previous positive."""

    var: str
    law: str  # as written (EXPONENTIAL, UNIFORM, NORMAL, EMPIRICAL, ...)
    args: tuple[Duration, ...]
    span: Span = field(compare=False, repr=False, default_factory=Span.unknown)
    law_span: Span = field(compare=False, repr=False, default_factory=Span.unknown)


@dataclass(frozen=True)
class Prediction:
    """`PREDICT Z WITHIN 15 min`: the consequent's symbol and the rule window."""

    symbol: str
    within: Duration
    span: Span = field(compare=False, repr=False, default_factory=Span.unknown)


@dataclass(frozen=True)
class Query:
    components: tuple[Component, ...]
    where: Expr | None = None
    strategy: str | None = None
    strategy_span: Span = field(compare=False, repr=False, default_factory=Span.unknown)
    within: Duration | None = None
    order_by: tuple[str, ...] = ()
    order_span: Span = field(compare=False, repr=False, default_factory=Span.unknown)
    returns: tuple[OutputItem, ...] = ()
    group_by: tuple[str, ...] = ()
    group_span: Span = field(compare=False, repr=False, default_factory=Span.unknown)
    aggregates: tuple[OutputItem, ...] = ()
    emit: str | None = None  # EMIT ON MATCH | EMIT EVERY TRIGGER: "match" | "every trigger"
    emit_span: Span = field(compare=False, repr=False, default_factory=Span.unknown)
    # probabilistic detection (docs/ayac.md): MISSING RATE, DELAY, THRESHOLD, USING MODEL
    missing_rates: tuple[MissingRate, ...] = ()
    missing_span: Span = field(compare=False, repr=False, default_factory=Span.unknown)
    delays: tuple[DelayLaw, ...] = ()
    delay_span: Span = field(compare=False, repr=False, default_factory=Span.unknown)
    threshold: float | None = None
    threshold_span: Span = field(compare=False, repr=False, default_factory=Span.unknown)
    model_path: str | None = None
    model_span: Span = field(compare=False, repr=False, default_factory=Span.unknown)
    select: str | None = None  # SELECT: "all" | "earliest maximal" (event set patterns)
    select_span: Span = field(compare=False, repr=False, default_factory=Span.unknown)
    inclusive: bool = False  # WITHIN w INCLUSIVE: last.ts - first.ts <= w
    inclusive_span: Span = field(compare=False, repr=False, default_factory=Span.unknown)
    # TIME BETWEEN lower AND upper [WIDTH AT MOST width]: an interval time (imprecise)
    time_lower: Expr | None = None
    time_upper: Expr | None = None
    time_width: Duration | None = None
    time_span: Span = field(compare=False, repr=False, default_factory=Span.unknown)
    skip: str | None = None  # AFTER MATCH SKIP: PAST_LAST_EVENT | TO_NEXT_EVENT
    skip_span: Span = field(compare=False, repr=False, default_factory=Span.unknown)
    timeouts: bool = False  # OUTPUT TIMEOUTS
    timeouts_span: Span = field(compare=False, repr=False, default_factory=Span.unknown)
    funnel: bool = False  # FUNNEL SEQ(...) instead of PATTERN
    name: str | None = None
    text: str = field(default="", compare=False, repr=False)
    span: Span = field(compare=False, repr=False, default_factory=Span.unknown)
    # Episode rules (RULE name: EPISODE ...): the components are the vertices.
    episode: Episode | None = None
    predict: Prediction | None = None
    symbol: Expr | None = None  # SYMBOL expr: an event's symbol from its columns
    symbol_span: Span = field(compare=False, repr=False, default_factory=Span.unknown)
    confidence: float | None = None
    confidence_span: Span = field(compare=False, repr=False, default_factory=Span.unknown)


def walk(expr: Expr):
    """Yield `expr` and every sub-expression, depth first."""
    yield expr
    if isinstance(expr, BinOp):
        yield from walk(expr.left)
        yield from walk(expr.right)
    elif isinstance(expr, (Not | Negate, InList)):
        yield from walk(expr.operand)
    elif isinstance(expr, Call):
        for arg in expr.args:
            yield from walk(arg)


def conjuncts(expr: Expr | None) -> list[Expr]:
    """Split a WHERE expression on its top-level ANDs."""
    if expr is None:
        return []
    if isinstance(expr, BinOp) and expr.op == "and":
        return conjuncts(expr.left) + conjuncts(expr.right)
    return [expr]


def to_text(expr: Expr) -> str:
    """Render an expression back to query syntax (used by `explain` and error messages)."""
    if isinstance(expr, Literal):
        if isinstance(expr.value, bool):
            return "TRUE" if expr.value else "FALSE"
        if isinstance(expr.value, str):
            return "'" + expr.value.replace("'", "\\'") + "'"
        return repr(expr.value)
    if isinstance(expr, AttrRef):
        attr = expr.attr if expr.attr.isidentifier() else f"`{expr.attr}`"
        return f"{expr.var}.{attr}"
    if isinstance(expr, VarRef):
        return expr.var
    if isinstance(expr, Call):
        if expr.name == "like":
            return f"({to_text(expr.args[0])} LIKE {to_text(expr.args[1])})"
        return f"{expr.name}({', '.join(to_text(a) for a in expr.args)})"
    if isinstance(expr, BinOp):
        op = expr.op.upper() if expr.op in LOGIC else expr.op
        return f"({to_text(expr.left)} {op} {to_text(expr.right)})"
    if isinstance(expr, Not):
        return f"NOT {to_text(expr.operand)}"
    if isinstance(expr, Negate):
        return f"-{to_text(expr.operand)}"
    if isinstance(expr, InList):
        items = ", ".join(to_text(v) for v in expr.values)
        return f"{to_text(expr.operand)} {'NOT IN' if expr.negated else 'IN'} ({items})"
    if isinstance(expr, Equivalence):
        return f"[{expr.attr}]"
    raise TypeError(f"not an expression: {expr!r}")


def bare_text(text: str) -> str:
    """A condition's text without the parentheses around the whole of it."""
    if text.startswith("(") and text.endswith(")"):
        depth = 0
        for at, char in enumerate(text):
            depth += {"(": 1, ")": -1}.get(char, 0)
            if depth == 0 and at < len(text) - 1:
                return text
        return text[1:-1]
    return text
