"""Learning the model from history (`sparkcep fit`; the paper leaves it "a separate task").

From a probabilistic query, `FitPlan` writes the precise pattern queries whose matches
in a history measure the model (the runners run them, on Spark or pandas):

- `complete`: the positive components only (negations and the probabilistic clauses
  dropped), returning each one's time: the gaps between consecutive positives in these
  complete matches are samples of each f_i;
- `reduced[v]`, for each positive v: the pattern without v. Each instance of the complex
  event with every other positive observed matches it; those whose v was also observed
  extend to a complete match. So the miss rate of v is estimated as
  ε̂_v = 1 − (distinct reduced matches among the complete ones) / (reduced matches);
- `negated[v]`, for each negated v: v as a positive after its previous positive (or
  before the first positive, for a leading negation), returning both times: the gaps
  when the negated event does happen are samples of its law. Its miss rate cannot be
  told from history (a missed negated event looks like an absent one): the model gives
  it the mean of the positives' estimates and says so.

`fit_law` fits the laws to a sample of gaps and measures each by its Kolmogorov–Smirnov
distance D to the sample: by default (`auto`) the parametric law with the smallest D is
chosen when D is below the 5% critical value 1.36/√n, else the empirical CDF.

>>> fp = FitPlan("PATTERN SEQ(A x, !B y, C z) WHERE [tag] AND x.v > 1 WITHIN 10 s "
...              "MISSING RATE 0.1", time_col="ts")
>>> print(fp.complete)
PATTERN SEQ(A x, C z) WHERE [tag] AND (x.v > 1) WITHIN 10 s RETURN x.ts AS __t_x, z.ts AS __t_z
>>> print(fp.reduced["x"])
PATTERN SEQ(C z) WHERE [tag] WITHIN 10 s
>>> print(fp.negated["y"])
PATTERN SEQ(A x, B y) WHERE [tag] AND (x.v > 1) WITHIN 10 s RETURN x.ts AS __t_x, y.ts AS __t_y
>>> law, fit = fit_law(np.array([1.0, 2.0, 2.5, 4.0, 7.0]), "exponential")  # D at 1: F(1) = 0.261
>>> law.text(), fit["n"], round(fit["ks"], 3)
('EXPONENTIAL(3.3)', 5, 0.261)
"""

from __future__ import annotations

import math

import numpy as np

from sparkcep.engines.ayac.laws import (  # noqa: F401  (law_from_json: for runners/fit.py)
    Empirical,
    Exponential,
    Law,
    Normal,
    Uniform,
    law_from_json,
)
from sparkcep.language import ast
from sparkcep.language.parser import parse

FORMAT = "sparkcep-ayac-model/1"
LAW_CHOICES = ("auto", "empirical", "exponential", "normal", "uniform")
EMPIRICAL_POINTS = 512  # an empirical law keeps at most this many quantiles
STRATEGY_CALLS = ("skip_till_any_match", "skip_till_next_match", "strict_contiguity")


def time_column(var: str) -> str:
    return f"__t_{var}"


class FitPlan:
    """The precise queries that measure a probabilistic query's model in a history."""

    def __init__(self, query: str, *, time_col: str = "ts"):
        q = parse(query)
        self.query = q
        self.time_col = time_col
        self.positives = [c for c in q.components if not c.negated]
        self.negatives = [c for c in q.components if c.negated]
        self.complete = self._text(self.positives, returns=self.positives)
        self.reduced = {
            c.var: self._text([p for p in self.positives if p is not c])
            for c in self.positives
            if len(self.positives) > 1
        }
        self.negated: dict[str, str] = {}
        self.anchor: dict[str, str] = {}  # negated var -> the positive its gap runs from/to
        for c in self.negatives:
            before = [p for p in self.positives if q.components.index(p) < q.components.index(c)]
            if before:
                pair = [before[-1], _positive(c)]
            else:
                pair = [_positive(c), self.positives[0]]
            self.anchor[c.var] = (before[-1] if before else self.positives[0]).var
            self.negated[c.var] = self._text(pair, returns=pair)

    def _text(self, comps, returns=()) -> str:
        names = {c.var for c in comps}
        parts = ", ".join(f"{c.event_type or 'ANY'} {c.var}" for c in comps)
        text = f"PATTERN SEQ({parts})"
        conds = []
        for expr in ast.conjuncts(self.query.where):
            if isinstance(expr, ast.Call) and expr.name.lower() in STRATEGY_CALLS:
                continue
            used = {n.var for n in ast.walk(expr) if isinstance(n, ast.AttrRef | ast.VarRef)}
            if used <= names:
                conds.append(ast.to_text(expr))
        if conds:
            text += " WHERE " + " AND ".join(conds)
        within = self.query.within
        if within is not None:
            amount = int(within.amount) if float(within.amount).is_integer() else within.amount
            text += f" WITHIN {amount}" + (f" {within.unit}" if within.unit else "")
        if len(self.query.order_by) == 2:
            text += f" ORDER BY {', '.join(self.query.order_by)}"
        if returns:
            items = [f"{c.var}.{self.time_col} AS {time_column(c.var)}" for c in returns]
            text += " RETURN " + ", ".join(items)
        return text

    def gap_pairs(self) -> list[tuple[str, str, str]]:
        """(variable whose law it is, earlier, later): the gaps of the complete matches."""
        return [(b.var, a.var, b.var) for a, b in zip(self.positives, self.positives[1:])]

    def negated_pair(self, var: str) -> tuple[str, str]:
        """(earlier, later) of a negated variable's query."""
        anchor = self.anchor[var]
        before = self.query.components.index(next(c for c in self.positives if c.var == anchor))
        mine = self.query.components.index(next(c for c in self.negatives if c.var == var))
        return (anchor, var) if before < mine else (var, anchor)


