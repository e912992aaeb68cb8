"""Confidence and time range of match signatures, from the events' valid intervals
(event-based framework, §4.1 and C.4), vectorised over signatures.

A point match of signature (e_1, ..., e_l) takes a point t_j of each valid interval with
t_1 < ... < t_l and t_l - t_1 < W; its probability is the product of the points'
probabilities, times, under skip-till-next, the probability that no other event that
could take component j lies strictly between t_{j-1} and t_j (eq. (2)). The confidence
sums them; the range is [least t_1, greatest t_l] over the point matches of positive
probability.

Both are one pass over the components that keeps, per first point t_1 (the window
couples t_1 and t_l) and per point t of event j, the mass of the partial point matches
ending at t: Algorithm 2's memoised partial paths, with the window applied. Taken
literally, Algorithm 2 enumerates the valid intervals without the window and over-counts
(Fig. 1: 35/225 instead of 25/225); `apply_window=False` gives that figure.

Skip-till-next (eq. (3)): when each other event can come between one pair (j-1, j) only,
the "no event between" factor splits into one factor per pair, q_j(s, t) = product over
x in Θ_j of P[x not in (s, t)], and the pass multiplies by it. When an event could come
between several pairs (it can match several components), the factor does not split; the
point matches of those signatures are enumerated, and an event's factor is the mass of
its points outside the union of the gaps it could fill (the gaps are disjoint, so this
is exact). This replaces eq. (4)'s enumeration of the shared events' points. With three
components (`NextThree`) the same sum is taken without enumerating point matches: the
shared events' factors are expanded into products of a (t_1, t_2) and a (t_2, t_3)
array, and the window is met at the middle component. With more (`NextChain`), a
product of matrices along the chain, with the shared events' places as states.

The sums are in floats, so a signature that matches in every possible world comes out
as 1 up to rounding, possibly above it (151 points of 1/151 do not sum to 1 exactly).
`in_unit_range` settles that on integers: a signature is certain exactly when every
tuple of its events' positive points is a point match (`certain`); its confidence is
then exactly 1, and any other's is below 1, where a float above it can only be rounding.
"""

from __future__ import annotations

import itertools

import numpy as np

from sparkcep.engines.imprecise.candidates import theta_pairs
from sparkcep.engines.imprecise.events import IntervalEvents, Pattern

CHUNK_CELLS = 1_000_000  # float cells of one chunk's largest array


class Grid:
    """The points of each signature's valid intervals: component j's point k is
    vlb[:, j] + k, for k < width[j]; `prob[j]` (m, width[j]) their probabilities (zero
    beyond vub)."""

    def __init__(self, events: IntervalEvents, idx, vlb, vub, width: int | None = None):
        self.vlb, self.vub = vlb, vub
        self.length = idx.shape[1]
        self.width = [max(int((vub[:, j] - vlb[:, j]).max()) + 1, 1) for j in range(self.length)]
        if width is not None:  # one width for all, whatever the batch (at least theirs)
            self.width = [max(width, w) for w in self.width]
        self.points, self.prob = [], []
        for j in range(self.length):
            pts = vlb[:, j, None] + np.arange(self.width[j])[None, :]
            self.points.append(pts)
            inside = pts <= vub[:, j, None]
            self.prob.append(np.where(inside, events.prob(idx[:, j, None], pts), 0.0))

    def subset(self, rows: np.ndarray) -> Grid:
        out = Grid.__new__(Grid)
        out.vlb, out.vub, out.length, out.width = (
            self.vlb[rows],
            self.vub[rows],
            self.length,
            self.width,
        )
        out.points = [p[rows] for p in self.points]
        out.prob = [p[rows] for p in self.prob]
        return out


class AnyConfidence:
    """Algorithm 2 (C.4) with the window: the confidence and range of skip-till-any
    signatures, from their valid intervals.

    Fig. 1: a1 = [1,5], c2 = [3,5], b3 = [3,5], c4 = [4,8], W = 4; signature (a1, b3, c2)
    with valid intervals [1,3], [3,4], [4,5] has confidence 25/225 and range [1,5]:

    >>> from sparkcep.engines.imprecise.events import IntervalEvents
    >>> ev = IntervalEvents.from_arrays([1, 3, 3, 4], [5, 5, 5, 8], [1, 4, 2, 4])
    >>> idx, vlb, vub = np.array([[0, 2, 1]]), np.array([[1, 3, 4]]), np.array([[3, 4, 5]])
    >>> conf, start, end = AnyConfidence(ev, 4)(idx, vlb, vub)
    >>> round(float(conf[0]) * 225, 9), int(start[0]), int(end[0])
    (25.0, 1, 5)
    >>> round(float(AnyConfidence(ev, 4, apply_window=False)(idx, vlb, vub)[0][0]) * 225, 9)
    35.0
    """

    def __init__(self, events: IntervalEvents, window: int, apply_window: bool = True):
        self.events = events
        self.window = window
        self.apply_window = apply_window

    def __call__(self, idx, vlb, vub):
        return chunked(self._run, idx, vlb, vub)

    def _run(self, idx, vlb, vub):
        grid = Grid(self.events, idx, vlb, vub)
        return chain(grid, None, self.window if self.apply_window else None)


