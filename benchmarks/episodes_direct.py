"""DirectMatch compiled with numba: a baseline on equal footing with the compiled CBS-Tree.

Benchmark-only (the product's DirectMatch is Python: `window.DirectMatch`, `cbr.CBR`).
DirectMatch (the paper's reference [4], §3.2) retrieves a rule's min-latest occurrence
from the raw events of the window: CBR (Algorithm 1) where "the latest instance of e in
[lt, rt]" is a scan of the held events from rt back to lt, newest first, with no index.

`run` is `kernel.run` with the tree taken out: the same ring (`Segment`'s sym, tick and
first columns), the same rule arrays (`matcher._Compiled`), the same trigger table, the
same per-window lower bound, the same Definition 3, and the answers of an instant shared
by its rules as the kernel shares them (and the Python DirectMatch, `SharedAnswers`):
up to MEMO answers per symbol and instant. The only difference is where an answer comes
from: a backward scan of the ring instead of FindLatestEventOccurrence on the tree.

`DirectCompiled` is `matcher._Compiled` calling this `run` (the Python around it, the
ring's growth and the making of `Found` rows are the same code as the CBS-Tree's), and
`direct_program(rules)` gives a compiled program whose matcher uses it, so that
`episodes.match_only` times it exactly as it times the CBS-Tree.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from sparkcep.engines.episodes.kernel import DONE, FULL, GROW, MEMO, _after
from sparkcep.engines.episodes.matcher import _Compiled, _Held
from sparkcep.engines.episodes.window import Segment


@njit(cache=True, inline="always")
def _scan(ring_sym, cap, e, lt, hi):
    """The latest position in [lt, hi] whose event is e, or -1: newest first, over the
    ring's contiguous runs of slots."""
    while hi >= lt:
        s = hi % cap
        n = min(hi - lt, s)  # positions hi .. hi - n are slots s .. s - n
        for j in range(s, s - n - 1, -1):
            if ring_sym[j] == e:
                return hi - (s - j)
        hi -= n + 1
    return -1


@njit(cache=True, inline="always")
def _latest(ring_sym, cap, e, lt, b, memo, i):
    """The latest instance of e at or before b, when one lies in [lt, b] (else -1 or a
    position before lt), shared by the rules of instant i. memo = (t, lo, hi, at):
    t >= 0: e is at t and not in (t, hi]; t = -1: e is not in [lo, hi]; at[e] = (the
    instant, how many are held, the next to replace), as `kernel._upto`."""
    mt, ml, mh, at = memo
    if at[e, 0] != i:
        at[e, 0], at[e, 1], at[e, 2] = i, 0, 0
    n = at[e, 1]
    for k in range(n):
        t = mt[e, k]
        if t >= 0:
            if t <= b <= mh[e, k]:
                return t
        elif ml[e, k] <= lt and b <= mh[e, k]:
            return -1
    t = _scan(ring_sym, cap, e, lt, b)
    if t >= 0:
        for k in range(n):
            if mt[e, k] == t:  # b is after hi: the interval grows
                mh[e, k] = b
                return t
    k = at[e, 2]
    mt[e, k], ml[e, k], mh[e, k] = t, lt, b
    at[e, 2] = (k + 1) % MEMO
    if n < MEMO:
        at[e, 1] = n + 1
    return t


