"""A MATCH_RECOGNIZE spec compiled once: pattern program, DEFINE split into row-local and
history conditions, MEASURES closures, the features threads carry, and how far physical
navigation reaches (rows kept before an attempt, rows needed after one)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sparkcep.engines.match_recognize.expressions import ExpressionCompiler
from sparkcep.engines.match_recognize.matcher import FeatureLayout
from sparkcep.engines.match_recognize.pattern import DONE, RowPatternProgram
from sparkcep.expressions import Vec
from sparkcep.language import ast
from sparkcep.language import match_recognize as mr


@dataclass
class Segment:
    """One partition's rows at hand, as the matcher reads them: rows `lo` .. `n` - 1 of
    lists that may hold other partitions too."""

    cols: dict[str, list]  # column -> values (nulls None, timestamps in microseconds)
    n: int  # the end of the partition's rows
    ticks: list[int]
    okbits: list[int]  # per row, bit v set when variable v's row-local conditions hold
    base: int  # the partition's index of row i is base + i (rows before lo were dropped)
    final: bool  # no more rows will come (the partition ends at row n - 1)
    horizon: int | None = None  # no row will come with a time before this
    candidates: list[bool] | None = None  # rows whose first two rows allow a match
    next_candidate: list[int] | None = None  # per row, the first candidate at or after it
    lo: int = 0


@dataclass
class Rows:
    """Every partition's rows at hand, prepared at once (numpy across partitions)."""

    cols: dict[str, list]
    ticks: list[int]
    okbits: list[int]
    final: bool
    horizon: int | None
    candidates: list[bool] | None
    next_candidate: list[int] | None

    def part(self, lo: int, hi: int, offset: int) -> Segment:
        """The partition of rows lo .. hi - 1, whose row lo is its `offset`-th row."""
        return Segment(
            self.cols, hi, self.ticks, self.okbits, offset - lo, self.final, self.horizon,
            self.candidates, self.next_candidate, lo,
        )  # fmt: skip


