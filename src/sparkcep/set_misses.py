"""Why an event set pattern (`SEQ({c, p+}, {b})`, match-windows.md) did not match: its
near misses, the partial matches that bound the most variables, each with the sets it
bound, how far into the current set it got, and why the rest could not be bound.

A *partial match* binds the variables of the first sets and some of the next one (the
variables of a set match in any order, so any of them), as Definition 2 binds them:
each plain variable one event, each `v+` one or more in time order, no event twice, every
event of a set before every event of the next, all within the window, in one key, and
every condition that names only bound variables true (element-wise, `prev`, aggregates
over the events bound). It is a near miss when no further variable can be bound: its
reason is said, for each variable it wanted, of that variable's candidates (the events
with its type and properties), in this order:

- none after the previous set's last event (or none at all) in the key;
- all of them lie outside the window (the nearest, and by how much);
- the first in the window fails a condition with the events bound (the values shown).

SELECT chooses among matches; it never stops a partial match, so near misses are those
of every match (Definition 2). Ranked by the variables bound, then by the time of the
first event, then by the events bound (more first).

    >>> import pandas as pd
    >>> events = pd.DataFrame({"type": ["C", "P", "P", "B"], "ts": [1, 2, 3, 9],
    ...                        "v": [5, 7, 4, 1]})
    >>> from sparkcep.why_not import near_misses
    >>> query = "PATTERN SEQ({C c, P+ p}, {B b}) WHERE prev(p.v) < p.v AND b.v > c.v WITHIN 10"
    >>> misses = near_misses(events, query, near=2)
    >>> print(misses.loc[0, "bound"])
    {c=C 0 at 1, p=[P 1 at 2]}, {b=?}
    >>> print(misses.loc[0, "reason"])
    b.v > c.v was false for B 3 at 9: 1 > 5 (the first B of 1 in the window)
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sparkcep.expressions import evaluate
from sparkcep.language import ast
from sparkcep.language.ast import bare_text
from sparkcep.misses import (
    AGGREGATES,
    MAX_STEPS,
    NearMiss,
    _Explorer,
    _variables,
)


class SetExplorer(_Explorer):
    """The partial matches of an event set pattern, partition by partition, keeping the
    `near` that bound the most variables (`_Explorer`'s events, conditions and output)."""

    def __init__(self, plan, options, near: int):
        super().__init__(plan, options, near)
        self.sets = plan.spec.sets
        self.set_of = {v: s for s, members in enumerate(self.sets) for v in members}
        self.order = [v for members in self.sets for v in members]
        self.comp = {c.var: c for c in plan.positives}
        # (expression, its variables, whether it aggregates: checked on what is bound)
        self.conds = [(c.expr, _variables(c.expr), _aggregates(c.expr)) for c in plan.conditions]
        self.inclusive = plan.spec.inclusive
        self.select = plan.spec.select
        self.found: list[tuple] = []  # with `wanted`: (key, binding, partition) of the
        self.every: list[tuple] = []  # matches selected, and of every match (Definition 2)
        self.selected = 0

    # ---- one partition ------------------------------------------------------------------

    def partition(self, key: tuple, part: pd.DataFrame) -> None:
        self._enter(key, part)
        self.pool = {v: self._candidates_of(v) for v in self.order}
        here: list[dict] = []
        if not self._goes_on({}):
            self._keep_set({}, self._reasons({}))
        seen: set = set()
        stack: list[dict] = [{}]
        while stack:
            binding = stack.pop()
            canon = _canon(binding, self.order)
            if canon in seen:
                continue
            seen.add(canon)
            self.steps += 1
            if self.steps >= MAX_STEPS:
                self.capped = True
                break
            if binding and self._holds_aggregates(binding):
                if len(binding) == len(self.order):
                    here.append(binding)
                elif not self._goes_on(binding):
                    self._keep_set(binding, self._reasons(binding))
            stack += self._children(binding)
        self.matches += len(here)
        chosen = _select(here, self.comp) if self.select == "earliest maximal" else here
        self.selected += len(chosen)
        if self.wanted is not None:
            self.found += [(key, b, self.part) for b in chosen]
            self.every += [(key, b) for b in here]

    def _candidates_of(self, var: str) -> list[int]:
        """The partition's events with `var`'s type and properties (its conditions on it
        alone), in processing order: column-wise, as the filter reads them."""
        comp, n = self.comp[var], len(self.part)
        ok = np.ones(n, dtype=bool)
        if comp.event_type is not None:
            ok &= self.types == comp.event_type if self.types is not None else False
        for expr in comp.local:
            try:
                value = evaluate(expr, lambda e: self.values[e.attr], n)
            except (AttributeError, KeyError):  # (not a plain column: event by event)
                return [i for i in range(n) if self._fits(comp, i)]
            truth = value.values.astype(bool)
            ok &= truth if value.null is None else truth & ~value.null
        return np.flatnonzero(ok).tolist()

    def _children(self, binding: dict) -> list[dict]:
        """Each binding one step on: a next variable's first event, or one more event of a
        bound `v+` (after its last), that keeps everything but aggregates true."""
        out = []
        for v in self._next_vars(binding):
            out += [{**binding, v: [i]} for i in self.pool[v] if self._open(binding, v, i)]
        for v, seq in binding.items():
            if self.comp[v].kleene:
                out += [
                    {**binding, v: [*seq, i]}
                    for i in self.pool[v]
                    if self._after(seq[-1], i) and self._open(binding, v, i)
                ]
        return out

    def _next_vars(self, binding: dict) -> list[str]:
        """The variables that can be bound next: the unbound ones of the first set with any."""
        for members in self.sets:
            rest = [v for v in members if v not in binding]
            if rest:
                return rest
        return []

    def _goes_on(self, binding: dict) -> bool:
        """Whether a next variable can be bound (a `v+` with as many events as its
        aggregates need) so that the binding is a partial match."""
        for v in self._next_vars(binding):
            for i in self.pool[v]:
                if not self._open(binding, v, i):
                    continue
                stack = [{**binding, v: [i]}]
                while stack:  # (more events of v only when an aggregate wants them)
                    child = stack.pop()
                    self.steps += 1
                    if self._holds_aggregates(child):
                        return True
                    if self.steps >= MAX_STEPS:
                        self.capped = True
                        return True  # (not said to stop: the search stops)
                    if self.comp[v].kleene:
                        seq = child[v]
                        stack += [
                            {**child, v: [*seq, j]}
                            for j in self.pool[v]
                            if self._after(seq[-1], j) and self._open(child, v, j)
                        ]
        return False

    # ---- the checks of a partial match ----------------------------------------------------

    def _open(self, binding: dict, var: str, i: int) -> bool:
        """Whether event i can join `var` in `binding`: unused, the sets in sequence,
        within the window, and every condition it completes true but aggregates."""
        return self._blocked(binding, var, i) is None and self._failure(binding, var, i) is None

    def _blocked(self, binding: dict, var: str, i: int) -> str | None:
        if any(i in seq for seq in binding.values()):
            return "used"
        s = self.set_of[var]
        for u, seq in binding.items():
            t = self.set_of[u]
            if t == s - 1 and not all(self._after(j, i) for j in seq):
                return "order"
            if t == s + 1 and not all(self._after(i, j) for j in seq):
                return "order"
        if not self._span_ok(binding, i):
            return "window"
        return None

    def _span_ok(self, binding: dict, i: int) -> bool:
        w = self.plan.window
        if w is None:
            return True
        times = [self.ticks[j] for seq in binding.values() for j in seq] + [self.ticks[i]]
        return max(times) - min(times) < w

    def _failure(self, binding: dict, var: str, i: int, aggregates: bool = False):
        """The first condition that i, joining `var`, makes false: (expr, lists, choice)
        or None; `aggregates`: those over the whole of a `v+` too."""
        lists = {u: list(seq) for u, seq in binding.items()}
        lists[var] = [*lists.get(var, []), i]
        fixed = {var: len(lists[var]) - 1}
        for expr, names, aggregate in self.conds:
            if var not in names or not names <= lists.keys() or aggregate != aggregates:
                continue
            choice = self._failing(expr, lists, {} if aggregate else fixed)
            if choice is not None:
                return expr, lists, choice
        return None

    def _holds_aggregates(self, binding: dict) -> bool:
        return all(
            self._failing(expr, binding, {}) is None
            for expr, names, aggregate in self.conds
            if aggregate and names <= binding.keys()
        )

    # ---- why it stopped ---------------------------------------------------------------------

    def _reasons(self, binding: dict) -> tuple[list[str], str]:
        wanted = self._next_vars(binding)
        said = [self._reason(binding, v) for v in wanted]
        if len(said) == 1:
            return wanted, said[0]
        return wanted, "; ".join(f"{v}: {r}" for v, r in zip(wanted, said, strict=True))

    def _reason(self, binding: dict, var: str) -> str:
        """Why no candidate of `var` joins `binding` (see the module's docstring)."""
        kind = self._kind(var)
        used = {j for seq in binding.values() for j in seq}
        s = self.set_of[var]
        before = [j for u, seq in binding.items() if self.set_of[u] == s - 1 for j in seq]
        floor = max(before) if before else None  # (positions are in processing order)
        pool = [i for i in self.pool[var] if i not in used]
        after = [i for i in pool if floor is None or self._after(floor, i)]
        if not after:
            if floor is None:
                other = " other than the events bound" if self.pool[var] else ""
                return f"no {kind}{other}" + self._where()
            return f"no {kind} after {self._event(floor)}" + self._tied_to(var, floor, used)
        inside = [i for i in after if self._span_ok(binding, i)]
        if not inside:
            return self._closed(binding, after, kind)
        first = inside[0]
        failed = self._failure(binding, var, first) or self._failure(
            binding, var, first, aggregates=True
        )
        if failed is None:  # (cannot be: it would have gone on)
            return f"{self._event(first)} fits, yet the search stopped (too many steps)"
        expr, lists, choice = failed
        whole = self.comp[var].kleene and _aggregates(expr) and var not in _element_vars(expr)
        said = self._false(expr, lists, choice, var, whole=whole)
        return f"{said} (the first {kind} of {len(inside)} in the window)"

    def _kind(self, var: str) -> str:
        """`C`, `C with c.v > 2`, `event with c.L = 'C'`: a variable's type and properties."""
        c = self.comp[var]
        kind = c.event_type or "event"
        if c.local:
            kind += " with " + " AND ".join(bare_text(ast.to_text(e)) for e in c.local)
        return kind

    def _tied_to(self, var: str, last: int, used: set) -> str:
        same = [
            i
            for i in self.pool[var]
            if i != last and i not in used and self.order_key[i] == self.order_key[last]
        ]
        if not same:
            return ""
        n = len(same)
        return (
            f"; {n} {self._kind(var)} event{'s' * (n != 1)} at the same time as "
            f"{self._event(last)} {'do' if n != 1 else 'does'} not count as after it: equal "
            "times are never in sequence (ORDER BY the time and a column, or --tiebreak, "
            "orders them)"
        )

    def _closed(self, binding: dict, outside: list[int], kind: str) -> str:
        """The candidate nearest the window and how far past it (the window: the bound
        events' first time + WITHIN, or their last time - WITHIN)."""
        times = [self.ticks[j] for seq in binding.values() for j in seq]
        lo, hi, w = min(times), max(times), self.plan.window
        written = w - 1 if self.inclusive else w  # INCLUSIVE: the plan's window is w + 1
        late = [i for i in outside if self.ticks[i] >= lo + w]
        early = [i for i in outside if self.ticks[i] <= hi - w]
        past_late = int(self.ticks[late[0]] - lo - written) if late else None
        past_early = int(hi - written - self.ticks[early[-1]]) if early else None
        if past_late is not None and (past_early is None or past_late <= past_early):
            return f"the window closed: the first {kind} after it, " + self._past(
                late[0], past_late, "after", "end"
            )
        return f"the window: the last {kind} before it, " + self._past(
            early[-1], past_early, "before", "start"
        )

    def _past(self, i: int, past: int, side: str, edge: str) -> str:
        if past == 0:
            return f"{self._event(i)}, at the window's {edge} (WITHIN leaves its {edge} out)"
        return f"{self._event(i)}, {self._span(past)} {side} the window's {edge}"

    def _span(self, ticks: int) -> str:
        day = 86_400_000_000
        if self.plan.time_kind == "timestamp" and ticks > day and ticks % day:
            return str(pd.Timedelta(microseconds=ticks))  # 4 days 23:00:00
        return super()._span(ticks)

    # ---- the near misses kept -------------------------------------------------------------

    def _keep_set(self, binding: dict, why: tuple[list[str], str]) -> None:
        wanted, reason = why
        events = sorted(j for seq in binding.values() for j in seq)
        first = self.ticks[events[0]] if events else 0
        flat = [j for v in self.order if v in binding for j in binding[v]]
        rank = (-len(binding), int(first), -len(events), flat)
        ids = [self.part["__id"].iloc[j] for j in events]
        times = [self.part[self.options.time_col].iloc[j] for j in events]
        shown = self._bound_set_text(binding, wanted)
        miss = NearMiss(rank, self.key, shown, ", ".join(wanted), reason, ids, times)
        self.best.append(miss)
        if len(self.best) > 40 * self.near:  # (room for those left out: `result`)
            self.best = sorted(self.best)[: 20 * self.near]

    def _bound_set_text(self, binding: dict, wanted: list[str]) -> str:
        """`{c=C 1 at 0, p=[P 2 at 1, P 3 at 4]}, {b=?}`: the sets bound, the current one's
        unbound variables as `v=?`."""
        sets = []
        for members in self.sets:
            shown = []
            for v in members:
                if v in binding and self.comp[v].kleene:
                    shown.append(f"{v}=[{', '.join(self._event(j) for j in binding[v])}]")
                elif v in binding:
                    shown.append(f"{v}={self._event(binding[v][0])}")
                elif v in wanted:
                    shown.append(f"{v}=?")
            if shown:
                sets.append("{" + ", ".join(shown) + "}")
            if any(v in wanted for v in members):
                break
        return ", ".join(sets)

    def result(self, frame: pd.DataFrame, partitions: int) -> pd.DataFrame:
        """The near misses, those within a larger one that stopped for the same reason
        left out (a `v+` with fewer of the same events: a ranked superset comes first)."""
        kept: list[NearMiss] = []
        for miss in sorted(self.best):
            if not any(
                k.key == miss.key
                and k.rank[0] == miss.rank[0]
                and k.reason == miss.reason
                and set(miss.ids) <= set(k.ids)
                for k in kept
            ):
                kept.append(miss)
        self.best = kept
        out = super().result(frame, partitions)
        if self.select == "earliest maximal":
            out.attrs["summary"] = out.attrs["summary"].replace(
                f"{self.matches:,} matches",
                f"{self.selected:,} matches ({self.matches:,} before SELECT EARLIEST MAXIMAL)",
                1,
            )
        return out

    # ---- why this match -------------------------------------------------------------------

    def explained_matches(self) -> pd.DataFrame:
        """For each match the run gives that starts with the wanted event: a row per
        variable (`var`, `event`, `why`, `others`) and a last one on the window."""
        for key, binding, part in self.found:
            self.key, self.part = key, part
            events = sorted(j for seq in binding.values() for j in seq)
            if str(part["__id"].iloc[events[0]]) != str(self.wanted):
                continue
            self._explain_set_match(binding, events[0])
        return super().explained_matches()

    def _explain_set_match(self, binding: dict, start: int) -> None:
        number = 1 + len({row["match"] for row in self.explained})
        self.ticks = self.part["__ticks"].to_numpy(dtype=np.int64)
        types = self.part.get(self.options.type_col)
        self.types = types.to_numpy() if types is not None else None
        rivals = [
            b
            for k, b in self.every
            if k == self.key and min(j for seq in b.values() for j in seq) == start
        ]
        for v in self.order:
            seq = binding[v]
            event = (
                f"[{', '.join(self._event(j) for j in seq)}]"
                if self.comp[v].kleene
                else self._event(seq[0])
            )
            rest = {u: s for u, s in binding.items() if u != v}
            others = {tuple(b[v]) for b in rivals if {u: b[u] for u in rest} == rest}
            others.discard(tuple(seq))
            row = {"match": number, "var": v, "event": event, "others": len(others)}
            row["why"] = self._why_bound(v, binding, start, rivals, len(others))
            self.explained.append(row)
        if self.plan.window is not None:
            times = [self.ticks[j] for seq in binding.values() for j in seq]
            written = self.plan.window - 1 if self.inclusive else self.plan.window
            room = int(min(times) + written - max(times))
            end = "the window's end" + (" (included)" if self.inclusive else "")
            why = f"the window: its last event came {self._span(room)} before {end}"
            self.explained.append({"match": number, "var": "", "event": "", "why": why,
                                   "others": 0})  # fmt: skip

    def _why_bound(self, var: str, binding: dict, start: int, rivals, others: int) -> str:
        seq = binding[var]
        kind = self._kind(var)
        head = "the match's first event; " if seq[0] == start else ""
        if self.select != "earliest maximal":
            n = others
            return head + (
                f"SELECT ALL: {n} other binding{'s' * (n != 1)} of {var} fit with the rest "
                "of this match, each in a match of its own"
                if n
                else f"SELECT ALL: the only binding of {var} that fits with the rest of this match"
            )
        earlier = [b for b in rivals if b[var][0] < seq[0]]
        if not earlier:
            why = f"earliest: no match from {self._event(start)} binds {var} to an earlier {kind}"
        else:
            b = min(earlier, key=lambda b: b[var][0])
            later = next(u for u in self.order if b[u][0] > binding[u][0])
            why = (
                f"earliest: {self._event(b[var][0])} binds {var} only in matches whose "
                f"{later} starts later ({self._event(b[later][0])})"
            )
        if self.comp[var].kleene:
            n = len(seq)
            why += (
                f"; maximal: {_count(n)} {'are' if n != 1 else 'is'} all that fit (no match "
                "from the same start contains this one)"
            )
        return head + why


def _canon(binding: dict, order: list[str]) -> tuple:
    return tuple((v, tuple(binding[v])) for v in order if v in binding)


def _aggregates(expr) -> bool:
    """Whether an expression aggregates a variable's events (count, sum, ..., last)."""
    return any(isinstance(n, ast.Call) and n.name in AGGREGATES for n in ast.walk(expr))


def _element_vars(expr) -> set[str]:
    from sparkcep.misses import _element_refs

    return set(_element_refs(expr))


def _select(matches: list[dict], comp: dict) -> list[dict]:
    """SELECT EARLIEST MAXIMAL among `matches` (one partition), as docs/ses.md reads §3:
    per start, no other has every first event at or before its own (and differs), and
    no other contains it variable by variable."""

    def start(m):
        return min(j for seq in m.values() for j in seq)

    out = []
    for m in matches:
        group = [g for g in matches if g is not m and start(g) == start(m)]
        earlier = any(
            all(g[v][0] <= m[v][0] for v in m) and any(g[v][0] < m[v][0] for v in m) for g in group
        )
        contained = any(all(set(m[v]) <= set(g[v]) for v in m) for g in group)
        if not earlier and not contained:
            out.append(m)
    return out


def _count(n: int) -> str:
    return "its one event" if n == 1 else f"its {n} events"
