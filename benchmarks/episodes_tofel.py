"""ToFel compiled with numba: a baseline on equal footing with the compiled CBS-Tree.

Benchmark-only (the product's ToFel is Python: `tofel.ToFel`, driven by `matcher.Matcher`).
The algorithm is tofel.py's, computed over flat arrays: each predicate (its first rule:
rules with one predicate hold the same matches, as the Python `Matcher` reports them)
holds one partial match per ideal of its DAG (`tofel._shape`: the ideals by size, the
full one last, each vertex's steps from an ideal lacking it to the ideal with it); every
arriving event that is a vertex of a predicate advances the held matches (alive: first
position within the predicate window of now; a dead one met on the way is dropped) and
those grown earlier at this instant, a vertex joining only those that hold none of its
direct predecessors at this instant; at the end of the instant the grown matches are
merged (vertex-wise latest) into the held ones, and the full ideal's merge, the latest
occurrence ending now, fires when it starts at a later instant than the previous
complete match. No retrieval, no rejected instances.

State, kept beside the segment (`seg._tofel`, arrays sized by the rules, not the stream):
`h_min[x]` the first position of the match held for ideal x (ideals of all the
predicates in one numbering, predicate p's from `i_off[p]`; -1: none held) and its
positions per vertex in `h_pos` (-1 for a vertex not in it): predicate p's ideal a at
`h_off[p] + a * k`, k the predicate's vertices (its matches side by side in memory).
The matches grown at one instant are scratch rows (`e_*`), a linked list per predicate,
keyed as in tofel.py by (ideal, the vertices at this instant). An instant of one event
(no ties) needs none: a predicate has one vertex of that symbol (an episode's events are
distinct), the ideals a step leads to hold it and are no step's source, so each grown
match goes straight into the held one (the same merge, the same firing test).

`ToFelCompiled` is `matcher._Compiled` calling `run_tofel` (the Python around it, the
ring's growth and the making of `Found` rows are the CBS-Tree's code), and
`tofel_program(plans, names, options)` gives a compiled program whose matcher uses it,
so that `episodes.match_only` times it exactly as it times the CBS-Tree.

Not mirrored: the Python ToFel's `seg.kept` (what a stored state holds) is read when the
arrays are first made for a segment but not written back, and `Matcher.prune` (Spark's
horizon, which drops dead matches from `seg.kept`) does not reach the arrays; the dead
matches `ToFel._advance` drops on its way are dropped here alike. `match_only` and the
tests never prune.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from sparkcep.engines.episodes.kernel import DONE, FULL, GROW, _after
from sparkcep.engines.episodes.matcher import _Compiled
from sparkcep.engines.episodes.rules import RuleSet
from sparkcep.engines.episodes.tofel import ToFel
from sparkcep.engines.episodes.window import Segment

SCRATCH = 1024  # grown matches of one instant, to start with (doubled when needed)


@njit(cache=True, inline="always")
def _merge(h_pos, h_min, x, at, row, nv):
    """The match `row` into the one held for ideal x (its positions from h_pos[at]): the
    vertex-wise latest (row itself when none is held); its first position in h_min."""
    if h_min[x] < 0:
        for u in range(nv):
            h_pos[at + u] = row[u]
    else:
        for u in range(nv):
            if row[u] > h_pos[at + u]:
                h_pos[at + u] = row[u]
    m = -1
    for u in range(nv):
        c = h_pos[at + u]
        if c >= 0 and (m < 0 or c < m):
            m = c
    h_min[x] = m


@njit(cache=True, inline="always")
def _complete(h_pos, h_min, hf, at, done, nv, ring_first, cap):
    """`done`, this instant's latest complete match, replaces the last one (held at hf):
    it fires when it starts at a later instant than that one."""
    first = done[0]
    for u in range(1, nv):
        if done[u] < first:
            first = done[u]
    fire = h_min[hf] < 0 or h_min[hf] < ring_first[first % cap]
    for u in range(nv):
        h_pos[at + u] = done[u]
    h_min[hf] = first
    return fire


@njit(cache=True)
def run_tofel(  # noqa: PLR0913, PLR0915, C901
    syms, ticks, new_instant, owned, i,  # the batch, and where to start (an instant)
    ring_sym, ring_tick, ring_first, state,  # the ring; state = [count, capacity]
    v_off, p_win, windows, max_window,  # the predicates: vertices, window
    x_off, x_pred, x_vert,  # symbol -> the (predicate, vertex) pairs of its vertices
    i_off, st_off, st_from, st_to, nxt, pmask,  # ideals, steps, predecessor masks
    h_off, h_pos, h_min,  # the held matches
    out_pred, out_pos,  # the occurrences found
):  # fmt: skip
    """Instants of the batch from event `i` on, as `kernel.run`: returns (why, next
    event, occurrences), DONE, GROW (the ring must grow before the instant at `next
    event`) or FULL (`out_*` cannot take another instant's occurrences)."""
    n = len(syms)
    count, cap = state[0], state[1]
    n_pred = len(p_win)
    max_v = out_pos.shape[1]
    low_at = np.full(len(windows), -1, np.int64)
    low = np.zeros(len(windows), np.int64)
    head = np.full(n_pred, -1, np.int64)  # predicate -> its first grown match (this instant)
    seen = np.full(n_pred, -1, np.int64)  # the instant that last touched a predicate
    touched = np.empty(n_pred, np.int64)
    size = SCRATCH
    e_next = np.empty(size, np.int64)
    e_j = np.empty(size, np.int64)
    e_at = np.empty(size, np.int64)
    e_pos = np.empty((size, max_v), np.int64)
    done = np.empty(max_v, np.int64)
    row = np.empty(max_v, np.int64)
    found = 0
    while i < n:
        j = i + 1
        while j < n and not new_instant[j]:
            j += 1
        tick = ticks[i]
        for k in range(j - i):  # the ring must hold the largest window (as kernel.run)
            q = count + k
            if q >= cap and ring_tick[q % cap] > tick - max_window:
                state[0] = count
                return GROW, i, found
        if found + n_pred > len(out_pred):
            state[0] = count
            return FULL, i, found
        start = count
        for k in range(i, j):  # the instant's events on the ring
            slot = count % cap
            ring_sym[slot] = syms[k]
            ring_tick[slot] = tick
            ring_first[slot] = start
            count += 1
        n_t = 0
        n_e = 0
        mine = owned[j - 1]
        # One event: a predicate has one vertex of its symbol (an episode's are distinct),
        # so what it grows needs no merging with other growths (its targets, the ideals
        # with v, are no step's source): in place, the predicates in order.
        single = j - i == 1
        for k in range(i, j):
            q = start + (k - i)
            s = syms[k]
            for x in range(x_off[s], x_off[s + 1]):
                p = x_pred[x]
                v = x_vert[x]
                g = v_off[p] + v
                if not single and seen[p] != i:
                    seen[p] = i
                    touched[n_t] = p
                    n_t += 1
                    head[p] = -1
                w = p_win[p]
                if low_at[w] != i:  # Segment.lower(tick − ω): only ever moves forward
                    low_at[w] = i
                    low[w] = _after(ring_tick, cap, max(low[w], count - cap, 0), count,
                                    tick - windows[w])  # fmt: skip
                lo = low[w]
                bit = np.int64(1) << np.int64(v)
                old = head[p]  # the matches grown before this event (none is a target
                # now: a target holds v, a match holding v has no step by v)
                base = i_off[p]
                full = i_off[p + 1] - 1 - base
                nv = v_off[p + 1] - v_off[p]
                hp = h_off[p]
                for y in range(st_off[g], st_off[g + 1]):  # the held matches' steps
                    a = st_from[y]
                    b = st_to[y]
                    src = -1
                    hs = 0
                    if a >= 0:
                        ha = base + a
                        if h_min[ha] < 0:
                            continue
                        if h_min[ha] < lo:  # out of the window: dropped
                            h_min[ha] = -1
                            continue
                        src = ha
                        hs = hp + a * nv
                    if single:  # nothing else grown: straight into the held matches
                        for u in range(nv):
                            row[u] = h_pos[hs + u] if src >= 0 else -1
                        row[v] = q
                        if b == full:
                            hb = hp + b * nv
                            if (
                                _complete(h_pos, h_min, base + b, hb, row, nv, ring_first, cap)
                                and mine
                            ):
                                out_pred[found] = p
                                out_pos[found, :nv] = row[:nv]
                                out_pos[found, nv:] = -1
                                found += 1
                        else:
                            _merge(h_pos, h_min, base + b, hp + b * nv, row, nv)
                        continue
                    at = bit
                    # the target (b, bit): grown already this instant?
                    t = old
                    while t >= 0 and not (e_j[t] == b and e_at[t] == at):
                        t = e_next[t]
                    if t < 0:
                        if n_e == size:  # more room
                            size *= 2
                            e_next = _grown1(e_next, size)
                            e_j = _grown1(e_j, size)
                            e_at = _grown1(e_at, size)
                            e_pos = _grown2(e_pos, size)
                        t = n_e
                        n_e += 1
                        e_next[t] = head[p]
                        head[p] = t
                        e_j[t] = b
                        e_at[t] = at
                    if src >= 0:
                        for u in range(nv):
                            e_pos[t, u] = h_pos[hs + u]
                    else:
                        for u in range(nv):
                            e_pos[t, u] = -1
                    e_pos[t, v] = q
                e = old
                while e >= 0:  # the matches grown before at this instant
                    b = nxt[base + e_j[e], v]
                    if b >= 0 and not (e_at[e] & pmask[g]):
                        at = e_at[e] | bit
                        t = old
                        while t >= 0 and not (e_j[t] == b and e_at[t] == at):
                            t = e_next[t]
                        if t < 0:
                            if n_e == size:
                                size *= 2
                                e_next = _grown1(e_next, size)
                                e_j = _grown1(e_j, size)
                                e_at = _grown1(e_at, size)
                                e_pos = _grown2(e_pos, size)
                            t = n_e
                            n_e += 1
                            e_next[t] = head[p]
                            head[p] = t
                            e_j[t] = b
                            e_at[t] = at
                        for u in range(nv):
                            e_pos[t, u] = e_pos[e, u]
                        e_pos[t, v] = q
                    e = e_next[e]
        if n_t > 1:
            touched[:n_t].sort()
        for z in range(n_t):  # the grown matches into the held ones; the full one fires?
            p = touched[z]
            e = head[p]
            if e < 0:
                continue
            base = i_off[p]
            full = i_off[p + 1] - 1 - base
            nv = v_off[p + 1] - v_off[p]
            have = False
            while e >= 0:
                b = e_j[e]
                if b == full:
                    if have:
                        for u in range(nv):
                            if e_pos[e, u] > done[u]:
                                done[u] = e_pos[e, u]
                    else:
                        for u in range(nv):
                            done[u] = e_pos[e, u]
                        have = True
                else:
                    _merge(h_pos, h_min, base + b, h_off[p] + b * nv, e_pos[e], nv)
                e = e_next[e]
            head[p] = -1
            hf = h_off[p] + full * nv
            if (
                have
                and _complete(h_pos, h_min, base + full, hf, done, nv, ring_first, cap)
                and mine
            ):
                out_pred[found] = p
                out_pos[found, :nv] = done[:nv]
                out_pos[found, nv:] = -1
                found += 1
        i = j
    state[0] = count
    return DONE, n, found


@njit(cache=True)
def _grown1(a, size):
    b = np.empty(size, a.dtype)
    b[: len(a)] = a
    return b


@njit(cache=True)
def _grown2(a, size):
    b = np.empty((size, a.shape[1]), a.dtype)
    b[: a.shape[0]] = a
    return b


class ToFelCompiled(_Compiled):
    """`matcher._Compiled` with `run_tofel` in place of the CBS-Tree kernel: the rules as
    the arrays it reads (each predicate's shape from `ToFel`, computed once)."""

    def __init__(self, rules: RuleSet):
        super().__init__(rules)
        shapes = ToFel(rules).shape  # per rule: (ideals, steps, predecessor masks)
        leads = [members[0] for members in self.members]
        n_ideals = [len(shapes[r][0]) for r in leads]
        self.i_off = np.concatenate([[0], np.cumsum(n_ideals)]).astype(np.int64)
        sizes = [n * k for n, k in zip(n_ideals, self.n_vertices.tolist())]
        self.h_off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        st_from, st_to, counts, pmask = [], [], [], []
        self.nxt = np.full((int(self.i_off[-1]), self.max_v), -1, np.int64)
        for p, r in enumerate(leads):
            _, steps, preds = shapes[r]
            for v, step in enumerate(steps):
                counts.append(len(step))
                pmask.append(preds[v])
                for a, b in step.items():
                    st_from.append(a)
                    st_to.append(b)
                    if a >= 0:
                        self.nxt[self.i_off[p] + a, v] = b
        self.st_off = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self.st_from = np.array(st_from, np.int64)
        self.st_to = np.array(st_to, np.int64)
        self.pmask = np.array(pmask, np.int64)
        # symbol -> (predicate, vertex), predicates in order, vertices in order (by_vertex's)
        pairs: list[list[tuple[int, int]]] = [[] for _ in rules.symbols]
        for p, r in enumerate(leads):
            for v, s in enumerate(rules[r].symbols):
                pairs[s].append((p, v))
        self.x_off = np.concatenate([[0], np.cumsum([len(x) for x in pairs])]).astype(np.int64)
        self.x_pred = np.array([p for x in pairs for p, _ in x], np.int64)
        self.x_vert = np.array([v for x in pairs for _, v in x], np.int64)
        self.shapes = [shapes[r] for r in leads]

    def held(self, seg: Segment) -> _ToFelHeld:
        """The segment's matches as arrays (made from `seg.kept` when the segment has
        none yet, or its state was stored and read back)."""
        held = getattr(seg, "_tofel", None)
        if held is None or held.kept_of is not seg.kept:
            held = _ToFelHeld(self, seg)
            seg._tofel = held
        return held

    def _run(self, seg, held, state, syms, ticks, new_instant, owned, i):
        return run_tofel(
            syms, ticks, new_instant, owned, i, seg.sym, seg.tick, seg.first, state,
            self.v_off, self.p_win, self.windows, self.rules.max_window,
            self.x_off, self.x_pred, self.x_vert,
            self.i_off, self.st_off, self.st_from, self.st_to, self.nxt, self.pmask,
            self.h_off, held.h_pos, held.h_min, self.out_pred, self.out_pos,
        )  # fmt: skip

    def _write_back(self, seg: Segment, held) -> None:
        """Nothing: ToFel has no rejected instances (the Python path leaves
        `seg.rejected` empty too)."""


class _ToFelHeld:
    """Beside a segment's state: the match held for each ideal of each predicate."""

    def __init__(self, compiled: ToFelCompiled, seg: Segment):
        self.h_pos = np.full(int(compiled.h_off[-1]), -1, np.int64)
        self.h_min = np.full(int(compiled.i_off[-1]), -1, np.int64)
        for p, members in enumerate(compiled.members):
            kept = seg.kept.get(members[0])
            if not kept:
                continue
            ideals = compiled.shapes[p][0]
            for a, m in enumerate(kept):
                if m:
                    x = compiled.i_off[p] + a
                    at = compiled.h_off[p] + a * len(m)
                    self.h_pos[at : at + len(m)] = m
                    self.h_min[x] = min(m[u] for u in ideals[a])
        self.kept_of = seg.kept


def tofel_program(plans, names, options):
    """The `tofel` program with its matcher running the compiled ToFel."""
    from sparkcep.engines.registry import engines

    program = engines()["tofel"].compile(plans, names, options)
    program.matcher.compiled = ToFelCompiled(program.rules)
    return program


__all__ = ["DONE", "FULL", "GROW", "ToFelCompiled", "run_tofel", "tofel_program"]
