"""The plan: what a query means, independent of the engine that answers it.

A `Plan` holds what every engine needs (components, conditions filed where they are
checked, the partition key, the window, the strategy, RETURN columns) and, in `spec`, what
only one family of engines reads (`AggregateSpec` for AGG queries). Engines decide from
the plan whether they can answer it (`sparkcep.engines.choose`).
"""

from __future__ import annotations

import difflib
import functools
import inspect
from dataclasses import dataclass, field, fields, replace
from typing import get_type_hints

from sparkcep.budget import parse_size
from sparkcep.errors import QueryError
from sparkcep.language import ast
from sparkcep.schema import Kind
from sparkcep.timeunits import unit_named

STRATEGIES = ("STRICT_CONTIGUITY", "SKIP_TILL_NEXT_MATCH", "SKIP_TILL_ANY_MATCH")
AGGREGATES = ("count", "sum", "avg", "min", "max", "first", "last")  # over Kleene elements
AGG_FUNCTIONS = ("count", "sum", "avg", "min", "max")  # of the AGG clause


def _option(default, help: str, flag: str | None = None, **cli):
    """An option of `Options`: its default, what it means (the CLI's help) and its flag
    (None: Python only); `cli` holds more of the flag (`min`, a `parse` of its text)."""
    return field(default=default, metadata={"help": help, "flag": flag, **cli})


@dataclass(frozen=True)
class Options:
    """How events are read and how a run goes: built once, where the user's options
    arrive (CLI, Python API), and carried by every plan.

    Each field is an option, defined here once: its name is the Python keyword, its
    metadata the CLI flag and help (`takes_options` and the CLI's flags follow from it;
    docs/api.md says more of each). `time_unit` is an integer time column's unit (ns,
    us, ms or s); `max_matches` stops after this many matches (the first found, not the
    first of the sorted output); `memory_budget` is in bytes (None: 2 GiB); interval time
    (docs/imprecise.md): `time_end_col` is the interval's upper bound (the time column its
    lower bound), `pmf_col` a column holding a list of probabilities, one per point of the
    interval (default: uniform), and `max_width` the largest `upper - lower` in ticks
    (U_max) when the query does not show it; `ayac_rows` is what a probabilistic query
    (docs/ayac.md) reports: a row per path (`paths`) or per complex event (`events`).

    >>> Options.from_kwargs(time_col="t", time_unit="sec").time_unit
    's'
    >>> Options.from_kwargs(time_cl="t")
    Traceback (most recent call last):
    TypeError: unknown option 'time_cl' (did you mean time_col?)
    """

    time_col: str = _option("ts", "Time column (integers or timestamps).", "--time")
    type_col: str = _option("type", "Event type column.", "--type")
    id_col: str | None = _option(
        None, "Event id column (run: default the 0-based row number).", "--id"
    )
    time_unit: str | None = _option(
        None, "Unit of an integer time column: ms, s, us or ns.", "--time-unit"
    )
    tiebreak: str | None = _option(None, "Order equal-time events by this column.", "--tiebreak")
    time_end_col: str | None = _option(
        None,
        "Interval time: the column of each event's latest time (--time is its earliest).",
        "--time-upper",
    )
    prob_col: str | None = field(default=None, metadata={"internal": True})  # no engine yet
    max_matches: int | None = _option(None, "Stop after this many matches.", "--max-matches", min=1)
    memory_budget: int | None = _option(
        None,
        "Memory the matches of one run (or Spark task) may hold, e.g. 2GB (default).",
        "--memory-budget",
        parse=parse_size,  # bytes, or a size as written (the flag's text)
    )
    algorithm: str | None = _option(
        None, "An engine by name (e.g. twostep for AGG); default: the best one.", "--algorithm"
    )
    sharing: str = _option(
        "prefix",
        "Several AGG queries: prefix (shared prefix trees), chop (also chop-connect; "
        "whole inputs, not streams) or none.",
        "--sharing",
    )
    prune: str | None = _option(
        None,
        "Match-window prunings of the engines behind match windows: none, f (filter), "
        "fp (and partition), fpc (and necessary conditions; the default).",
        "--prune",
    )
    pmf_col: str | None = _option(
        None, "Interval time: a column of lists, a probability per point.", "--pmf"
    )
    max_width: int | None = _option(
        None, "Interval time: the largest upper - lower (U_max).", "--max-width", min=0
    )
    ayac_rows: str = _option(
        "paths",
        "Probabilistic queries (ayac): a row per path (paths) or per complex event, its "
        "most probable path with the event's probability (events).",
        "--ayac-rows",
    )

    def __post_init__(self):
        if self.time_unit is not None:  # the language's spellings too: sec, milliseconds
            object.__setattr__(self, "time_unit", unit_named(self.time_unit))
        for name, option in OPTIONS.items():  # an option written as text: 2GB
            value = getattr(self, name)
            if "parse" in option.metadata and isinstance(value, str):
                object.__setattr__(self, name, option.metadata["parse"](value))

    @classmethod
    def from_kwargs(cls, options: Options | None = None, /, **kw) -> Options:
        """Options from keywords, over `options` when given; an unknown keyword is a
        TypeError that names the closest option."""
        for name in kw:
            if name not in OPTIONS:
                raise TypeError(f"unknown option '{name}'{did_you_mean(name, OPTIONS)}")
        return replace(options, **kw) if options is not None else cls(**kw)


