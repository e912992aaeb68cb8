"""Episode rules from history, by minimal occurrences, and their precision and recall
on held-out events (docs/episodes.md, "Rules from data"). Pure pandas and numpy: the
Spark job in `sparkcep.runners.jobs.mining` runs these functions on each partition and adds
up what they count.

Predicates are serial episodes v1 -> v2 -> ... -> vk of distinct symbols (Mannila et
al.'s MINEPI, reference [11] of the paper). Their minimal occurrences within the
predicate window ω are found level by level: those of γ·x come from those of γ, each
extended by the first x at a later instant, keeping for each end the latest start (the
others enclose it). These intervals are exactly what the engine reports for the rule
γ ⇒ y (one min-latest occurrence per minimal interval), so

- support(γ) = the number of minimal occurrences of γ,
- hits(γ ⇒ y) = how many of them see y in their predicted interval (t_e, t_s + ω_ρ),
- confidence(γ ⇒ y) = hits / support: the precision the rule had on the history.

Support never grows when γ is extended (each minimal occurrence of γ·x extends its own
one of γ), so candidates come from frequent predicates only.

Parallel and DAG predicates (`mine(..., shapes="parallel" | "dag")`, `--shapes`) are
partial orders of distinct symbols (`dag_mining`): their minimal occurrences come from
`dag_minimal_occurrences`, their candidates from `dag_mining.next_level` (Apriori), and
a rule file writes them with the edges of their transitive reduction.

A stream generated from the rule A -> B ⇒ C:

>>> import pandas as pd
>>> events = pd.DataFrame({"symbol": list("ABCxABCxABxx"), "tick": range(12)})
>>> counts = count_rules(partition(events, "symbol", "tick"), [("A", "B")], window=3,
...                      rule_window=4, consequents=None)
>>> counts.loc[counts["consequent"] == "C", ["predicate", "support", "hits"]].values.tolist()
[[('A', 'B'), 3, 2]]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sparkcep.engines.episodes.dag_mining import (
    Episode,
    is_serial_key,
    minimal_intervals,
    next_level,
)
from sparkcep.engines.episodes.symbols import symbol_values
from sparkcep.prep.table import frame_ticks

SEP = "\x1f"  # joins a predicate's symbols in one string column (Spark rows)


def event_symbols(frame: pd.DataFrame, symbol, type_col: str) -> np.ndarray:
    """Each event's symbol: SYMBOL's value, or the type (object array, None: none)."""
    if symbol is not None:
        return symbol_values(symbol, frame)
    return frame[type_col].astype(object).where(frame[type_col].notna(), None).to_numpy()


def consequent_events(frame: pd.DataFrame, plans, *, type_col: str, time_col: str) -> pd.DataFrame:
    """The events whose symbol some rule predicts: symbol, tick and the key columns."""
    spec = plans[0].spec
    key = list(plans[0].key)
    wanted = {p.spec.predict for p in plans}
    symbols = event_symbols(frame, spec.symbol, type_col)
    ticks = frame_ticks(frame, time_col)
    keep = np.array([s in wanted for s in symbols], dtype=bool)
    out = frame.loc[keep, key].reset_index(drop=True)
    out["symbol"] = symbols[keep]
    out["tick"] = ticks[keep]
    return out


@dataclass
class Partition:
    """One partition's events in processing order: symbol, time in ticks, instant."""

    symbols: np.ndarray  # object: str
    ticks: np.ndarray  # int64
    instants: np.ndarray  # int64, nondecreasing
    own_from: int | None = None  # count occurrences ending at ticks >= own_from ...
    own_to: int | None = None  # ... and < own_to (a Spark time range); None: all

    def __post_init__(self):
        self.index: dict[str, np.ndarray] = {}
        if len(self.symbols):
            order = np.argsort(self.symbols.astype(str), kind="stable")
            names, starts = np.unique(self.symbols[order].astype(str), return_index=True)
            for name, a, b in zip(names, starts, [*starts[1:], len(order)]):
                self.index[str(name)] = np.sort(order[a:b])