def _positive(comp: ast.Component) -> ast.Component:
    return ast.Component(comp.var, comp.event_type, False, False, span=comp.span)


# ---- laws --------------------------------------------------------------------------------


def ks_distance(sample: np.ndarray, law: Law) -> float:
    """max |F_n(x) − F(x)| over the sample (both sides of each step of F_n)."""
    x = np.sort(np.asarray(sample, dtype=np.float64))
    n = len(x)
    f = law.cdf(x)
    above = np.arange(1, n + 1) / n - f
    below = f - np.arange(0, n) / n
    return float(max(above.max(), below.max(), 0.0))


def candidate_laws(sample: np.ndarray) -> dict[str, Law]:
    x = np.asarray(sample, dtype=np.float64)
    out: dict[str, Law] = {}
    mean = float(x.mean())
    if mean > 0:
        out["exponential"] = Exponential(mean)
    sd = float(x.std(ddof=1)) if len(x) > 1 else 0.0
    if sd > 0:
        out["normal"] = Normal(max(mean, 0.0), sd)
    lo, hi = float(x.min()), float(x.max())
    if hi > lo:
        out["uniform"] = Uniform(max(lo, 0.0), hi)
    return out


def empirical(sample: np.ndarray) -> Empirical:
    x = np.sort(np.asarray(sample, dtype=np.float64))
    if len(x) > EMPIRICAL_POINTS:
        x = np.quantile(x, (np.arange(EMPIRICAL_POINTS) + 0.5) / EMPIRICAL_POINTS)
    return Empirical(x)


def fit_law(sample: np.ndarray, choice: str = "auto") -> tuple[Law, dict]:
    """The law of a sample of gaps (ticks) and the goodness-of-fit figures."""
    x = np.asarray(sample, dtype=np.float64)
    x = x[np.isfinite(x)]
    if not len(x):
        raise ValueError("no gaps to fit")
    laws = candidate_laws(x)
    scores = {name: ks_distance(x, law) for name, law in laws.items()}
    critical = 1.36 / math.sqrt(len(x))
    if choice == "empirical" or (choice == "auto" and not scores):
        chosen, law = "empirical", empirical(x)
    elif choice == "auto":
        best = min(scores, key=scores.get)
        chosen, law = (
            (best, laws[best]) if scores[best] <= critical else ("empirical", empirical(x))
        )
    elif choice in laws:
        chosen, law = choice, laws[choice]
    else:
        raise ValueError(f"cannot fit a {choice} law to these gaps")
    fit = {
        "n": len(x),
        "law": chosen,
        "ks": ks_distance(x, law) if chosen == "empirical" else scores[chosen],
        "critical_5pct": critical,
        "candidates": {name: round(d, 6) for name, d in sorted(scores.items())},
        "mean": float(x.mean()),
    }
    return law, fit


def miss_rate(reduced: int, extended: int) -> tuple[float | None, dict]:
    """ε̂ = 1 − extended / reduced, with its binomial standard error."""
    if reduced <= 0:
        return None, {"reduced_matches": reduced, "extended": extended}
    p = max(0.0, min(1.0, 1.0 - extended / reduced))
    return p, {
        "reduced_matches": int(reduced),
        "extended": int(extended),
        "std_err": math.sqrt(p * (1 - p) / reduced),
    }


def model_json(
    plan: FitPlan,
    *,
    unit: str | None,
    laws: dict[str, tuple[Law, dict]],
    rates: dict[str, tuple[float | None, dict]],
    complete_matches: int,
) -> dict:
    """The model file: each variable's miss rate and delay law, with how they were
    measured."""
    estimated = [r for r, _ in rates.values() if r is not None]
    assumed = float(np.mean(estimated)) if estimated else None
    components: dict[str, dict] = {}
    for c in plan.query.components:
        entry: dict = {}
        if c.negated:
            entry["miss_rate"] = assumed
            entry["miss_rate_from"] = (
                "assumed: the mean of the positives' estimates (a missed negated event "
                "cannot be told from an absent one)"
            )
        elif c.var in rates and rates[c.var][0] is not None:
            entry["miss_rate"], detail = rates[c.var]
            entry["miss_rate_from"] = (
                f"history: 1 - {detail['extended']}/{detail['reduced_matches']} matches "
                f"without {c.var} extend to complete ones"
            )
            entry["std_err"] = detail["std_err"]
        else:
            entry["miss_rate"] = None
            entry["miss_rate_from"] = "not estimable (a single positive, or no matches)"
        if c.var in laws:
            law, fit = laws[c.var]
            entry["delay"] = law.to_json()
            entry["fit"] = fit
        components[c.var] = entry
    return {
        "format": FORMAT,
        "query": plan.query.text,
        "unit": unit,
        "complete_matches": int(complete_matches),
        "components": components,
    }


def fit_summary(fit: dict) -> str:
    """One line for `explain`: the sample size, the law and its KS distance."""
    others = ", ".join(f"{k} {v:.3g}" for k, v in fit.get("candidates", {}).items())
    return f"n = {fit.get('n')}, {fit.get('law')} with KS D = {fit.get('ks', 0):.3g}" + (
        f" (D of the fitted laws: {others})" if others else ""
    )
