"""The scoring functions of ayac-probabilistic-cep.md §3, each checked two ways:

- against numerical integration of its definition (densities integrated here on fine
  grids, independently of the engine's closed forms and tables), and
- against a Monte Carlo simulation of the paper's generative model: each component
  follows the last positive before it after a delay drawn from its law, and is missed
  with probability ε. Fixed seeds; an estimate must lie within 4 standard errors (plus
  1e-4 for the engine's tables) of the function.

Where §3's formulas break the paper's own Markov assumption (S^PP and S^{N..NPN..N}
measure both delays from e_{i−1}) the engine follows the model (docs/ayac.md); the
tests show that the simulation agrees with the model and not with §3's formula.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from sparkcep.engines.ayac.scoring import (
    Link,
    MissedNegative,
    MissedNegatives,
    MissedPair,
    MissedPositive,
    MissedSurrounded,
    Negative,
    Segment,
)
from sparkcep.plan.laws import Empirical, Exponential, Normal, Uniform

N = 200_000  # Monte Carlo draws
Z = 4.0  # standard errors allowed
TABLE = 1e-4  # the engine's tabulation error, at most

# ---- the laws, written out here: density, and a sampler ---------------------------------


def density(law, t):
    t = np.asarray(t, dtype=float)
    if isinstance(law, Exponential):
        m = law.mean_ticks
        return np.where(t >= 0, np.exp(-t / m) / m, 0.0)
    if isinstance(law, Uniform):
        return np.where((t >= law.low) & (t <= law.high), 1.0 / (law.high - law.low), 0.0)
    if isinstance(law, Normal):
        mass = 0.5 * math.erfc(-law.mu / law.sd / math.sqrt(2))  # P(X >= 0)
        z = (t - law.mu) / law.sd
        return np.where(t >= 0, np.exp(-z * z / 2) / (law.sd * math.sqrt(2 * math.pi)) / mass, 0)
    raise TypeError(law)


def sample(law, rng, size):
    if isinstance(law, Exponential):
        return rng.exponential(law.mean_ticks, size)
    if isinstance(law, Uniform):
        return rng.uniform(law.low, law.high, size)
    if isinstance(law, Normal):
        out = rng.normal(law.mu, law.sd, size)
        bad = out < 0
        while bad.any():  # truncated to [0, ∞): draw again where negative
            out[bad] = rng.normal(law.mu, law.sd, bad.sum())
            bad = out < 0
        return out
    if isinstance(law, Empirical):
        return rng.choice(np.asarray(law.values), size)
    raise TypeError(law)


GRID = np.linspace(0.0, 12.0, 1_200_001)  # fine enough: h = 1e-5


def _cdf_table(law, cache={}):  # noqa: B006 (a cache on purpose)
    if law not in cache:
        mid = (GRID[1:] + GRID[:-1]) / 2
        cache[law] = np.concatenate([[0.0], np.cumsum(density(law, mid) * np.diff(GRID))])
    return cache[law]


def cdf(law, T):
    """F(T) by integrating the density (midpoint rule on a 1e-5 grid)."""
    return np.interp(T, GRID, _cdf_table(law))


def integral(fn, lo, hi, points=100_001):
    x = np.linspace(lo, hi, points)
    mid = (x[1:] + x[:-1]) / 2
    return float(np.sum(fn(mid) * np.diff(x)))


def assert_close(estimate, std_err, value, what):
    assert abs(estimate - value) <= Z * std_err + TABLE, (what, estimate, value, std_err)


def proportion(hits):
    p = float(np.mean(hits))
    return p, math.sqrt(max(p * (1 - p), 1e-12) / len(hits))


def not_observed_draw(law, rate, length, rng, shape, tries=100):
    """One draw of a negated component's delay, conditioned on it not being observed
    within `length` (rejection sampling): returns whether that draw happened there."""
    d = sample(law, rng, (*shape, tries))
    missed = rng.random((*shape, tries)) < rate
    seen = (d <= length[..., None]) & ~missed
    first = np.argmax(~seen, axis=-1)  # the first draw that was not observed
    pick = np.take_along_axis(d, first[..., None], axis=-1)[..., 0]
    return pick <= length


LAWS = [Exponential(2.0), Uniform(1.0, 5.0), Normal(3.0, 1.0)]
TS = [0.7, 2.5, 4.0, 7.5]


# ---- S^P (§3.1) -----------------------------------------------------------------------


@pytest.mark.parametrize("law", LAWS, ids=lambda x: x.name)
@pytest.mark.parametrize("T", TS)
def test_missed_positive(law, T):
    eps = 0.15
    s = MissedPositive(eps, law)
    # the definition: ε ∫_0^T f(t) dt
    assert float(s(T)) == pytest.approx(eps * cdf(law, T), abs=1e-5)
    # the event: e_i happens within T after e_{i-1} and is missed
    rng = np.random.default_rng(1)
    hits = (sample(law, rng, N) <= T) & (rng.random(N) < eps)
    assert_close(*proportion(hits), float(s(T)), "S^P")


def test_missed_positive_with_an_empirical_law():
    law = Empirical([1.0, 2.0, 2.0, 6.0])
    s = MissedPositive(0.2, law)
    assert s([0.5, 2.0, 5.9, 6.0]).tolist() == pytest.approx([0.0, 0.15, 0.15, 0.2], abs=1e-15)
    rng = np.random.default_rng(2)
    hits = (sample(law, rng, N) <= 3.0) & (rng.random(N) < 0.2)
    assert_close(*proportion(hits), float(s(3.0)), "S^P empirical")


# ---- S^N and S^{N..N} (§3.2, §3.3) ----------------------------------------------------


@pytest.mark.parametrize("law", LAWS, ids=lambda x: x.name)
@pytest.mark.parametrize("T", TS)
def test_missed_negative(law, T):
    eps = 0.25
    s = MissedNegative(eps, law)
    f = cdf(law, T)
    assert float(s(T)) == pytest.approx((1 - f) / (eps * f + 1 - f), abs=1e-5)
    # the event: given that e_i was not observed in the gap, it did not happen there
    rng = np.random.default_rng(3)
    d = sample(law, rng, N)
    happened = d <= T
    observed = happened & (rng.random(N) >= eps)
    assert_close(*proportion(~happened[~observed]), float(s(T)), "S^N")


def test_missed_negatives():
    negs = (Negative(0.2, Exponential(3.0)), Negative(0.4, Uniform(0.0, 6.0)))
    s = MissedNegatives(negs)
    T = 2.5
    expected = 1.0
    for neg in negs:
        f = cdf(neg.law, T)
        expected *= (1 - f) / (neg.rate * f + 1 - f)
    assert float(s(T)) == pytest.approx(expected, abs=1e-5)
    rng = np.random.default_rng(4)
    happened = [sample(n.law, rng, N) <= T for n in negs]
    observed = [h & (rng.random(N) >= n.rate) for h, n in zip(happened, negs)]
    none_seen = ~observed[0] & ~observed[1]
    none_happened = ~happened[0] & ~happened[1]
    assert_close(*proportion(none_happened[none_seen]), float(s(T)), "S^{N..N}")


# ---- S^{PP} (§3.3), by the Markov model ------------------------------------------------


@pytest.mark.parametrize(
    ("law_i", "law_j"),
    [(Exponential(1.0), Uniform(2.0, 4.0)), (Uniform(0.5, 3.0), Exponential(2.5)),
     (Normal(2.0, 0.8), Normal(1.0, 1.0))],
    ids=["exp-uniform", "uniform-exp", "normal-normal"],
)  # fmt: skip
@pytest.mark.parametrize("T", [1.5, 3.5, 6.0])
def test_missed_pair_follows_the_model(law_i, law_j, T):
    eps_i, eps_j = 0.3, 0.2
    s = MissedPair(eps_i, law_i, eps_j, law_j, window=8.0)
    # the definition by the model: ε_i ε_j ∫_0^T f_i(s) F_j(T − s) ds (e_{i+1} from e_i)
    model = eps_i * eps_j * integral(lambda x: density(law_i, x) * cdf(law_j, T - x), 0.0, T)
    assert float(s(T)) == pytest.approx(model, abs=2e-5)
    # the event: both happen within T (d_i + d_{i+1} ≤ T) and both are missed
    rng = np.random.default_rng(5)
    d_i, d_j = sample(law_i, rng, N), sample(law_j, rng, N)
    hits = (d_i + d_j <= T) & (rng.random(N) < eps_i) & (rng.random(N) < eps_j)
    estimate, err = proportion(hits)
    assert_close(estimate, err, float(s(T)), "S^PP")


def test_the_papers_pair_formula_conflicts_with_its_model():
    # §3's ε² ∫_0^T f_{i+1}(t) F_i(t) dt times e_{i+1} from e_{i−1}: with e_i ~ U(0, 1)
    # and e_{i+1} ~ U(3, 4) after e_i, both are inside T = 4 only when d_i + d_{i+1} ≤ 4.
    law_i, law_j = Uniform(0.0, 1.0), Uniform(3.0, 4.0)
    s = MissedPair(1.0, law_i, 1.0, law_j, window=8.0)
    rng = np.random.default_rng(6)
    hits = sample(law_i, rng, N) + sample(law_j, rng, N) <= 4.0
    estimate, err = proportion(hits)
    assert_close(estimate, err, float(s(4.0)), "model")  # 1/2
    assert abs(float(s.paper(4.0)) - estimate) > 0.4  # the paper's gives 1


# ---- S^{N..NPN..N} (§3.3), by the Markov model -----------------------------------------


@pytest.mark.parametrize("T", [2.0, 4.5, 7.0])
def test_missed_surrounded_follows_the_model(T):
    eps = 0.3
    law = Uniform(0.5, 6.0)
    before = (Negative(0.2, Exponential(2.0)),)  # timed from e_{i-1}, over e_i's delay t
    after = (Negative(0.3, Uniform(0.0, 4.0)), Negative(0.1, Exponential(1.0)))  # from e_i
    s = MissedSurrounded(eps, law, before, after, window=8.0)

    def sn(neg, t):
        f = cdf(neg.law, t)
        return (1 - f) / (neg.rate * f + 1 - f)

    def integrand(t):
        out = density(law, t) * sn(before[0], t)
        for neg in after:
            out = out * sn(neg, T - t)
        return out

    assert float(s(T)) == pytest.approx(eps * integral(integrand, 0.0, T), abs=2e-5)
    # the event: e_i happens at t ≤ T and is missed; each negated component, drawn on
    # the condition that it was not observed in its interval, did not happen there
    rng = np.random.default_rng(7)
    n = N // 5
    t = sample(law, rng, n)
    ok = (t <= T) & (rng.random(n) < eps)
    ok &= ~not_observed_draw(before[0].law, before[0].rate, t, rng, (n,))
    for neg in after:
        ok &= ~not_observed_draw(neg.law, neg.rate, np.maximum(T - t, 0.0), rng, (n,))
    estimate, err = proportion(ok)
    assert_close(estimate, err, float(s(T)), "S^{N..NPN..N}")
    if T == 4.5:  # §3's formula (every negation over all of T) is another number
        assert abs(float(s.paper(T)) - estimate) > 10 * err


# ---- any other run of missing components, and the upper bound G ---------------------------


def test_a_general_segment_and_its_bound():
    # P N P: e1 missed, a negation timed from e1, e2 missed (timed from e1), T left to e3.
    law1, law2 = Exponential(1.5), Uniform(0.0, 3.0)
    neg = Negative(0.3, Exponential(1.0))
    seg = Segment((0.4, 0.5), (Link(law1), Link(law2, (neg,))), (), window=10.0)
    rng = np.random.default_rng(8)
    n = N // 5
    d1, d2 = sample(law1, rng, n), sample(law2, rng, n)
    ok = (d1 + d2 <= 6.0) & (rng.random(n) < 0.4) & (rng.random(n) < 0.5)
    ok &= ~not_observed_draw(neg.law, neg.rate, d2, rng, (n,))
    assert_close(*proportion(ok), float(seg(6.0)), "S^{PNP}")
    grid = np.linspace(0.0, 10.0, 1001)
    values = seg(grid)
    # G(T) = max_{t ≤ T} H(t) bounds H everywhere below T
    assert np.all(seg.bound(grid) >= np.maximum.accumulate(values) - 1e-15)