def partition(
    frame: pd.DataFrame, symbol_col: str, tick_col: str, tie_col: str | None = None, **own
) -> Partition:
    """A frame of events (any order) as a Partition; rows without a symbol are left out."""
    frame = frame[frame[symbol_col].notna()]
    by = [tick_col, tie_col] if tie_col else [tick_col]
    frame = frame.sort_values(by, kind="stable")
    ticks = frame[tick_col].to_numpy(dtype=np.int64)
    new = np.ones(len(frame), dtype=bool)
    if len(frame) > 1:
        same = ticks[1:] == ticks[:-1]
        if tie_col:
            ties = frame[tie_col].to_numpy()
            same &= ties[1:] == ties[:-1]
        new[1:] = ~same
    instants = np.cumsum(new) - 1
    return Partition(frame[symbol_col].to_numpy(dtype=object), ticks, instants, **own)


@dataclass
class Occurrences:
    """Minimal occurrences of one predicate, ordered by start (and end)."""

    start: np.ndarray  # instant
    end: np.ndarray  # instant
    start_tick: np.ndarray
    end_tick: np.ndarray


def minimal_occurrences(part: Partition, predicate: Sequence[str], window: int) -> Occurrences:
    """The minimal occurrences of the serial episode `predicate` within `window`.

    >>> p = partition(pd.DataFrame({"s": list("ABAB"), "t": [0, 1, 2, 9]}), "s", "t")
    >>> mo = minimal_occurrences(p, ["A", "B"], window=5)
    >>> mo.start_tick.tolist(), mo.end_tick.tolist()
    ([0], [1])
    """
    first = part.index.get(predicate[0], np.zeros(0, dtype=np.int64))
    # A single symbol: one occurrence per instant that has it.
    inst = np.unique(part.instants[first])
    ticks = part.ticks[np.searchsorted(part.instants, inst)]
    occ = Occurrences(inst, inst, ticks, ticks)
    for x in predicate[1:]:
        rows = part.index.get(x, np.zeros(0, dtype=np.int64))
        x_inst = np.unique(part.instants[rows])
        nxt = np.searchsorted(x_inst, occ.end, side="right")  # the first x at a later instant
        ok = nxt < len(x_inst)
        end = x_inst[nxt[ok]]
        end_tick = part.ticks[np.searchsorted(part.instants, end)]
        start, start_tick = occ.start[ok], occ.start_tick[ok]
        inside = end_tick - start_tick < window
        start, start_tick, end, end_tick = (a[inside] for a in (start, start_tick, end, end_tick))
        # For each end keep the latest start: the others enclose that one.
        keep = np.ones(len(end), dtype=bool)
        if len(end) > 1:
            keep[:-1] = end[1:] != end[:-1]
        occ = Occurrences(start[keep], end[keep], start_tick[keep], end_tick[keep])
    return occ


def dag_minimal_occurrences(part: Partition, episode: Episode, window: int) -> Occurrences:
    """The minimal occurrences of any episode within `window` (`dag_mining`): events of
    ordered symbols at earlier instants, of unordered ones at any, the same one too.

    >>> p = partition(pd.DataFrame({"s": list("BABAB"), "t": range(5)}), "s", "t")
    >>> mo = dag_minimal_occurrences(p, Episode.of("AB", []), window=5)  # A and B, any order
    >>> list(zip(mo.start_tick.tolist(), mo.end_tick.tolist()))
    [(0, 1), (1, 2), (2, 3), (3, 4)]
    """
    names = episode.order()
    empty = np.zeros(0, dtype=np.int64)
    instants = [np.unique(part.instants[part.index.get(s, empty)]) for s in names]
    if any(not len(i) for i in instants):
        return Occurrences(empty, empty, empty, empty)
    succ: list[list[int]] = [[] for _ in names]
    for u, v in episode.edges():
        succ[u].append(v)
    start, end = minimal_intervals(instants, succ, [v for v in range(len(names)) if not succ[v]])
    start_tick = part.ticks[np.searchsorted(part.instants, start)]
    end_tick = part.ticks[np.searchsorted(part.instants, end)]
    inside = end_tick - start_tick < window
    return Occurrences(start[inside], end[inside], start_tick[inside], end_tick[inside])


