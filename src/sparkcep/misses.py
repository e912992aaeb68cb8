"""Why a pattern query did not match: its *near misses*, the partial matches that got
furthest, each with the events it bound and why the next component was not bound.

A partial match of depth k binds the first k positive components of a native pattern
as a match would (types, order, window, the conditions that name only those components,
the negations between them, the strategy), and cannot go on: no event can be the next
component's. Its reason is said of the candidates for that component, in this order:

- none of its type comes after the last bound event (in the key);
- the first of its type comes after the window has closed (how far after);
- the first of its type within the window fails the component's own condition, or a
  condition with the events bound (the values compared are shown), or a negated event
  lies between (which one);
- under SKIP_TILL_NEXT_MATCH the run took the first eligible event and died with it;
  under STRICT_CONTIGUITY the next event of the key was not the component's.

A complete binding that a negation at the start or end forbids is a near miss of full
depth. Near misses are ranked by depth, then by the time of their first event.

    >>> import pandas as pd
    >>> events = pd.DataFrame({"type": ["A", "B", "C", "C"], "ts": [1, 2, 4, 30],
    ...                        "v": [5, 1, 3, 9]})
    >>> misses = near_misses(events, "PATTERN SEQ(A a, B b, C c) WHERE c.v > a.v WITHIN 10")
    >>> print(misses.loc[0, "reason"])
    c.v > a.v was false for C 2 at 4: 3 > 5 (the first C of 1 in the window)

Native patterns without Kleene closure (the `nfa` engine's); others say so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from sparkcep.errors import SparkcepError
from sparkcep.expressions import column_vec, evaluate
from sparkcep.language import ast
from sparkcep.plan import Options
from sparkcep.plan.model import Plan
from sparkcep.prep.table import time_ticks

NEAR = 5  # near misses shown by default
MAX_STEPS = 200_000  # partial matches explored, at most (a dense key: said in the result)
COLUMNS = ["depth", "of", "bound", "stopped_at", "reason", "ids", "times"]


@dataclass(order=True)
class NearMiss:
    rank: tuple  # (-depth, first time, ids): the deepest first, then the earliest
    key: tuple = field(compare=False)
    bound: str = field(compare=False)  # var=event, ... in pattern order
    stopped_at: str = field(compare=False)
    reason: str = field(compare=False)
    ids: list = field(compare=False, default_factory=list)  # the bound events' ids
    times: list = field(compare=False, default_factory=list)  # and their times


def near_misses(
    events: pd.DataFrame,
    query: str,
    options: Options | None = None,
    *,
    key=None,
    start=None,
    end=None,
    near: int = NEAR,
    plot: str | None = None,
) -> pd.DataFrame:
    """The `near` partial matches of `query` over `events` that got furthest (see the
    module's docstring), one row each: the key's columns, `depth` (positive components
    bound) `of` (how many there are), `bound` (var=id@time, ...), `stopped_at` (the
    component not bound) and `reason`. `key`: one key's value (a tuple for several
    key columns); `start`, `end`: the time range [start, end] of the events considered.
    The frame's `attrs["summary"]` says what was looked at (and matches found)."""
    from sparkcep.runners.local import check_events

    options = options or Options()
    checked = check_events(pd.DataFrame(events), query, options)
    if len(checked.plans) != 1:
        raise SparkcepError("why explains one query at a time: give one (--query NAME)")
    plan = checked.plans[0]
    _supported(plan)
    valid = checked.valid
    ticks = time_ticks(valid[options.time_col])
    keep = np.ones(len(valid), dtype=bool)
    if start is not None:
        keep &= ticks >= _tick(start, valid[options.time_col])
    if end is not None:
        keep &= ticks <= _tick(end, valid[options.time_col])
    valid, ticks = valid[keep], ticks[keep]
    ids = valid[options.id_col] if options.id_col else valid["__row"]
    frame = valid.assign(__ticks=ticks, __id=ids.to_numpy())
    if key is not None:
        wanted = key if isinstance(key, tuple) else (key,)
        if len(wanted) != len(plan.key):
            raise SparkcepError(
                f"the query's key is {list(plan.key) or 'none'}: give one value for each"
            )
        for col, value in zip(plan.key, wanted, strict=True):
            frame = frame[frame[col].astype(str) == str(value)]
    order = [*plan.key, "__ticks", *([plan.tiebreak] if plan.tiebreak else []), "__row"]
    frame = frame.sort_values(order, kind="stable")
    explorer = _Explorer(plan, options, near)
    groups = frame.groupby(list(plan.key), sort=False) if plan.key else [((), frame)]
    for value, part in groups:
        explorer.partition(value if isinstance(value, tuple) else (value,), part)
    misses = explorer.result(frame, len(groups) if plan.key else 1)
    if plot is not None:
        draw(misses, frame, plan, options, plot)
    return misses


