"""The CBS-Tree and CBR (Algorithm 1) compiled: one call runs a batch of instants.

`tree.py` and `cbr.py` say what is computed; this module computes the same answers over
flat arrays, with numba, so that a rule's retrieval costs what the paper counts (log L
node visits) and not a Python call per node. One call of `run` takes the events of one
partition's batch and, instant by instant: pushes the instant's events on the ring and
the tree (one leaf-to-root path each, cut where nothing changes); finds the predicates
one of whose sinks' symbols arrived (one pass for all the rules: a table from a symbol to
the predicates it can end); retrieves each one's latest occurrence, every search cut to
[lt, rt]; drops it when it holds a rejected instance; else replaces the predicate's
rejected instances (Definition 3) and records the occurrence.

The tree is the paper's: a complete binary tree over the ring's L slots whose nodes hold
R_E, the symbols of their leaves (one bit per symbol, the OR of the children's). Two
things differ from `CBSTree`, both for speed and neither in the answers: the nodes are
numbered as a heap (children 2k and 2k + 1, L rounded up to a power of two: no child,
parent or leaf-range arrays to read), and FindLatestEventOccurrence searches from the
leaf of rt up and then down, instead of the root down through Cases 1-4. R_T is then not
needed: the wrap of the ring is two runs of slots, the newer searched first. A search
for an instance d positions back visits about 2·log d nodes and writes nothing. The
top-down search, with the paper's four cases, read every node's children, leaf range and
R_T from eight arrays; in the kernel it cost several times a scan of the window (dense
traffic stream, AveW 500, 10,000 episodes, 20,000 events: 3.9 s of kernel time against
2.4 s with DirectMatch's scan; 2.3-2.5 s with this search).

`run` is compiled twice: with the tree, and without it as DirectMatch (each answer from a
scan of the ring back from rt; `run_direct`, the baseline of benchmarks/episodes.py).

No pyspark here: numba and numpy only. The compiled code is cached on disk (cache=True).
"""

from __future__ import annotations

import numpy as np
from numba import njit

MEMO = 8  # the answers kept per symbol and instant
DONE, GROW, FULL = 0, 1, 2  # why `run` returned