def count_rules(
    part: Partition,
    predicates: Iterable[Sequence[str]],
    *,
    window: int,
    rule_window: int,
    consequents: Sequence[str] | None,
) -> pd.DataFrame:
    """For each predicate: its support and, for each consequent symbol (all when None),
    how many of its minimal occurrences see it in their predicted interval. Rows:
    predicate (tuple), support, consequent (None on the support-only row), hits."""
    names = list(part.index) if consequents is None else [c for c in consequents if c in part.index]
    symbol_ticks = {y: part.ticks[part.index[y]] for y in names}
    rows: list[tuple] = []
    for predicate in predicates:
        if is_serial_key(predicate):
            occ = minimal_occurrences(part, predicate, window)
        else:
            occ = dag_minimal_occurrences(part, Episode.from_key(predicate), window)
        owned = np.ones(len(occ.end), dtype=bool)
        if part.own_from is not None:
            owned &= occ.end_tick >= part.own_from
        if part.own_to is not None:
            owned &= occ.end_tick < part.own_to
        t_s, t_e = occ.start_tick[owned], occ.end_tick[owned]
        rows.append((tuple(predicate), len(t_e), None, 0))
        if not len(t_e):
            continue
        for y, ticks in symbol_ticks.items():
            i = np.searchsorted(ticks, t_e, side="right")  # the first y after t_e ...
            ok = i < len(ticks)
            hits = int(np.count_nonzero(ticks[i[ok]] < t_s[ok] + rule_window))  # ... before
            if hits:
                rows.append((tuple(predicate), len(t_e), y, hits))
    return pd.DataFrame(rows, columns=["predicate", "support", "consequent", "hits"])


@dataclass(frozen=True)
class MinedRule:
    predicate: tuple[str, ...]
    consequent: str
    support: int
    hits: int

    @property
    def confidence(self) -> float:
        return self.hits / self.support


def select(
    counts: pd.DataFrame, *, min_support: int, min_confidence: float
) -> tuple[list[tuple[str, ...]], list[MinedRule]]:
    """(frequent predicates, rules) from counts summed over partitions."""
    support = counts[counts["consequent"].isna()].groupby("predicate")["support"].sum()
    frequent = sorted(p for p, n in support.items() if n >= min_support)
    hits = counts[counts["consequent"].notna()].groupby(["predicate", "consequent"])["hits"].sum()
    rules = []
    for (predicate, consequent), n in hits.items():
        total = int(support.get(predicate, 0))
        if total >= min_support and n / total >= min_confidence:
            rules.append(MinedRule(tuple(predicate), str(consequent), total, int(n)))
    return frequent, rules


def extend(frequent: Sequence[tuple[str, ...]], symbols: Sequence[str], limit: int) -> list:
    """Candidates of the next level: each frequent predicate followed by a frequent
    symbol it does not hold; at most `limit` (the first ones, in order)."""
    out = []
    for predicate in frequent:
        for x in symbols:
            if x not in predicate:
                out.append((*predicate, x))
                if len(out) >= limit:
                    return out
    return out


@dataclass
class Mined:
    """What `mine` found: the rules, each frequent predicate's support, and the levels
    whose candidates the cap cut (level, candidates counted)."""

    rules: list[MinedRule]
    support: dict[tuple[str, ...], int]
    capped: list[tuple[int, int]]


