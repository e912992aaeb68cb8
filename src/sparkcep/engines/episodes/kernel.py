"""The CBS-Tree and CBR (Algorithm 1) compiled: one call runs a batch of instants.

`tree.py` and `cbr.py` say what is computed; this module computes the same answers over
flat arrays, with numba, so that a rule's retrieval costs what the paper counts (N·log L
node visits) and not a Python call per node. One call of `run` takes the events of one
partition's batch and, instant by instant: pushes the instant's events on the ring and
the tree (one leaf-to-root path each); finds the predicates one of whose sinks' symbols
arrived (one pass for all the rules: a table from a symbol to the predicates it can end);
retrieves each one's latest occurrence with FindLatestEventOccurrence, every search cut to
[lt, rt] (Cases 1–4 of §3.2, an explicit stack instead of the recursion); drops it when
it holds a rejected instance; else replaces the predicate's rejected instances
(Definition 3) and records the occurrence.

The tree here is `CBSTree`'s, with R_E as one bit per symbol (a node's bits are the OR of
its children's) and R_T as the node's newest and oldest position (`lat`, `smt`); the
node numbering, the leaf of a position and the four cases are the same, and the answers
are equal (benchmarks/episodes.py asserts that the three algorithms report the same rows).

No pyspark here: numba and numpy only. The compiled code is cached on disk (cache=True).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from sparkcep.engines.episodes.tree import CBSTree

STACK = 512  # search frames: at most 3 per tree level
MEMO = 8  # the answers kept per symbol and instant
DONE, GROW, FULL = 0, 1, 2  # why `run` returned


class Tree:
    """A CBS-Tree over `capacity` leaves as arrays (see `CBSTree` for the layout)."""

    def __init__(self, capacity: int, n_symbols: int):
        shape = CBSTree(capacity)  # the numbering: children, parents, leftmost/rightmost leaf
        self.capacity = capacity
        self.root = shape.root
        self.lch = np.asarray(shape.lch, np.int64)
        self.rch = np.asarray(shape.rch, np.int64)
        self.parent = np.asarray(shape.parent, np.int64)
        self.first = np.asarray(shape.first, np.int64)
        self.last = np.asarray(shape.last, np.int64)
        self.pos = np.asarray(shape.pos, np.int64)
        self.lat = np.asarray(shape.lat, np.int64)
        self.smt = np.asarray(shape.smt, np.int64)
        self.bits = np.zeros((len(shape.lch), max(1, (n_symbols + 63) // 64)), np.uint64)

    def arrays(self):
        return (self.lch, self.rch, self.parent, self.first, self.last, self.pos, self.lat,
                self.smt, self.bits)  # fmt: skip

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays())


# ---- the tree --------------------------------------------------------------------------------


@njit(cache=True, inline="always")
def _has(bits, node, e):
    return (bits[node, e >> 6] >> np.uint64(e & 63)) & np.uint64(1)


@njit(cache=True)
def insert(cap, lch, rch, parent, first, last, pos, lat, smt, bits, position, symbol):  # noqa: PLR0913
    """The instance at `position` (the newest) replaces the one `cap` positions older."""
    leaf = position % cap + 1
    bits[leaf, :] = 0
    if symbol >= 0:
        bits[leaf, symbol >> 6] = np.uint64(1) << np.uint64(symbol & 63)
    pos[leaf] = position
    lat[leaf] = position
    smt[leaf] = position
    node = parent[leaf]
    words = bits.shape[1]
    while node:
        lc = lch[node]
        rc = rch[node] if rch[node] else lc
        for w in range(words):
            bits[node, w] = bits[lc, w] | bits[rc, w]
        lat[node] = position
        a, b = smt[lc], smt[rc]
        smt[node] = a if a < b else b
        node = parent[node]


@njit(cache=True)
def find(cap, root, lch, rch, first, last, pos, lat, smt, bits, e, lt, rt, stack, parts):  # noqa: C901, PLR0913, PLR0915
    """FindLatestEventOccurrence: the position of the latest instance of `e` within
    [lt, rt], or -1. `CBSTree.find` without the rejected check (the caller does it)."""
    oldest = lat[root] - cap + 1
    if lt < oldest:
        lt = oldest
    if lt > rt or not _has(bits, root, e):
        return -1
    if root <= cap:
        p = pos[root]
        return p if lt <= p <= rt else -1
    sp = 0
    stack[0, 0], stack[0, 1], stack[0, 2] = root, lt, rt
    sp = 1
    while sp:
        sp -= 1
        n, lt, rt = stack[sp, 0], stack[sp, 1], stack[sp, 2]
        if n <= cap:  # a leaf: the first one reached is the answer
            return pos[n]
        lc, rc = lch[n], rch[n]
        if rc == 0:  # the last node of an odd level has one child
            stack[sp, 0], stack[sp, 1], stack[sp, 2] = lc, lt, rt
            sp += 1
            continue
        r_lmt, l_rmt = pos[first[rc]], pos[last[lc]]
        if smt[rc] > lat[lc]:  # Cases 1-3: the leaves under n are in time order
            lmt, rmt = pos[first[n]], pos[last[n]]
            if lt < lmt:
                lt = lmt
            if rt > rmt:
                rt = rmt
            if lt > rt:
                continue
            if rt == rmt:  # Case 1: one child holds the answer
                if _has(bits, rc, e):
                    stack[sp, 0], stack[sp, 1], stack[sp, 2] = rc, max(lt, r_lmt), rt
                    sp += 1
                elif lt <= l_rmt and _has(bits, lc, e):
                    stack[sp, 0], stack[sp, 1], stack[sp, 2] = lc, lt, l_rmt
                    sp += 1
                continue
            # Cases 2, 3: the right child's part first (pushed last), then the left's
            if lt <= l_rmt and _has(bits, lc, e):
                stack[sp, 0], stack[sp, 1], stack[sp, 2] = lc, lt, min(rt, l_rmt)
                sp += 1
            if rt >= r_lmt and _has(bits, rc, e):
                stack[sp, 0], stack[sp, 1], stack[sp, 2] = rc, max(lt, r_lmt), rt
                sp += 1
            continue
        # Case 4: the parts, newest first, pushed in reverse order
        l_lmt, r_rmt = pos[first[lc]], pos[last[rc]]
        nparts = 0
        if rt >= l_lmt:  # sub-case (a)
            if r_lmt != smt[rc]:  # Type 3: the newest leaf is under the right child
                parts[0, 0], parts[0, 1], parts[0, 2] = rc, r_lmt, lat[rc]
                parts[1, 0], parts[1, 1], parts[1, 2] = lc, l_lmt, l_rmt
                nparts = 2
            else:
                parts[0, 0], parts[0, 1], parts[0, 2] = lc, l_lmt, lat[lc]
                nparts = 1
        if r_lmt != smt[rc]:
            parts[nparts, 0], parts[nparts, 1], parts[nparts, 2] = rc, smt[rc], r_rmt
            nparts += 1
        else:
            parts[nparts, 0], parts[nparts, 1], parts[nparts, 2] = rc, r_lmt, r_rmt
            nparts += 1
            if l_rmt != lat[lc]:
                parts[nparts, 0], parts[nparts, 1], parts[nparts, 2] = lc, smt[lc], l_rmt
                nparts += 1
        for k in range(nparts - 1, -1, -1):
            node = parts[k, 0]
            lo = max(lt, parts[k, 1])
            hi = min(rt, parts[k, 2])
            if lo <= hi and _has(bits, node, e):
                stack[sp, 0], stack[sp, 1], stack[sp, 2] = node, lo, hi
                sp += 1
    return -1


@njit(cache=True)
def build(cap, lch, rch, parent, first, last, pos, lat, smt, bits, ring_sym, count):  # noqa: PLR0913
    """The tree over the positions the ring holds (after a resize, or a state read back)."""
    for p in range(max(0, count - cap), count):
        insert(cap, lch, rch, parent, first, last, pos, lat, smt, bits, p, ring_sym[p % cap])


# ---- the matcher -----------------------------------------------------------------------------


@njit(cache=True, inline="always")
def _upto(cap, root, lch, rch, first, last, pos, lat, smt, bits, e, b, stack, parts, memo, i):  # noqa: PLR0913
    """The latest instance of `e` at or before position `b` (-1: none held), shared by all
    the rules of instant `i` (as `SharedAnswers` shares them in Python). memo = (t, hi,
    at): t[e, k], hi[e, k] (k < MEMO) say that t is the latest instance of e up to any
    position in [t, hi] (no e after t up to hi); at[e] = (the instant they are of, how
    many are held, the next to replace). Up to MEMO such answers per symbol: rules with the
    same symbol ask up to different positions (a vertex's bound is where its successors'
    instances start), and one answer per symbol left two thirds of the searches to be
    made again (10,000 dense episodes, AveW 500, 5,000 events: 2.67 million searches with
    one answer per symbol, 0.9 million with every answer of the instant kept; the kernel's
    time 1.38 s with one, 1.03 s with 8, 1.04 s with 16)."""
    mt, mh, at = memo
    if at[e, 0] != i:
        at[e, 0], at[e, 1], at[e, 2] = i, 0, 0
    n = at[e, 1]
    for k in range(n):
        if mt[e, k] <= b <= mh[e, k]:
            return mt[e, k]
    t = find(cap, root, lch, rch, first, last, pos, lat, smt, bits, e, 0, b, stack, parts)
    for k in range(n):
        if mt[e, k] == t:  # b is after hi: the interval grows
            mh[e, k] = b
            return t
    k = at[e, 2]
    mt[e, k], mh[e, k] = t, b
    at[e, 2] = (k + 1) % MEMO
    if n < MEMO:
        at[e, 1] = n + 1
    return t


@njit(cache=True, inline="always")
def _after(ring_tick, cap, q, count, bound):
    """The first position from q on (up to count) whose tick is after `bound` (the ring's
    ticks only grow): by steps doubling from q, then halving. A window's bound moves by
    as many positions as instants passed since its predicates were last triggered: one
    on dense streams, hundreds on sparse ones (where a step at a time was a fifth of the
    kernel's time)."""
    if q >= count or ring_tick[q % cap] > bound:
        return q
    lo, step = q, 1  # ring_tick[lo] <= bound
    hi = lo + step
    while hi < count and ring_tick[hi % cap] <= bound:
        lo = hi
        step *= 2
        hi = lo + step
    if hi > count:
        hi = count
    while hi - lo > 1:  # ring_tick[lo] <= bound; hi == count or ring_tick[hi] > bound
        mid = (lo + hi) // 2
        if ring_tick[mid % cap] <= bound:
            lo = mid
        else:
            hi = mid
    return hi


@njit(cache=True)
def run(  # noqa: PLR0913, PLR0915, C901
    syms, ticks, new_instant, owned, i,  # the batch, and where to start (an instant)
    ring_sym, ring_tick, ring_first, state,  # the ring; state = [count, capacity]
    lch, rch, parent, first, last, pos, lat, smt, bits, root,  # the tree
    v_off, v_sym, v_ret, v_topo, s_off, s_list, p_win, windows, max_window,  # the rules
    sink_off, sink_list,  # symbol -> the predicates it can end
    rej, rej_n, changed,  # each predicate's rejected instances
    out_pred, out_pos,  # the occurrences found
):  # fmt: skip
    """Instants of the batch from event `i` on. Returns (why, next event, occurrences):
    DONE, or GROW when the ring must grow before the instant at `next event`, or FULL
    when `out_*` cannot take another instant's occurrences."""
    n = len(syms)
    count, cap = state[0], state[1]
    n_pred = len(p_win)
    seen = np.full(n_pred, -1, np.int64)  # the instant that last triggered a predicate
    arrived = np.full(len(sink_off) - 1, -1, np.int64)  # symbol -> its position, this instant
    arrived_at = np.full(len(sink_off) - 1, -1, np.int64)
    low_at = np.full(len(windows), -1, np.int64)
    low = np.zeros(len(windows), np.int64)
    triggered = np.empty(n_pred, np.int64)
    max_v = out_pos.shape[1]
    where = np.empty(max_v, np.int64)
    firsts = np.empty(max_v, np.int64)
    rejected = np.zeros(max_v, np.bool_)
    stack = np.empty((STACK, 3), np.int64)
    parts = np.empty((4, 3), np.int64)
    n_sym = len(sink_off) - 1
    memo = (
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
        # The ring must hold the largest window: grow (in Python) before this instant?
        for k in range(j - i):
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
            insert(cap, lch, rch, parent, first, last, pos, lat, smt, bits, count, s)
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
            if low_at[w] != i:  # lt = Segment.lower(tick − ω): only ever moves forward
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
                t = _upto(cap, root, lch, rch, first, last, pos, lat, smt, bits, e, bound, stack,
                          parts, memo, i)  # fmt: skip
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
                    if lo > hi or _upto(cap, root, lch, rch, first, last, pos, lat, smt, bits,
                                        v_sym[g], hi, stack, parts, memo, i) < lo:  # fmt: skip
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
