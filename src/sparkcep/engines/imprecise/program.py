"""The imprecise engines as a program: pattern queries over interval times, over batches
of a partition's events, each match signature reported once it is final.

Events come in processing order: by the time column, which lies in each event's
interval (a row check), so an event seen before another never lies entirely after it —
the paper's arrival-order constraint holds by construction. An event not yet seen has
its time at or after the latest time seen (`latest`), hence its lower bound at or after
F = latest - before (before: how far below the time column a lower bound may be, at most
U_max): no point before F can still come.

A signature (e_1, ..., e_l) is final once F > vub_l, its last event's valid upper bound:
every point match of it ends at or before vub_l, so all of its events, and every event
that could lie between two of them (skip-till-next), have been seen; its confidence and
range cannot change any more (the paper emits point-based matches at e_l.upper + W; this
is the same idea on the valid interval, the same for every algorithm).

State: the events that can still take part in a match that is not final (upper bound
after F - W - U_max), the rows computed but not yet final (`pending`), and `latest`.
Each batch is matched together with the kept events; the rows that became final are
reported, the others wait (`advance` and `flush` report from `pending`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from sparkcep.engines.base import Program, RowCheck
from sparkcep.engines.imprecise.algorithm import Algorithm, Found
from sparkcep.engines.imprecise.bounds import ValidBounds
from sparkcep.engines.imprecise.events import Pattern, bound_values, interval_events
from sparkcep.engines.output import QUERY, OutputColumn, merged_output, sort_rows
from sparkcep.engines.state import state_class
from sparkcep.errors import QueryError
from sparkcep.expressions import Vec
from sparkcep.language import ast
from sparkcep.plan import Plan
from sparkcep.plan.intervals import NO_VAR, STREAM_WIDTH, IntervalSpec, bound_text

FINAL = "__final"  # the time after which a row is final (its last event's vub)
PLAN = "__plan"
NEW = "__new"
OWNED = "__owned"
PMF_TOLERANCE = 1e-9

STRATEGY_WORDS = {
    "SKIP_TILL_ANY_MATCH": "skip-till-any-match: every combination of events in some possible world",
    "SKIP_TILL_NEXT_MATCH": "skip-till-next-match: in a possible world, each event is the first "
    "relevant one after the previous (equal points fork the run)",
}


@state_class
@dataclass
class ImpreciseState:
    buffer: pd.DataFrame | None = None  # events that can still take part in a match
    pending: pd.DataFrame | None = None  # rows not final yet, with FINAL and PLAN
    latest: int | None = None  # latest time seen, in points


class ImpreciseProgram(Program):
    """Pattern queries over interval times, run by one algorithm (`algorithm`).

    >>> import pandas as pd
    >>> from sparkcep.plan import Options, analyze
    >>> from sparkcep.engines.imprecise.queryorder import QueryOrder
    >>> options = Options(id_col="id")
    >>> plan = analyze("PATTERN SEQ(A a, B b) TIME BETWEEN ts - 1 AND ts + 1 WITHIN 5",
    ...                None, options)
    >>> program = ImpreciseProgram([plan], [None], options, QueryOrder)
    >>> stream = pd.DataFrame({"type": list("AB"), "ts": [1, 2], "id": [0, 1]})
    >>> state = program.new_state()
    >>> len(program.process(state, stream))  # b may still lie at 3: wait for time 4
    0
    >>> program.advance(state, 5)[["a", "b", "range_start", "range_end", "confidence"]]
       a  b  range_start  range_end  confidence
    0  0  1            0          3    0.666667
    """

    engine = "imprecise"

    def __init__(self, plans, names, options, algorithm: type[Algorithm]):
        super().__init__(plans, names, options)
        self.algorithm = algorithm
        self.specs: list[IntervalSpec] = [p.spec for p in self.plans]  # type: ignore[misc]
        self.patterns = [Pattern.of(p) for p in self.plans]
        if len({s.point_unit for s in self.specs}) > 1:
            raise QueryError(
                "interval queries over one timestamp column run together must share their "
                "points: give --time-unit"
            )
        self._output = self._merged_output()

    # ---- what the program needs and gives
    @property
    def reach(self) -> tuple[int | None, int | None]:
        """Every event that bears on a signature anchored at e_1 has its time within
        2 U_max before e_1's time and W + 2 U_max after it."""
        if any(s.from_data for s in self.specs):
            raise QueryError(STREAM_WIDTH)  # a batch run reads U_max from the data first
        u = max(s.max_width for s in self.specs)  # type: ignore[type-var]
        w = max(p.window for p in self.patterns)
        tick = self.specs[0].point_us  # reach is in the time column's ticks
        return (2 * u + 1) * tick, (w + 2 * u + 1) * tick

    @property
    def output(self) -> tuple[OutputColumn, ...]:
        return self._output

    @property
    def order(self) -> tuple[str, ...]:
        plan = self.plans[0]
        first = (*plan.key, "range_end", "range_start", *[c.var for c in plan.positives])
        return first if self.names is None else (QUERY, *first)

    def _merged_output(self) -> tuple[OutputColumn, ...]:
        return merged_output(self._plan_output, self.plans, self.names)

    def _plan_output(self, plan) -> list[OutputColumn]:
        time_col = self.options.time_col
        mine = [OutputColumn("range_start", like=time_col),
                OutputColumn("range_end", like=time_col)]  # fmt: skip
        mine += [OutputColumn(k, like=k) for k in plan.key]
        mine += [OutputColumn(c.var, like=self.id_col or "") for c in plan.positives]
        mine.append(OutputColumn("confidence", "float"))
        return mine + [OutputColumn(r.name, r.kind) for r in plan.returns]

    def columns(self) -> tuple[str, ...]:
        names = list(super().columns())
        for spec in self.specs:
            names += spec.columns()
        return tuple(dict.fromkeys(names))

    def row_checks(self) -> tuple[RowCheck, ...]:
        checks: list[RowCheck] = []
        for spec in dict.fromkeys(self.specs):
            checks += interval_checks(spec, self.options.time_col)
        return tuple(dict.fromkeys(checks))

    def describe(self) -> list[tuple[str, str]]:
        plan, spec = self.plans[0], self.specs[0]
        return [
            ("strategy", STRATEGY_WORDS[plan.strategy]),
            ("time", f"an interval: {spec.text}, {_width_words(spec)}; "
                     + ("probabilities from " + spec.pmf_col if spec.pmf_col
                        else "uniform over its points")),
            ("algorithm", f"{self.algorithm.name}: {self.algorithm.words}"),
            ("reported", "each match signature (one event per variable) once no unseen event "
                         "can change it, with its time range and confidence"
                         + ("" if spec.threshold is None
                            else f", when its confidence is at least {spec.threshold:g} "
                                 "(THRESHOLD)")),
        ]  # fmt: skip

    # ---- running
    def new_state(self) -> ImpreciseState:
        return ImpreciseState()

    def process(self, state: ImpreciseState, events: pd.DataFrame, *, owned=None) -> pd.DataFrame:
        latest = None if state.latest is None else state.latest * self.specs[0].point_us
        ticks = self.check_time_order(events, latest) // self.specs[0].point_us
        previous = state.latest
        if len(ticks):
            top = int(ticks.max())
            state.latest = top if state.latest is None else max(state.latest, top)
        frame = events.assign(**{NEW: True, OWNED: True if owned is None else owned})
        if state.buffer is not None and len(state.buffer):
            kept = state.buffer.assign(**{NEW: False, OWNED: True})
            frame = self.in_order(pd.concat([kept, frame]))
        else:
            frame = frame.reset_index(drop=True)
        if not len(frame):
            return self.empty(events)
        rows = self._evaluate(frame)
        done = self._frontier(previous)
        rows = rows[rows[FINAL] >= done[rows[PLAN].to_numpy()]]  # not reported before
        out = self._release(state, rows, self._frontier(state.latest))
        self._prune(state, frame.drop(columns=[NEW]))
        return out

    def advance(self, state: ImpreciseState, to: int) -> pd.DataFrame:
        """No event before `to` will come: report what became final."""
        to //= self.specs[0].point_us  # ticks -> points
        if state.latest is not None and to <= state.latest:
            return self.empty(state.buffer)
        state.latest = to
        out = self.empty(state.buffer)
        if state.pending is not None and len(state.pending):
            out = self._release(state, state.pending, self._frontier(to))
        if state.buffer is not None:
            self._prune(state, state.buffer)
        return out

    def flush(self, state: ImpreciseState) -> pd.DataFrame:
        if state.pending is None or not len(state.pending):
            return self.empty(state.buffer)
        rows, state.pending = state.pending, None
        return self._rows(rows)

    def is_empty(self, state: ImpreciseState) -> bool:
        buffer_empty = state.buffer is None or not len(state.buffer)
        return buffer_empty and (state.pending is None or not len(state.pending))

    # ---- internals
    def _frontier(self, latest: int | None) -> np.ndarray:
        """Per plan, F: no point before it can come (-inf before any event)."""
        if latest is None:
            return np.full(len(self.plans), np.iinfo(np.int64).min)
        if any(s.from_data for s in self.specs):
            raise QueryError(STREAM_WIDTH)  # a batch run reads U_max from the data first
        return np.array([latest - s.before for s in self.specs], dtype=np.int64)  # type: ignore[operator]

    def _release(self, state: ImpreciseState, rows: pd.DataFrame, frontier) -> pd.DataFrame:
        final = rows[FINAL].to_numpy() < frontier[rows[PLAN].to_numpy()]
        state.pending = rows[~final].reset_index(drop=True)
        return self._rows(rows[final])

    def _rows(self, rows: pd.DataFrame) -> pd.DataFrame:
        if not len(rows):
            return self.empty(rows)
        out = rows.drop(columns=[FINAL, PLAN]).reset_index(drop=True)
        return sort_rows(out, self.order)

    def _prune(self, state: ImpreciseState, frame: pd.DataFrame):
        """Keep the events whose upper bound is after F - W - U_max for some plan."""
        if state.latest is None or not len(frame):
            state.buffer = frame.drop(columns=[OWNED], errors="ignore")
            return
        keep = np.zeros(len(frame), dtype=bool)
        mask = self.mask(frame)
        frontier = self._frontier(state.latest)
        for i, (plan, spec) in enumerate(zip(self.plans, self.specs)):
            relevant = self.signatures.plan_mask(plan, mask) != 0
            _, hi = bound_values(spec, frame, len(frame))
            horizon = frontier[i] - self.patterns[i].window - spec.max_width  # type: ignore[operator]
            keep |= relevant & (hi > horizon)
        state.buffer = frame[keep].drop(columns=[OWNED], errors="ignore").reset_index(drop=True)

    def _evaluate(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Every signature over `frame` anchored at an owned event, as output rows with
        FINAL and PLAN."""
        mask = self.mask(frame)
        segments = self.segments_of(frame)
        owned = frame[OWNED].to_numpy(dtype=bool)
        outs = []
        for i, plan in enumerate(self.plans):
            events = interval_events(plan, frame, self.signatures.plan_mask(plan, mask), segments)
            if not len(events):
                continue
            found = self.algorithm(events, self.patterns[i], budget=self.budget).run()
            found = _kept(found, owned[events.row[found.idx[:, 0]]] if len(found) else None)
            if self.specs[i].threshold is not None:
                found = _kept(found, found.confidence >= self.specs[i].threshold)
            if not len(found):
                continue
            out = self._match_rows(plan, frame, events, found, self.patterns[i].window)
            if self.names is not None:
                out.insert(0, QUERY, self.names[i])
            out[PLAN] = i
            outs.append(out)
        if not outs:
            empty = self.empty(frame)
            return empty.assign(**{FINAL: pd.Series([], dtype=np.int64),
                                   PLAN: pd.Series([], dtype=np.int64)})  # fmt: skip
        return self.concat(outs, frame)

    def _match_rows(self, plan: Plan, frame, events, found: Found, window: int) -> pd.DataFrame:
        idx = found.idx
        rows = events.row[idx]
        time = frame[self.options.time_col]
        out: dict[str, object] = {
            "range_start": _as_time(found.start, time, self.specs[0].point_unit),
            "range_end": _as_time(found.end, time, self.specs[0].point_unit),
        }
        for k in plan.key:
            out[k] = frame[k].to_numpy()[rows[:, 0]]
        ids = frame[self.id_col].to_numpy()
        for j, comp in enumerate(plan.positives):
            out[comp.var] = ids[rows[:, j]]
        out["confidence"] = found.confidence.astype(np.float64)
        for col in plan.returns:
            out[col.name] = _typed(_return_values(col.expr, plan, events, idx), col.kind)
        lo, hi = events.lo[idx], events.hi[idx]
        _, _, vub, _ = ValidBounds.three_pass(lo, hi, window)
        out[FINAL] = vub[:, -1]
        return pd.DataFrame(out)


def _as_time(points: np.ndarray, time: pd.Series, point_unit: str | None):
    """Points as values of the time column: its integers, or timestamps (UTC)."""
    if point_unit is not None:
        stamps = pd.to_datetime(points.astype(np.int64), unit=point_unit)
        tz = getattr(time.dtype, "tz", None)
        return stamps.tz_localize("UTC").tz_convert(tz) if tz else stamps
    return points.astype(time.dtype, copy=False) if time.dtype.kind in "iu" else points


def _kept(found: Found, keep) -> Found:
    """The signatures where `keep` holds (all when None)."""
    if keep is None or keep.all():
        return found
    return Found(found.idx[keep], found.start[keep], found.end[keep], found.confidence[keep])


def _return_values(expr: ast.Expr, plan: Plan, events, idx) -> list:
    from sparkcep.expressions import evaluate

    variables = [c.var for c in plan.positives]

    def resolve(node) -> Vec:
        return events.columns[node.attr].take(idx[:, variables.index(node.var)])

    return evaluate(expr, resolve, len(idx)).to_list()


def _typed(values: list, kind: str):
    if kind == "int":
        return pd.array(values, dtype="Int64")
    if kind == "float":
        return pd.array([np.nan if v is None else v for v in values], dtype="float64")
    if kind == "bool":
        return pd.array(values, dtype="boolean")
    if kind == "timestamp":
        return pd.to_datetime(pd.array(values, dtype="Int64"), unit="us")
    return values


def _width_words(spec: IntervalSpec) -> str:
    if spec.from_data:
        return (
            "U_max (the largest upper - lower) read from the input in a batch run; a stream "
            "needs WIDTH AT MOST or --max-width"
        )
    if spec.point_unit is not None:
        return f"at most {spec.max_width} points of 1 {spec.point_unit} wide (U_max)"
    return f"at most {spec.max_width} ticks wide (U_max)"


def interval_checks(spec: IntervalSpec, time_col: str) -> list[RowCheck]:
    """The row checks of an interval time (docs/imprecise.md, "Rejected rows")."""
    lo, hi = spec.lower, spec.upper
    ts = spec.time_expr(time_col)
    width = ast.Literal(spec.max_width)
    lo_text, hi_text = bound_text(lo, spec.point_unit), bound_text(hi, spec.point_unit)

    def op(o, a, b):
        return ast.BinOp(o, a, b)

    checks = [
        RowCheck(op("=", lo, lo), f"the interval's lower bound ({lo_text}) is missing"),
        RowCheck(op("=", hi, hi), f"the interval's upper bound ({hi_text}) is missing"),
        RowCheck(op("<=", lo, hi), f"lower > upper: the interval [{lo_text}, {hi_text}] is empty"),
        RowCheck(
            op("and", op("<=", lo, ts), op("<=", ts, hi)),
            f"{time_col} lies outside its interval [{lo_text}, {hi_text}]",
        ),
    ]
    if not spec.from_data:  # else U_max is the widest of these rows
        checks.append(
            RowCheck(
                op("<=", op("-", hi, lo), width),
                f"the interval [{lo_text}, {hi_text}] is wider than U_max = {spec.max_width}",
            )
        )
    if spec.pmf_col:
        pmf = ast.AttrRef(NO_VAR, spec.pmf_col)
        points = op("+", op("-", hi, lo), ast.Literal(1))
        total = ast.Call("list_sum", (pmf,))
        checks += [
            RowCheck(
                op("=", ast.Call("cardinality", (pmf,)), points),
                f"the pmf ({spec.pmf_col}) must be a list of one probability per point of "
                f"the interval",
            ),
            RowCheck(
                op(">=", ast.Call("list_min", (pmf,)), ast.Literal(0)),
                f"the pmf ({spec.pmf_col}) has a negative or missing probability",
            ),
            RowCheck(
                op("<=", ast.Call("abs", (op("-", total, ast.Literal(1)),)),
                   ast.Literal(PMF_TOLERANCE)),
                f"the pmf ({spec.pmf_col}) does not sum to 1 over its interval",
            ),
        ]  # fmt: skip
    return checks