def mine(
    count: Callable[[list | None], pd.DataFrame],
    *,
    min_support: int,
    min_confidence: float,
    max_length: int,
    max_candidates: int,
    shapes: str = "serial",
) -> Mined:
    """Level-wise mining: `count(candidates)` gives the counts of `count_rules` summed
    over partitions (None: every single symbol). `shapes`: serial (`extend`), parallel
    or dag (`dag_mining.next_level`).

    >>> events = pd.DataFrame({"symbol": list("ABCxBACxABCx"), "tick": range(12)})
    >>> part = partition(events, "symbol", "tick")
    >>> def count(candidates):
    ...     candidates = candidates or [(x,) for x in part.index]
    ...     return count_rules(part, candidates, window=3, rule_window=4, consequents=None)
    >>> found = mine(count, min_support=3, min_confidence=1.0, max_length=2,
    ...              max_candidates=100, shapes="parallel")
    >>> [(r.predicate, r.consequent, r.support) for r in found.rules if len(r.predicate) > 2]
    [(('A', 'B', '\\x1e'), 'C', 3), (('A', 'B', '\\x1e'), 'x', 3)]
    >>> found.support[("A", "B", "\\x1e")], found.capped  # A and B, either order first
    (3, [])
    """
    rules: list[MinedRule] = []
    support: dict[tuple[str, ...], int] = {}
    capped: list[tuple[int, int]] = []
    candidates = None  # level 1: every symbol
    symbols: list[str] = []
    for level in range(1, max_length + 1):
        counts = count(candidates)
        frequent, found = select(counts, min_support=min_support, min_confidence=min_confidence)
        rules += found
        totals = counts[counts["consequent"].isna()].groupby("predicate")["support"].sum()
        support.update({p: int(totals[p]) for p in frequent})
        if level == 1:
            symbols = [p[0] for p in frequent]
        if not frequent or level == max_length:
            break
        if shapes == "serial":
            candidates = extend(frequent, symbols, max_candidates + 1)
            cut = len(candidates) > max_candidates
            candidates = candidates[:max_candidates]
        else:
            following = next_level(frequent, symbols, max_candidates, shapes)
            candidates, cut = following.candidates, following.capped
        if cut:
            capped.append((level + 1, len(candidates)))
        if not candidates:
            break
    return Mined(rules, support, capped)


def rules_text(
    rules: Sequence[MinedRule],
    *,
    window: str,
    rule_window: str,
    symbol: str | None = None,
    key: Sequence[str] = (),
    prefix: str = "m",
) -> str:
    """A rule file for the mined rules (best confidence first)."""
    ordered = sorted(rules, key=lambda r: (-r.confidence, -r.support, r.predicate, r.consequent))
    lines = [f"-- {len(ordered)} rules mined by minimal occurrences (docs/episodes.md)"]
    for i, rule in enumerate(ordered, start=1):
        names, pairs = rule.predicate, [(j, j + 1) for j in range(len(rule.predicate) - 1)]
        if not is_serial_key(rule.predicate):
            names, pairs = rule.predicate[:-1], Episode.from_key(rule.predicate).edges()
        vertices = ", ".join(f"{_quote(s)} v{j}" for j, s in enumerate(names, start=1))
        edges = ", ".join(f"v{u + 1} -> v{v + 1}" for u, v in pairs)
        body = f"EPISODE ({vertices}{'; ' + edges if edges else ''})"
        if key:
            body += " WHERE " + " AND ".join(f"[{k}]" for k in key)
        if symbol:
            body += f" SYMBOL {symbol}"
        lines.append(
            f"-- support {rule.support}, {rule.hits} predicted intervals held the consequent"
        )
        lines.append(
            f"RULE {prefix}{i}: {body} WITHIN {window} PREDICT {_quote(rule.consequent)}"
            f" WITHIN {rule_window} CONFIDENCE {rule.confidence:.4f};"
        )
    return "\n".join(lines) + "\n"


def _quote(symbol: str) -> str:
    return "'" + symbol.replace("\\", "\\\\").replace("'", "\\'") + "'"