def _supported(plan: Plan) -> None:
    why_not = None
    if plan.spec is not None:
        why_not = "a query of this kind (AGG, event sets, interval times, lossy streams)"
    elif any(c.kleene for c in plan.components):
        why_not = "Kleene closure"
    if why_not:
        raise SparkcepError(
            f"why explains native SEQ patterns without Kleene closure so far, not {why_not}"
        )


def _tick(value, column: pd.Series) -> int:
    if pd.api.types.is_datetime64_any_dtype(column.dtype):
        stamp = pd.Timestamp(value)
        stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
        return int(stamp.value // 1000)  # microseconds, as the time column's ticks
    return int(value)


class _Explorer:
    """Depth-first over the partial matches of each partition, keeping the `near` best."""

    def __init__(self, plan: Plan, options: Options, near: int):
        self.plan, self.options, self.near = plan, options, near
        self.positives = plan.positives
        self.best: list[NearMiss] = []  # the best kept (cut to `near` now and then)
        self.steps = 0
        self.matches = 0
        self.capped = False

    # ---- one partition ------------------------------------------------------------------

    def partition(self, key: tuple, part: pd.DataFrame) -> None:
        self.key, self.part = key, part.reset_index(drop=True)
        self.ticks = self.part["__ticks"].to_numpy(dtype=np.int64)
        self.order_key = (
            list(zip(self.ticks, self.part[self.plan.tiebreak], strict=True))
            if self.plan.tiebreak
            else list(self.ticks)
        )
        types = self.part.get(self.options.type_col)
        self.types = types.to_numpy() if types is not None else None
        self.values = {c: column_vec(self.part[c]) for c in self.part.columns}
        first = self.positives[0]
        starts = [i for i in range(len(self.part)) if self._fits(first, i)]
        if not starts:
            self._keep([], first.var, self._none_reason(first, None))
        for i in starts:
            if self.steps >= MAX_STEPS:
                self.capped = True
                return
            self._extend([(first.var, i)])

    def _extend(self, bound: list[tuple[str, int]]) -> None:
        self.steps += 1
        k = len(bound)
        if k == len(self.positives):
            self._complete(bound)
            return
        component = self.positives[k]
        nexts, reason = self._next_events(bound, component)
        if not nexts:
            self._keep(bound, component.var, reason)
            return
        for i in nexts:
            if self.steps >= MAX_STEPS:
                self.capped = True
                return
            self._extend([*bound, (component.var, i)])

    def _complete(self, bound: list[tuple[str, int]]) -> None:
        for negation in self.plan.negations:
            if self._checked_early(negation):
                continue  # checked as the positive after it bound
            fired = self._negation_fires(negation, bound)
            if fired is not None:
                self._keep(bound, negation.component.var, fired)
                return
        self.matches += 1

    # ---- the next component -------------------------------------------------------------

    def _next_events(self, bound, component) -> tuple[list[int], str]:
        """The events that can bind `component` after `bound` (the strategy's), or none
        and why."""
        last = bound[-1][1]
        later = [i for i in range(last + 1, len(self.part)) if self._after(last, i)]
        strategy = self.plan.strategy
        if strategy == "STRICT_CONTIGUITY":
            if last + 1 >= len(self.part) or not self._after(last, last + 1):
                return [], f"strict contiguity: no later event follows {self._event(last)}"
            candidates = [last + 1]
        elif strategy == "SKIP_TILL_NEXT_MATCH":
            eligible = [i for i in later if self._eligible(component, bound, i)]
            candidates = eligible[:1]
            if not candidates:
                return [], self._none_reason(component, bound, later)
        else:
            candidates = later
        passing = [i for i in candidates if self._why_not(component, bound, i) is None]
        if passing:
            return passing, ""
        if strategy == "STRICT_CONTIGUITY":
            return [], f"strict contiguity: {self._why_not(component, bound, candidates[0])}"
        if strategy == "SKIP_TILL_NEXT_MATCH":
            reason = self._why_not(component, bound, candidates[0])
            return [], f"skip-till-next-match took {self._event(candidates[0])}: {reason}"
        return [], self._none_reason(component, bound, later)

    def _none_reason(self, component, bound, later=None) -> str:
        """Why no event of `later` binds `component` (None: the partition's first)."""
        kind = component.event_type or "event"
        if bound is None:
            typed = [i for i in range(len(self.part)) if self._typed(component, i)]
            if not typed:
                return f"no {kind} event" + self._where()
            failed = self._local_failure(component, typed[0])
            return f"{failed} (and for every {kind}{self._where()})" if failed else "no event"
        typed = [i for i in later if self._typed(component, i)]
        last = bound[-1][1]
        if not typed:
            return f"no {kind} event after {self._event(last)}" + self._tied(component, last)
        inside = [i for i in typed if self._in_window(bound, i)]
        if not inside:
            late = self._late(bound, typed[0])
            return f"the window closed: the first {kind} after it, {late}" + self._tied(
                component, last
            )
        reason = self._why_not(component, bound, inside[0])
        return f"{reason} (the first {kind} of {len(inside)} in the window)"

    def _tied(self, component, last: int) -> str:
        """A note on the events of `component`'s type at the very time of `last`: never
        after it (equal times are not in sequence without a tie-break)."""
        same = [
            i
            for i in range(len(self.part))
            if i != last and self.order_key[i] == self.order_key[last] and self._typed(component, i)
        ]
        if not same:
            return ""
        kind = component.event_type or "event"
        n = len(same)
        return (
            f"; {n} {kind} event{'s' * (n != 1)} at the same time as {self._event(last)} "
            f"{'do' if n != 1 else 'does'} not count as after it: equal times are never in "
            "sequence (ORDER BY the time and a column, or --tiebreak, orders them)"
        )

    def _why_not(self, component, bound, i) -> str | None:
        """Why event `i` cannot bind `component` after `bound` (None: it can)."""
        if not self._typed(component, i):
            return f"{self._event(i)} is not a {component.event_type}"
        if not self._in_window(bound, i):
            return self._late(bound, i)
        failed = self._local_failure(component, i)
        if failed:
            return failed
        binding = {**dict(bound), component.var: i}
        for condition in self.plan.conditions:
            if condition.stage == component.pos and not self._holds(condition.expr, binding):
                return self._false(condition.expr, binding, component.var)
        for negation in self.plan.negations:
            if negation.component.gap == component.pos and self._checked_early(negation):
                fired = self._negation_fires(negation, list(bound), i)
                if fired is not None:
                    return fired
        return None

    def _eligible(self, component, bound, i) -> bool:
        """SKIP_TILL_NEXT_MATCH's eligibility: type and the conditions of the components so
        far (not the window, not negations)."""
        if not self._typed(component, i) or self._local_failure(component, i):
            return False
        binding = {**dict(bound), component.var: i}
        return all(
            self._holds(c.expr, binding) for c in self.plan.conditions if c.stage == component.pos
        )

    def _negation_fires(self, negation, bound, nxt=None) -> str | None:
        """The event by which a negation forbids `bound` (with `nxt` as the next
        positive component, when given), said; None: none does."""
        gap, w = negation.component.gap, self.plan.window
        binding = dict(bound)
        if nxt is not None:
            binding[self.positives[len(bound)].var] = nxt
        first, last = bound[0][1], max(binding.values())
        if gap == 0:
            window = [i for i in range(first) if self._after(i, first)]
            window = [i for i in window if w is None or self.ticks[i] > self.ticks[last] - w]
            where = f"before {self._event(first)}, within the window"
        elif gap == len(self.positives):
            window = [i for i in range(last + 1, len(self.part)) if self._after(last, i)]
            window = [i for i in window if w is None or self.ticks[i] < self.ticks[first] + w]
            where = f"after {self._event(last)}, within the window"
        else:
            lo, hi = binding[self.positives[gap - 1].var], binding[self.positives[gap].var]
            window = [i for i in range(lo + 1, hi) if self._after(lo, i) and self._after(i, hi)]
            where = f"between {self._event(lo)} and {self._event(hi)}"
        component = negation.component
        for i in window:
            if not self._typed(component, i) or self._local_failure(component, i):
                continue
            scope = {**binding, component.var: i}
            if all(self._holds(c, scope) for c in negation.conditions):
                return f"the negation !{component.var} fired: {self._event(i)} {where}"
        return None

    def _checked_early(self, negation) -> bool:
        """Whether a negation between two positives is checked as the later one binds:
        when its conditions name no positive after it (else: on the complete binding)."""
        gap = negation.component.gap
        if gap in (0, len(self.positives)):
            return False
        later = {c.var for c in self.positives[gap + 1 :]}
        return not any(_variables(c) & later for c in negation.conditions)

    # ---- events and conditions ----------------------------------------------------------

    def _after(self, i: int, j: int) -> bool:
        return self.order_key[i] < self.order_key[j]

    def _typed(self, component, i: int) -> bool:
        return component.event_type is None or self.types[i] == component.event_type

    def _fits(self, component, i: int) -> bool:
        return self._typed(component, i) and not self._local_failure(component, i)

    def _in_window(self, bound, i: int) -> bool:
        w = self.plan.window
        return w is None or self.ticks[i] - self.ticks[bound[0][1]] < w

    def _local_failure(self, component, i: int) -> str | None:
        binding = {component.var: i}
        for expr in component.local:
            if not self._holds(expr, binding):
                return self._false(expr, binding, component.var)
        return None

    def _resolve(self, binding: dict[str, int]):
        def resolve(expr):
            if isinstance(expr, ast.AttrRef):
                column = self.values[expr.attr]
                at = binding[expr.var]
                null = None if column.null is None else column.null[at : at + 1]
                return type(column)(column.values[at : at + 1], null)
            raise SparkcepError(f"why cannot evaluate {ast.to_text(expr)} yet")

        return resolve

    def _holds(self, expr, binding: dict[str, int]) -> bool:
        value = evaluate(expr, self._resolve(binding), 1)
        null = value.null is not None and bool(value.null[0])
        return not null and bool(value.values[0])

    def _value(self, expr, binding) -> str:
        value = evaluate(expr, self._resolve(binding), 1)
        if value.null is not None and value.null[0]:
            return "null"
        shown = value.values[0]
        return repr(shown) if isinstance(shown, str) else str(shown)

    def _false(self, expr, binding, var: str) -> str:
        """`expr was false for T id at t: left op right` (the values compared)."""
        text = _bare(ast.to_text(expr))
        event = self._event(binding[var])
        if isinstance(expr, ast.BinOp) and expr.op not in ("and", "or"):
            left, right = self._value(expr.left, binding), self._value(expr.right, binding)
            return f"{text} was false for {event}: {left} {expr.op} {right}"
        return f"{text} was false for {event}"

    def _event(self, i: int) -> str:
        kind = self.types[i] if self.types is not None else "event"
        time = self.part[self.options.time_col].iloc[i]
        return f"{kind} {self.part['__id'].iloc[i]} at {_time_text(time)}"

    def _late(self, bound, i: int) -> str:
        """`event`, and how long after the window's end (first + window: excluded)."""
        past = int(self.ticks[i] - self.ticks[bound[0][1]] - self.plan.window)
        if past == 0:
            return f"{self._event(i)}, at the window's end (WITHIN leaves its end out)"
        return f"{self._event(i)}, {self._span(past)} after the window's end"

    def _span(self, ticks: int) -> str:
        if self.plan.time_kind != "timestamp":
            unit = self.options.time_unit
            return f"{ticks} {unit}" if unit else f"{ticks} tick" + "s" * (ticks != 1)
        for size, unit in ((86_400_000_000, "days"), (1_000_000, "s"), (1_000, "ms")):
            if ticks % size == 0:
                return f"{ticks // size} {unit}"
        return f"{ticks} µs"

    def _where(self) -> str:
        return f" for key {self.key}" if self.plan.key else ""

    # ---- the near misses kept -----------------------------------------------------------

    def _keep(self, bound, stopped_at: str, reason: str) -> None:
        first = self.ticks[bound[0][1]] if bound else 0
        rank = (-len(bound), int(first), [int(i) for _, i in bound])
        shown = self._bound_text(bound)  # (now: the partition's rows are at hand)
        ids = [self.part["__id"].iloc[i] for _, i in bound]
        times = [self.part[self.options.time_col].iloc[i] for _, i in bound]
        self.best.append(NearMiss(rank, self.key, shown, stopped_at, reason, ids, times))
        if len(self.best) > 4 * self.near:
            self.best = sorted(self.best)[: self.near]

    def _bound_text(self, bound) -> str:
        return ", ".join(f"{var}={self._event(i)}" for var, i in bound)

    def result(self, frame: pd.DataFrame, partitions: int) -> pd.DataFrame:
        misses = sorted(self.best)[: self.near]
        rows = [
            {
                **dict(zip(self.plan.key, m.key, strict=True)),
                "depth": -m.rank[0],
                "of": len(self.positives),
                "bound": m.bound,
                "stopped_at": m.stopped_at,
                "reason": m.reason,
                "ids": m.ids,
                "times": m.times,
            }
            for m in misses
        ]
        out = pd.DataFrame(rows, columns=[*self.plan.key, *COLUMNS])
        unit = ("key", "keys") if self.plan.key else ("partition", "partitions")
        summary = (
            f"{len(frame):,} events in {partitions:,} {unit[partitions != 1]}, "
            f"{self.matches:,} matches, {self.steps:,} partial matches explored"
        )
        if self.capped:
            summary += f" (stopped at {MAX_STEPS:,}: narrow the key or the time range)"
        out.attrs["summary"] = summary
        return out


def draw(misses: pd.DataFrame, events: pd.DataFrame, plan: Plan, options: Options, path):
    """The events looked at, one row per type (of the first near miss's key), and each
    near miss of that key as a chain through the events it bound, with its window and
    a cross where it stopped; the reasons below. Needs matplotlib."""
    try:
        import matplotlib
    except ImportError:
        raise SparkcepError("why --plot needs matplotlib: pip install matplotlib") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = misses
    if plan.key and len(misses):
        first = tuple(misses.iloc[0][list(plan.key)])
        shown = misses[[tuple(r) == first for r in misses[list(plan.key)].itertuples(index=False)]]
        for col, value in zip(plan.key, first, strict=True):
            events = events[events[col] == value]
    type_col, time_col = options.type_col, options.time_col
    types = list(dict.fromkeys(c.event_type for c in plan.components if c.event_type))
    types += sorted(set(events[type_col].astype(str)) - set(types))[:5]  # (a few others)
    row = {t: i for i, t in enumerate(types)}
    events = events[events[type_col].astype(str).isin(row)]
    figure, axes = plt.subplots(figsize=(11, 1.2 + 0.45 * len(types) + 0.3 * len(shown)))
    axes.scatter(events[time_col], events[type_col].astype(str).map(row), s=14, c="0.6",
                 zorder=2, label="events")  # fmt: skip
    by_id = events.set_index("__id")
    colours = plt.get_cmap("tab10")
    for n, miss in enumerate(shown.itertuples(index=False)):
        colour = colours(n % 10)
        ys = [row[str(by_id.loc[i, type_col])] + 0.08 * (n - len(shown) / 2) for i in miss.ids]
        if miss.ids:
            axes.plot(miss.times, ys, "-o", color=colour, lw=2, ms=6, zorder=3,
                      label=f"{n + 1}: {miss.depth} of {miss.of}, {miss.stopped_at} not bound")  # fmt: skip
            if plan.window is not None:
                start = pd.Timestamp(miss.times[0]) if plan.time_kind == "timestamp" else None
                end = (start + pd.Timedelta(microseconds=plan.window)
                       if start is not None else miss.times[0] + plan.window)  # fmt: skip
                axes.axvspan(miss.times[0] if start is None else start, end, color=colour,
                             alpha=0.08, zorder=1)  # fmt: skip
            axes.plot(miss.times[-1], ys[-1], "x", color=colour, ms=12, mew=2.5, zorder=4)
    axes.set_yticks(range(len(types)), types)
    axes.set_ylim(len(types) - 0.3, -0.7)  # the pattern's types at the top, in its order
    title = " ".join(plan.text.split())
    axes.set_title(title if len(title) < 110 else title[:107] + "...", fontsize=9)
    axes.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    notes = [f"{n + 1}: {r}" for n, r in enumerate(shown["reason"])]
    figure.text(0.01, 0.01, "\n".join(notes)[:2000], fontsize=7, va="bottom", wrap=True)
    figure.tight_layout(rect=(0, 0.04 + 0.035 * len(notes), 1, 1))
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _variables(expr) -> set[str]:
    """The variables an expression names."""
    if isinstance(expr, ast.AttrRef | ast.VarRef):
        return {expr.var}
    found = set()
    for value in vars(expr).values():
        items = value if isinstance(value, tuple | list) else (value,)
        for item in items:
            if isinstance(item, ast.Expr):
                found |= _variables(item)
    return found


def _bare(text: str) -> str:
    """A condition's text without the parentheses around the whole of it."""
    if text.startswith("(") and text.endswith(")"):
        depth = 0
        for at, char in enumerate(text):
            depth += {"(": 1, ")": -1}.get(char, 0)
            if depth == 0 and at < len(text) - 1:
                return text
        return text[1:-1]
    return text


def _time_text(value) -> str:
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    return str(value)
