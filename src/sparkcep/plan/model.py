"""The plan: what a query means, independent of the engine that answers it.

A `Plan` holds what every engine needs (components, conditions filed where they are
checked, the partition key, the window, the strategy, RETURN columns) and, in `spec`, what
only one family of engines reads (`AggregateSpec` for AGG queries). Engines decide from
the plan whether they can answer it (`sparkcep.engines.choose`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sparkcep.errors import QueryError
from sparkcep.language import ast
from sparkcep.schema import Kind
from sparkcep.timeunits import unit_named

STRATEGIES = ("STRICT_CONTIGUITY", "SKIP_TILL_NEXT_MATCH", "SKIP_TILL_ANY_MATCH")
AGGREGATES = ("count", "sum", "avg", "min", "max", "first", "last")  # over Kleene elements
AGG_FUNCTIONS = ("count", "sum", "avg", "min", "max")  # of the AGG clause


@dataclass(frozen=True)
class Options:
    """How events are read and how a run goes: built once, where the user's options
    arrive (CLI, Python API), and carried by every plan.

    Input: `time_col` (integers or timestamps), `type_col`, `id_col` (None: 0-based row
    numbers in input order), `time_unit` of an integer time column (ns, us, ms or s),
    `tiebreak` (a column ordering equal times, as ORDER BY ts, col), `time_end_col` (the
    end of an interval time) and `prob_col` (an event's probability) for the engines
    that read them. Run: `max_matches` (stop after this many matches: the first found,
    not the first of the sorted output), `memory_budget` (bytes the matches and partial
    matches of one program run may hold; None: 2 GiB), `algorithm`
    (an engine by name, e.g. twostep; None: the best for the query), `sharing` of AGG
    queries (prefix, chop or none), `prune`: the match-window prunings of the engines
    that run behind match windows (none, f, fp or fpc; None: the best, fpc).
    queries (prefix, chop or none).

    Interval time (docs/imprecise.md): `time_end_col` is then the interval's upper bound
    (the time column its lower bound), `pmf_col` a column holding a list of
    probabilities, one per point of the interval (default: uniform), and `max_width`
    the largest `upper - lower` in ticks (U_max) when the query does not show it.
    """

    time_col: str = "ts"
    type_col: str = "type"
    id_col: str | None = None
    time_unit: str | None = None
    tiebreak: str | None = None
    time_end_col: str | None = None
    prob_col: str | None = None
    max_matches: int | None = None
    memory_budget: int | None = None
    algorithm: str | None = None
    sharing: str = "prefix"
    prune: str | None = None
    pmf_col: str | None = None
    max_width: int | None = None

    def __post_init__(self):
        if self.time_unit is not None:  # the language's spellings too: sec, milliseconds
            object.__setattr__(self, "time_unit", unit_named(self.time_unit))


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
class ReturnColumn:
    """A RETURN item: its output name, expression and kind."""

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

    @property
    def output_kind(self) -> Kind:
        """COUNT and integer SUM/MIN/MAX are integers; AVG and float values are floats."""
        if self.func == "count" or (self.kind == "int" and self.func != "avg"):
            return "int"
        return "float"


@dataclass(frozen=True)
class AggregateSpec:
    """What an AGG query adds to its pattern (docs/aggregation.md)."""

    items: tuple[AggItem, ...]
    group_by: tuple[str, ...] = ()
    # When a row is given: "match", at a trigger whose instant ends new matches of its
    # group (EMIT ON MATCH, the default); "every trigger" (EMIT EVERY TRIGGER).
    emit: str = "match"

    def attributes(self) -> list[str]:
        return [i.attr for i in self.items if i.attr is not None]


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
    returns: tuple[ReturnColumn, ...]
    time_kind: Kind
    schema: dict[str, Kind] = field(default_factory=dict, compare=False)
    warnings: tuple[str, ...] = ()
    # What one family of engines adds to the pattern (AggregateSpec for AGG: aseq,
    # twostep); None for a plain pattern query. Engines test its type in `reason`.
    spec: object | None = None
    skip: str | None = None  # AFTER MATCH SKIP: PAST_LAST_EVENT | TO_NEXT_EVENT (nfa)
    timeouts: bool = False  # OUTPUT TIMEOUTS: partial matches whose window closed (nfa)

    @property
    def name(self) -> str | None:
        return self.query.name

    @property
    def positives(self) -> tuple[PlanComponent, ...]:
        return tuple(c for c in self.components if not c.negated)

    @property
    def negated(self) -> tuple[PlanComponent, ...]:
        return tuple(c for c in self.components if c.negated)

    @property
    def has_trailing_negation(self) -> bool:
        return any(n.gap == len(self.positives) for n in self.negations)

    @property
    def text(self) -> str:
        return self.query.text

    @property
    def aggregate(self) -> AggregateSpec | None:
        return self.spec if isinstance(self.spec, AggregateSpec) else None

    def error(self, message: str, span: ast.Span | None = None) -> QueryError:
        """An error in this query, pointing at `span` (the query's start by default)."""
        return QueryError(message, self.text, relative_span(self.query, span or self.query.span))

    def span_of(self, column: str) -> ast.Span:
        """Where the query makes an output column: its RETURN item, else its variable,
        else the query's start."""
        for item, returned in zip(self.query.returns, self.returns):
            if returned.name == column and item.span.line > 0:
                return item.span
        for c in self.components:
            if c.var == column and c.span.line > 0:
                return c.span
        return self.query.span

    def component(self, var: str) -> PlanComponent:
        for c in self.components:
            if c.var == var:
                return c
        raise KeyError(var)

    def local_attributes(self) -> tuple[str, ...]:
        """Attribute columns the local conjuncts read (the pushed-down filter)."""
        names: list[str] = []
        for comp in self.components:
            for expr in comp.local:
                names += [n.attr for n in ast.walk(expr) if isinstance(n, ast.AttrRef)]
        return tuple(dict.fromkeys(names))

    def engine_attributes(self) -> tuple[str, ...]:
        """Attribute columns an engine reads (local conjuncts are evaluated before it)."""
        names: list[str] = []
        exprs = [c.expr for c in self.conditions]
        exprs += [e for n in self.negations for e in n.conditions]
        exprs += [r.expr for r in self.returns]
        for expr in exprs:
            names += [n.attr for n in ast.walk(expr) if isinstance(n, ast.AttrRef)]
        if self.aggregate is not None:
            names += self.aggregate.attributes()
        names += self.key
        return tuple(dict.fromkeys(names))


def relative_span(query: ast.Query, span: ast.Span | None) -> ast.Span | None:
    """`span` in the query's own text: spans are positions in the whole file, and an
    error shows the query's text."""
    if span is None or span.line <= 0 or query.span.line <= 0:
        return span
    q = query.span
    shift_line = q.line - 1

    def col(line: int, column: int) -> int:
        return column - (q.column - 1) if line == q.line else column

    return ast.Span(
        span.line - shift_line,
        col(span.line, span.column),
        span.end_line - shift_line,
        col(span.end_line, span.end_column),
    )