def chance_of_holding(ticks: np.ndarray, lengths: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """For each length L: the probability that the open interval (s, s + L), its start
    s uniform in [lo, hi − L] (the interval inside the span [lo, hi], which holds the
    sorted times `ticks`), holds one of them. It holds when s lies in (t − L, t) for
    some t, so the chance is the length of the union of those intervals within
    [lo, hi − L], over hi − lo − L — exact, no sampling. The union's length is
    Σ min(L, gap before t) (L for the first t), less what lies before lo
    (max(0, L − (t_first − lo))) and after hi − L (max(0, t_last − (hi − L))). An
    interval as long as the span or longer sits at lo.

    >>> t = np.array([10, 12, 30])
    >>> # L = 4: s in (6, 10) ∪ (8, 12) ∪ (26, 30), 10 of the 36 ticks of [0, 36]
    >>> chance_of_holding(t, np.array([4, 100]), 0, 40).round(4).tolist()
    [0.2778, 1.0]
    """
    t = np.asarray(ticks, dtype=np.float64)
    length = np.asarray(lengths, dtype=np.float64)
    if not len(t):
        return np.zeros(len(length))
    gaps = np.sort(np.diff(t))
    below = np.concatenate([[0.0], np.cumsum(gaps)])  # sums of the k smallest gaps
    k = np.searchsorted(gaps, length)  # the gaps shorter than L count whole
    union = below[k] + (len(gaps) - k + 1) * length
    union -= np.maximum(0.0, length - (t[0] - lo)) + np.maximum(0.0, t[-1] - (hi - length))
    room = hi - lo - length
    covers = ((t > lo) & (t < lo + length[:, None])).any(axis=1) if (room <= 0).any() else 0
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(room > 0, union / np.where(room > 0, room, 1.0), covers).astype(float)


def interval_hits(
    predictions: pd.DataFrame,
    consequents: pd.DataFrame,
    key: Sequence[str],
    span: tuple[float, float] | None = None,
) -> pd.DataFrame:
    """Precision and recall of each rule's predicted intervals, and their chance.

    `predictions`: query, predict, after, before (ticks) and the key columns;
    `consequents`: symbol, tick and the key columns of the held-out events. A prediction
    holds when its symbol occurs in (after, before) in its partition; an event of a
    rule's consequent is recalled when it lies in one of that rule's intervals.
    `chance`: the share of the rule's predictions expected to hold were each interval
    placed at a uniformly random time in `span` (the held-out events' first and last
    times; `chance_of_holding`, with the consequent's times in the prediction's
    partition); `lift` = precision / chance.
    """
    rows = []
    groups = (
        dict(iter(consequents.groupby([*key, "symbol"], sort=False))) if len(consequents) else {}
    )
    for rule, preds in predictions.groupby("query", sort=True):
        symbol = preds["predict"].iloc[0]
        n = held = recalled = total = 0
        expected = 0.0  # the held predictions expected by chance
        for keys, part in preds.groupby(list(key), sort=False) if key else [((), preds)]:
            keys = keys if isinstance(keys, tuple) else (keys,)
            events = groups.get((*keys, symbol))
            ticks = np.sort(events["tick"].to_numpy()) if events is not None else np.zeros(0, int)
            after, before = part["after"].to_numpy(), part["before"].to_numpy()
            i = np.searchsorted(ticks, after, side="right")
            ok = i < len(ticks)
            held += int(np.count_nonzero(ticks[i[ok]] < before[ok]))
            if span is not None:
                expected += float(chance_of_holding(ticks, before - after, *span).sum())
            n += len(part)
            covered = np.zeros(len(ticks), dtype=bool)
            lo, hi = np.searchsorted(ticks, after, "right"), np.searchsorted(ticks, before, "left")
            for a, b in zip(lo, hi):
                covered[a:b] = True
            recalled += int(covered.sum())
        total = int((consequents["symbol"] == symbol).sum()) if len(consequents) else 0
        rows.append((rule, symbol, n, held, recalled, total, expected))
    names = ["rule", "predict", "predictions", "held", "recalled", "consequents", "expected"]
    out = pd.DataFrame(rows, columns=names)
    out["precision"] = out["held"] / out["predictions"].where(out["predictions"] > 0)
    out["recall"] = out["recalled"] / out["consequents"].where(out["consequents"] > 0)
    out["chance"] = out["expected"] / out["predictions"].where(out["predictions"] > 0)
    out["lift"] = out["precision"] / out["chance"].where(out["chance"] > 0)
    return out