class NextConfidence:
    """Skip-till-next signatures (eq. (2), (3)): the same pass with, between events j-1
    and j, the probability that no other event that could take component j lies between
    them.

    Fig. 1 under skip-till-next: (a1, b3, c2) needs c4 (in [4,8]) not to fall between b3
    and c2; the possible worlds give 24/225:

    >>> from sparkcep.engines.imprecise.events import IntervalEvents, Pattern
    >>> ev = IntervalEvents.from_arrays([1, 3, 3, 4], [5, 5, 5, 8], [1, 4, 2, 4])
    >>> pattern = Pattern((1, 2, 4), 4, True, ((), (), ()), ("a", "b", "c"), 4)
    >>> idx, vlb, vub = np.array([[0, 2, 1]]), np.array([[1, 3, 4]]), np.array([[3, 4, 5]])
    >>> conf, start, end = NextConfidence(ev, pattern)(idx, vlb, vub)
    >>> round(float(conf[0]) * 225, 9), int(start[0]), int(end[0])
    (24.0, 1, 5)
    """

    def __init__(self, events: IntervalEvents, pattern: Pattern):
        self.events = events
        self.pattern = pattern

    def __call__(self, idx, vlb, vub):
        if self.pattern.length == 3 and len(idx):  # no point-match tensor (NextThree)
            return NextThree(self.events, self.pattern, self._general)(idx, vlb, vub)
        if self.pattern.length > 3 and len(idx):  # nor for longer chains (NextChain)
            return NextChain(self.events, self.pattern, self._general)(idx, vlb, vub)
        return self._general(idx, vlb, vub)

    def _general(self, idx, vlb, vub):
        """Any length: the factored pass where the gaps' Θ sets are disjoint, the
        point-match enumeration where they share an event."""
        m = len(idx)
        gaps = [theta_pairs(self.events, self.pattern, idx, vlb, vub, j)
                for j in range(1, self.pattern.length)]  # fmt: skip
        shared = _shared(gaps, len(self.events), m)
        conf = np.zeros(m)
        start = np.zeros(m, np.int64)
        end = np.zeros(m, np.int64)
        split = np.flatnonzero(~shared)
        if len(split):
            keep = np.full(m, -1)
            keep[split] = np.arange(len(split))
            local = [(keep[a][keep[a] >= 0], x[keep[a] >= 0]) for a, x in gaps]
            c, s, e = chunked(self._split, idx[split], vlb[split], vub[split], local)
            conf[split], start[split], end[split] = c, s, e
        both = np.flatnonzero(shared)
        if len(both):
            keep = np.full(m, -1)
            keep[both] = np.arange(len(both))
            local = [(keep[a][keep[a] >= 0], x[keep[a] >= 0]) for a, x in gaps]
            c, s, e = chunked(self._enumerate, idx[both], vlb[both], vub[both], local, power=0)
            conf[both], start[both], end[both] = c, s, e
        return conf, start, end

    def _split(self, idx, vlb, vub, gaps):
        grid = Grid(self.events, idx, vlb, vub)
        factors = [self._factor(grid, j + 1, a, x) for j, (a, x) in enumerate(gaps)]
        return chain(grid, factors, self.pattern.window)

    def _factor(self, grid: Grid, j: int, a, x):
        """q_j(s, t) for each signature: (m, width[j-1], width[j])."""
        m = len(grid.vlb)
        q = np.ones((m, grid.width[j - 1], grid.width[j]))
        if not len(a):
            return q
        s = grid.points[j - 1][a][:, :, None]
        t = grid.points[j][a][:, None, :]
        xs = x[:, None, None]
        outside = self.events.mass_upto(xs, s) + self.events.mass_from(xs, t)
        order = np.argsort(a, kind="stable")
        a, outside = a[order], outside[order]
        firsts = np.flatnonzero(np.r_[True, a[1:] != a[:-1]])
        q[a[firsts]] = np.multiply.reduceat(outside, firsts, axis=0)
        return q

    def _enumerate(self, idx, vlb, vub, gaps):
        """Signatures whose Θ sets share an event: every point match at once (a tensor
        with one axis per component), each other event's factor the mass of its points
        outside the union of the gaps it could fill — summed over the segments between
        them, so that a certain spoiler gives exactly 0."""
        ev, window = self.events, self.pattern.window
        grid = Grid(ev, idx, vlb, vub)
        m, length = len(idx), grid.length
        shape = (m, *grid.width)

        def axis(values: np.ndarray, j: int) -> np.ndarray:  # (n, w_j) -> broadcastable
            return values.reshape(values.shape[0], *[-1 if i == j else 1 for i in range(length)])

        mass = np.ones(shape)
        for j in range(length):
            mass = mass * axis(grid.prob[j], j)
            if j:
                mass = mass * (axis(grid.points[j - 1], j - 1) < axis(grid.points[j], j))
        mass = mass * (axis(grid.points[-1], length - 1) - axis(grid.points[0], 0) < window)
        gaps_of: dict[tuple[int, int], list[int]] = {}
        for j, (a, x) in enumerate(gaps, start=1):
            for key in zip(a.tolist(), x.tolist()):
                gaps_of.setdefault(key, []).append(j)
        by_set: dict[tuple[int, ...], list[tuple[int, int]]] = {}
        for key, js in gaps_of.items():
            by_set.setdefault(tuple(js), []).append(key)
        for js, pairs in sorted(by_set.items()):
            a = np.array([p[0] for p in pairs])
            x = np.array([p[1] for p in pairs])
            t = [axis(grid.points[j][a], j) for j in range(length)]
            xs = x.reshape(-1, *[1] * length)
            outside = ev.mass_upto(xs, t[js[0] - 1]) + ev.mass_from(xs, t[js[-1]])
            for j, k in itertools.pairwise(js):  # between two of its gaps: [t_j, t_{k-1}]
                outside = outside + ev.mass_upto(xs, t[k - 1]) - ev.mass_upto(xs, t[j] - 1)
            order = np.argsort(a, kind="stable")
            a, outside = a[order], outside[order]
            firsts = np.flatnonzero(np.r_[True, a[1:] != a[:-1]])
            mass[a[firsts]] *= np.multiply.reduceat(outside, firsts, axis=0)
        total = mass
        for j in range(length, 0, -1):  # axis by axis, each in one fixed order
            total = _sum(total, axis=j)
        rows = np.arange(m)
        by_first = mass.reshape(m, grid.width[0], -1).max(axis=2) > 0
        by_last = mass.reshape(m, -1, grid.width[-1]).max(axis=1) > 0
        start = grid.points[0][rows, np.argmax(by_first, axis=1)]
        k = by_last.shape[1] - 1 - np.argmax(by_last[:, ::-1], axis=1)
        return total, start, grid.points[-1][rows, k]


MAX_SHARED = 10  # NextThree: at most 2^10 phase terms a signature, else the enumeration
PHASE_CELLS = 4_000_000  # NextThree: float cells of one batch's (t, t) arrays, all terms


