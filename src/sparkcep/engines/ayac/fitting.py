"""Learning the model from history (`sparkcep fit`; the paper leaves it "a separate task").

From a probabilistic query, `FitPlan` writes the precise pattern queries whose matches
in a history measure the model (the runners run them, on Spark or pandas):

- `complete`: the positive components only (negations and the probabilistic clauses
  dropped), returning each one's time: the gaps between consecutive positives in these
  complete matches are samples of each f_i;
- `reduced[v]`, for each positive v: the pattern without v, returning the others' times.
  Each instance of the complex event with every other positive observed matches it;
  those whose v was also observed extend to a complete match. For a middle positive the
  slot where v would lie is bracketed by its observed neighbours, so
  ε̂_v = 1 − (reduced matches that extend) / (reduced matches). The first and last
  positives have a neighbour on one side only: their slot is cut by the window (the
  complete match must fit in it too) and by the history's first or last event, so an
  unseen v there is not evidence of a miss. Each reduced match then counts by the
  chance w = F(room) that v, had it been observed, would lie in the room left
  (F: the law of the gap between v and its neighbour), and
  ε̂_v = 1 − (reduced matches that extend) / Σ w — unbiased under the paper's model;
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
PATTERN SEQ(C z) WHERE [tag] WITHIN 10 s RETURN z.ts AS __t_z
>>> fp.slot("x"), fp.slot("z")  # the neighbour whose gap law places each, and the side
(('z', 'first'), ('z', 'last'))
>>> print(fp.negated["y"])
PATTERN SEQ(A x, B y) WHERE [tag] AND (x.v > 1) WITHIN 10 s RETURN x.ts AS __t_x, y.ts AS __t_y
>>> law, fit = fit_law(np.array([1.0, 2.0, 2.5, 4.0, 7.0]), "exponential")  # D at 1: F(1) = 0.261
>>> law.text(), fit["n"], round(fit["ks"], 3)
('EXPONENTIAL(3.3)', 5, 0.261)
"""

from __future__ import annotations

import math

import numpy as np

from sparkcep.language import ast
from sparkcep.language.parser import parse
from sparkcep.plan.laws import (  # noqa: F401  (law_from_json: for runners/jobs/fit.py)
    Empirical,
    Exponential,
    Law,
    Normal,
    Uniform,
    law_from_json,
)

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
            c.var: self._text(others, returns=others)
            for c in self.positives
            if len(self.positives) > 1
            for others in [[p for p in self.positives if p is not c]]
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

    def together(self) -> tuple[str, bool]:
        """The measuring queries as one query file, and whether it holds several (then each
        row's `query` is 'complete', 'negated_<var>' or 'reduced_<var>'): one run measures
        them all, over one reading of the history and the same checked rows."""
        named = {
            "complete": self.complete,
            **{f"negated_{var}": text for var, text in self.negated.items()},
            **{f"reduced_{var}": text for var, text in self.reduced.items()},
        }
        if len(named) == 1:
            return self.complete, False
        return "\n".join(f"QUERY {name}: {text};" for name, text in named.items()), True

    def gap_pairs(self) -> list[tuple[str, str, str]]:
        """(variable whose law it is, earlier, later): the gaps of the complete matches."""
        return [(b.var, a.var, b.var) for a, b in zip(self.positives, self.positives[1:])]

    def others(self, var: str) -> list[str]:
        """The positives of `reduced[var]`, in order."""
        return [p.var for p in self.positives if p.var != var]

    def slot(self, var: str) -> tuple[str, str] | None:
        """For the first or last positive: (the variable whose delay law is the gap
        between it and its one neighbour, "first" or "last"); None for a middle one."""
        names = [p.var for p in self.positives]
        if len(names) < 2 or var not in names[0 :: len(names) - 1]:
            return None
        return (names[1], "first") if var == names[0] else (var, "last")

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


# The columns of a reduced match that the miss-rate estimator reads.
EXTENDED = "__extended"  # its other positives' events form a complete match too
WINDOW_ROOM = "__window_room"  # the room the window leaves for the missing positive
HISTORY_ROOM = "__history_room"  # its distance to the history's first / last event
SHARED = "__shared"  # it shares an event with another, or extends in more than one way

EDGE_SHARE = 0.05  # warn when edges or shared events weigh on more of an estimate


