"""Brute-force oracle for probabilistic detection (docs/ayac.md; ayac-probabilistic-cep.md).

It enumerates every *path*: every subset of the positive components that contains the
last one, observed, with every assignment of events to them in order within the window,
the others inferred missing; it keeps the paths whose conditions hold (a conjunct holds
when TRUE, or NULL while it mentions a variable inferred missing) and that no negated
event kills (one lying strictly between the observed events around the negation's place,
or after the window's start when no observed event is before it, with its conditions
holding); each path's probability is the product of its segments' scores, each computed
here by direct numerical integration of its definition (§3, with the Markov model):

    Π ε(missing positives) × ∫_{Σ links ≤ T} Π_links f(ℓ) Π_neg S^N(ℓ) · Π_res S^N(T − Σ) dℓ

It is slow and meant for a dozen events. Only `sparkcep.language` is used from the
package (the parser and the AST), and `oracle.key_attributes` from these tests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations, pairwise, product

import numpy as np
from oracle import key_attributes

from sparkcep.language import ast
from sparkcep.language.parser import parse

# ---- delay laws, from their definitions -----------------------------------------------------


def _phi(z: float) -> float:
    return 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))


_ERF = np.frompyfunc(math.erf, 1, 1)  # math.erf on each element, without a Python call each


def _phi_array(z: np.ndarray) -> np.ndarray:
    # (np.asarray: on a 0-d array np.frompyfunc gives a Python float, with no .astype)
    return 0.5 * (1.0 + np.asarray(_ERF(z / math.sqrt(2.0)), dtype=float))


@dataclass(frozen=True)
class Law:
    name: str
    args: tuple[float, ...]

    def cdf(self, t):
        t = np.asarray(t, dtype=float)
        if self.name == "EXPONENTIAL":
            (m,) = self.args
            return np.where(t > 0, 1.0 - np.exp(-np.maximum(t, 0) / m), 0.0)
        if self.name == "UNIFORM":
            lo, hi = self.args if len(self.args) == 2 else (0.0, self.args[0])
            return np.minimum(np.maximum((t - lo) / (hi - lo), 0.0), 1.0)
        if self.name == "NORMAL":
            mu, sd = self.args
            below = _phi(-mu / sd)
            phi = _phi_array((np.maximum(t, 0.0) - mu) / sd)
            return np.where(t >= 0, (phi - below) / (1.0 - below), 0.0)
        if self.name == "EMPIRICAL":
            values = np.sort(self.args)  # the share of the values <= t
            return np.searchsorted(values, t, side="right") / len(values)
        raise ValueError(self.name)


def s_n(rate: float, law: Law, t):
    """P(the negated event did not happen | it was not observed within t) (§3.2)."""
    f = law.cdf(t)
    den = rate * f + 1.0 - f
    return np.where(den > 0, (1.0 - f) / np.where(den > 0, den, 1.0), 1.0)


def _n_product(negs, t):
    out = np.ones(np.shape(t))
    for rate, law in negs:
        out = out * s_n(rate, law, t)
    return out


def segment_score(rates, links, residual, T: float) -> float:
    """Π ε × the integral over the links' lengths; links: [(law, negatives)], residual:
    the negatives over what is left of T. Nested midpoint rules with exact cell masses
    (each inner integral on its own grid over [0, what is left])."""
    factor = math.prod(rates) if rates else 1.0
    if len(links) == 1 and not links[0][1] and not residual:
        return factor * float(links[0][0].cdf(T))
    cells = {0: 1, 1: 20_000, 2: 1_200, 3: 120}[len(links)]
    return factor * float(_integral(links, residual, np.array(float(T)), cells))


def _integral(links, residual, T: np.ndarray, cells: int) -> np.ndarray:
    """∫_0^T f(ℓ) Π S^N(ℓ) · (the rest over T − ℓ) dℓ for the first link, recursively."""
    if not links:
        return _n_product(residual, T)
    law, negs = links[0]
    grid = T[..., None] * np.linspace(0.0, 1.0, cells + 1)
    mids = (grid[..., 1:] + grid[..., :-1]) / 2
    weights = np.diff(law.cdf(grid), axis=-1) * _n_product(negs, mids)
    rest = _integral(links[1:], residual, T[..., None] - mids, cells)
    return np.sum(weights * rest, axis=-1)


# ---- expressions (SQL three-valued logic, coalesce) -------------------------------------------


def _eval(expr: ast.Expr, env: dict[str, dict | None]):
    if isinstance(expr, ast.Literal):
        return expr.value
    if isinstance(expr, ast.AttrRef):
        event = env[expr.var]
        value = None if event is None else event.get(expr.attr)
        return None if isinstance(value, float) and math.isnan(value) else value
    if isinstance(expr, ast.Call):
        values = [_eval(a, env) for a in expr.args]
        if expr.name == "coalesce":
            return next((v for v in values if v is not None), None)
        if expr.name == "abs":
            return None if values[0] is None else abs(values[0])
        raise ValueError(expr.name)
    if isinstance(expr, ast.Not):
        v = _eval(expr.operand, env)
        return None if v is None else not v
    if isinstance(expr, ast.Negate):
        v = _eval(expr.operand, env)
        return None if v is None else -v
    if isinstance(expr, ast.InList):
        v = _eval(expr.operand, env)
        if v is None:
            return None
        hit = v in [x.value for x in expr.values]
        return not hit if expr.negated else hit
    if isinstance(expr, ast.BinOp):
        a, b = _eval(expr.left, env), _eval(expr.right, env)
        if expr.op == "and":
            if a is False or b is False:
                return False
            return True if a is True and b is True else None
        if expr.op == "or":
            if a is True or b is True:
                return True
            return False if a is False and b is False else None
        if a is None or b is None:
            return None
        ops = {
            "=": lambda: a == b, "!=": lambda: a != b, "<": lambda: a < b,
            "<=": lambda: a <= b, ">": lambda: a > b, ">=": lambda: a >= b,
            "+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
            "/": lambda: None if b == 0 else a / b,
            "%": lambda: None if b == 0 else math.fmod(a, b),
        }  # fmt: skip
        return ops[expr.op]()
    raise ValueError(f"unsupported {expr!r}")


def _vars(expr: ast.Expr) -> set[str]:
    return {n.var for n in ast.walk(expr) if isinstance(n, ast.AttrRef | ast.VarRef)}


def _holds(expr, env, missing: set[str]) -> bool:
    value = _eval(expr, env)
    return value is True or (value is None and bool(_vars(expr) & missing))


# ---- the query ---------------------------------------------------------------------------------


@dataclass
class _Query:
    comps: list[ast.Component]
    positives: list[ast.Component]
    gap: dict[str, int]  # negated var -> number of positives before it
    window: int
    rates: dict[str, float]
    laws: dict[str, Law]
    threshold: float
    local: dict[str, list[ast.Expr]]
    cross: list[ast.Expr]  # conjuncts over several positives
    negation: dict[str, list[ast.Expr]]  # non-local conjuncts mentioning a negated var
    key: list[str]
    order_by: str | None


def _query(text: str) -> _Query:
    q = parse(text)
    comps = list(q.components)
    positives = [c for c in comps if not c.negated]
    gap, seen = {}, 0
    for c in comps:
        if c.negated:
            gap[c.var] = seen
        else:
            seen += 1
    window = int(q.within.amount)
    rates = {c.var: 0.0 for c in comps}
    for item in q.missing_rates:
        for var in [item.var] if item.var else list(rates):
            rates[var] = float(item.rate)
    laws = {c.var: Law("UNIFORM", (0.0, float(window))) for c in comps}
    for d in q.delays:
        laws[d.var] = Law(d.law.upper(), tuple(float(a.amount) for a in d.args))
    worst = max(rates[c.var] for c in positives)
    threshold = q.threshold if q.threshold is not None else worst * worst
    key = key_attributes(q)
    conjs = []
    for expr in ast.conjuncts(q.where):
        if isinstance(expr, ast.Equivalence):
            first = positives[0].var
            conjs += [
                ast.BinOp("=", ast.AttrRef(first, expr.attr), ast.AttrRef(c.var, expr.attr))
                for c in comps
                if c.var != first
            ]
        else:
            conjs.append(expr)
    local = {c.var: [] for c in comps}
    cross, negation = [], {c.var: [] for c in comps if c.negated}
    for expr in conjs:
        names = _vars(expr)
        if (
            isinstance(expr, ast.BinOp) and expr.op == "="
            and isinstance(expr.left, ast.AttrRef) and isinstance(expr.right, ast.AttrRef)
            and expr.left.attr == expr.right.attr and expr.left.attr in key
            and expr.left.var != expr.right.var
        ):  # fmt: skip
            continue  # the partition guarantees it
        negs = [v for v in names if v in gap]
        if len(names) == 1:
            local[next(iter(names))].append(expr)
        elif negs:
            negation[negs[0]].append(expr)
        else:
            cross.append(expr)
    order_by = q.order_by[1] if len(q.order_by) == 2 else None
    return _Query(
        comps, positives, gap, window, rates, laws, threshold, local, cross, negation, key,
        order_by,
    )  # fmt: skip


def _matches(comp: ast.Component, event: dict, q: _Query) -> bool:
    if comp.event_type is not None and event["type"] != comp.event_type:
        return False
    return all(_eval(e, {comp.var: event}) is True for e in q.local[comp.var])


_SEGMENTS: dict[tuple, float] = {}


def _segment(q: _Query, a: int, b: int, T: float) -> float:
    """The score of the run of missing components between observed positives a and b
    (a = −1: from the window's start), memoised."""
    key = (id(q), a, b, T)
    if key not in _SEGMENTS:
        _SEGMENTS[key] = _integrate(q, a, b, T)
    return _SEGMENTS[key]


def _integrate(q: _Query, a: int, b: int, T: float) -> float:
    pos = q.positives
    missing = range(a + 1, b)

    def negs(g):
        return [(q.rates[v], q.laws[v]) for v, gg in q.gap.items() if gg == g]

    rates = [q.rates[pos[p].var] for p in missing]
    if a < 0:
        links = [(q.laws[pos[p + 1].var], negs(p + 1)) for p in range(b)]
        residual = negs(0)
    else:
        links = [(q.laws[pos[p].var], negs(p)) for p in missing]
        residual = negs(b)
    return segment_score(rates, links, residual, T)


def oracle_paths(events: list[dict], text: str, id_col: str = "id") -> list[dict]:
    """Every path with a positive probability: {var: id or None, 'probability': p}."""
    q = _query(text)
    parts: dict[tuple, list[dict]] = {}
    for e in events:
        key = tuple(e.get(k) for k in q.key)
        if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in key):
            continue
        parts.setdefault(key, []).append(e)
    out = []
    for part in parts.values():
        out += _paths_in(part, q, id_col)
    _SEGMENTS.clear()
    return out


