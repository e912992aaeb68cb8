"""A(P, W) for sequenced event set patterns: the matches that start at a window's first
event (match-windows.md Definition 4), all of them (Definition 2) or the earliest and
maximal ones (§3, the SES semantics).

A match from the window's first event h is found in two steps:

1. its *skeleton*: one event per variable — the event of a plain variable, the first
   event of a `v+` — with h bound to a variable of B1, the sets in sequence (every
   event of B_s strictly before every event of B_{s+1}), events distinct, within the
   window, and the conditions the skeleton completes;
2. its *extensions*: more events for the `v+` variables, each after the variable's
   last one, before the first event of the next set, and fitting the conditions with
   everything bound so far.

Every match has exactly one skeleton (its first events), so all matches are the
extensions of all skeletons. The earliest matches are those whose skeleton no other
match's skeleton precedes variable by variable (Pareto); a superset of a match has a
skeleton at least as early, so the earliest and maximal matches are, per earliest
skeleton, the extensions that no other extension contains. Two shortcuts keep this
exact and small: a skeleton search stops where a skeleton found already is earlier for
every variable (later candidates only get later), and an extension never *skips* an
event that a `v+` variable could take whatever else happens (no prev() on it, no
condition with another `v+`, no aggregate condition): skipping it gives only matches
that are not maximal.

The Chemo example (P1 = (⟨{c, p+}, {b}⟩, Θ, 15 d), patient 1, Example 7): from e1 there
are three matches, and one is earliest and maximal.

>>> import numpy as np
>>> from sparkcep.plan import analyze
>>> from sparkcep.prep.table import EventTable
>>> q = '''PATTERN SEQ({c, p+}, {b}) WHERE c.L = 'C' AND p.L = 'P' AND b.L = 'B'
...        AND prev(p.V) < p.V WITHIN 15 INCLUSIVE SELECT EARLIEST MAXIMAL'''
>>> plan = analyze(q)
>>> days = np.array([3, 4, 5, 12, 17, 22])                       # e1 e2 e3 e9 e11 e14
>>> mask = np.array([0b001, 0b100, 0b010, 0b010, 0b100, 0b100])  # bits c, p, b
>>> table = EventTable(days, np.arange(6), np.zeros(6, np.int64), mask)
>>> values = {"V": [1672.5, 7100, 111.5, 116.5, 3400, 3000]}
>>> every = SesMatcher(plan, table, values, select="all")
>>> sorted(str(m) for m in every.matches(0, 5))
["{'c': [0], 'p': [2, 3], 'b': [4]}", "{'c': [0], 'p': [2], 'b': [4]}", "{'c': [0], 'p': [3], 'b': [4]}"]
>>> SesMatcher(plan, table, values).matches(0, 5)
[{'c': [0], 'p': [2, 3], 'b': [4]}]
"""

from __future__ import annotations

import numpy as np

from sparkcep.engines.ses.conditions import Binding, Conditions
from sparkcep.errors import SparkcepError
from sparkcep.plan import Plan
from sparkcep.plan.sets import SesSpec
from sparkcep.prep.table import EventTable

STEP_LIMIT = 5_000_000  # bindings tried in one window before giving up clearly


class TooManyBindings(SparkcepError):
    pass


def pattern_sets(plan: Plan) -> tuple[tuple[str, ...], ...]:
    """The variables of each set in order: the spec's, or one set per component."""
    if isinstance(plan.spec, SesSpec):
        return plan.spec.sets
    return tuple((c.var,) for c in plan.positives)


