"""Possible-worlds oracle for pattern queries over interval times, written from the
paper's definitions (imprecise-timestamps.md §2.3, §3 conditions (1)-(2)) only.

Every event takes one point of its interval, with its probability (uniform unless a pmf
is given, each value divided by the pmf's sum); each combination is a possible world, of probability the product. In each
world the events are ordered by their points and the pattern is matched:

- skip-till-any: every tuple of distinct events, one per component, of the components'
  types, whose points strictly increase (two events at the same point are never in
  sequence), with t_l - t_1 < W and every condition of WHERE true;
- skip-till-next: such a tuple where, moreover, for each j >= 2 no event lies strictly
  between t_{j-1} and t_j that could take component j after e_1 .. e_{j-1} (its type,
  and every condition over v_1 .. v_j that mentions v_j, true with it as v_j).

Matches are grouped by signature (the id per variable); each signature gets the
tightest range [least t_1, greatest t_l] over the worlds of positive probability that
give it, and its confidence, the sum of their probabilities (exact fractions).

Only the parser (through tests/oracle.py's query reading and SQL evaluation) is used
from the package. Slow by design: a few events, intervals of a few points.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

from oracle import _Ctx, _eval, _holds, _Query

from sparkcep.language import ast


def _bound(expr: ast.Expr, event: dict):
    return _eval(expr, _Ctx({"": event}, {}, {}))


def _points(event, lo, hi, pmf_col):
    n = hi - lo + 1
    if pmf_col is None:
        probs = [Fraction(1, n)] * n
    else:  # a pmf as given sums to 1 up to its rounding: its exact share per point
        given = [Fraction(p) for p in event[pmf_col]]
        probs = [p / sum(given) for p in given]
    return [(lo + i, p) for i, p in enumerate(probs) if p > 0]


def possible_world_matches(
    query_text: str,
    events: list[dict],
    *,
    time_col: str = "ts",
    type_col: str = "type",
    id_col: str = "id",
    upper_col: str | None = None,
    pmf_col: str | None = None,
) -> list[dict]:
    """One dict per signature: the id per variable, the key values, range_start,
    range_end and confidence (a Fraction)."""
    q = _Query(query_text, time_col)
    query = q.query
    comps = q.positives
    if len(comps) != len(q.components):
        raise NotImplementedError("negation is not defined over interval times")
    variables = [c.var for c in comps]
    window = q.window
    nxt = q.strategy == "SKIP_TILL_NEXT_MATCH"

    def can_be(e, c) -> bool:
        return c.event_type is None or e[type_col] == c.event_type

    relevant = [e for e in events if any(can_be(e, c) for c in comps)]
    parts: dict[tuple, list[dict]] = {}
    for e in relevant:
        key = tuple(e.get(k) for k in q.key)
        if any(v is None for v in key):
            continue
        parts.setdefault(key, []).append(e)
    found: dict[tuple, dict] = {}
    for key, part in parts.items():
        options = []
        for e in part:
            if query.time_lower is not None:
                lo, hi = _bound(query.time_lower, e), _bound(query.time_upper, e)
            else:
                lo, hi = e[time_col], e[upper_col]
            options.append(_points(e, lo, hi, pmf_col))
        for world in itertools.product(*options):
            prob = Fraction(1)
            for _, p in world:
                prob *= p
            point = {id(e): t for e, (t, _) in zip(part, world)}
            for match in _matches(q, comps, variables, part, point, window, nxt, can_be):
                sig = tuple(e[id_col] for e in match)
                first, last = point[id(match[0])], point[id(match[-1])]
                row = found.setdefault(
                    sig,
                    {"key": key, "range_start": first, "range_end": last, "confidence": 0},
                )
                row["range_start"] = min(row["range_start"], first)
                row["range_end"] = max(row["range_end"], last)
                row["confidence"] += prob
    out = []
    for sig, row in found.items():
        item = dict(zip(variables, sig))
        item.update(zip(q.key, row["key"]))
        item.update(
            range_start=row["range_start"],
            range_end=row["range_end"],
            confidence=row["confidence"],
        )
        out.append(item)
    return out


def _matches(q, comps, variables, part, point, window, nxt, can_be):
    """The matches of one possible world (each a tuple of events, one per component)."""
    candidates = [[e for e in part if can_be(e, c)] for c in comps]
    for combo in itertools.product(*candidates):
        if len({id(e) for e in combo}) < len(combo):
            continue
        ts = [point[id(e)] for e in combo]
        if any(b <= a for a, b in itertools.pairwise(ts)):
            continue
        if ts[-1] - ts[0] >= window:
            continue
        lists = {v: [e] for v, e in zip(variables, combo)}
        if not all(_holds(c, lists) for c in q.positive_conjuncts):
            continue
        if nxt and not _first_each_time(q, comps, variables, part, point, combo, can_be):
            continue
        yield combo


def _first_each_time(q, comps, variables, part, point, combo, can_be) -> bool:
    """Condition (2) of §3: for j >= 2, no event that could take component j lies
    strictly between e_{j-1} and e_j."""
    for j in range(1, len(comps)):
        before, after = point[id(combo[j - 1])], point[id(combo[j])]
        known = set(variables[: j + 1])
        conds = [c for c in q.positive_conjuncts
                 if c.mentioned <= known and variables[j] in c.mentioned]  # fmt: skip
        for x in part:
            if not before < point[id(x)] < after or not can_be(x, comps[j]):
                continue
            lists = {v: [e] for v, e in zip(variables[:j], combo[:j])}
            lists[variables[j]] = [x]
            if all(_holds(c, lists) for c in conds):
                return False
    return True