def _precedes(e, f, q: _Query) -> bool:
    if q.order_by is None:
        return e["ts"] < f["ts"]
    return (e["ts"], e[q.order_by]) < (f["ts"], f[q.order_by])


def _paths_in(events: list[dict], q: _Query, id_col: str) -> list[dict]:
    k = len(q.positives)
    cands = [[e for e in events if _matches(c, e, q)] for c in q.positives]
    out = []
    for size in range(1, k + 1):
        for observed in combinations(range(k), size):
            if observed[-1] != k - 1:
                continue
            for chosen in product(*[cands[p] for p in observed]):
                path = _path(events, q, observed, chosen)
                if path is not None:
                    out.append(path)
    return [
        {**{v: (None if e is None else e[id_col]) for v, e in p["env"].items()},
         "probability": p["probability"]}
        for p in out
    ]  # fmt: skip


def _path(events, q: _Query, observed, chosen):
    if any(not _precedes(x, y, q) for x, y in pairwise(chosen)):
        return None
    t_last, t_first = chosen[-1]["ts"], chosen[0]["ts"]
    if not t_last - t_first < q.window:
        return None
    env = {c.var: None for c in q.positives}
    for p, e in zip(observed, chosen):
        env[q.positives[p].var] = e
    missing = {v for v, e in env.items() if e is None}
    if not all(_holds(expr, env, missing) for expr in q.cross):
        return None
    by_pos = dict(zip(observed, chosen))
    for comp in q.comps:
        if comp.negated and _killed(events, q, comp, by_pos, env, missing, t_last):
            return None
    score = 1.0
    anchors = [-1, *observed]
    for a, b in pairwise(anchors):
        if a < 0:
            T = by_pos[b]["ts"] - (t_last - q.window)
        else:
            T = by_pos[b]["ts"] - by_pos[a]["ts"]
        score *= _segment(q, a, b, float(T))
    if not score > 0:
        return None
    return {"env": env, "probability": score}


def _killed(events, q: _Query, comp, by_pos, env, missing, t_last) -> bool:
    g = q.gap[comp.var]
    left = max((p for p in by_pos if p <= g - 1), default=None)
    right = min(p for p in by_pos if p >= g)
    for e in events:
        if not _matches(comp, e, q):
            continue
        if left is None:
            inside = e["ts"] > t_last - q.window and _precedes(e, by_pos[right], q)
        else:
            inside = _precedes(by_pos[left], e, q) and _precedes(e, by_pos[right], q)
        if inside and all(
            _holds(expr, {**env, comp.var: e}, missing) for expr in q.negation[comp.var]
        ):
            return True
    return False
