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
    >>> from sparkcep.why_not import near_misses
    >>> misses = near_misses(events, "PATTERN SEQ(A a, B b, C c) WHERE c.v > a.v WITHIN 10")
    >>> print(misses.loc[0, "reason"])
    c.v > a.v was false for C 2 at 4: 3 > 5 (the first C of 1 in the window)

Native patterns (the `nfa` engine's), Kleene closure included; event set patterns
(`SEQ({c, p+}, {b})`) in `set_misses.py`, on the same frame; others say so. A Kleene
component that cannot close (an aggregate false on its elements, and no further event
can join them) is a near miss of the components before it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import product

import numpy as np
import pandas as pd

from sparkcep.errors import SparkcepError
from sparkcep.expressions import column_vec, evaluate
from sparkcep.language import ast
from sparkcep.language.ast import bare_text
from sparkcep.plan import Options
from sparkcep.plan.model import Plan
from sparkcep.vec import Vec

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


def _supported(plan: Plan) -> None:
    from sparkcep.plan.sets import SesSpec

    why_not = None
    if plan.spec is not None and not isinstance(plan.spec, SesSpec):
        why_not = "a query of this kind (AGG, interval times, lossy streams)"
    if why_not:
        raise SparkcepError(f"why explains SEQ patterns and event sets so far, not {why_not}")


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
        self.wanted = None  # an event id: the matches that start with it are explained
        self.explained: list[dict] = []

    # ---- one partition ------------------------------------------------------------------

    def _enter(self, key: tuple, part: pd.DataFrame) -> None:
        """A partition's events, as every explorer reads them: times, order, types and
        the columns as value vectors."""
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

    def partition(self, key: tuple, part: pd.DataFrame) -> None:
        self._enter(key, part)
        first = self.positives[0]
        starts = [i for i in range(len(self.part)) if self._fits(first, i)]
        starts = [i for i in starts if self._condition_failure(first, [], i) is None]
        if not starts:
            self._keep([], 0, first.var, self._none_reason(first, None))
        for i in starts:
            if self.steps >= MAX_STEPS:
                self.capped = True
                return
            self._extend([(first.var, i)])

    def _extend(self, bound: list[tuple[str, int]]) -> None:
        """Every way `bound` goes on (more elements of an open Kleene component, the next
        component, or the end), or keep it as a near miss when there is none."""
        self.steps += 1
        k = len({var for var, _ in bound})  # components with an event bound
        current = self.positives[k - 1]
        branches: list[tuple[str, int]] = []
        closure = None
        if current.kleene:
            more, _ = self._candidates(bound, current, element=True)
            branches += [(current.var, i) for i in more]
            closure = self._closure_failure(bound, current)
        if closure is None and k == len(self.positives):
            self._complete(bound)
        elif closure is None:
            following = self.positives[k]
            nexts, reason = self._candidates(bound, following)
            branches += [(following.var, i) for i in nexts]
            if not nexts:  # (more elements of a Kleene component: other partial matches)
                self._keep(bound, k, following.var, reason)
        elif not branches:
            self._keep(bound, k - 1, current.var, closure)
        for branch in branches:
            if self.steps >= MAX_STEPS:
                self.capped = True
                return
            self._extend([*bound, branch])

    def _complete(self, bound: list[tuple[str, int]]) -> None:
        for negation in self.plan.negations:
            if self._checked_early(negation):
                continue  # checked as the positive after it bound
            fired = self._negation_fires(negation, bound)
            if fired is not None:
                self._keep(bound, len(self.positives), negation.component.var, fired)
                return
        self.matches += 1
        if self.wanted is not None and str(self.part["__id"].iloc[bound[0][1]]) == str(self.wanted):
            self._explain_match(bound)

    def _explain_match(self, bound) -> None:
        """Why a match bound its events: for each, the strategy's choice among the events
        that could have taken its place after the ones before it; then the window."""
        number = 1 + len({row["match"] for row in self.explained})
        strategy = self.plan.strategy
        for at, (var, i) in enumerate(bound):
            row = {"match": number, "var": var, "event": self._event(i), "others": 0}
            if at == 0:
                key = ", ".join(f"{c}={v}" for c, v in zip(self.plan.key, self.key, strict=True))
                row["why"] = "the match's first event" + (f" (key {key})" if key else "")
                self.explained.append(row)
                continue
            prefix, component = bound[:at], self._component(var)
            last = prefix[-1][1]
            later = [j for j in range(last + 1, len(self.part)) if self._after(last, j)]
            fitting = [j for j in later if self._why_not(component, prefix, j) is None]
            others = [j for j in fitting if j != i]
            row["others"] = len(others)
            before = self._event(last)
            if strategy == "STRICT_CONTIGUITY":
                row["why"] = f"strict contiguity: the event right after {before}"
            elif strategy == "SKIP_TILL_NEXT_MATCH":
                kind = component.event_type or "event"
                n = len(others)
                later_ones = f"; {n} later one{'s' * (n != 1)} would have fitted too" if n else ""
                row["why"] = f"skip-till-next-match: the first {kind} after {before} that fits"
                row["why"] += later_ones
            elif others:
                shown = ", ".join(self._event(j) for j in others[:3])
                more = f" and {len(others) - 3} more" if len(others) > 3 else ""
                row["why"] = (
                    f"skip-till-any-match: one of {len(fitting)} events that fit after "
                    f"{before}; the others ({shown}{more}) take its place in matches of "
                    "their own"
                )
            else:
                row["why"] = f"skip-till-any-match: the only event that fits after {before}"
            self.explained.append(row)
        if self.plan.window is not None:
            first, end = bound[0][1], max(i for _, i in bound)
            room = int(self.ticks[first] + self.plan.window - self.ticks[end])
            why = f"the window: its last event came {self._span(room)} before the window's end"
            self.explained.append(
                {"match": number, "var": "", "event": "", "why": why, "others": 0}
            )

    def _component(self, var: str):
        return next(c for c in self.positives if c.var == var)

    def explained_matches(self) -> pd.DataFrame:
        """One row per event of each match that starts with the wanted event: `match`
        (its number), `var`, `event`, `why`, `others` (how many other events could have
        taken its place there); a last row per match on its window."""
        out = pd.DataFrame(self.explained, columns=["match", "var", "event", "why", "others"])
        found = out["match"].nunique() if len(out) else 0
        starts = "starts" if found == 1 else "start"
        out.attrs["summary"] = (
            f"{found} match{'es' * (found != 1)} {starts} with event {self.wanted}"
        )
        return out

    # ---- the next component -------------------------------------------------------------

    def _candidates(self, bound, component, element: bool = False) -> tuple[list[int], str]:
        """The events that can bind `component` after `bound` (the strategy's): its next
        element (`element`: an open Kleene component), or its first event; or none and
        why (said for a next component only)."""
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
                return [], "" if element else self._none_reason(component, bound, later)
        else:
            candidates = later
        passing = [i for i in candidates if self._why_not(component, bound, i) is None]
        if passing or element:
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
        """Why event `i` cannot bind `component` (its next element, or its first event)
        after `bound` (None: it can)."""
        if not self._typed(component, i):
            return f"{self._event(i)} is not a {component.event_type}"
        if not self._in_window(bound, i):
            return self._late(bound, i)
        failed = self._local_failure(component, i) or self._condition_failure(component, bound, i)
        if failed:
            return failed
        if any(var == component.var for var, _ in bound):
            return None  # a further element: no negation stands between elements
        for negation in self.plan.negations:
            if negation.component.gap == component.pos and self._checked_early(negation):
                fired = self._negation_fires(negation, list(bound), i)
                if fired is not None:
                    return fired
        return None

    def _eligible(self, component, bound, i) -> bool:
        """SKIP_TILL_NEXT_MATCH's eligibility: type and the conditions of the components so
        far (not the window, not negations, not aggregates)."""
        return self._fits(component, i) and self._condition_failure(component, bound, i) is None

    def _condition_failure(self, component, bound, i) -> str | None:
        """The condition checked as `i` binds `component` that fails, said (None: none):
        each for every element of the Kleene components it names element-wise."""
        lists = _lists([*bound, (component.var, i)])
        fixed = {component.var: len(lists[component.var]) - 1}
        for condition in self.plan.conditions:
            if condition.stage != component.pos or condition.kind == "closure":
                continue
            choice = self._failing(condition.expr, lists, fixed)
            if choice is not None:
                return self._false(condition.expr, lists, choice, component.var)
        return None

    def _closure_failure(self, bound, component) -> str | None:
        """The condition on the whole of a Kleene component (an aggregate) that its
        elements in `bound` fail, said (None: none)."""
        lists = _lists(bound)
        for condition in self.plan.conditions:
            if condition.stage == component.pos and condition.kind == "closure":
                choice = self._failing(condition.expr, lists, {})
                if choice is not None:
                    return self._false(condition.expr, lists, choice, component.var, whole=True)
        return None

    def _negation_fires(self, negation, bound, nxt=None) -> str | None:
        """The event by which a negation forbids `bound` (with `nxt` as the next
        positive component's first event, when given), said; None: none does."""
        gap, w = negation.component.gap, self.plan.window
        steps = (
            [*bound, (self.positives[len(_lists(bound))].var, nxt)] if nxt is not None else bound
        )
        lists = _lists(steps)
        first, last = steps[0][1], max(i for _, i in steps)
        if gap == 0:
            window = [i for i in range(first) if self._after(i, first)]
            window = [i for i in window if w is None or self.ticks[i] > self.ticks[last] - w]
            where = f"before {self._event(first)}, within the window"
        elif gap == len(self.positives):
            window = [i for i in range(last + 1, len(self.part)) if self._after(last, i)]
            window = [i for i in window if w is None or self.ticks[i] < self.ticks[first] + w]
            where = f"after {self._event(last)}, within the window"
        else:
            lo = lists[self.positives[gap - 1].var][-1]
            hi = lists[self.positives[gap].var][0]
            window = [i for i in range(lo + 1, hi) if self._after(lo, i) and self._after(i, hi)]
            where = f"between {self._event(lo)} and {self._event(hi)}"
        component = negation.component
        for i in window:
            if not self._fits(component, i):
                continue
            scope = {**lists, component.var: [i]}
            if all(self._failing(c, scope, {}) is None for c in negation.conditions):
                return f"the negation !{component.var} fired: {self._event(i)} {where}"
        return None

    def _checked_early(self, negation) -> bool:
        """Whether a negation between two positives is checked as the later one binds:
        when its conditions name no positive after it, nor that one if it is a Kleene
        component (else: on the complete binding)."""
        gap = negation.component.gap
        if gap in (0, len(self.positives)):
            return False
        later = {c.var for c in self.positives[gap + 1 :]}
        if self.positives[gap].kleene:  # (an aggregate of all its events: known at the end)
            later.add(self.positives[gap].var)
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
        lists = {component.var: [i]}
        for expr in component.local:
            choice = self._failing(expr, lists, {})
            if choice is not None:
                return self._false(expr, lists, choice, component.var)
        return None

    def _failing(self, expr, lists: dict[str, list[int]], fixed: dict[str, int]):
        """None when `expr` holds for every choice of one element of each Kleene component
        it names element-wise (`fixed`: the element of those already chosen; a `prev`
        is not checked on a first element), else the first choice for which it does not."""
        refs = _element_refs(expr)
        axes = [
            [(var, p) for p in ([fixed[var]] if var in fixed else range(len(lists[var])))]
            for var in refs
        ]
        for combo in product(*axes):
            choice = dict(combo)
            if any(prev and choice[var] == 0 for var, prev in refs.items()):
                continue
            value = evaluate(expr, self._resolve(lists, choice), 1)
            if (value.null is not None and value.null[0]) or not value.values[0]:
                return choice
        return None

    def _resolve(self, lists: dict[str, list[int]], choice: dict[str, int]):
        def one(attr: str, at: int | None) -> Vec:
            column = self.values[attr]
            if at is None:
                return Vec(np.zeros(1, dtype=np.int64), np.ones(1, dtype=bool))
            null = None if column.null is None else column.null[at : at + 1]
            return Vec(column.values[at : at + 1], null)

        def resolve(expr):
            if isinstance(expr, ast.AttrRef):
                return one(expr.attr, lists[expr.var][choice.get(expr.var, 0)])
            if isinstance(expr, ast.Call) and expr.name == "prev":
                arg = expr.args[0]
                return one(arg.attr, lists[arg.var][choice[arg.var] - 1])
            if isinstance(expr, ast.Call) and expr.name in AGGREGATES:
                return self._aggregate(expr, lists)
            raise SparkcepError(f"why cannot evaluate {ast.to_text(expr)} yet")

        return resolve

    def _aggregate(self, call, lists) -> Vec:
        """An aggregate over a component's elements, as docs/semantics.md says: count
        counts elements, sum/avg/min/max skip nulls (null when all are), first/last."""
        arg = call.args[0]
        items = lists[arg.var]
        if call.name == "count":
            return Vec(np.array([len(items)], dtype=np.int64))
        column = self.values[arg.attr]
        null = column.null if column.null is not None else np.zeros(len(column.values), bool)
        if call.name in ("first", "last"):
            at = items[0] if call.name == "first" else items[-1]
            return Vec(column.values[at : at + 1], null[at : at + 1])
        present = [column.values[i] for i in items if not null[i]]
        if not present:
            return Vec(np.zeros(1, dtype=column.values.dtype), np.ones(1, dtype=bool))
        value = {"sum": sum, "min": min, "max": max}.get(call.name, lambda v: sum(v) / len(v))(
            present
        )
        return Vec(np.array([value]))

    def _value(self, expr, lists, choice) -> str:
        value = evaluate(expr, self._resolve(lists, choice), 1)
        if value.null is not None and value.null[0]:
            return "null"
        shown = value.values[0]
        return repr(shown) if isinstance(shown, str) else str(shown)

    def _false(self, expr, lists, choice, var: str, whole: bool = False) -> str:
        """`expr was false for T id at t: left op right` (the values compared); for the
        whole of a Kleene component (`whole`), its events' ids."""
        text = bare_text(ast.to_text(expr))
        if whole:
            ids = ", ".join(str(self.part["__id"].iloc[i]) for i in lists[var])
            event = f"{var} = [{ids}]"
        else:
            event = self._event(lists[var][choice.get(var, len(lists[var]) - 1)])
            others = [v for v in choice if v != var and len(lists[v]) > 1]
            if others:  # the element of another Kleene component it failed with
                event += " with " + ", ".join(
                    f"{v}[{choice[v]}]={self._event(lists[v][choice[v]])}" for v in others
                )
        if isinstance(expr, ast.BinOp) and expr.op not in ("and", "or"):
            left = self._value(expr.left, lists, choice)
            right = self._value(expr.right, lists, choice)
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

    def _keep(self, bound, depth: int, stopped_at: str, reason: str) -> None:
        first = self.ticks[bound[0][1]] if bound else 0
        rank = (-depth, int(first), [int(i) for _, i in bound])
        shown = self._bound_text(bound)  # (now: the partition's rows are at hand)
        ids = [self.part["__id"].iloc[i] for _, i in bound]
        times = [self.part[self.options.time_col].iloc[i] for _, i in bound]
        self.best.append(NearMiss(rank, self.key, shown, stopped_at, reason, ids, times))
        if len(self.best) > 4 * self.near:
            self.best = sorted(self.best)[: self.near]

    def _bound_text(self, bound) -> str:
        """`a=A 1 at 0, b=[B 2 at 1, B 3 at 4]` (a Kleene component's events in brackets)."""
        lists = _lists(bound)
        return ", ".join(
            f"{var}={self._event(items[0])}"
            if not self._kleene(var)
            else f"{var}=[{', '.join(self._event(i) for i in items)}]"
            for var, items in lists.items()
        )

    def _kleene(self, var: str) -> bool:
        return any(c.var == var and c.kleene for c in self.positives)

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
    types = list(dict.fromkeys(t for c in plan.components if (t := _drawn_type(c, type_col))))
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


AGGREGATES = ("count", "sum", "avg", "min", "max", "first", "last")


def _drawn_type(component, type_col: str) -> str | None:
    """A component's type: written, or said by its condition `v.type = 'T'` (an event set
    pattern's untyped variable)."""
    if component.event_type:
        return component.event_type
    for expr in component.local:
        if (
            isinstance(expr, ast.BinOp)
            and expr.op == "="
            and isinstance(expr.left, ast.AttrRef)
            and expr.left.attr == type_col
            and isinstance(expr.right, ast.Literal)
        ):
            return str(expr.right.value)
    return None


def _lists(bound) -> dict[str, list[int]]:
    """var -> its events (one for a singleton, the elements of a Kleene component)."""
    lists: dict[str, list[int]] = {}
    for var, i in bound:
        lists.setdefault(var, []).append(i)
    return lists


def _element_refs(expr, under_aggregate: bool = False) -> dict[str, bool]:
    """The variables an expression names element by element (not inside an aggregate),
    each with whether it names its `prev`."""
    found: dict[str, bool] = {}
    if isinstance(expr, ast.AttrRef):
        return {} if under_aggregate else {expr.var: False}
    if isinstance(expr, ast.Call):
        if expr.name == "prev" and not under_aggregate:
            return {expr.args[0].var: True}
        under_aggregate = under_aggregate or expr.name in AGGREGATES
    for value in vars(expr).values():
        items = value if isinstance(value, tuple | list) else (value,)
        for item in items:
            if isinstance(item, ast.Expr):
                for var, prev in _element_refs(item, under_aggregate).items():
                    found[var] = found.get(var, False) or prev
    return found


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


def _time_text(value) -> str:
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    return str(value)
