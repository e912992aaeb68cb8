"""Delay laws f_i (ayac-probabilistic-cep.md §3): the time from the previous positive
component to component i, as a cumulative distribution F_i(T) = P(delay ≤ T).

Durations are in ticks of the time column. Every law is a distribution on [0, ∞):

- `Exponential(mean)`: F(T) = 1 − exp(−T / mean);
- `Uniform(low, high)`: F(T) = (T − low) / (high − low), clipped to [0, 1];
- `Normal(mean, sd)`: the normal law truncated to [0, ∞) (a delay is never negative);
- `Empirical(values)`: the empirical CDF of observed delays, F(T) = #{v ≤ T} / n.

>>> law = Exponential(120.0)
>>> round(float(law.cdf(120.0)), 6)
0.632121
>>> Uniform(0.0, 10.0).cdf([-1.0, 0.0, 2.5, 10.0, 30.0]).tolist()
[0.0, 0.0, 0.25, 1.0, 1.0]
>>> Empirical([1.0, 2.0, 2.0, 4.0]).cdf([0.0, 2.0, 3.9, 4.0]).tolist()
[0.0, 0.75, 0.75, 1.0]
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

LAWS = ("EXPONENTIAL", "UNIFORM", "NORMAL", "EMPIRICAL")

_erf = np.frompyfunc(math.erf, 1, 1)


def _phi(z: np.ndarray) -> np.ndarray:
    """The standard normal CDF, to the precision of math.erf."""
    z = np.asarray(z, dtype=np.float64)
    return 0.5 * (1.0 + np.asarray(_erf(z / math.sqrt(2.0)), dtype=np.float64))


class Law:
    """A delay law: `cdf(T)` for arrays of T (ticks), a name and its parameters."""

    name: str = ""

    def cdf(self, t) -> np.ndarray:
        raise NotImplementedError

    def mean(self) -> float:
        raise NotImplementedError

    def params(self) -> dict[str, float | list[float]]:
        raise NotImplementedError

    def scaled(self, factor: float) -> Law:
        """The same law with every duration multiplied by `factor` (a change of unit)."""
        raise NotImplementedError

    def text(self, fmt=lambda ticks: f"{ticks:g}") -> str:
        """The law as it would be written in a query, durations formatted by `fmt`."""
        args = ", ".join(fmt(v) for v in self.params().values() if not isinstance(v, list))
        return f"{self.name}({args})"

    def to_json(self) -> dict:
        return {"law": self.name.lower(), **self.params()}


@dataclass(frozen=True)
class Exponential(Law):
    mean_ticks: float
    name = "EXPONENTIAL"

    def cdf(self, t) -> np.ndarray:
        t = np.maximum(np.asarray(t, dtype=np.float64), 0.0)
        return -np.expm1(-t / self.mean_ticks)

    def mean(self) -> float:
        return self.mean_ticks

    def params(self):
        return {"mean": self.mean_ticks}

    def scaled(self, factor: float) -> Exponential:
        return Exponential(self.mean_ticks * factor)


@dataclass(frozen=True)
class Uniform(Law):
    low: float
    high: float
    name = "UNIFORM"

    def cdf(self, t) -> np.ndarray:
        t = np.asarray(t, dtype=np.float64)
        return np.clip((t - self.low) / (self.high - self.low), 0.0, 1.0)

    def mean(self) -> float:
        return (self.low + self.high) / 2

    def params(self):
        return {"low": self.low, "high": self.high}

    def scaled(self, factor: float) -> Uniform:
        return Uniform(self.low * factor, self.high * factor)


@dataclass(frozen=True)
class Normal(Law):
    """A normal law of delays, truncated to [0, ∞) and renormalised."""

    mu: float
    sd: float
    name = "NORMAL"

    def cdf(self, t) -> np.ndarray:
        t = np.maximum(np.asarray(t, dtype=np.float64), 0.0)
        below = float(_phi(np.array(-self.mu / self.sd)))
        return (_phi((t - self.mu) / self.sd) - below) / (1.0 - below)

    def mean(self) -> float:
        a = -self.mu / self.sd
        pdf = math.exp(-a * a / 2) / math.sqrt(2 * math.pi)
        return self.mu + self.sd * pdf / (1.0 - float(_phi(np.array(a))))

    def params(self):
        return {"mean": self.mu, "sd": self.sd}

    def scaled(self, factor: float) -> Normal:
        return Normal(self.mu * factor, self.sd * factor)


@dataclass(frozen=True)
class Empirical(Law):
    """The empirical CDF of observed delays (ties and repeats allowed)."""

    values: tuple[float, ...]
    name = "EMPIRICAL"

    def __init__(self, values):
        object.__setattr__(self, "values", tuple(sorted(float(v) for v in values)))

    def cdf(self, t) -> np.ndarray:
        t = np.asarray(t, dtype=np.float64)
        sorted_values = np.asarray(self.values)
        return np.searchsorted(sorted_values, t, side="right") / len(sorted_values)

    def mean(self) -> float:
        return float(np.mean(self.values))

    def params(self):
        return {"values": list(self.values)}

    def scaled(self, factor: float) -> Empirical:
        return Empirical([v * factor for v in self.values])

    def text(self, fmt=lambda ticks: f"{ticks:g}") -> str:
        shown = [fmt(v) for v in self.values[:4]]
        more = f", ... {len(self.values)} values" if len(self.values) > 4 else ""
        return f"EMPIRICAL({', '.join(shown)}{more})"


def law_from_json(data: dict) -> Law:
    """A law written by `Law.to_json` (the model file of `sparkcep fit`)."""
    name = str(data.get("law", "")).upper()
    if name == "EXPONENTIAL":
        return Exponential(float(data["mean"]))
    if name == "UNIFORM":
        return Uniform(float(data["low"]), float(data["high"]))
    if name == "NORMAL":
        return Normal(float(data["mean"]), float(data["sd"]))
    if name == "EMPIRICAL":
        return Empirical([float(v) for v in data["values"]])
    raise ValueError(f"unknown law '{data.get('law')}' (known: {', '.join(LAWS)})")


def make_law(name: str, args: list[float]) -> Law:
    """A law from its name and arguments in ticks; ValueError says what is wrong."""
    name = name.upper()
    if name == "EXPONENTIAL":
        if len(args) != 1 or not args[0] > 0:
            raise ValueError("EXPONENTIAL takes one mean delay longer than zero, e.g. (2 min)")
        return Exponential(args[0])
    if name == "UNIFORM":
        if len(args) == 1:
            args = [0.0, args[0]]
        if len(args) != 2 or not 0 <= args[0] < args[1]:
            raise ValueError("UNIFORM takes (high) or (low, high) with 0 <= low < high")
        return Uniform(args[0], args[1])
    if name == "NORMAL":
        if len(args) != 2 or not args[1] > 0 or args[0] < 0:
            raise ValueError("NORMAL takes (mean, sd) with mean >= 0 and sd > 0")
        return Normal(args[0], args[1])
    if name == "EMPIRICAL":
        if not args or any(a < 0 for a in args):
            raise ValueError("EMPIRICAL takes one or more observed delays, none negative")
        return Empirical(args)
    raise ValueError(f"unknown law '{name}' (known: {', '.join(LAWS)})")


def fit_summary(fit: dict) -> str:
    """One line for `explain`: the sample size, the law and its KS distance."""
    others = ", ".join(f"{k} {v:.3g}" for k, v in fit.get("candidates", {}).items())
    return f"n = {fit.get('n')}, {fit.get('law')} with KS D = {fit.get('ks', 0):.3g}" + (
        f" (D of the fitted laws: {others})" if others else ""
    )