OPTIONS = {f.name: f for f in fields(Options)}  # name -> its field: default, help, flag
OPTION_TYPES = get_type_hints(Options)
PUBLIC_OPTIONS = tuple(n for n, f in OPTIONS.items() if not f.metadata.get("internal"))
# a stream runs on, and shares no whole input: no match cap, AGG sharing or pruning
STREAM_OPTIONS = tuple(n for n in PUBLIC_OPTIONS if n not in ("max_matches", "sharing", "prune"))
# MATCH_RECOGNIZE's ORDER BY names the time column and tie-break; it has no event type
MATCH_RECOGNIZE_OPTIONS = ("id_col", "time_unit", "max_matches")


def did_you_mean(name: str, names) -> str:
    close = difflib.get_close_matches(name, list(names), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def takes_options(*names: str, required: tuple[str, ...] = (), annotate=None):
    """Decorate `f(..., options: Options | None = None)`: its signature shows each option
    of `names` (default: every public one) as a keyword with its default (`required`
    ones without) after `options`, and a call's option keywords arrive in `options` as
    one `Options`.

    `annotate(name, field, type)` gives a parameter's annotation (the CLI's flags).

    >>> @takes_options("time_col", "id_col")
    ... def run(events, *, options=None):
    ...     return options.time_col, options.id_col
    >>> import inspect; inspect.signature(run)
    <Signature (events, *, options=None, time_col: str = 'ts', id_col: str | None = None)>
    >>> run([], time_col="t"), run([], options=Options(id_col="n"), time_col="t")
    (('t', None), ('t', 'n'))
    >>> run([], sharing="none")
    Traceback (most recent call last):
    TypeError: run() got an unexpected keyword argument 'sharing'
    >>> run([], tim_col="t")
    Traceback (most recent call last):
    TypeError: run() got an unexpected keyword argument 'tim_col' (did you mean time_col?)
    """
    names = names or PUBLIC_OPTIONS

    def decorate(f):
        own = list(inspect.signature(f).parameters.values())

        def option(name, default):
            annotation = (annotate or _plain)(name, OPTIONS[name], OPTION_TYPES[name])
            kind = inspect.Parameter.KEYWORD_ONLY
            return inspect.Parameter(name, kind, default=default, annotation=annotation)

        at = [p.name for p in own].index("options") + 1  # the options stand after it
        before = own[:at]
        rest = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own[at:]]
        shown = [option(n, _EMPTY if n in required else OPTIONS[n].default) for n in names]
        public = inspect.Signature(before + shown + rest)
        # a call binds with every option optional: a required one may come in `options`
        binding = inspect.Signature(before + [option(n, OPTIONS[n].default) for n in names] + rest)

        @functools.wraps(f)
        def with_options(*args, **kw):
            try:
                bound = binding.bind(*args, **kw)
            except TypeError as e:
                stray = next((k for k in kw if k not in public.parameters), None)
                hint = did_you_mean(stray, public.parameters) if stray else ""
                raise TypeError(f"{f.__name__}() {_after_name(e)}{hint}") from None
            given = {n: bound.arguments.pop(n) for n in names if n in bound.arguments}
            options = Options.from_kwargs(bound.arguments.get("options"), **given)
            for name in required:
                if getattr(options, name) is None:
                    raise TypeError(f"{f.__name__}() missing a required argument: '{name}'")
            bound.arguments["options"] = options
            return f(*bound.args, **bound.kwargs)

        with_options.__signature__ = public
        return with_options

    return decorate


_EMPTY = inspect.Parameter.empty


def _plain(name, field, type_):
    return type_


def _after_name(error: TypeError) -> str:
    """Python's words for a bad call, without the name it puts first."""
    text = str(error)
    return text.split("() ", 1)[1] if "() " in text else text


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