@njit(cache=True)
def run(  # noqa: PLR0913, PLR0915, C901
    syms, ticks, new_instant, owned, i,  # the batch, and where to start (an instant)
    ring_sym, ring_tick, ring_first, state,  # the ring; state = [count, capacity]
    v_off, v_sym, v_ret, v_topo, s_off, s_list, p_win, windows, max_window,  # the rules
    sink_off, sink_list,  # symbol -> the predicates it can end
    rej, rej_n, changed,  # each predicate's rejected instances
    out_pred, out_pos,  # the occurrences found
):  # fmt: skip
    """`kernel.run` without the tree: same arguments but the tree's, same returns."""
    n = len(syms)
    count, cap = state[0], state[1]
    n_pred = len(p_win)
    seen = np.full(n_pred, -1, np.int64)
    arrived = np.full(len(sink_off) - 1, -1, np.int64)
    arrived_at = np.full(len(sink_off) - 1, -1, np.int64)
    low_at = np.full(len(windows), -1, np.int64)
    low = np.zeros(len(windows), np.int64)
    triggered = np.empty(n_pred, np.int64)
    max_v = out_pos.shape[1]
    where = np.empty(max_v, np.int64)
    firsts = np.empty(max_v, np.int64)
    rejected = np.zeros(max_v, np.bool_)
    n_sym = len(sink_off) - 1
    memo = (
        np.empty((n_sym, MEMO), np.int64),
        np.empty((n_sym, MEMO), np.int64),
        np.empty((n_sym, MEMO), np.int64),
        np.full((n_sym, 3), -1, np.int64),
    )
    found = 0
    while i < n:
        j = i + 1
        while j < n and not new_instant[j]:
            j += 1
        tick = ticks[i]
        for k in range(j - i):  # the ring must hold the largest window
            q = count + k
            if q >= cap and ring_tick[q % cap] > tick - max_window:
                state[0] = count
                return GROW, i, found
        if found + n_pred > len(out_pred):
            state[0] = count
            return FULL, i, found
        start = count
        n_trig = 0
        for k in range(i, j):
            s = syms[k]
            slot = count % cap
            ring_sym[slot] = s
            ring_tick[slot] = tick
            ring_first[slot] = start
            arrived[s] = count
            arrived_at[s] = i
            for x in range(sink_off[s], sink_off[s + 1]):
                p = sink_list[x]
                if seen[p] != i:
                    seen[p] = i
                    triggered[n_trig] = p
                    n_trig += 1
            count += 1
        if j - i > 1:
            triggered[:n_trig].sort()
        rt = count - 1
        mine = owned[j - 1]
        for x in range(n_trig):
            p = triggered[x]
            w = p_win[p]
            if low_at[w] != i:
                low_at[w] = i
                low[w] = _after(ring_tick, cap, max(low[w], count - cap, 0), count,
                                tick - windows[w])  # fmt: skip
            lt = low[w]
            base = v_off[p]
            nv = v_off[p + 1] - base
            ok = True
            for r in range(nv):  # Algorithm 1: reverse topological order
                v = v_ret[base + r]
                g = base + v
                e = v_sym[g]
                if s_off[g + 1] > s_off[g]:
                    m = where[s_list[s_off[g]]]
                    for y in range(s_off[g] + 1, s_off[g + 1]):
                        if where[s_list[y]] < m:
                            m = where[s_list[y]]
                    bound = ring_first[m % cap] - 1
                elif arrived_at[e] == i:  # a sink whose event just arrived
                    where[v] = arrived[e]
                    continue
                else:
                    bound = rt
                if bound < lt:
                    ok = False
                    break
                t = _latest(ring_sym, cap, e, lt, bound, memo, i)
                if t < lt:
                    ok = False
                    break
                for y in range(base, base + rej_n[p]):  # a rejected instance: stop
                    if rej[y] == t:
                        ok = False
                        break
                if not ok:
                    break
                where[v] = t
            if not ok:
                continue
            # Definition 3: the rejected instances of this min-latest occurrence
            begin = rt
            for v in range(nv):
                firsts[v] = ring_first[where[v] % cap]
                if firsts[v] < begin:
                    begin = firsts[v]
            for v in range(nv):
                rejected[v] = firsts[v] == begin
            for r in range(nv):
                v = v_topo[base + r]
                if not rejected[v]:
                    continue
                g = base + v
                for y in range(s_off[g], s_off[g + 1]):
                    u = s_list[y]
                    if rejected[u]:
                        continue
                    lo, hi = where[v] + 1, firsts[u] - 1
                    if lo > hi or _latest(ring_sym, cap, v_sym[g], lo, hi, memo, i) < lo:
                        rejected[u] = True
            c = 0
            for v in range(nv):
                if rejected[v]:
                    rej[base + c] = where[v]
                    c += 1
            rej_n[p] = c
            changed[p] = 1
            if mine:
                out_pred[found] = p
                out_pos[found, :nv] = where[:nv]
                out_pos[found, nv:] = -1
                found += 1
        i = j
    state[0] = count
    return DONE, n, found


class DirectCompiled(_Compiled):
    """`matcher._Compiled` with `run` above in place of the CBS-Tree kernel (and no tree)."""

    def held(self, seg: Segment) -> _Held:
        held = getattr(seg, "_kernel", None)
        if held is None or held.rejected_of is not seg.rejected:
            held = _Held(self, seg)
            seg._kernel = held
        return held

    def _run(self, seg, held, state, syms, ticks, new_instant, owned, i):
        """`_Compiled.feed`'s kernel call, with the scan for the tree."""
        return run(
            syms, ticks, new_instant, owned, i, seg.sym, seg.tick, seg.first, state,
            *self._rule_arrays(held),
        )  # fmt: skip


def direct_program(plans, names, options):
    """The `directmatch` program with its matcher running the compiled DirectMatch."""
    from sparkcep.engines.registry import engines

    program = engines()["directmatch"].compile(plans, names, options)
    program.matcher.compiled = DirectCompiled(program.rules)
    return program
