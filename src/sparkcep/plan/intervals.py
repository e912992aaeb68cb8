"""Interval time (docs/imprecise.md): each event happened at one integer point of an
uncertainty interval [lower, upper], with a probability per point (uniform by default).

The interval is given in the query (`TIME BETWEEN ts - 5 AND ts + 5`), or by columns
(`--time-upper COL` beside `--time`, `Options.time_end_col`); `--pmf COL` names a column
holding a list of probabilities, one per point. The analysis adds an `IntervalSpec` to
the plan; the imprecise engines read it (and only they answer plans that have one).

>>> from sparkcep.plan import analyze
>>> plan = analyze("PATTERN SEQ(A a, B b) TIME BETWEEN ts - 2 AND ts + 3 WITHIN 10")
>>> spec = plan.spec
>>> spec.max_width, spec.before, spec.after, spec.columns()
(5, 2, 3, ('ts',))
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from sparkcep.expressions import TIME_POINTS
from sparkcep.language import ast
from sparkcep.plan.ayac import AyacSpec
from sparkcep.timeunits import NANOS, WINDOW_LIMIT

POINT_UNITS = ("s", "ms", "us")  # the points of an interval over a timestamp column

NO_VAR = ""  # the variable of the bare column names of TIME's bounds


@dataclass(frozen=True)
class IntervalSpec:
    """What an interval-time plan adds: the bounds as expressions over the input's
    columns, the largest width U_max (ticks), and how far the bounds may lie from the
    time column (`before`: ts - lower, `after`: upper - ts; both at most U_max)."""

    lower: ast.Expr
    upper: ast.Expr
    max_width: int | None  # None: the data's, read by a batch run (`with_data_widths`)
    before: int | None
    after: int | None
    pmf_col: str | None = None
    text: str = ""
    threshold: float | None = None  # THRESHOLD: the least confidence reported
    point_unit: str | None = None  # a timestamp time column: the unit of one point

    @property
    def point_us(self) -> int:
        """Microseconds per point (1: the time column's own ticks)."""
        return 1 if self.point_unit is None else NANOS[self.point_unit] // NANOS["us"]

    def time_expr(self, time_col: str) -> ast.Expr:
        """The time column in points: itself, or a timestamp's whole points."""
        ts = ast.AttrRef(NO_VAR, time_col)
        return ts if self.point_unit is None else _in_points(ts, self.point_us)

    def points_window(self, window: int) -> int:
        """A window of `window` ticks (microseconds for timestamps) in points: times
        are whole points, so last - first < w is last - first < ceil(w)."""
        return -(-window // self.point_us)

    @property
    def from_data(self) -> bool:
        """U_max is the data's (no WIDTH AT MOST, --max-width or constant bounds)."""
        return self.max_width is None

    def with_width(self, width: int) -> IntervalSpec:
        """The spec with U_max = `width`; a bound's distance from the time column is at
        most U_max."""
        before = width if self.before is None else min(self.before, width)
        after = width if self.after is None else min(self.after, width)
        return replace(self, max_width=width, before=before, after=after)

    def columns(self) -> tuple[str, ...]:
        """The input columns the interval reads."""
        names = _attrs(self.lower) + _attrs(self.upper)
        if self.pmf_col:
            names.append(self.pmf_col)
        return tuple(dict.fromkeys(names))


def _attrs(expr: ast.Expr) -> list[str]:
    return [n.attr for n in ast.walk(expr) if isinstance(n, ast.AttrRef)]


class IntervalClauses:
    """TIME BETWEEN / --time-upper / --pmf analysis (mixed into the analyzer, which
    provides `query`, `options`, `schema`, `comps`, `error`, `_strategy`, `_time_kind`)."""

    _point_unit: str | None = None  # a timestamp time column: the unit of one point

    def _interval_time(self) -> bool:
        return self.query.time_lower is not None or self.options.time_end_col is not None

    def _interval_spec(self, spec, window):
        q, opts = self.query, self.options
        if not self._interval_time() and opts.pmf_col is None:
            return spec
        where = q.time_span if q.time_lower is not None else None
        if q.time_lower is None and opts.time_end_col is None:
            raise self.error(
                "--pmf gives a probability per point of an interval time: give the interval "
                "too (--time-upper COL, or TIME BETWEEN lower AND upper)"
            )
        if q.time_lower is not None and opts.time_end_col is not None:
            raise self.error(
                "the interval time is given twice: by TIME BETWEEN and by --time-upper", where
            )
        if spec is not None:
            if q.aggregates:
                raise self.error(
                    "AGG over interval times is not supported: each match has a confidence",
                    q.aggregates[0].span,
                )
            what = (
                "missed events (MISSING RATE, DELAY, USING MODEL)"
                if isinstance(spec, AyacSpec)
                else "funnels and event sets"
            )
            raise self.error(f"{what} are not supported over interval times", where)
        self._check_interval_pattern(window, where)
        kind = self._time_kind()
        if kind not in ("int", "unknown", "timestamp"):
            raise self.error(
                f"an interval time is made of integer points, and the time column "
                f"'{opts.time_col}' holds {kind} values: give the time as integers (e.g. "
                f"tenths of a second) or timestamps",
                where,
            )
        self._point_unit = self._interval_point_unit(where) if kind == "timestamp" else None
        if q.time_lower is not None:
            lower, upper = q.time_lower, q.time_upper
            text = f"TIME BETWEEN {_text(lower)} AND {_text(upper)}"
            if self._point_unit is not None:
                self._check_units(lower, upper)
            lower, upper = self._in_ticks(lower), self._in_ticks(upper)
        else:
            lower = ast.AttrRef(NO_VAR, opts.time_col)
            upper = ast.AttrRef(NO_VAR, opts.time_end_col)
            text = f"from columns {opts.time_col} (lower) and {opts.time_end_col} (upper)"
        for bound in (lower, upper):
            self._check_bound(bound)
        if self._point_unit is not None:
            lower, upper = (_timestamps_in_points(b, self._point_unit)
                            for b in (lower, upper))  # fmt: skip
        if opts.pmf_col is not None and self.schema is not None and opts.pmf_col not in self.schema:
            raise self.error(f"the pmf column '{opts.pmf_col}' is not in the input")
        offsets = (_offset(lower, opts.time_col), _offset(upper, opts.time_col))
        if None not in offsets and not offsets[0] <= 0 <= offsets[1]:
            raise self.error(
                f"the interval must contain the time column's value ({opts.time_col}): "
                f"write TIME BETWEEN {opts.time_col} - a AND {opts.time_col} + b",
                where,
            )
        width = self._interval_width(offsets)
        before = -offsets[0] if offsets[0] is not None else None
        after = offsets[1] if offsets[1] is not None else None
        spec = IntervalSpec(lower, upper, None, before, after, opts.pmf_col, text,
                            self._confidence_threshold(), self._point_unit)  # fmt: skip
        if self._point_unit is not None:
            self.warnings.append(
                f"the time column '{opts.time_col}' holds timestamps: the interval's points "
                f"are whole {self._point_unit} (each time and bound is truncated to its "
                f"{self._point_unit}; --time-unit {'|'.join(POINT_UNITS)} sets the point), and "
                f"range_start and range_end are the timestamps of those points"
            )
        return spec if width is None else spec.with_width(width)

    def _check_units(self, *bounds):
        """Over a timestamp column a number in a bound is a duration with its unit."""
        for bound in bounds:
            for node in ast.walk(bound):
                if isinstance(node, ast.Literal) and isinstance(node.value, int | float):
                    raise self.error(
                        f"the time column holds timestamps: give the bound a unit (e.g. "
                        f"{_number(node.value)} s)",
                        node.span,
                    )

    def _interval_point_unit(self, where) -> str:
        """The point of an interval over a timestamp column: --time-unit, else the
        coarsest of POINT_UNITS in which every duration of TIME's clause is whole."""
        q, unit = self.query, self.options.time_unit
        if unit is not None:
            if unit not in POINT_UNITS:
                raise self.error(
                    f"the time column '{self.options.time_col}' holds timestamps (microseconds):"
                    f" an interval's points are {', '.join(POINT_UNITS)}, not {unit}",
                    where,
                )
            return unit
        durations = [
            n.value
            for bound in (q.time_lower, q.time_upper)
            if bound is not None
            for n in ast.walk(bound)
            if isinstance(n, ast.Literal) and isinstance(n.value, ast.Duration)
        ]
        if q.time_width is not None:
            durations.append(q.time_width)
        for unit in POINT_UNITS:
            if all(_whole(d.amount * NANOS[d.unit] / NANOS[unit]) for d in durations if d.unit):
                return unit
        return POINT_UNITS[-1]

    def _confidence_threshold(self) -> float | None:
        """THRESHOLD over interval times: the least confidence a reported signature has
        (the paper's confidence is a probability, so a threshold on it is one on the
        probability of the match)."""
        q = self.query
        if q.threshold is None:
            return None
        if not 0.0 < q.threshold <= 1.0:
            raise self.error(
                f"THRESHOLD over interval times is a confidence in (0, 1], not {q.threshold:g}",
                q.threshold_span,
            )
        return float(q.threshold)

    def _check_interval_pattern(self, window, where):
        for comp in self.comps.values():
            if comp.negated or comp.kleene:
                what = "negation" if comp.negated else "Kleene closure"
                raise self.error(
                    f"{what} is not supported over interval times (the paper leaves it to "
                    f"future work)",
                    comp.span,
                )
        strategy, _ = self._strategy()
        if strategy == "STRICT_CONTIGUITY":
            raise self.error(
                "strict contiguity has no meaning over interval times: use "
                "SKIP_TILL_NEXT_MATCH or SKIP_TILL_ANY_MATCH",
                self.query.strategy_span,
            )
        if window is None:
            raise self.error("a pattern over interval times needs a WITHIN window", where)

    def _check_bound(self, expr: ast.Expr):
        for node in ast.walk(expr):
            if isinstance(node, ast.AttrRef):
                if node.var != NO_VAR:
                    raise self.error(
                        "TIME BETWEEN names the event's own columns (ts - 5), not a variable's",
                        node.span,
                    )
                if self.schema is not None and node.attr not in self.schema:
                    raise self.error(
                        f"'{node.attr}' is not a column of the input (columns: "
                        f"{', '.join(self.schema)})",
                        node.span,
                    )
                kind = self.schema.get(node.attr, "unknown") if self.schema else "unknown"
                if self._point_unit is not None and kind != "timestamp":
                    raise self.error(
                        f"the time column holds timestamps, and '{node.attr}' holds {kind} "
                        f"values: an interval bound is a timestamp column plus or minus a "
                        f"duration (ts - 1 s)",
                        node.span,
                    )
                if self._point_unit is None and kind not in ("int", "unknown"):
                    raise self.error(
                        f"an interval bound is an integer, and '{node.attr}' holds {kind} values",
                        node.span,
                    )
            elif isinstance(node, ast.Literal):
                if not isinstance(node.value, int) or isinstance(node.value, bool):
                    raise self.error("an interval bound is an integer", node.span)
            elif isinstance(node, ast.BinOp):
                if node.op not in ("+", "-", "*", "%"):
                    raise self.error(
                        f"an interval bound is integer arithmetic (+ - * %), not '{node.op}'",
                        node.span,
                    )
            elif isinstance(node, ast.Call):
                if node.name != "abs" or len(node.args) != 1:
                    raise self.error("an interval bound may call abs() only", node.span)
            elif not isinstance(node, ast.Negate):
                raise self.error("an interval bound is integer arithmetic", node.span)

    def _in_ticks(self, bound: ast.Expr) -> ast.Expr:
        """A bound whose last term is a duration (ts - 1 s), that duration in ticks."""
        if not isinstance(bound, ast.BinOp):
            return bound
        term = bound.right
        if not isinstance(term, ast.Literal) or not isinstance(term.value, ast.Duration):
            return bound
        ticks = self._duration_ticks_of(term.value, "bound")
        if abs(ticks - round(ticks)) > 1e-9:
            raise self.error(
                f"an interval bound is a whole number of ticks, and this is {ticks:g} "
                f"ticks of {self._point_unit or self.options.time_unit}",
                term.span,
            )
        return replace(bound, right=ast.Literal(round(ticks), span=term.span))

    def _duration_ticks_of(self, duration: ast.Duration, what: str) -> float:
        """A duration of TIME's clause in ticks of the integer time column."""
        unit = self._point_unit or self.options.time_unit
        if duration.unit is None:
            if self._point_unit is not None:
                raise self.error(
                    f"the time column holds timestamps: give the {what} a unit (e.g. "
                    f"{_number(duration.amount)} s)",
                    duration.span,
                )
            ticks = duration.amount
        elif unit is None:
            raise self.error(
                f"the {what} has a unit but the integer time column has none: give "
                f"--time-unit, or write the {what} in ticks",
                duration.span,
            )
        else:
            ticks = duration.amount * NANOS[duration.unit] / NANOS[unit]
        if not abs(ticks) < WINDOW_LIMIT:  # also inf, from WIDTH AT MOST 1e400
            raise self.error(f"the {what} is too large (at most 2^62 ticks)", duration.span)
        return ticks

    def _interval_width(self, offsets) -> int | None:
        """U_max: WIDTH AT MOST, else --max-width, else what constant bounds show, else
        None: the largest width in the data, which a batch run reads (a stream cannot)."""
        width = self.query.time_width
        if width is not None:
            ticks = self._duration_ticks_of(width, "width")
            value = math.floor(ticks + 1e-9)
            if value < 0:
                raise self.error("the width must not be negative", width.span)
            return value
        if self.options.max_width is not None:
            if self.options.max_width < 0:
                raise self.error("--max-width must not be negative")
            return int(self.options.max_width)
        if None not in offsets:
            return offsets[1] - offsets[0]
        return None


def _whole(x: float) -> bool:
    return math.isfinite(x) and abs(x - round(x)) <= 1e-9


def _number(amount: float) -> str:
    return str(int(amount)) if float(amount).is_integer() else f"{amount:g}"


def _in_points(expr: ast.Expr, point_us: int) -> ast.Expr:
    return ast.Call(TIME_POINTS, (expr, ast.Literal(point_us)), span=expr.span)


def _timestamps_in_points(expr: ast.Expr, unit: str) -> ast.Expr:
    """A bound with its timestamp columns as whole points of `unit` (its durations are
    in points already)."""
    if isinstance(expr, ast.AttrRef):
        return _in_points(expr, NANOS[unit] // NANOS["us"])
    if isinstance(expr, ast.BinOp):
        return replace(expr, left=_timestamps_in_points(expr.left, unit),
                       right=_timestamps_in_points(expr.right, unit))  # fmt: skip
    if isinstance(expr, ast.Negate):
        return replace(expr, operand=_timestamps_in_points(expr.operand, unit))
    if isinstance(expr, ast.Call):
        args = tuple(_timestamps_in_points(a, unit) for a in expr.args)
        return replace(expr, args=args)
    return expr


def _is_time(expr: ast.Expr, time_col: str) -> bool:
    """`expr` is the time column (or its points)."""
    if isinstance(expr, ast.Call) and expr.name == TIME_POINTS:
        expr = expr.args[0]
    return isinstance(expr, ast.AttrRef) and expr.attr == time_col


def _offset(expr: ast.Expr, time_col: str) -> int | None:
    """c when `expr` is time_col + c (or time_col - c, or time_col), else None."""
    if _is_time(expr, time_col):
        return 0
    if (
        isinstance(expr, ast.BinOp)
        and expr.op in ("+", "-")
        and _is_time(expr.left, time_col)
        and isinstance(expr.right, ast.Literal)
        and isinstance(expr.right.value, int)
        and not isinstance(expr.right.value, bool)
    ):
        return expr.right.value if expr.op == "+" else -expr.right.value
    return None


def bound_text(expr: ast.Expr, unit: str | None = None) -> str:
    """A bound as written: bare column names, parentheses only where needed; numbers
    with the `unit` of a point when the time column holds timestamps."""
    if isinstance(expr, ast.Literal) and isinstance(expr.value, ast.Duration):
        amount = expr.value.amount
        return f"{int(amount) if float(amount).is_integer() else amount} {expr.value.unit}"
    if isinstance(expr, ast.Literal) and unit is not None:
        return f"{expr.value} {unit}"
    if isinstance(expr, ast.AttrRef):
        return expr.attr if expr.var == NO_VAR else f"{expr.var}.{expr.attr}"
    if isinstance(expr, ast.BinOp):
        right = bound_text(expr.right, unit)
        if isinstance(expr.right, ast.BinOp):
            right = f"({right})"
        return f"{bound_text(expr.left, unit)} {expr.op} {right}"
    if isinstance(expr, ast.Negate):
        return f"-{bound_text(expr.operand, unit)}"
    if isinstance(expr, ast.Call) and expr.name == TIME_POINTS:
        return bound_text(expr.args[0], unit)
    if isinstance(expr, ast.Call):
        return f"{expr.name}({', '.join(bound_text(a, unit) for a in expr.args)})"
    return ast.to_text(expr)


_text = bound_text


STREAM_WIDTH = (
    "an interval time over a stream needs U_max, the largest upper - lower (a stream has no "
    "end to read it from): TIME BETWEEN ... WIDTH AT MOST n, or --max-width n"
)


def needs_data_width(plans) -> bool:
    """Whether a plan's U_max is to be read from the data."""
    return any(isinstance(p.spec, IntervalSpec) and p.spec.from_data for p in plans)


def require_widths(plans) -> None:
    """A stream's plans: U_max must be given (QueryError otherwise)."""
    if needs_data_width(plans):
        from sparkcep.errors import QueryError

        raise QueryError(STREAM_WIDTH)


def with_data_widths(plans, widest) -> list:
    """Plans whose U_max is the data's, with it: `widest(spec)` gives the largest
    upper - lower over the input's rows (None: no row), and the plan says so."""
    out = []
    for plan in plans:
        spec = plan.spec
        if not isinstance(spec, IntervalSpec) or not spec.from_data:
            out.append(plan)
            continue
        width = max(int(widest(spec) or 0), 0)
        note = (
            f"U_max = {width} {'ticks' if spec.point_unit is None else spec.point_unit}: the largest interval width (upper - lower) in the input; "
            f"WIDTH AT MOST n (or --max-width n) would bound it and reject wider rows"
        )
        out.append(replace(plan, spec=spec.with_width(width), warnings=(*plan.warnings, note)))
    return out


def frame_width(spec: IntervalSpec, frame, time_col: str) -> int | None:
    """The largest upper - lower of `frame`'s rows whose interval is usable (bounds
    present, lower <= time <= upper), as the row checks will keep them."""
    import numpy as np
    import pandas as pd

    from sparkcep.expressions import column_vec, evaluate

    n = len(frame)
    if not n:
        return None
    cache: dict = {}

    def resolve(node):
        if node.attr not in cache:
            cache[node.attr] = column_vec(frame[node.attr])
        return cache[node.attr]

    def numbers(vec):
        values = pd.to_numeric(pd.Series(vec.values), errors="coerce").to_numpy(np.float64)
        return np.where(vec.nulls(), np.nan, values)

    lo = numbers(evaluate(spec.lower, resolve, n))
    hi = numbers(evaluate(spec.upper, resolve, n))
    ts = numbers(evaluate(spec.time_expr(time_col), resolve, n))
    ok = (lo <= ts) & (ts <= hi)  # false where any is NaN (null)
    lo_v, hi_v = lo, hi
    return int((hi_v - lo_v)[ok].max()) if ok.any() else None