class NextThree:
    """Skip-till-next confidence and range for l = 3 in O(w^2 (|Θ| + 2^|S|)) a signature
    (w the widest valid interval, S the events in both Θ sets), with no tensor of point
    matches: what `_general` computes (`_split`, and `_enumerate` where Θ sets share an
    event), for every signature of three components.

    The weight of point match (t0, t1, t2), t0 < t1 < t2 and t2 - t0 < W, is

        p0(t0) p1(t1) p2(t2) q1(t0, t1) q2(t1, t2) prod_{x in S} (L_x(t0) + p_x(t1) + R_x(t2))

    with L_x(t) = P[x <= t], R_x(t) = P[x >= t] and q_j the product over the other Θ_j
    events of L_x(t_{j-1}) + R_x(t_j) (a shared x avoids both gaps: at or before t0, at
    t1, or at or after t2). Three exact rewrites:

    1. Folding. A shared x with R_x = 0 on event 3's points has the pairwise factor
       L_x(t0) + p_x(t1), a factor of q1; with L_x = 0 on event 1's, p_x(t1) + R_x(t2)
       goes into q2. A Θ_j factor with L_x = 0 (R_x = 0) on its grid is one of p_j
       (p_{j-1}) alone.
    2. Phase expansion. With g_x(t1, t2) = p_x(t1) + R_x(t2),
       prod_{x in S} (L_x(t0) + g_x(t1, t2)) = sum over A ⊆ S of
       prod_{x in A} L_x(t0) * prod_{x not in A} g_x(t1, t2): 2^|S| nonnegative terms,
       each a(t0, t1) b(t1, t2).
    3. The window, meeting at the middle component. With B(t1, u) = sum over t2 <= u of
       b(t1, t2), the mass of a term's point matches that start at t0 is
       sum over t1 of a(t0, t1) B(t1, t0 + W - 1).

    All terms are nonnegative, so a range end is positive mass, never a difference.
    Signatures with more than MAX_SHARED shared events (after folding) go to `fallback`.
    """

    def __init__(self, events: IntervalEvents, pattern: Pattern, fallback):
        self.events, self.window, self.fallback = events, pattern.window, fallback
        self.pattern = pattern

    def __call__(self, idx, vlb, vub):
        ev, m, n_ev = self.events, len(idx), len(self.events)
        gaps = [theta_pairs(ev, self.pattern, idx, vlb, vub, j) for j in (1, 2)]
        k1, k2 = (a * n_ev + x for a, x in gaps)
        both = np.intersect1d(k1, k2)  # sorted: by signature, then event
        only = [(a[~np.isin(k, both)], x[~np.isin(k, both)]) for (a, x), k in zip(gaps, (k1, k2))]
        sa, sx = both // n_ev, both % n_ev
        r_zero = ev.last[sx] < vlb[sa, 2]  # R_x = 0 on t2's points: a factor of q1
        l_zero = ~r_zero & (ev.first[sx] > vub[sa, 0])  # L_x = 0 on t0's: of q2
        # kinds: 0 L + R (one gap), 1 L(t0) + p(t1) (shared, R = 0), 2 p(t1) + R(t2) (L = 0)
        only = [
            (np.r_[only[0][0], sa[r_zero]], np.r_[only[0][1], sx[r_zero]],
             np.r_[np.zeros(len(only[0][0]), np.int64), np.ones(r_zero.sum(), np.int64)]),
            (np.r_[only[1][0], sa[l_zero]], np.r_[only[1][1], sx[l_zero]],
             np.r_[np.zeros(len(only[1][0]), np.int64), np.full(l_zero.sum(), 2)]),
        ]  # fmt: skip
        sa, sx = sa[~(r_zero | l_zero)], sx[~(r_zero | l_zero)]
        n_shared = np.bincount(sa, minlength=m)
        conf, start, end = np.zeros(m), np.zeros(m, np.int64), np.zeros(m, np.int64)
        many = np.flatnonzero(n_shared > MAX_SHARED)
        if len(many):
            conf[many], start[many], end[many] = self.fallback(idx[many], vlb[many], vub[many])
        binds = (vub[:, 2] - vlb[:, 0] >= self.window).astype(np.int64)  # window can cut
        for s, bind in sorted(set(zip(n_shared.tolist(), binds.tolist()))):
            if s > MAX_SHARED:
                continue
            rows = np.flatnonzero((n_shared == s) & (binds == bind))
            xs = sx[np.isin(sa, rows)].reshape(len(rows), s)  # sa is sorted
            w = int((vub[rows] - vlb[rows]).max()) + 1
            step = max(1, PHASE_CELLS // ((2 + 2**s) * w * w))
            for lo in range(0, len(rows), step):
                sub = rows[lo : lo + step]
                c, st, en = self._batch(idx[sub], vlb[sub], vub[sub], _local(only, sub, m),
                                        xs[lo : lo + step])  # fmt: skip
                conf[sub], start[sub], end[sub] = c, st, en
        return conf, start, end

    def _factor(self, grid: Grid, j: int, a, x, kinds):
        """q_j (m, w_{j-1}, w_j); folds its one-sided factors into grid.prob (1.). One
        multiply per (signature, event) pair, rank by rank within a signature: a
        `reduceat` over a (pairs, w, w) array would cost as much as the rest."""
        ev = self.events
        q = np.ones((len(grid.vlb), grid.width[j - 1], grid.width[j]))
        u_zero = (kinds == 0) & (ev.first[x] > grid.vub[a, j - 1])  # P[x <= s] = 0
        f_zero = (kinds == 0) & ~u_zero & (ev.last[x] < grid.vlb[a, j])  # P[x >= t] = 0
        for sel, comp, mass in ((u_zero, j, ev.mass_from), (f_zero, j - 1, ev.mass_upto)):
            for ak, xk, _ in _by_rank(a[sel], x[sel], kinds[sel]):
                grid.prob[comp][ak] *= mass(xk[:, None], grid.points[comp][ak])
        pair = ~(u_zero | f_zero)
        for ak, xk, kk in _by_rank(a[pair], x[pair], kinds[pair]):
            s, t, xk, kk = grid.points[j - 1][ak], grid.points[j][ak], xk[:, None], kk[:, None]
            up = np.where(kk == 2, ev.prob(xk, s), ev.mass_upto(xk, s))
            down = np.where(kk == 1, ev.prob(xk, t), ev.mass_from(xk, t))
            q[ak] *= up[:, :, None] + down[:, None, :]
        return q

    def _batch(self, idx, vlb, vub, gaps, xs, full_end=False):
        """(confidence, start, end) of signatures that share len(xs[0]) events `xs`."""
        ev, window = self.events, self.window
        grid = Grid(ev, idx, vlb, vub)
        m, s = xs.shape
        t0, t1, t2 = grid.points
        q1, q2 = [self._factor(grid, j + 1, a, x, k) for j, (a, x, k) in enumerate(gaps)]
        p0, p1, p2 = grid.prob  # after folding
        a_base = p0[:, :, None] * q1 * (t0[:, :, None] < t1[:, None, :]) * p1[:, None, :]
        b_base = q2 * (t1[:, :, None] < t2[:, None, :]) * p2[:, None, :]
        before = [ev.mass_upto(xs[:, i, None], t0) for i in range(s)]  # L_x(t0)
        after = [ev.prob(xs[:, i, None], t1)[:, :, None] + ev.mass_from(xs[:, i, None], t2)[:, None, :]
                 for i in range(s)]  # g_x(t1, t2)  # fmt: skip
        by_t0, by_t2 = np.zeros(t0.shape), np.zeros(t2.shape)  # mass by first, last point
        binds = (grid.vub[:, 2] - grid.vlb[:, 0] >= window).any()
        rows = np.arange(m)
        kl = t2.shape[1] - 1 - np.argmax((p2 > 0)[:, ::-1], axis=1)  # last positive t2
        in_window = (t0 >= (t2[rows, kl] - window + 1)[:, None]).astype(float)
        last_mass = np.zeros(m)  # whether some point match ends at kl (positivity only)
        for phase in itertools.product((False, True), repeat=s):  # x_i at or before t0?
            a, b = a_base, b_base
            for i, early in enumerate(phase):
                if early:
                    a = a * before[i][:, :, None]
                else:
                    b = b * after[i]
            if not binds:  # no window: (t0, t1) and (t1, t2) independent given t1
                by_t0 += _sum(a * _sum(b, axis=2)[:, None, :], axis=2)
                if full_end:
                    by_t2 += _sum(b * _sum(a, axis=1)[:, :, None], axis=1)
                else:
                    last_mass += (b[rows, :, kl] * _sum(a, axis=1)).sum(axis=1)
                continue
            upto = np.cumsum(b, axis=2)  # B(t1, u), u over t2's points, left to right
            reach = _gather(upto, grid.vlb[:, 2], t0 + window - 1)  # (m, t1, t0)
            by_t0 += _sum(a * reach.transpose(0, 2, 1), axis=2)
            if full_end:  # from t2 back: sum over t0 >= t2 - W + 1
                suffix = np.cumsum(a[:, ::-1, :], axis=1)[:, ::-1, :].transpose(0, 2, 1)
                by_t2 += _sum(b * _gather(suffix, grid.vlb[:, 0], t2 - window + 1, True), axis=1)
            else:
                last_mass += (b[rows, :, kl] * np.matmul(in_window[:, None, :], a)[:, 0, :]).sum(1)
        conf = _sum(by_t0, axis=1)
        start = t0[rows, np.argmax(by_t0 > 0, axis=1)]
        if full_end:
            k = by_t2.shape[1] - 1 - np.argmax((by_t2 > 0)[:, ::-1], axis=1)
            return conf, start, t2[rows, k]
        end = t2[rows, kl]
        redo = np.flatnonzero((last_mass == 0) & (conf > 0))  # no match ends at kl
        if len(redo):
            local = _local(gaps, redo, m)
            end[redo] = self._batch(idx[redo], vlb[redo], vub[redo], local, xs[redo], True)[2]
        return conf, start, end


MAX_ACTIVE = 6  # NextChain: at most 2^6 states at a point, else the enumeration
CHAIN_CELLS = 2_000_000  # NextChain: float cells of one batch's (first, point) arrays


class NextChain(NextThree):
    """Skip-till-next confidence and range for l >= 4 as a product of matrices along
    the chain, with no tensor of point matches: what `_general` computes.

    An event x in the Θ sets of gaps J_x (gap j lies between t_{j-1} and t_j) must
    avoid their union; the gaps are disjoint, so x's factor is the mass of the places
    it may take, each a function of one point or of two neighbours: at or before t_0,
    in an allowed gap, at a point t_j, at or after t_{l-1}. J'_x, the gaps where x can
    fall at all (a positive point strictly between vlb_{j-1} and vub_j), decide:

    1. Folding. |J'_x| = 1, gap i: the factor is L_x(t_{i-1}) + R_x(t_i), a factor of
       the pairwise q_i (as NextThree's, folded into p_{i-1} or p_i when one side is 0).
    2. States. Otherwise x is open from point a - 1 to point b (a, b = min, max of J'_x):
       it is placed at t_{a-1} or before (weight L_x(t_{a-1})), or in step j (from
       t_{j-1} to t_j, a <= j <= b) strictly inside gap j if j is not in J'_x
       (P[t_{j-1} < x < t_j]) or at t_j if j < b (p_x(t_j)), or, still unplaced when
       it closes at b, at t_b or after (R_x(t_b)). The pass keeps, per set of placed
       open events (at most 2^MAX_ACTIVE) and per first point, the mass of the partial
       point matches ending at each point of component j; a step multiplies by
       q_j(s, t) [s < t] p_j(t) and the placement weights of the events placed in it.
    3. The window is applied at the end, on (first point, last point).

    Every term is nonnegative, so which signatures and range ends have mass is exact.
    Signatures with more than MAX_ACTIVE events open at once go to `fallback`."""

    def __call__(self, idx, vlb, vub):
        ev, m, n_ev, length = self.events, len(idx), len(self.events), self.pattern.length
        gaps = [theta_pairs(ev, self.pattern, idx, vlb, vub, j) for j in range(1, length)]
        keys = np.concatenate([a * n_ev + x for a, x in gaps])
        gap_of = np.concatenate([np.full(len(a), j) for j, (a, _) in enumerate(gaps, 1)])
        sa, sx = keys // n_ev, keys % n_ev
        # J'_x: the gaps where x has a positive point strictly inside (vlb_{j-1}, vub_j)
        can = (ev.last[sx] > vlb[sa, gap_of - 1]) & (ev.first[sx] < vub[sa, gap_of])
        order = np.lexsort((gap_of, keys))
        keys, gap_of, can, sa, sx = keys[order], gap_of[order], can[order], sa[order], sx[order]
        uniq, first_at = np.unique(keys, return_index=True)
        bits = np.bitwise_or.reduceat(np.where(can, 1 << gap_of, 0), first_at)
        any_bits = np.bitwise_or.reduceat(1 << gap_of, first_at)
        ua, ux = uniq // n_ev, uniq % n_ev
        n_can = np.array([bin(b).count("1") for b in bits.tolist()], np.int64)
        # one gap: a pairwise factor (kind 0: L(t_{i-1}) + R(t_i)); none: no factor
        single = n_can == 1
        single_gap = np.where(single, np.log2(np.maximum(bits, 1)).astype(np.int64), 0)
        none = (n_can == 0) & (np.array([bin(b).count("1") for b in any_bits.tolist()]) == 1)
        none_gap = np.log2(np.maximum(any_bits, 1)).astype(np.int64)
        pair_sel = single | none
        pair_gap = np.where(single, single_gap, none_gap)
        pairs = [(ua[pair_sel & (pair_gap == j)], ux[pair_sel & (pair_gap == j)])
                 for j in range(1, length)]  # fmt: skip
        # events in several Θ sets that can fall in none of them: factor 1, dropped
        shared = n_can >= 2
        sa_s, sx_s, bits_s = ua[shared], ux[shared], bits[shared]
        conf, start, end = np.zeros(m), np.zeros(m, np.int64), np.zeros(m, np.int64)
        # a signature's shape: the J' sets of its shared events, in order
        shape_of: list[tuple[int, ...]] = [() for _ in range(m)]
        xs_of: list[list[int]] = [[] for _ in range(m)]
        for a, x, b in zip(sa_s.tolist(), sx_s.tolist(), bits_s.tolist()):
            shape_of[a] += (b,)
            xs_of[a].append(x)
        groups: dict[tuple[int, ...], list[int]] = {}
        for r in range(m):
            order_r = sorted(range(len(shape_of[r])), key=lambda k: shape_of[r][k])
            xs_of[r] = [xs_of[r][k] for k in order_r]
            shape = tuple(shape_of[r][k] for k in order_r)
            groups.setdefault(shape, []).append(r)
        fallback = []
        for shape, members in sorted(groups.items()):
            if _max_open(shape, length) > MAX_ACTIVE:
                fallback += members
                continue
            rows = np.array(members, np.int64)
            xs = np.array([xs_of[r] for r in members], np.int64).reshape(len(rows), len(shape))
            w = int((vub[rows] - vlb[rows]).max()) + 1
            states = 2 ** _max_open(shape, length)
            step = max(1, CHAIN_CELLS // (states * w * w))
            for lo in range(0, len(rows), step):
                sub = rows[lo : lo + step]
                local = _local([(a, x, np.zeros(len(a), np.int64)) for a, x in pairs], sub, m)
                c, st, en = self._chain(idx[sub], vlb[sub], vub[sub], local, xs[lo : lo + step],
                                        shape)  # fmt: skip
                conf[sub], start[sub], end[sub] = c, st, en
        if fallback:
            rows = np.array(sorted(fallback), np.int64)
            conf[rows], start[rows], end[rows] = self.fallback(idx[rows], vlb[rows], vub[rows])
        return conf, start, end

    def _chain(self, idx, vlb, vub, pairs, xs, shape):
        ev, window, length = self.events, self.window, self.pattern.length
        # the widest possible valid interval: a signature's arrays have the same shape in
        # any batch, so the matrix products (BLAS) sum its terms the same way
        grid = Grid(ev, idx, vlb, vub, width=self.pattern.max_width + 1)
        q = [self._factor(grid, j + 1, a, x, k) for j, (a, x, k) in enumerate(pairs)]
        pts, prob = grid.points, grid.prob  # prob after folding
        m, w0 = prob[0].shape
        spans = [(_low_bit(b), b.bit_length() - 1) for b in shape]  # (a, b) of each slot
        diag = np.zeros((m, w0, w0))
        diag[:, np.arange(w0), np.arange(w0)] = prob[0]
        mass = {0: diag}  # placed open slots (bitmask) -> (m, first, point of j)
        mass = self._open(mass, spans, xs, 0, pts[0])
        for j in range(1, length):
            s, t = pts[j - 1][:, :, None], pts[j][:, None, :]
            base = q[j - 1] * (s < t) * prob[j][:, None, :]
            active = [k for k, (a, b) in enumerate(spans) if a <= j <= b]
            place = {}
            for k in active:
                x = xs[:, k, None, None]
                w = np.zeros(base.shape)
                if not shape[k] >> j & 1:  # strictly inside gap j
                    w = w + (ev.mass_upto(x, t - 1) - ev.mass_upto(x, s))
                if j < spans[k][1]:  # at t_j
                    w = w + ev.prob(x, t)
                place[k] = w
            out: dict[int, np.ndarray] = {}
            for state in sorted(mass):
                free = [k for k in active if not state >> k & 1]
                for n in range(len(free) + 1):
                    for chosen in itertools.combinations(free, n):
                        factor = base
                        for k in chosen:
                            factor = factor * place[k]
                        new = state | sum(1 << k for k in chosen)
                        part = np.matmul(mass[state], factor)
                        out[new] = out[new] + part if new in out else part
            mass = out
            for k, (_, b) in enumerate(spans):  # close the slots that end at j
                if b != j:
                    continue
                closed: dict[int, np.ndarray] = {}
                tail = ev.mass_from(xs[:, k, None], pts[j])[:, None, :]
                for state in sorted(mass):
                    value = mass[state] if state >> k & 1 else mass[state] * tail
                    key = state & ~(1 << k)
                    closed[key] = closed[key] + value if key in closed else value
                mass = closed
            mass = self._open(mass, spans, xs, j, pts[j])
        final = mass[0] * ((pts[-1][:, None, :] - pts[0][:, :, None]) < window)
        by_first, by_last = _sum(final, axis=2), _sum(final, axis=1)
        conf = _sum(by_first, axis=1)
        rows = np.arange(m)
        start = pts[0][rows, np.argmax(by_first > 0, axis=1)]
        k = by_last.shape[1] - 1 - np.argmax((by_last > 0)[:, ::-1], axis=1)
        return conf, start, pts[-1][rows, k]

    def _open(self, mass, spans, xs, j, points):
        """Open the slots whose first gap is j + 1: placed at t_j or before, or not yet."""
        for k, (a, _) in enumerate(spans):
            if a - 1 != j:
                continue
            before = self.events.mass_upto(xs[:, k, None], points)[:, None, :]
            out: dict[int, np.ndarray] = {}
            for state in sorted(mass):
                out[state] = mass[state]
                out[state | 1 << k] = mass[state] * before
            mass = out
        return mass


def _low_bit(b: int) -> int:
    return (b & -b).bit_length() - 1


def _max_open(shape, length: int) -> int:
    """The most slots open at once (from point a - 1 to point b)."""
    spans = [(_low_bit(b), b.bit_length() - 1) for b in shape]
    return max((sum(a - 1 <= j <= b for a, b in spans) for j in range(length)), default=0)


def _local(gaps, rows: np.ndarray, m: int):
    """(signature, event, kind) triples of `rows`, renumbered 0.. in the order of rows."""
    keep = np.full(m, -1)
    keep[rows] = np.arange(len(rows))
    return [(keep[a][keep[a] >= 0], x[keep[a] >= 0], k[keep[a] >= 0]) for a, x, k in gaps]


def _by_rank(a, x, kinds):
    """The (signature, event, kind) triples in groups with each signature at most once,
    the events of a signature in their order."""
    order = np.argsort(a, kind="stable")
    a, x, kinds = a[order], x[order], kinds[order]
    rank = np.arange(len(a)) - np.searchsorted(a, a, "left")
    for r in range(int(rank.max()) + 1 if len(rank) else 0):
        k = rank == r
        yield a[k], x[k], kinds[k]


def _gather(values, base, at, suffix=False):
    """values[m, i, at[m, k] - base[m]] -> (m, i, k) for running sums over a grid: 0
    before it and the last value after it, or for suffix sums 0 after it and the first
    value before it."""
    pos = at - base[:, None]
    inside = pos < values.shape[2] if suffix else pos >= 0
    pos = np.clip(pos, 0, values.shape[2] - 1)
    pos = np.broadcast_to(pos[:, None, :], (*values.shape[:2], pos.shape[1]))
    return np.where(inside[:, None, :], np.take_along_axis(values, pos, axis=2), 0.0)


BELOW_ONE = float(np.nextafter(1.0, 0.0))


def in_unit_range(events: IntervalEvents, pattern: Pattern, idx, conf) -> np.ndarray:
    """The confidences `conf` of signatures `idx`, exactly 1 where the signature is
    certain, else capped just below 1: its true value is below 1 (a tuple of positive
    points fails), so a float above it is rounding. Clamping at 1 instead would call an
    uncertain match certain; computing in fractions would cost the numpy passes."""
    if not len(idx):
        return conf
    return np.where(certain(events, pattern, idx), 1.0, np.minimum(conf, BELOW_ONE))


def certain(events: IntervalEvents, pattern: Pattern, idx) -> np.ndarray:
    """Signatures that match in every possible world, decided on integers: with f_j, l_j
    event j's first and last positive points, l_{j-1} < f_j for each j (every order
    holds), l_l - f_1 < W (every window holds) and, under skip-till-next, no event that
    could take component j has a positive point strictly between f_{j-1} and l_j (then
    some world puts it between events j-1 and j)."""
    first, last = events.first[idx], events.last[idx]
    ok = (last[:, :-1] < first[:, 1:]).all(axis=1)
    if pattern.length > 1:  # one event is always within its window
        ok &= last[:, -1] - first[:, 0] < pattern.window
    if pattern.next and ok.any():
        rows = np.flatnonzero(ok)
        lo, hi = first[rows], last[rows]
        for j in range(1, pattern.length):
            a, x = theta_pairs(events, pattern, idx[rows], lo, hi, j)
            spoils = events.positive_between(x, lo[a, j - 1], hi[a, j])
            ok[rows[a[spoils]]] = False
    return ok


def _shared(gaps, n_events: int, m: int) -> np.ndarray:
    """Signatures with an event in two of their Θ sets."""
    shared = np.zeros(m, dtype=bool)
    if len(gaps) < 2:
        return shared
    keys = np.concatenate([a * n_events + x for a, x in gaps])
    values, counts = np.unique(keys, return_counts=True)
    shared[values[counts > 1] // n_events] = True
    return shared


def chain(grid: Grid, factors, window: int | None):
    """(confidence, range start, range end) of each signature of `grid`.

    Where the window cannot bind (the last valid point minus the first is below W), one
    pass forward gives the confidence and the range end and one backward the range
    start; elsewhere the forward pass keeps the first point too (`_chain_by_first`)."""
    m = len(grid.vlb)
    cut = np.zeros(m, dtype=np.int64)  # first points the window can cut, each signature
    if window is not None and grid.length > 1:  # one event is always within its window
        cut = np.clip(grid.vub[:, -1] - window + 1 - grid.vlb[:, 0], 0, grid.width[0])
    if not cut.any():
        return _chain_free(grid, factors)
    if factors is None:  # skip-till-any: the window by inclusion-exclusion, linear in width
        out = (np.zeros(m), np.zeros(m, np.int64), np.zeros(m, np.int64))
        for rows, fn in ((np.flatnonzero(cut == 0), _chain_free),
                         (np.flatnonzero(cut > 0), lambda g, f: _any_windowed(g, window))):  # fmt: skip
            if len(rows):
                for target, values in zip(out, fn(grid.subset(rows), None)):
                    target[rows] = values
        return out
    out = (np.zeros(m), np.zeros(m, np.int64), np.zeros(m, np.int64))
    widest = max(grid.width)
    per_row = widest if factors is None else widest * widest
    for k in np.unique(cut).tolist():  # as many rows as points cut, in each group
        group = np.flatnonzero(cut == k)
        step = len(group) if k == 0 else max(1, CHUNK_CELLS // ((k + 1) * per_row))
        for lo in range(0, len(group), step):
            rows = group[lo : lo + step]
            sub = grid.subset(rows)
            parts = None if factors is None else [f[rows] for f in factors]
            part = _chain_free(sub, parts) if k == 0 else _chain_by_first(sub, parts, window)
            for target, values in zip(out, part):
                target[rows] = values
    return out


def _spread(grid: Grid, mass: np.ndarray, j: int, factors) -> np.ndarray:
    """Mass of component j-1's points (last axis) -> the mass that reaches each point of
    component j (sum over s < t, times q_j(s, t) under skip-till-next)."""
    pts = grid.points[j]
    if factors is None:
        running = _running(mass)  # the sum over s < t, read at t - 1
        at = pts - 1 - grid.vlb[:, j - 1, None]
        inside = at >= 0
        at = np.clip(at, 0, grid.width[j - 1] - 1)
        if mass.ndim == 3:
            at = np.broadcast_to(at[:, None, :], (*mass.shape[:2], at.shape[1]))
            inside = inside[:, None, :]
        return np.where(inside, np.take_along_axis(running, at, axis=-1), 0.0)
    before = grid.points[j - 1][:, :, None] < pts[:, None, :]  # s < t
    factor = np.where(before, factors[j - 1], 0.0)
    if mass.ndim == 2:
        return _step(mass[:, None, :], factor)[:, 0, :]
    return _step(mass, factor)


def _chain_free(grid: Grid, factors):
    """No window to apply: forward for the confidence and the last point, backward for
    the first point."""
    m = len(grid.vlb)
    mass = grid.prob[0]
    for j in range(1, grid.length):
        mass = _spread(grid, mass, j, factors) * grid.prob[j]
    total = _sum(mass, axis=1)
    rows = np.arange(m)
    k = mass.shape[1] - 1 - np.argmax((mass > 0)[:, ::-1], axis=1)
    end = grid.points[-1][rows, k]
    a = np.argmax(_backward(grid, factors) > 0, axis=1)
    return total, grid.points[0][rows, a], end


def _backward(grid: Grid, factors) -> np.ndarray:
    """(m, width[0]): the mass of the point matches (window aside) that start at each
    point of event 1."""
    back = grid.prob[-1]
    for j in range(grid.length - 2, -1, -1):
        back = _gather_back(grid, back, j, factors) * grid.prob[j]
    return back


def _gather_back(grid: Grid, back: np.ndarray, j: int, factors) -> np.ndarray:
    """Mass of the suffixes from component j+1's points -> from each point of j."""
    pts = grid.points[j]
    if factors is None:
        suffix = np.cumsum(back[:, ::-1], axis=1)[:, ::-1]  # the sum over t > s
        at = pts + 1 - grid.vlb[:, j + 1, None]
        inside = at < grid.width[j + 1]
        at = np.clip(at, 0, grid.width[j + 1] - 1)
        return np.where(inside, np.take_along_axis(suffix, at, axis=1), 0.0)
    after = pts[:, :, None] < grid.points[j + 1][:, None, :]  # s < t
    factor = np.where(after, factors[j], 0.0)  # (m, s, t)
    out = np.zeros(pts.shape)
    for t in range(factor.shape[2]):
        out += factor[:, :, t] * back[:, t, None]
    return out


def _chain_by_first(grid: Grid, factors, window: int):
    """mass[m, r, k]: the partial point matches whose last point is point k of event j,
    by their first point: row r < K holds those that start at point r of event 1 when
    the window can cut them (r before vub_l - W + 1: K of them), row K all the others
    together (the window cannot cut a path that starts there). The window is applied at
    each step to the rows r < K."""
    p0, first = grid.prob[0], grid.points[0]
    m, w0 = p0.shape
    cut = np.clip(grid.vub[:, -1] - window + 1 - grid.vlb[:, 0], 0, w0)  # points cut, each
    k_max = int(cut.max())
    rows_k = np.arange(k_max)
    alone = rows_k[None, :] < cut[:, None]  # (m, K): row r is point r, tracked alone
    mass = np.zeros((m, k_max + 1, w0))
    mass[:, rows_k, rows_k] = np.where(alone, p0[:, :k_max], 0.0)
    mass[:, k_max, :] = np.where(np.arange(w0)[None, :] >= cut[:, None], p0, 0.0)
    starts = first[:, :k_max]  # (m, K)
    for j in range(1, grid.length):
        pts = grid.points[j]
        mass = _spread(grid, mass, j, factors) * grid.prob[j][:, None, :]
        mass[:, :k_max, :] *= (pts[:, None, :] - starts[:, :, None]) < window
    by_row = _sum(mass, axis=2)
    by_last = _sum(mass, axis=1)
    total = _sum(by_row, axis=1)
    rows = np.arange(m)
    k = by_last.shape[1] - 1 - np.argmax((by_last > 0)[:, ::-1], axis=1)
    end = grid.points[-1][rows, k]
    positive = (by_row[:, :k_max] > 0) & alone
    start = np.where(positive.any(axis=1), first[rows, np.argmax(positive, axis=1)], 0)
    rest = ~positive.any(axis=1) & (by_row[:, k_max] > 0)
    if rest.any():  # the first positive point among the ones the window does not cut
        sub = np.flatnonzero(rest)
        back = _backward(grid.subset(sub), None if factors is None else [f[sub] for f in factors])
        back[np.arange(w0)[None, :] < cut[sub, None]] = 0.0
        start[sub] = first[sub, np.argmax(back > 0, axis=1)]
    return total, start, end


def _at(values: np.ndarray, base: np.ndarray, x: np.ndarray) -> np.ndarray:
    """values[m, x - base[m]] for times x (m, q): 0 before the grid, the last value
    after it (values are running sums over the grid)."""
    i = x - base[:, None]
    inside = i >= 0
    i = np.clip(i, 0, values.shape[1] - 1)
    return np.where(inside, np.take_along_axis(values, i, axis=1), 0.0)


def _any_windowed(grid: Grid, window: int):
    """Skip-till-any where the window binds, in time linear in the widths.

    With P[s][k](x) the mass of the chains of components s..k with every point <= x (a
    running sum over k's points of p_k(t) P[s][k-1](t - 1)), the mass of the chains of
    s..l-1 inside the open interval (a, b) is, splitting off the last k whose point is
    <= a,  G_s(a, b) = P[s][l-1](b - 1) - sum over k >= s of P[s][k](a) G_{k+1}(a, b)
    (G_l = 1). The confidence is the sum over the first event's points a of
    p_0(a) G_1(a, a + W). Which first and last points have a chain at all is found
    exactly, by the earliest and latest chains (no subtraction), so that a signature or
    a range end is never made by rounding."""
    length, vlb = grid.length, grid.vlb
    a = grid.points[0]  # (m, w0)
    b = a + window
    prefix: dict[tuple[int, int], np.ndarray] = {}
    for s in range(1, length):
        before = None
        for k in range(s, length):
            term = grid.prob[k]
            if before is not None:
                term = term * _at(before, vlb[:, k - 1], grid.points[k] - 1)
            before = _running(term)
            prefix[(s, k)] = before
    inside = {length: np.ones(a.shape)}
    for s in range(length - 1, 0, -1):
        g = _at(prefix[(s, length - 1)], vlb[:, length - 1], b - 1)
        for k in range(s, length):
            g = g - _at(prefix[(s, k)], vlb[:, k], a) * inside[k + 1]
        inside[s] = g
    valid = _chains_start(grid, window)
    mass = np.where(valid, grid.prob[0] * inside[1], 0.0)
    total = _sum(mass, axis=1)
    rows = np.arange(len(vlb))
    start = a[rows, np.argmax(valid, axis=1)]
    return total, start, _chains_end(grid, window)


def _positive_next(grid: Grid, j: int) -> np.ndarray:
    """(m, width_j + 1): per grid position, the first position at or after it whose
    point has positive probability (width_j when none)."""
    w = grid.width[j]
    pos = np.where(grid.prob[j] > 0, np.arange(w)[None, :], w)
    pos = np.minimum.accumulate(pos[:, ::-1], axis=1)[:, ::-1]
    return np.concatenate([pos, np.full((len(pos), 1), w)], axis=1)


def _chains_start(grid: Grid, window: int) -> np.ndarray:
    """(m, w0): whether a chain starts at each point a of event 1 (positive points, in
    order, the last before a + W): the earliest chain from a decides."""
    big = np.iinfo(np.int64).max // 4
    a = grid.points[0]
    t = a.copy()
    for j in range(1, grid.length):
        nxt = _positive_next(grid, j)
        i = np.clip(t + 1 - grid.vlb[:, j, None], 0, grid.width[j])
        k = np.take_along_axis(nxt, i, axis=1)
        t = np.where(k < grid.width[j], grid.vlb[:, j, None] + k, big)
    return (grid.prob[0] > 0) & (t < a + window)


def _chains_end(grid: Grid, window: int) -> np.ndarray:
    """Per signature, the latest last point of a chain: for each point of the last
    event, the latest chain back to a point of event 1 within the window."""
    last = grid.length - 1
    z = grid.points[last]
    t = z.copy()
    for j in range(last - 1, -1, -1):  # the latest positive point of j before t
        w = grid.width[j]
        pos = np.where(grid.prob[j] > 0, np.arange(w)[None, :], -1)
        prev = np.maximum.accumulate(pos, axis=1)
        i = t - 1 - grid.vlb[:, j, None]
        ok = i >= 0
        k = np.where(ok, np.take_along_axis(prev, np.clip(i, 0, w - 1), axis=1), -1)
        if j == 0:
            # a positive point of event 1 in [z - W + 1, t - 1]: the latest is enough
            found = (k >= 0) & (grid.vlb[:, 0, None] + k > z - window)
        else:
            t = np.where(k >= 0, grid.vlb[:, j, None] + k, np.iinfo(np.int64).min // 4)
    found &= grid.prob[last] > 0
    rows = np.arange(len(z))
    k = found.shape[1] - 1 - np.argmax(found[:, ::-1], axis=1)
    return z[rows, k]


def _sum(values: np.ndarray, axis: int) -> np.ndarray:
    """A sum in one fixed order, left to right: a signature's confidence does not depend
    on how wide the other signatures of its batch make the arrays (numpy's pairwise
    sums group terms by the array's length; trailing zeros change nothing here)."""
    out = values.take(0, axis=axis).copy()
    for i in range(1, values.shape[axis]):
        out += values.take(i, axis=axis)
    return out


def _running(values: np.ndarray) -> np.ndarray:
    """Running sums along the last axis, left to right."""
    out = values.copy()
    for i in range(1, values.shape[-1]):
        out[..., i] += out[..., i - 1]
    return out


def _step(mass: np.ndarray, factor: np.ndarray) -> np.ndarray:
    """out[m, a, t] = sum over s of mass[m, a, s] * factor[m, s, t], in the order of s."""
    out = np.zeros((mass.shape[0], mass.shape[1], factor.shape[2]))
    for s in range(mass.shape[2]):
        out += mass[:, :, s, None] * factor[:, None, s, :]
    return out


def chunked(fn, idx, vlb, vub, gaps=None, power: int | None = None):
    """`fn` over slices of the signatures small enough for memory. A signature takes
    the widest width to `power` cells (default: 1, or 2 with Θ factors); power 0: the
    product of its widths (every point match)."""
    m = len(idx)
    if not m:
        return np.zeros(0), np.zeros(0, np.int64), np.zeros(0, np.int64)
    widths = (vub - vlb).max(axis=0) + 1
    power = (1 if gaps is None else 2) if power is None else power
    widest = int(max(widths.max(), 1))
    cells = int(np.prod(widths.astype(np.float64))) if power == 0 else widest**power
    step = max(1, CHUNK_CELLS // max(cells, 1))
    if m <= step:
        return fn(idx, vlb, vub) if gaps is None else fn(idx, vlb, vub, gaps)
    outs = []
    for lo in range(0, m, step):
        hi = min(m, lo + step)
        if gaps is None:
            outs.append(fn(idx[lo:hi], vlb[lo:hi], vub[lo:hi]))
        else:
            part = []
            for a, x in gaps:
                sel = (a >= lo) & (a < hi)
                part.append((a[sel] - lo, x[sel]))
            outs.append(fn(idx[lo:hi], vlb[lo:hi], vub[lo:hi], part))
    return tuple(np.concatenate([o[i] for o in outs]) for i in range(3))
