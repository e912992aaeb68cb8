"""Scoring functions (ayac-probabilistic-cep.md §3): the probability that the components
missing between two observed events happened as the pattern says, as a function of the
time T between those events.

The paper's model: component e_i happens a delay d_i ~ f_i after the last positive
component before it (the Markov property), and each event is missed with probability ε
(per component). Its functions, for a gap of length T:

- S^P(T) = ε F_i(T): the missing positive e_i happened within T and was missed (§3.1);
- S^N(T) = (1 − F_i(T)) / (ε F_i(T) + 1 − F_i(T)): the negated e_i, not observed in
  the gap, did not happen (§3.2);
- S^{N..N}(T) = Π S^N_k(T): several negated components (§3.3);
- S^{PP}(T): two consecutive positives, both missed (§3.3);
- S^{N..NPN..N}(T): a missing positive surrounded by negated components (§3.3).

For S^{PP} and S^{N..NPN..N} §3's formulas measure both delays from e_{i−1}, which
contradicts the paper's own Markov assumption (e_{i+1}'s delay, and that of a negated
component after e_i, run from e_i). These classes follow the model; `paper(T)` gives
§3's formula for comparison (docs/ayac.md):

- S^{PP}(T) = ε_i ε_{i+1} P(d_i + d_{i+1} ≤ T) = ε_i ε_{i+1} ∫_0^T f_i(s) F_{i+1}(T − s) ds
  (§3: ε² ∫_0^T f_{i+1}(t) F_i(t) dt);
- S^{N..NPN..N}(T) = ε ∫_0^T f_i(t) Π_before S^N_k(t) Π_after S^N_k(T − t) dt
  (§3: ε F_i(T) Π_before S^N_k(T) Π_after S^N_k(T)).

Any other run of missing components (e.g. P N P) is a `Segment`: a chain of *links*,
each the gap between two consecutive positives of the run, with the negated components
standing in it; its score is Π ε × the integral, over the links' lengths, of Π f_link ×
Π S^N over each link, the last link taking what is left of T. Segments of more than one
positive, or of a positive next to negations, are computed once on a grid of `cells`
cells over [0, W] (the paper's lookup tables) and interpolated; the others have closed
forms. Every function also has `bound(T) = max_{t ≤ T} H(t)`, the paper's G.

>>> from sparkcep.plan.laws import Uniform
>>> law = Uniform(0.0, 10.0)
>>> float(MissedPositive(0.1, law)(5.0))          # ε F(5) = 0.1 × 0.5
0.05
>>> round(float(MissedNegative(0.1, law)(5.0)), 6)  # 0.5 / (0.05 + 0.5)
0.909091
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sparkcep.plan.laws import Law

CELLS = 2048  # grid cells over [0, W] for the tabulated scoring functions


@dataclass(frozen=True)
class Negative:
    """A negated component: its miss rate ε and the law of its delay."""

    rate: float
    law: Law


def not_happened(negatives, t) -> np.ndarray:
    """Π S^N_k(t) over `negatives`: given that none was observed within t, none happened.

    With ε = 0, not observed means not happened (1, also where F = 1)."""
    t = np.asarray(t, dtype=np.float64)
    out = np.ones(t.shape)
    for neg in negatives:
        f = neg.law.cdf(t)
        den = neg.rate * f + 1.0 - f
        with np.errstate(invalid="ignore", divide="ignore"):
            s = np.where(den > 0, (1.0 - f) / np.where(den > 0, den, 1.0), 1.0)
        out = out * s
    return out


class ScoringFunction:
    """H(T) for arrays of T (ticks), and its running maximum `bound` (the paper's G)."""

    name = "S"
    monotone: str | None = None  # "up" (non-decreasing), "down" or None

    def __call__(self, t) -> np.ndarray:
        raise NotImplementedError

    def bound(self, t) -> np.ndarray:
        """G(T) = max over t ≤ T of H(t)."""
        t = np.asarray(t, dtype=np.float64)
        if self.monotone == "up":
            return self(t)
        if self.monotone == "down":
            return np.broadcast_to(self(np.zeros(1))[0], t.shape).copy()
        raise NotImplementedError


class Constant(ScoringFunction):
    """An edge that skips nothing: H = 1."""

    name = "1"
    monotone = "down"

    def __call__(self, t):
        return np.ones(np.shape(t))


class MissedPositive(ScoringFunction):
    """S^P(T) = ε F_i(T) (§3.1): e_i happened within T after e_{i−1} and was missed.

    Not renormalised: it is the probability of that event, as the paper states it.

    >>> from sparkcep.plan.laws import Exponential
    >>> s = MissedPositive(0.1, Exponential(2.0))
    >>> round(float(s(3.0)), 6), round(float(s.bound(3.0)), 6)   # 0.1 (1 − e^−1.5)
    (0.077687, 0.077687)
    """

    name = "S^P"
    monotone = "up"

    def __init__(self, rate: float, law: Law):
        self.rate, self.law = rate, law

    def __call__(self, t):
        return self.rate * self.law.cdf(t)


class MissedNegative(ScoringFunction):
    """S^N(T) = (1 − F_i(T)) / (ε F_i(T) + 1 − F_i(T)) (§3.2): the negated e_i was not
    observed in a gap of T; the probability that it did not happen.

    >>> from sparkcep.plan.laws import Uniform
    >>> s = MissedNegative(0.2, Uniform(0.0, 4.0))
    >>> [round(float(x), 4) for x in s([0.0, 2.0, 4.0])]   # 1, 0.5/0.6, 0
    [1.0, 0.8333, 0.0]
    """

    name = "S^N"
    monotone = "down"

    def __init__(self, rate: float, law: Law):
        self.rate, self.law = rate, law

    def __call__(self, t):
        return not_happened([Negative(self.rate, self.law)], t)


class MissedNegatives(ScoringFunction):
    """S^{N..N}(T) = Π_k S^N_k(T) (§3.3): several negated components in one gap."""

    name = "S^{N..N}"
    monotone = "down"

    def __init__(self, negatives: tuple[Negative, ...]):
        self.negatives = tuple(negatives)

    def __call__(self, t):
        return not_happened(self.negatives, t)


@dataclass(frozen=True)
class Link:
    """The gap between two consecutive positives of a segment: the law of its length
    (the later positive's delay) and the negated components standing in it."""

    law: Law
    negatives: tuple[Negative, ...] = ()


class Tabulated(ScoringFunction):
    """A scoring function tabulated on `cells` + 1 points over [0, W], interpolated
    linearly; `bound` is the running maximum of the table (an upper bound of the
    interpolant)."""

    monotone = None

    def __init__(self, window: float, values: np.ndarray):
        self.window = float(window)
        self.cells = len(values) - 1
        self.step = self.window / self.cells if self.cells else 1.0
        self.grid = np.linspace(0.0, self.window, self.cells + 1)
        self.values = np.clip(values, 0.0, 1.0)
        self.running = np.maximum.accumulate(self.values)

    def __call__(self, t):
        return np.interp(np.asarray(t, dtype=np.float64), self.grid, self.values)

    def bound(self, t):
        t = np.asarray(t, dtype=np.float64)
        index = np.clip(np.ceil(t / self.step - 1e-9), 0, self.cells).astype(np.int64)
        return self.running[index]


def _link_masses(link: Link, window: float, cells: int) -> np.ndarray:
    """The link's sub-density f·Π S^N on the half-grid (h/2 steps): the probability mass
    of each cell at its midpoint (odd positions), an atom at 0 at position 0."""
    h = window / cells
    edges = link.law.cdf(np.arange(cells + 1) * h)
    mids = (np.arange(cells) + 0.5) * h
    out = np.zeros(2 * cells + 1)
    out[1::2] = np.diff(edges) * not_happened(link.negatives, mids)
    out[0] = edges[0] * not_happened(link.negatives, np.zeros(1))[0]
    return out


def _convolve(a: np.ndarray, b: np.ndarray, size: int) -> np.ndarray:
    """The first `size` terms of the convolution of a and b (by FFT)."""
    n = len(a) + len(b) - 1
    length = 1 << (n - 1).bit_length()
    out = np.fft.irfft(np.fft.rfft(a, length) * np.fft.rfft(b, length), length)[:size]
    return np.maximum(out, 0.0)


def segment_table(
    links: tuple[Link, ...],
    residual: tuple[Negative, ...],
    window: float,
    cells: int = CELLS,
) -> np.ndarray:
    """Π-less segment integral on the grid x_j = j·W/cells: the probability that the
    links' lengths sum to s ≤ x_j, weighted by Π f·S^N along them and by the residual's
    Π S^N(x_j − s). Midpoint rule per cell, a sum landing on a grid point counts half."""
    size = 2 * cells + 1
    combined = _link_masses(links[0], window, cells)
    for link in links[1:]:
        combined = _convolve(combined, _link_masses(link, window, cells), size)
    combined = np.concatenate([combined, np.zeros(max(0, size - len(combined)))])[:size]
    half = window / (2 * cells)
    rest = not_happened(residual, np.arange(size) * half)
    conv = _convolve(combined, rest, size)
    values = conv[0::2] - 0.5 * combined[0::2] * rest[0]
    values[0] = combined[0] * rest[0]
    return values


class Segment(ScoringFunction):
    """The score of any run of missing components between two observed positives (or
    between the window's start and the first observed one): Π ε of its positives times
    the integral over its links (see the module's docstring), on a grid.

    >>> from sparkcep.plan.laws import Uniform
    >>> u = Uniform(0.0, 10.0)
    >>> pp = Segment((0.5, 0.5), (Link(u), Link(u)), (), window=10.0)
    >>> round(float(pp(10.0)), 4)   # 0.25 × P(U1 + U2 ≤ 10) = 0.25 × 0.5
    0.125
    """

    def __init__(
        self,
        rates: tuple[float, ...],
        links: tuple[Link, ...],
        residual: tuple[Negative, ...],
        *,
        window: float,
        cells: int = CELLS,
        name: str = "S",
    ):
        self.rates = tuple(rates)
        self.links = tuple(links)
        self.residual = tuple(residual)
        self.name = name
        factor = float(np.prod(self.rates)) if self.rates else 1.0
        self.table = Tabulated(
            window, factor * segment_table(self.links, self.residual, window, cells)
        )

    def __call__(self, t):
        return self.table(t)

    def bound(self, t):
        return self.table.bound(t)


class MissedPair(Segment):
    """S^{PP}(T) (§3.3), two consecutive positives e_i, e_{i+1} missed, by the Markov
    model: ε_i ε_{i+1} P(d_i + d_{i+1} ≤ T) = ε_i ε_{i+1} ∫_0^T f_i(s) F_{i+1}(T − s) ds.

    >>> from sparkcep.plan.laws import Uniform
    >>> u = Uniform(0.0, 4.0)
    >>> s = MissedPair(0.1, u, 0.1, u, window=8.0)
    >>> round(float(s(4.0)), 5), round(float(s.paper(4.0)), 5)   # 0.01 × 1/2 and 0.01 × 1/2
    (0.005, 0.005)
    >>> round(float(s(2.0)), 5), round(float(s.paper(2.0)), 5)   # 0.01 × 1/8 and 0.01 × 1/8
    (0.00125, 0.00125)
    """

    def __init__(self, rate_i: float, law_i: Law, rate_j: float, law_j: Law, *, window: float,
                 cells: int = CELLS):  # fmt: skip
        super().__init__(
            (rate_i, rate_j), (Link(law_i), Link(law_j)), (), window=window, cells=cells,
            name="S^{PP}",
        )  # fmt: skip
        self.law_i, self.law_j = law_i, law_j

    def paper(self, t, points: int = 4096) -> np.ndarray:
        """§3's formula: ε² ∫_0^T f_{i+1}(t) F_i(t) dt (both delays from e_{i−1})."""
        shape = np.shape(t)
        out = []
        for T in np.atleast_1d(np.asarray(t, dtype=np.float64)):
            x = np.linspace(0.0, T, points + 1)
            mid = (x[1:] + x[:-1]) / 2
            out.append(np.sum(np.diff(self.law_j.cdf(x)) * self.law_i.cdf(mid)))
        return float(np.prod(self.rates)) * np.asarray(out).reshape(shape)


class MissedSurrounded(Segment):
    """S^{N..NPN..N}(T) (§3.3): a missing positive e_i with negated components before it
    (timed from e_{i−1}, over e_i's delay t) and after it (timed from e_i, over T − t):
    ε ∫_0^T f_i(t) Π_before S^N(t) Π_after S^N(T − t) dt.

    >>> from sparkcep.plan.laws import Uniform
    >>> u = Uniform(0.0, 10.0)
    >>> always_missed = Negative(1.0, u)                 # ε = 1: S^N(t) = 1 − F(t)
    >>> s = MissedSurrounded(0.1, u, (), (always_missed,), window=10.0)
    >>> round(float(s(10.0)), 4)   # 0.1 ∫_0^10 (1/10) (1 − (10 − t)/10) dt = 0.05
    0.05
    """

    def __init__(self, rate: float, law: Law, before: tuple[Negative, ...],
                 after: tuple[Negative, ...], *, window: float, cells: int = CELLS):  # fmt: skip
        super().__init__(
            (rate,), (Link(law, tuple(before)),), tuple(after), window=window, cells=cells,
            name="S^{N..NPN..N}",
        )  # fmt: skip
        self.law, self.before, self.after = law, tuple(before), tuple(after)

    def paper(self, t) -> np.ndarray:
        """§3's formula: ε F_i(T) Π_before S^N(T) Π_after S^N(T) (all timed from e_{i−1})."""
        t = np.asarray(t, dtype=np.float64)
        return (
            self.rates[0]
            * self.law.cdf(t)
            * not_happened(self.before, t)
            * not_happened(self.after, t)
        )


def segment_function(
    rates: tuple[float, ...],
    links: tuple[Link, ...],
    residual: tuple[Negative, ...],
    *,
    window: float,
    name: str,
    cells: int = CELLS,
) -> ScoringFunction:
    """The scoring function of a run of missing components: a closed form when there is
    one (nothing, S^P, S^{N..N}), else a tabulated `Segment`."""
    if not links:
        if not residual:
            return Constant()
        fn: ScoringFunction = (
            MissedNegative(residual[0].rate, residual[0].law)
            if len(residual) == 1
            else MissedNegatives(tuple(residual))
        )
    elif len(links) == 1 and not links[0].negatives and not residual:
        fn = MissedPositive(rates[0], links[0].law)
    else:
        fn = Segment(rates, links, residual, window=window, cells=cells, name=name)
    fn.name = name
    return fn
