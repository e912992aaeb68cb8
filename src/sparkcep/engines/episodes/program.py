"""The episode engines as a program: rules over batches of a partition's events.

State is, per partition (segment) of the stream, the recent events that can still take
part in an occurrence, each rule's rejected instances, and ToFel's partial matches when
ToFel runs (`window.Segment`). The CBS-Tree is rebuilt from the held events when the state
was stored and read back; it is never stored.

Output: one row per min-latest occurrence — the rule (`query`), the key, `t_s` and
`t_e`, the rule's `vertices` and the `ids` of their events (same order), the `predict`ed
symbol and its interval, open at both ends: after `t_e` and before `t_s` + the rule
window, and the rule's `confidence` when the rules carry one.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import itertools
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from sparkcep.budget import Budget
from sparkcep.engines.base import Program
from sparkcep.engines.episodes.matcher import ALGORITHMS, Found, Matcher
from sparkcep.engines.episodes.rules import RuleSet
from sparkcep.engines.episodes.symbols import symbol_values
from sparkcep.engines.episodes.window import Segment
from sparkcep.engines.output import QUERY, OutputColumn, sort_rows
from sparkcep.engines.state import state_class
from sparkcep.errors import DataError
from sparkcep.language import ast
from sparkcep.prep.mask import Signature, Signatures
from sparkcep.prep.table import MASK, frame_ticks
from sparkcep.timeunits import duration_text


@state_class
@dataclass
class EpisodeState:
    segments: dict = field(default_factory=dict)  # segment key -> Segment
    horizon: int | None = None  # advance(to): no event before `to` ticks comes any more


@dataclass(frozen=True)
class SymbolSignature(Signature):
    """A vertex symbol as the data sees it (type = symbol). Its mask value is the
    symbol's id + 1: an event has one type, so exactly one symbol signature holds and
    the shared mask, computed in Spark or pandas, says which symbol the event is."""

    code: int = 0

    @property
    def bit(self) -> int:
        return self.code + 1


class EpisodeProgram(Program):
    """Episode rules that partition the stream alike, compiled for one algorithm.

    >>> import pandas as pd
    >>> from sparkcep.plan import Options, analyze
    >>> options = Options(id_col="id")
    >>> plan = analyze("EPISODE (A a, B b; a -> b) WITHIN 3 PREDICT C WITHIN 5", None, options)
    >>> program = EpisodeProgram([plan], ["ab"], options)
    >>> stream = pd.DataFrame({"type": list("AABB"), "ts": [1, 2, 3, 4], "id": [0, 1, 2, 3]})
    >>> program.run(stream)[["query", "t_s", "t_e", "ids", "after", "before"]]
      query  t_s  t_e     ids  after  before
    0    ab    2    3  [1, 2]      3       7
    """

    engine = "episodes"

    def __init__(self, plans, names, options, algorithm: str = "episodes"):
        # Program.__init__ gives each distinct component a bit of a 62-bit mask; a rule
        # file has thousands of vertices, so here the signatures are the symbols.
        self.plans = tuple(plans)
        self.options = options
        self.budget = Budget.of(options)
        self.names = tuple(names) if any(n is not None for n in names) else None
        self.id_col = options.id_col
        first = self.plans[0]
        self.segment_cols: tuple[str, ...] = first.key
        self.partition_cols: tuple[str, ...] = first.key
        self.tiebreak = first.tiebreak
        self.algorithm = algorithm
        self.rules = RuleSet(self.plans, self.names or [None] * len(self.plans))
        self.specs = tuple(p.spec for p in self.plans)
        self.symbol: ast.Expr | None = first.spec.symbol
        self.signatures = Signatures()
        # Type symbols: the JVM filters and tags events; a SYMBOL is computed here.
        self.keep_unmatched = self.symbol is not None
        if self.symbol is None:
            for code, name in enumerate(self.rules.symbols):
                self.signatures.items.append(SymbolSignature(name, (), code, code))
        self.matcher = Matcher(self.rules, algorithm, self.budget)
        self._output = self._declared_output()

    # ---- what the program needs and gives
    @property
    def reach(self) -> tuple[int | None, int | None]:
        """An occurrence ending at t lies within (t − ω, t]: a time range needs the
        largest predicate window before it, nothing after."""
        return self.rules.max_window, 0

    @property
    def output(self) -> tuple[OutputColumn, ...]:
        return self._output

    @property
    def order(self) -> tuple[str, ...]:
        head = (QUERY,) if self.names is not None else ()
        return (*head, *self.partition_cols, "t_e", "t_s", "ids")

    @property
    def label(self) -> str:
        return "predictions"

    def attributes(self) -> tuple[str, ...]:
        names = [*self.partition_cols, *self.specs[0].attributes()]
        return tuple(dict.fromkeys(names))

    def _declared_output(self) -> tuple[OutputColumn, ...]:
        time_col = self.options.time_col
        cols = [OutputColumn(QUERY, "string")] if self.names is not None else []
        cols += [OutputColumn(k, like=k) for k in self.partition_cols]
        cols += [
            OutputColumn("t_s", like=time_col),
            OutputColumn("t_e", like=time_col),
            OutputColumn("vertices", "string", is_list=True),
            OutputColumn("ids", is_list=True, like=self.id_col or ""),
            OutputColumn("predict", "string"),
            OutputColumn("after", like=time_col),
            OutputColumn("before", like=time_col),
        ]
        if any(r.confidence is not None for r in self.rules.rules):
            cols.append(OutputColumn("confidence", "float"))
        return tuple(cols)

    def describe(self) -> list[tuple[str, str]]:
        rules = self.rules
        symbol = (
            f"SYMBOL {self.specs[0].symbol_text}"
            if self.symbol is not None
            else f"the type column '{self.options.type_col}'"
        )
        lines = [
            ("algorithm", f"{self.algorithm}: {ALGORITHMS[self.algorithm]}"),
            ("rules", f"{len(rules)}, sharing one index per partition; {len(rules.symbols)} "
             f"symbols, from {symbol}"),
        ]  # fmt: skip
        plan = self.plans[0]
        unit = "us" if plan.time_kind == "timestamp" else self.options.time_unit
        for plan, rule in list(zip(self.plans, rules.rules))[:5]:
            spec = plan.spec
            edges = ", ".join(f"{spec.vertices[u]} -> {spec.vertices[v]}" for u, v in spec.edges)
            vertices = ", ".join(f"{s} {v}" for s, v in zip(spec.symbols, spec.vertices))
            text = f"({vertices}{'; ' + edges if edges else ''})"
            q = plan.query
            written = [q.within, q.predict.within if q.predict is not None else None]
            within, ahead = (
                duration_text(w, unit, None if d is None else (d.amount, d.unit))
                for w, d in zip((rule.window, rule.rule_window), written)
            )
            lines.append(
                ("pattern", f"{'RULE ' + rule.name + ': ' if rule.name else ''}EPISODE {text} "
                 f"within {within}, predicts {rule.predict} in (t_e, t_s + {ahead})")
            )  # fmt: skip
        if len(rules) > 5:
            lines.append(("pattern", f"... and {len(rules) - 5} more rules"))
        return lines

    def mask(self, events: pd.DataFrame) -> np.ndarray:
        """Each event's symbol id + 1 (0: none) for type symbols; 0 with SYMBOL (the
        symbols are computed here, and the type column need not exist)."""
        if self.symbol is not None:
            return np.zeros(len(events), dtype=np.int64)
        if MASK in events.columns:
            return events[MASK].to_numpy(dtype=np.int64)
        types = events[self.options.type_col].astype(str)
        return types.map(self.rules.codes).fillna(-1).to_numpy(dtype=np.int64) + 1

    def symbols_of(self, events: pd.DataFrame) -> np.ndarray:
        """Each event's symbol id (-1: in no rule)."""
        if self.symbol is None:
            return self.mask(events) - 1
        values = pd.Series(symbol_values(self.symbol, events), dtype=object)
        return values.map(self.rules.codes).fillna(-1).to_numpy(dtype=np.int64)

    def tied_events(self, events: pd.DataFrame, owned: np.ndarray | None = None) -> int:
        """How many events share their instant with an event of their partition that
        some rule orders after or before them (`RuleSet.ordered_pairs`): those ties keep
        an occurrence from holding both, and a tie-break could change a result. Ties
        between other events change nothing and are not counted."""
        if not len(events) or not self.rules.ordered_pairs:
            return 0
        seen = self.symbols_of(events) >= 0
        if owned is not None:
            seen &= np.asarray(owned, bool)
        cols = [*self.segments_of(events), self.options.time_col]
        cols += [self.tiebreak] if self.tiebreak else []
        frame = events.loc[seen, cols].copy()
        frame["__code"] = self.symbols_of(events)[seen]
        frame["__instant"] = frame.groupby(cols, dropna=False, sort=False).ngroup()
        frame["__row"] = np.arange(len(frame))
        tied = frame[frame.duplicated("__instant", keep=False)][["__instant", "__code", "__row"]]
        pairs = tied.merge(tied, on="__instant")
        n = len(self.rules.symbols)
        ordered = np.array([a * n + b for a, b in self.rules.ordered_pairs], dtype=np.int64)
        hit = np.isin(pairs["__code_x"].to_numpy() * n + pairs["__code_y"].to_numpy(), ordered)
        return int(pairs.loc[hit, "__row_x"].nunique())

    # ---- running
    def new_state(self) -> EpisodeState:
        return EpisodeState()

    def process(self, state: EpisodeState, events: pd.DataFrame, *, owned=None) -> pd.DataFrame:
        if not len(events):
            return self.empty(events)
        with _collector_paused():
            return self._process(state, events, owned)

    def _process(self, state: EpisodeState, events: pd.DataFrame, owned) -> pd.DataFrame:
        ticks = frame_ticks(events, self.options.time_col)
        symbols = self.symbols_of(events)
        times = events[self.options.time_col].to_numpy()
        ids = events[self.id_col].to_numpy()
        ties = events[self.tiebreak].to_numpy() if self.tiebreak else None
        seg_cols = self.segments_of(events)
        found: list[Found] = []
        at: list[int] = []  # each occurrence's partition, as the row of its first event
        for a, b in _segments(events, seg_cols):
            key = tuple(_plain(events[c].iloc[a]) for c in seg_cols)
            if any(v is None for v in key):
                continue  # a null key belongs to no partition
            seg = state.segments.get(key) or Segment()
            self._check_order(ticks[a:b], seg.latest, state.horizon)
            seg.latest = int(ticks[b - 1])
            rel = a + np.flatnonzero(symbols[a:b] >= 0)
            if len(rel):
                starts = _instants(ticks[rel], None if ties is None else ties[rel])
                here = self.matcher.feed(
                    seg, symbols[rel], ticks[rel], starts, times[rel], ids[rel],
                    None if owned is None else np.asarray(owned)[rel],
                )  # fmt: skip
                found += here
                at += [a] * len(here)
            state.segments[key] = seg
        return self._rows(events, found, at)

    def advance(self, state: EpisodeState, to: int) -> pd.DataFrame:
        """No event before `to` will come: partitions whose events are all older than
        the largest window before `to` are forgotten (no rule can report there)."""
        state.horizon = to if state.horizon is None else max(state.horizon, to)
        for key, seg in list(state.segments.items()):
            if not self.matcher.prune(seg, state.horizon):
                del state.segments[key]
        return self.empty(None)

    def flush(self, state: EpisodeState) -> pd.DataFrame:
        return self.empty(None)  # an occurrence is final when its last event arrives

    def is_empty(self, state: EpisodeState) -> bool:
        return not state.segments

    # ----
    @staticmethod
    def _check_order(ticks: np.ndarray, latest: int | None, horizon: int | None) -> None:
        bounds = [x for x in (latest, horizon) if x is not None]
        back = bool(bounds) and ticks[0] < max(bounds)
        if back or (len(ticks) > 1 and (np.diff(ticks) < 0).any()):
            raise DataError("a partition's events must arrive in time order")

    def _rows(self, events: pd.DataFrame, found: list[Found], at: list[int]) -> pd.DataFrame:
        """A row for each rule of each occurrence, built a column at a time from arrays: a
        mined rule set gives dozens of rows per event (one per consequent of a predicate),
        and Python objects made row by row were most of the engine's time. Each row has its own
        `vertices` and `ids` lists (a user may change one)."""
        if not found:
            return self.empty(events)
        columns = self._rule_columns
        per_occurrence = np.fromiter((len(f.rules) for f in found), np.int64, len(found))
        occurrence = np.repeat(np.arange(len(found)), per_occurrence)  # of each row
        rule = np.fromiter(
            itertools.chain.from_iterable(f.rules for f in found), np.int64, len(occurrence)
        )
        out: dict[str, object] = {}
        if self.names is not None:
            out[QUERY] = columns["name"][rule]
        for k in self.partition_cols:
            out[k] = events[k].iloc[np.asarray(at)[occurrence]].reset_index(drop=True)
        time_dtype = events[self.options.time_col].dtype
        starts = pd.Series([f.start_time for f in found], dtype=time_dtype)
        ends = pd.Series([f.end_time for f in found], dtype=time_dtype)
        out["t_s"] = starts = starts.take(occurrence).reset_index(drop=True)
        out["t_e"] = ends = ends.take(occurrence).reset_index(drop=True)
        vertices = columns["vertices"]
        out["vertices"] = [vertices[r].copy() for r in rule.tolist()]  # a row's own list
        ids = [_plain_ids(f.ids) for f in found]  # once per occurrence, copied for each row
        out["ids"] = [ids[o].copy() for o in occurrence.tolist()]
        out["predict"] = columns["predict"][rule]
        out["after"] = ends.copy()
        out["before"] = _plus(starts, columns["rule_window"][rule])
        if any(c.name == "confidence" for c in self.output):
            out["confidence"] = columns["confidence"][rule]
        frame = pd.DataFrame(out)
        return sort_rows(frame[[c.name for c in self.output]], self.order)

    @functools.cached_property
    def _rule_columns(self) -> dict[str, object]:
        """What a row takes from its rule, per rule, for `_rows` to index."""
        rules = self.rules.rules
        confidence = pd.array([r.confidence for r in rules], "Float64").astype("float64")
        return {
            "name": np.array([r.name for r in rules], dtype=object),
            "vertices": [list(spec.vertices) for spec in self.specs],
            "predict": np.array([r.predict for r in rules], dtype=object),
            "rule_window": np.array([r.rule_window for r in rules], dtype=np.int64),
            "confidence": np.asarray(confidence, dtype=np.float64),
        }