class SesMatcher:
    """A(P, W) for the windows of one table: `matches(h, end)` gives the matches of the
    window [h, end) (table positions) that start at h, as bindings (variable -> positions).

    `select` is "all" or "earliest maximal" (default: the plan's SELECT). `key` (an int
    per event, -1 for null) makes every event of a match share it, when the windows are
    not partitioned by the key.
    """

    def __init__(
        self,
        plan: Plan,
        table: EventTable,
        columns: dict[str, list],
        *,
        select: str | None = None,
        key: np.ndarray | None = None,
    ):
        spec = plan.spec if isinstance(plan.spec, SesSpec) else None
        self.select = select or (spec.select if spec else "all")
        self.sets = pattern_sets(plan)
        self.kleene = {c.var for c in plan.positives if c.kleene}
        self.bit = {c.var: c.bit for c in plan.positives}
        self.set_index = {v: i for i, s in enumerate(self.sets) for v in s}
        self.variables = [v for s in self.sets for v in s]
        self.conditions = Conditions(plan, columns)
        self.mask = table.mask
        self.order = table.order
        self.key = key
        self.cands = {v: np.flatnonzero(table.mask & self.bit[v]) for v in self.variables}
        self.stable = {v: self.conditions.stable(v) for v in self.kleene}
        self.steps = 0

    # ---- the window's matches
    def matches(self, h: int, end: int, limit: int | None = None) -> list[Binding]:
        """`limit` (SELECT ALL): stop once that many are found (the first found)."""
        self.steps = 0
        if self.key is not None and self.key[h] < 0:
            return []
        window = {v: self._in_window(v, h, end, h) for v in self.variables}
        if self.select == "all":
            out: list[Binding] = []
            for skeleton in self._skeletons(h, window, None):
                rest = None if limit is None else limit - len(out)
                out += self._extensions(skeleton, h, end, prune=False, limit=rest)
                if limit is not None and len(out) >= limit:
                    break
            return out
        return self._earliest_maximal(h, end, window)

    def _in_window(self, var: str, lo: int, end: int, h: int) -> list[int]:
        """The candidates of `var` in [lo, end) (in h's partition, when unpartitioned)."""
        cands = self.cands[var]
        pos = cands[np.searchsorted(cands, lo) : np.searchsorted(cands, end)]
        if self.key is not None:
            pos = pos[self.key[pos] == self.key[h]]
        return pos.tolist()

    def _earliest_maximal(self, h: int, end: int, window) -> list[Binding]:
        found: list[tuple[dict[str, int], list[Binding]]] = []
        prune = not self.conditions.any_final
        for skeleton in self._skeletons(h, window, found):
            leaves = self._extensions(skeleton, h, end, prune=prune)
            if leaves:
                firsts = {v: pos[0] for v, pos in skeleton.items()}
                found.append((firsts, leaves))
        earliest = [
            (f, leaves)
            for f, leaves in found
            if not any(_precedes(g, f) for g, _ in found if g is not f)
        ]
        out: list[Binding] = []
        for _, leaves in earliest:
            out += _maximal(leaves)
        return out

    # ---- step 1: skeletons
    def _skeletons(self, h: int, window, found):
        """Each skeleton (one event per variable) of a match from h, as a binding.
        With `found` (earliest and maximal), a partial skeleton stops where a found one
        is at least as early for every variable."""
        first = [v for v in self.sets[0] if self.mask[h] & self.bit[v]]
        for v in first:
            binding: Binding = {v: [h]}
            if self.conditions.fits(v, binding, {v}):
                yield from self._assign(0, 0, -1, int(self.order[h]), binding, {h}, window, found)

    def _assign(self, s, i, floor, top, binding, used, window, found):
        """Bind the i-th variable of set s; `floor` is the instant every event of the set
        must follow, `top` the latest instant of the set so far."""
        members = self.sets[s]
        if i == len(members):
            if s + 1 == len(self.sets):
                yield {v: list(p) for v, p in binding.items()}
                return
            yield from self._assign(s + 1, 0, top, -1, binding, used, window, found)
            return
        var = members[i]
        if var in binding:
            yield from self._assign(s, i + 1, floor, top, binding, used, window, found)
            return
        bound = set(binding) | {var}
        for p in window[var]:
            if self.order[p] <= floor or p in used:
                continue
            self._count()
            binding[var] = [p]
            if found and self._dominated(binding, s, max(top, int(self.order[p])), window, found):
                del binding[var]
                break  # a later candidate is later still
            if self.conditions.fits(var, binding, bound):
                used.add(p)
                new_top = max(top, int(self.order[p]))
                yield from self._assign(s, i + 1, floor, new_top, binding, used, window, found)
                used.discard(p)
            del binding[var]

    def _dominated(self, binding, s, top, window, found) -> bool:
        """A found skeleton is at least as early as every completion of `binding`."""
        lows = {}
        for v in self.variables:
            if v in binding:
                lows[v] = binding[v][0]
                continue
            t = self.set_index[v]
            floor = top if t > s else -1
            lows[v] = next((p for p in window[v] if self.order[p] > floor), None)
            if lows[v] is None:
                return True  # no completion at all
        return any(all(f[v] <= lows[v] for v in self.variables) for f, _ in found)

    # ---- step 2: extensions
    def _extensions(
        self, skeleton: Binding, h: int, end: int, *, prune: bool, limit: int | None = None
    ) -> list[Binding]:
        plus = [v for v in self.variables if v in self.kleene]
        if not plus:
            return [skeleton] if self.conditions.holds_final(skeleton) else []
        ceiling = {}  # the instant an element of v must precede: the next set's first
        for v in plus:
            t = self.set_index[v]
            nxt = [self.order[p[0]] for u, p in skeleton.items() if self.set_index[u] == t + 1]
            ceiling[v] = min(nxt) if nxt else np.iinfo(np.int64).max
        used = {p[0] for p in skeleton.values()}
        events = sorted(
            {
                p
                for v in plus
                for p in self._in_window(v, skeleton[v][0] + 1, end, h)
                if p not in used and self.order[p] < ceiling[v]
            }
        )
        leaves: list[Binding] = []
        binding = {v: list(p) for v, p in skeleton.items()}
        self._extend(events, binding, plus, ceiling, prune, leaves, limit)
        return leaves

    def _extend(self, events, binding, plus, ceiling, prune, leaves, limit=None) -> None:
        """Depth first over `events`: each is taken by a `v+` it fits, or skipped. An
        explicit stack (a binding can take thousands of events).

        With `prune` (earliest and maximal), a branch is cut when it can only give a
        binding that another contains: it skips an event that a variable always takes
        (`must_take`), or an event x skipped while it fitted a variable with prev()
        (`pending`) could go back between that variable's neighbours — before the
        variable's next event y (then taking y is cut), or at its end (the leaf is
        dropped)."""
        all_vars = set(binding)
        pending: dict[str, list[int]] = {v: [] for v in plus}
        stack = [_Step(0)]
        while stack:
            step = stack[-1]
            if step.taken is not None:  # back from the branch that took the event
                binding[step.taken].pop()
                pending[step.taken] = step.saved
                step.taken = None
            if step.i == len(events):
                if self._leaf(binding, pending, leaves, limit):
                    return  # the limit reached
                stack.pop()
                continue
            x = events[step.i]
            while step.k < len(plus):
                v = plus[step.k]
                step.k += 1
                if not self._may_take(v, x, binding, ceiling):
                    continue
                self._count()
                binding[v].append(x)
                fits = self.conditions.fits(v, binding, all_vars)
                if fits and prune and self.stable[v] == "neighbours":
                    step.fitted.append(v)
                    if pending[v] and self._goes_back(v, binding, pending[v], all_vars):
                        fits = False
                if fits:
                    if prune and self.stable[v] == "always" and not self._tie_after(v, x):
                        step.must_take = True
                    step.taken, step.saved, pending[v] = v, pending[v], []
                    stack.append(_Step(step.i + 1))
                    break
                binding[v].pop()
            else:
                if step.skipped:  # back from the branch that skipped the event
                    for v in step.fitted:
                        pending[v].pop()
                    stack.pop()
                elif step.must_take:
                    stack.pop()
                else:
                    step.skipped = True
                    for v in step.fitted:
                        pending[v].append(x)
                    stack.append(_Step(step.i + 1))

    def _leaf(self, binding, pending, leaves, limit) -> bool:
        """Keeps a complete binding that is a leaf; whether `limit` leaves are kept."""
        if not any(pending.values()) and self.conditions.holds_final(binding):
            leaves.append({v: list(p) for v, p in binding.items()})
            return limit is not None and len(leaves) >= limit
        return False

    def _goes_back(self, var, binding, skipped, all_vars) -> bool:
        """Whether a skipped event fits between var's previous event and its newest."""
        seq = binding[var]
        newest = seq[-1]
        for x in skipped:
            if self.order[x] >= self.order[newest]:
                continue
            seq.insert(len(seq) - 1, x)
            fits = self.conditions.fits(var, binding, all_vars)
            seq.pop(len(seq) - 2)
            if fits:
                return True
        return False

    def _may_take(self, var: str, x: int, binding: Binding, ceiling) -> bool:
        """x satisfies var's properties, after its last event, before the next set."""
        rank = self.order[x]
        return bool(self.mask[x] & self.bit[var]) and (
            self.order[binding[var][-1]] < rank < ceiling[var]
        )

    def _tie_after(self, var: str, x: int) -> bool:
        """Whether a later event of the same instant as x could also bind `var`."""
        cands = self.cands[var]
        k = np.searchsorted(cands, x, side="right")
        return k < len(cands) and self.order[cands[k]] == self.order[x]

    def _count(self) -> None:
        self.steps += 1
        if self.steps > STEP_LIMIT:
            raise TooManyBindings(
                f"more than {STEP_LIMIT:,} partial matches in one match window: narrow the "
                "window or the conditions, or use SELECT EARLIEST MAXIMAL"
            )


class _Step:
    """A frame of the extension search: the event at i, the next variable to try."""

    __slots__ = ("fitted", "i", "k", "must_take", "saved", "skipped", "taken")

    def __init__(self, i: int):
        self.i = i
        self.k = 0
        self.taken: str | None = None
        self.saved: list[int] = []
        self.fitted: list[str] = []  # variables with prev() the event fitted
        self.must_take = False
        self.skipped = False


def _precedes(g: dict[str, int], f: dict[str, int]) -> bool:
    """g's first events are at least as early as f's for every variable, and differ."""
    return g != f and all(g[v] <= f[v] for v in f)


def _maximal(leaves: list[Binding]) -> list[Binding]:
    """The bindings no other binding of the list contains, variable by variable."""
    if len(leaves) < 2:
        return leaves
    sets = [{v: set(p) for v, p in leaf.items()} for leaf in leaves]
    out = []
    for i, a in enumerate(sets):
        contained = any(
            j != i and all(a[v] <= b[v] for v in a) and a != b for j, b in enumerate(sets)
        )
        if not contained:
            out.append(leaves[i])
    return out