def reduced_terms(rows, law: Law | None) -> dict:
    """The miss-rate estimator's sums over some reduced matches of a positive v (a
    pandas frame with the columns above; the rooms only for a first or last v): how
    many, how many extend, Σ w (w = F(room), the chance that v, observed, would lie in
    the room left; 1 for a middle v), how many have their room cut, by the history's
    edge or by the window (w < 0.99), how many share an event with another match.

    >>> import pandas as pd
    >>> rows = pd.DataFrame({EXTENDED: [True, False, True], SHARED: [False] * 3,
    ...                      WINDOW_ROOM: [10.0, 10.0, 4.0], HISTORY_ROOM: [50.0, 0.0, 50.0]})
    >>> reduced_terms(rows, Uniform(0.0, 8.0))  # w = 1, 0, 0.5
    {'matches': 3, 'extended': 2, 'expected': 1.5, 'edge_rows': 2, 'shared': 0}
    """
    n = len(rows)
    if WINDOW_ROOM in rows:
        room = np.minimum(rows[WINDOW_ROOM].to_numpy(float), rows[HISTORY_ROOM].to_numpy(float))
        room = np.maximum(room, 0.0)
        weight = law.cdf(room) if law is not None else (room > 0).astype(float)
        edge = int((weight < 0.99).sum())
    else:
        weight, edge = np.ones(n), 0
    return {
        "matches": n,
        "extended": int(rows[EXTENDED].sum()),
        "expected": float(np.sum(weight)),
        "edge_rows": edge,
        "shared": int(rows[SHARED].sum()),
    }


def add_terms(parts) -> dict:
    """The sums of `reduced_terms` over several batches."""
    keys = ("matches", "extended", "expected", "edge_rows", "shared")
    return {k: sum(p[k] for p in parts) for k in keys}


def miss_rate(terms: dict, var: str = "v") -> tuple[float | None, dict]:
    """ε̂ = 1 − extended / Σ w from `reduced_terms`, its binomial standard error on the
    effective sample Σ w, and the warnings where the estimate rests on matches at the
    edges (Σ w under 95% of the matches) or on events shared between matches (repeated
    reads; more than 5% of the matches).

    >>> rate, detail = miss_rate({"matches": 200, "extended": 160, "expected": 180.0,
    ...                           "edge_rows": 40, "shared": 0}, "a")
    >>> round(rate, 4), detail["sample"], round(detail["effective_sample"], 1)
    (0.1111, 200, 180.0)
    >>> print(detail["warnings"][0])  # doctest: +ELLIPSIS
    a's miss rate rests on edge rows: 40 of the 200 matches without a have ...
    """
    n, extended, expected = terms["matches"], terms["extended"], terms["expected"]
    detail = {"reduced_matches": int(n), "extended": int(extended), "sample": int(n)}
    if n <= 0 or expected <= 0:
        return None, detail
    p = max(0.0, min(1.0, 1.0 - extended / expected))
    detail.update(
        effective_sample=float(expected),
        std_err=math.sqrt(p * (1 - p) / expected),
        edge_rows=int(terms["edge_rows"]),
        shared=int(terms["shared"]),
    )
    warnings = []
    if expected < (1 - EDGE_SHARE) * n:  # the edges take more than 5% of the sample
        warnings.append(
            f"{var}'s miss rate rests on edge rows: {terms['edge_rows']:,} of the {n:,} "
            f"matches without {var} have the place where {var} would be cut by the window or "
            f"by the history's start or end; they count by the chance that {var} would fall "
            f"there (effective sample {expected:,.1f})"
        )
    if terms["shared"] > EDGE_SHARE * n:
        warnings.append(
            f"{var}'s miss rate rests on repeated reads: {terms['shared']:,} of the {n:,} "
            f"matches without {var} share an event with another or extend in more than one "
            "way, while the model counts one event per component and instance (reduce "
            "repeated reads to one event per sighting; instances closer than the window "
            "overlap too: a key [attr] keeps them apart)"
        )
    detail["warnings"] = warnings
    return p, detail


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
    warnings: list[str] = []
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
            weighed = plan.slot(c.var) is not None
            entry["miss_rate_from"] = (
                f"history: 1 - {detail['extended']}/"
                + (f"{detail['effective_sample']:.1f}" if weighed else str(detail["sample"]))
                + f" of the {detail['sample']} matches without {c.var} extend to complete ones"
                + (
                    " (each counted by the chance it leaves room for " + c.var + ")"
                    if weighed
                    else ""
                )
            )
            entry["std_err"] = detail["std_err"]
            entry["sample"] = detail["sample"]
            entry["effective_sample"] = detail["effective_sample"]
            entry["warnings"] = detail["warnings"]
            warnings += detail["warnings"]
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
        "warnings": warnings,
    }