@contextlib.contextmanager
def _collector_paused():
    """Python's cyclic garbage collector waits while a batch runs, and is then as it was.
    The rows' lists (each row's ids) are new objects by the ten thousand: they set off
    full collections, each walking every object of the process (the parsed rules too),
    which took longer than the matching (2,522 rules on 1,323 traffic events: 0.17 s
    with the collector waiting, 0.36 to 0.5 s without). A batch leaves a few dozen
    objects in reference cycles at most: they are collected after it."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def _segments(events: pd.DataFrame, cols: list[str]) -> list[tuple[int, int]]:
    """(start, end) of each run of equal segment values (events are sorted by them)."""
    n = len(events)
    if not cols:
        return [(0, n)]
    change = np.zeros(n, dtype=bool)
    change[0] = True
    for c in cols:
        values = events[c].to_numpy()
        if n > 1:
            diff = values[1:] != values[:-1]
            null = pd.isna(values)
            diff &= ~(null[1:] & null[:-1])
            change[1:] |= diff
    starts = [*np.flatnonzero(change).tolist(), n]
    return list(itertools.pairwise(starts))


def _instants(ticks: np.ndarray, ties: np.ndarray | None) -> np.ndarray:
    """Where a new instant starts: the time, or the tie-break value, changes."""
    new = np.ones(len(ticks), dtype=bool)
    if len(ticks) > 1:
        same = ticks[1:] == ticks[:-1]
        if ties is not None:
            same &= pd.Series(ties[1:]).eq(pd.Series(ties[:-1])).to_numpy() | (
                pd.isna(ties[1:]) & pd.isna(ties[:-1])
            )
        new[1:] = ~same
    return new


def _plain(v):
    """A numpy or pandas scalar as a plain Python value (None for a null)."""
    if v is None or (not isinstance(v, str | bytes | list) and pd.isna(v)):
        return None
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, pd.Timestamp):
        return v.isoformat()
    return v


def _plain_ids(ids: np.ndarray) -> list:
    """Ids as plain Python values (`_plain`): integers in one numpy call."""
    if ids.dtype.kind in "iub":
        return ids.tolist()
    return [_plain(i) for i in ids]


def _plus(times: pd.Series, ticks: np.ndarray) -> pd.Series:
    """time + a window in ticks (microseconds for timestamps); past the range of
    timestamps, null."""
    if pd.api.types.is_datetime64_any_dtype(times.dtype):
        try:  # one vectorised add; past the range, value by value
            return (times + pd.to_timedelta(ticks, unit="us")).astype(times.dtype)
        except (OverflowError, ValueError):
            pass
        out = []
        for t, w in zip(times, ticks):
            try:
                out.append(t + pd.Timedelta(microseconds=w))
            except (OverflowError, ValueError):
                out.append(pd.NaT)
        return pd.Series(out, dtype=times.dtype)
    return pd.Series(times.to_numpy(dtype=np.int64) + np.array(ticks, dtype=np.int64))