class Tree:
    """The CBS-Tree's R_E over `capacity` leaves: one bit per symbol and node, the nodes in
    heap order (node k's children are 2k and 2k + 1; the leaf of ring slot s is P + s,
    P = `capacity` rounded up to a power of two, the leaves past `capacity` empty). R_T
    needs no array: the ring's newest position says which position each slot holds."""

    def __init__(self, capacity: int, n_symbols: int):
        self.capacity = capacity
        self.leaves = 1 << max(0, (capacity - 1).bit_length())  # P
        words = max(1, (n_symbols + 63) // 64)
        self.bits = np.zeros((words, 2 * self.leaves), np.uint64)  # a word's nodes together


# ---- the tree --------------------------------------------------------------------------------


@njit(cache=True, inline="always")
def _has(bits, node, e):
    return (bits[e >> 6, node] >> np.uint64(e & 63)) & np.uint64(1)


@njit(cache=True, inline="always")
def _refresh(bits, node, w):
    """bits[w, node] = its children's OR: False when that changes nothing."""
    v = bits[w, 2 * node] | bits[w, 2 * node + 1]
    if v == bits[w, node]:
        return False
    bits[w, node] = v
    return True


@njit(cache=True)
def insert(cap, bits, position, symbol, old):
    """The instance at `position` (the newest, of `symbol`) replaces the one `cap`
    positions older (of `old`; -1: none) at its leaf. Only the two symbols' words can
    change on the path up, and above the first node where neither does, none does (a
    node's bits are its children's OR): the path stops there."""
    node = (bits.shape[1] >> 1) + position % cap
    if old >= 0:
        bits[old >> 6, node] &= ~(np.uint64(1) << np.uint64(old & 63))
    if symbol >= 0:
        bits[symbol >> 6, node] |= np.uint64(1) << np.uint64(symbol & 63)
    node >>= 1
    while node:
        moved = _refresh(bits, node, symbol >> 6) if symbol >= 0 else False
        if old >= 0 and (symbol < 0 or old >> 6 != symbol >> 6):
            moved = _refresh(bits, node, old >> 6) or moved
        if not moved:
            return
        node >>= 1


@njit(cache=True, inline="always")
def _down(bits, leaves, node, e):
    """The rightmost leaf holding e under `node` (which holds it), as a slot."""
    while node < leaves:
        node = 2 * node + 1 if _has(bits, 2 * node + 1, e) else 2 * node
    return node - leaves


@njit(cache=True, inline="always")
def _down_from(bits, leaves, node, h, e, lo):
    """The rightmost leaf at or after leaf `lo` holding e under `node`, whose leaves (h
    levels down) begin before `lo` and end at or after it, or -1: one path down."""
    while h:
        h -= 1
        right = 2 * node + 1
        start = right << h  # its leftmost leaf
        if start >= lo:  # the right child is all in range: the left begins before lo
            if _has(bits, right, e):
                return _down(bits, leaves, right, e)
            if start == lo:
                return -1
            node = 2 * node
        else:  # the left child is all before lo
            node = right
        if not _has(bits, node, e):
            return -1
    return node - leaves


@njit(cache=True, inline="always")
def _rightmost(bits, e, x, y):
    """The largest slot in [x, y] whose leaf holds e, or -1: from leaf y up, each left
    sibling met on the way (the positions just before those seen) tried until one holds
    e; then down to its rightmost leaf holding e. An instance d slots back costs about
    2·log d node visits, and nothing is written."""
    leaves = bits.shape[1] >> 1
    node, lo = y + leaves, x + leaves
    if _has(bits, node, e):
        return y
    h = 0
    while node > 1:
        if node & 1:  # a right child: its left sibling's leaves come just before
            sib = node - 1
            start, end = sib << h, ((sib + 1) << h) - 1
            if end < lo:
                return -1
            if _has(bits, sib, e):
                if start >= lo:
                    return _down(bits, leaves, sib, e)
                return _down_from(bits, leaves, sib, h, e, lo)
            if start <= lo:
                return -1
        node >>= 1
        h += 1
    return -1


@njit(cache=True, inline="always")
def find(cap, count, bits, e, lt, rt):
    """FindLatestEventOccurrence: the latest position of an instance of `e` within
    [lt, rt] among the `cap` newest of the `count` pushed, or -1. The interval is one
    run of slots, or two when it wraps around the ring (the newer one searched first)."""
    if lt < count - cap:
        lt = count - cap
    if lt < 0:
        lt = 0
    if lt > rt:
        return -1
    sr, sl = rt % cap, lt % cap
    if sl <= sr:
        s = _rightmost(bits, e, sl, sr)
        return -1 if s < 0 else rt - (sr - s)
    s = _rightmost(bits, e, 0, sr)
    if s >= 0:
        return rt - (sr - s)
    s = _rightmost(bits, e, sl, cap - 1)
    return -1 if s < 0 else rt - sr - cap + s


@njit(cache=True)
def build(cap, bits, ring_sym, count):
    """The tree over the positions the ring holds (after a resize, or a state read back)."""
    bits[:] = 0
    leaves = bits.shape[1] >> 1
    for p in range(max(0, count - cap), count):
        e = ring_sym[p % cap]
        if e >= 0:
            bits[e >> 6, leaves + p % cap] |= np.uint64(1) << np.uint64(e & 63)
    for node in range(leaves - 1, 0, -1):
        for w in range(bits.shape[0]):
            bits[w, node] = bits[w, 2 * node] | bits[w, 2 * node + 1]


# ---- the matcher -----------------------------------------------------------------------------


@njit(cache=True, inline="always")
def _scan(ring_sym, cap, e, lt, rt):
    """DirectMatch's retrieval: the latest position in [lt, rt] whose event is e, or -1,
    by reading the ring's slots from rt back (newest first, in contiguous runs)."""
    while rt >= lt:
        s = rt % cap
        n = min(rt - lt, s)  # positions rt .. rt - n are slots s .. s - n
        for j in range(s, s - n - 1, -1):
            if ring_sym[j] == e:
                return rt - (s - j)
        rt -= n + 1
    return -1


@njit(cache=True, inline="always")
def _latest(tree, bits, ring_sym, cap, count, e, lt, b, memo, i):  # noqa: PLR0913
    """The latest instance of e at or before position b when one lies in [lt, b] (else -1
    or a position before lt), shared by all the rules of instant i (as `SharedAnswers`
    shares them in Python), from the tree or, for DirectMatch (`tree` False), a scan.
    memo = (t, lo, hi, at): t >= 0: e is at t and not in (t, hi]; t = -1: e is not in
    [lo, hi]; at[e] = (the instant they are of, how many are held, the next to replace).
    Up to MEMO such answers per symbol: rules with the same symbol ask up to different
    positions (a vertex's bound is where its successors' instances start), and one
    answer per symbol left two thirds of the searches to be made again (10,000 dense
    episodes, AveW 500, 5,000 events: 2.67 million searches with one answer per symbol,
    0.9 million with every answer of the instant kept; the kernel's time 1.38 s with one,
    1.03 s with 8, 1.04 s with 16)."""
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
    t = find(cap, count, bits, e, lt, b) if tree else _scan(ring_sym, cap, e, lt, b)
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


def _compiled_run(TREE: bool):  # noqa: C901, PLR0915
    """`run` with the tree (TREE True) or DirectMatch's scan: TREE is a constant to numba,
    so each is compiled without the other's branch."""

    @njit(cache=True)
    def _run(  # noqa: PLR0913, PLR0915, C901
        syms, ticks, new_instant, owned, i,  # the batch, and where to start (an instant)
        ring_sym, ring_tick, ring_first, state,  # the ring; state = [count, capacity]
        bits,  # the tree (unused by DirectMatch)
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
                if TREE:
                    insert(cap, bits, count, s, ring_sym[slot] if count >= cap else -1)
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
                    t = _latest(TREE, bits, ring_sym, cap, count, e, lt, bound, memo, i)
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
                        if lo > hi or _latest(TREE, bits, ring_sym, cap, count, v_sym[g], lo, hi,
                                              memo, i) < lo:  # fmt: skip
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

    return _run


run = _compiled_run(True)
run_direct = _compiled_run(False)  # DirectMatch compiled (benchmarks/episodes_direct.py)