class CompiledQuery:
    def __init__(self, spec, window: int | None):
        self.spec = spec
        self.window = window
        self.variables = list(spec.variables)
        self.program = RowPatternProgram(spec.pattern, self.variables)
        self.compiler = ExpressionCompiler(self.variables, spec.subsets)
        self.row_local: list[list[ast.Expr]] = [[] for _ in self.variables]
        self.history: list[list] = [[] for _ in self.variables]
        history_exprs: list[ast.Expr] = []
        for label, var in enumerate(self.variables):
            for conjunct in ast.conjuncts(spec.defines.get(var)):
                if self.compiler.row_local(conjunct, label):
                    self.row_local[label].append(conjunct)
                else:
                    self.history[label].append(self.compiler.scalar(conjunct))
                    history_exprs.append(conjunct)
        define_aggs = range(len(self.compiler.aggs))
        navs, needs_history = self._features(history_exprs)
        self.layout = FeatureLayout(navs, self.compiler.aggs, define_aggs, needs_history)
        self.measures = [(m.name, self.compiler.scalar(m.expr)) for m in spec.measures]
        everything = [*spec.defines.values(), *(m.expr for m in spec.measures)]
        self.lookback = _reach(everything, "prev")
        self.lookahead = _reach(everything, "next")
        self.uses_match_number = any(
            isinstance(n, mr.MatchNumber) for e in everything for n in mr.walk(e)
        )
        self.uses_start = _has_anchor(spec.pattern, "^")
        self.uses_end = _has_anchor(spec.pattern, "$")
        names: list[str] = []
        for e in everything:
            names += [n.name for n in mr.walk(e) if isinstance(n, mr.Column)]
        self.columns = tuple(dict.fromkeys(names))
        prog = self.program
        if any(prog.op[p] == DONE for p, _ in prog.table(False, False)[0]):
            self._steps = None  # an empty match is possible at every row
        else:
            self._steps = prog.first_steps()[1]

    @property
    def needs_partition_history(self) -> bool:
        """Whether a partition's past matters once its pending rows are done: its match
        count (MATCH_NUMBER), whether it has started (^), rows PREV reads."""
        return self.uses_match_number or self.uses_start or self.lookback > 0

    def _features(self, exprs) -> tuple[dict, bool]:
        """The (kind, members) -> depth navigations DEFINE's history conditions read."""
        navs: dict = {}
        needs_history = False

        def want(kind, members, depth, arg):
            if members is None and not any(isinstance(n, mr.Classifier) for n in mr.walk(arg)):
                return  # every row, positions only: no feature
            navs[(kind, members)] = max(navs.get((kind, members), 0), depth)

        def visit(node):
            nonlocal needs_history
            if isinstance(node, mr.Column | mr.Classifier):
                if node.var is not None:
                    want("last", self.compiler.sets[node.var], 0, node)
                return
            if isinstance(node, mr.Nav):
                base = node.arg if isinstance(node.arg, mr.Nav) else None
                if node.func in ("first", "last"):
                    want(node.func, self.compiler.members_of(node.arg), node.offset, node.arg)
                    return
                inner = base.arg if base is not None else node.arg
                kind, depth = (base.func, base.offset) if base is not None else ("last", 0)
                members = self.compiler.members_of(inner)
                want(kind, members, depth, inner)
                if node.offset and any(isinstance(n, mr.Classifier) for n in mr.walk(inner)):
                    needs_history = True
                return
            if isinstance(node, mr.Agg):
                return
            for child in mr.children(node):
                visit(child)

        for expr in exprs:
            visit(expr)
        return navs, needs_history

    def rows(
        self, columns: dict, ticks, segment: np.ndarray, *, final: bool, horizon: int | None = None
    ) -> Rows:
        """The matcher's view of the rows of one or more partitions (`columns`: Vec or
        sequences; `segment`: each row's partition number, nondecreasing)."""
        vecs = {name: _vec(col) for name, col in columns.items()}
        n = len(ticks)
        okbits = np.zeros(n, dtype=np.int64)
        for label, conjuncts in enumerate(self.row_local):
            ok = np.ones(n, dtype=bool)
            for conjunct in conjuncts:
                ok &= self.compiler.vector(conjunct, label, vecs, segment).truth()
            okbits |= ok.astype(np.int64) << label
        found = self._candidates(okbits, segment, final)
        following = None
        if found is not None:
            nearest = np.full(n + 1, n, dtype=np.int64)
            nearest[np.flatnonzero(found)] = np.flatnonzero(found)
            following = np.minimum.accumulate(nearest[::-1])[::-1].tolist()
            found = found.tolist()
        return Rows(
            {name: vec.to_list() for name, vec in vecs.items()},
            np.asarray(ticks, dtype=np.int64).tolist(), okbits.tolist(), final, horizon, found,
            following,
        )  # fmt: skip

    def segment(
        self, columns: dict, ticks, *, offset: int, final: bool, horizon: int | None = None
    ) -> Segment:
        """One partition's rows (`columns`: Vec or sequences), row 0 its `offset`-th."""
        rows = self.rows(
            columns, ticks, np.zeros(len(ticks), np.int64), final=final, horizon=horizon
        )
        return rows.part(0, len(ticks), offset)

    def _candidates(self, okbits: np.ndarray, segment: np.ndarray, final: bool):
        """Rows where a match may start, by what it needs of its first two rows (a
        necessary condition: DEFINE's other conditions and the window come later)."""
        if self._steps is None:
            return None
        n = len(okbits)
        same = np.r_[segment[1:] == segment[:-1], False] if n else np.zeros(0, bool)
        following = np.where(same, np.r_[okbits[1:], 0] if n else okbits, 0)
        found = np.zeros(n, dtype=bool)
        for label, seconds, may_end in self._steps:
            here = ((okbits >> label) & 1).astype(bool)
            if may_end:
                found |= here
            else:
                wanted = sum(1 << s for s in set(seconds))
                found |= here & ((following & wanted) != 0)
        if n:
            ends = np.flatnonzero(np.r_[segment[1:] != segment[:-1], True])
            to_end = np.repeat(ends, np.diff(np.r_[-1, ends])) - np.arange(n) + 1
            if not final:  # the rows after it are not all at hand: try
                found |= to_end <= self.lookahead + 1
            found |= np.r_[True, segment[1:] != segment[:-1]]  # a partition's first row (^)
        return found


def _vec(col) -> Vec:
    if isinstance(col, Vec):
        return col
    values = list(col)
    null = np.array([v is None for v in values], dtype=bool)
    known = [v for v in values if v is not None]
    fill = known[0] if known else 0
    arr = np.array([fill if v is None else v for v in values])
    if arr.dtype.kind in "US":
        arr = arr.astype(object)
    return Vec(arr, null if null.any() else None)


def _reach(exprs, func: str) -> int:
    return max(
        (n.offset for e in exprs for n in mr.walk(e) if isinstance(n, mr.Nav) and n.func == func),
        default=0,
    )


def _has_anchor(node, kind: str) -> bool:
    if isinstance(node, mr.Anchor):
        return node.kind == kind
    if isinstance(node, mr.Concat | mr.Alt | mr.Permute):
        return any(_has_anchor(i, kind) for i in node.items)
    if isinstance(node, mr.Quant | mr.Exclude):
        return _has_anchor(node.node, kind)
    return False


def compile_query(spec, window: int | None) -> CompiledQuery:
    return CompiledQuery(spec, window)
