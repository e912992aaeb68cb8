"""MATCH_RECOGNIZE as a program over batches of a partition's rows.

Each partition is scanned in order, as the standard defines: at the first row not yet
passed a match is attempted; the preferred match (if any) is output and the scan resumes
where AFTER MATCH SKIP says; with no match (or an empty one) it resumes at the next row.

Between batches the state holds, per partition, the rows from the next attempt on (and
the few rows before it that PREV can read), which rows are already in a match (for WITH
UNMATCHED ROWS), and the partition's match count and position (MATCH_NUMBER, ^). An
attempt is decided only when the rows at hand tell its outcome: every thread died, or the
most preferred alive one is complete, or time passed its window (WITHIN); otherwise it
waits for the next batch (or `advance`, or `flush` at the end of the input).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from sparkcep.engines.base import Program, RowCheck
from sparkcep.engines.match_recognize.compiled import CompiledQuery
from sparkcep.engines.match_recognize.matcher import NO_MATCH, UNDECIDED, RowPatternMatcher
from sparkcep.engines.match_recognize.rows import EMPTY, MATCH, UNMATCHED, RowCollector
from sparkcep.engines.output import QUERY, OutputColumn
from sparkcep.engines.state import state_class
from sparkcep.errors import SparkcepError
from sparkcep.expressions import column_vec
from sparkcep.inputs import ORDER_COL, ROW
from sparkcep.language import ast
from sparkcep.language import match_recognize as mr
from sparkcep.plan.match_recognize import rangeable
from sparkcep.prep.table import frame_ticks
from sparkcep.timeunits import describe_window

CTX = "__ctx"  # a row kept only for PREV, before the next attempt
COV = "__cov"  # the row is in a match already found
OWN = "__own"  # the row may anchor output (Spark's time ranges)
OFF = "__off"  # a partition's index of its first kept row
MN = "__mn"  # a partition's matches so far


@state_class
@dataclass
class MrState:
    buffer: pd.DataFrame | None = None  # rows of attempts not decided yet, per partition
    segments: pd.DataFrame | None = None  # per partition: OFF, MN (when they matter)
    latest: int | None = None  # latest time seen, in ticks
    horizon: int | None = None  # no row will come before this time (advance)


class MrProgram(Program):
    """One MATCH_RECOGNIZE query compiled for the row pattern matcher."""

    engine = "match_recognize"

    def __init__(self, plans, names, options):
        # Rows have no type here: a `type` column is read like any other column.
        super().__init__(plans, names, replace(options, type_col=None))
        if len(self.plans) != 1:
            raise SparkcepError("MATCH_RECOGNIZE queries run one program each")
        self.plan = self.plans[0]
        self.spec = self.plan.spec
        self.query = CompiledQuery(self.spec, self.plan.window)
        self.keep_unmatched = True  # every row of a partition counts, whatever it is
        cols = [OutputColumn(QUERY, "string")] if self.names else []
        for c in self.spec.output:
            if c.source == "measure" and c.like is None:
                cols.append(OutputColumn(c.name, c.kind))
            else:
                cols.append(OutputColumn(c.name, c.kind, like=c.like or c.ref))
        self._output = tuple(cols)

    def tied_events(self, events: pd.DataFrame, owned: np.ndarray | None = None) -> int:
        """None that matter: rows with equal times are ordered by the row id and matched
        in sequence (explain says so), unlike a native pattern's events."""
        return 0

    # ---- what the program needs and gives
    @property
    def reach(self) -> tuple[int | None, int | None]:
        """Time ranges are exact only when every row starts its own attempt (SKIP TO
        NEXT ROW) and an attempt reads nothing beyond its window (docs/match_recognize.md)."""
        w = self.plan.window
        return (w, w) if rangeable(self.spec) and w is not None else (None, None)

    @property
    def output(self) -> tuple[OutputColumn, ...]:
        return self._output

    @property
    def order(self) -> tuple[str, ...]:
        first = [c.name for c in self.spec.output if c.source == "partition"]
        first += [c.name for c in self.spec.output if c.source == "order"]
        rest = [c.name for c in self.spec.output if c.name not in first]
        return (*([QUERY] if self.names else []), *first, *rest)

    @property
    def label(self) -> str:
        return "rows"

    def attributes(self) -> tuple[str, ...]:
        refs = [c.ref for c in self.spec.output if c.source != "measure"]
        return tuple(dict.fromkeys([*self.query.columns, *refs]))

    def row_checks(self) -> tuple[RowCheck, ...]:
        """A row whose PARTITION BY value is null belongs to no partition: rejected."""
        checks = []
        for col in self.spec.partition:
            ref = ast.AttrRef("row", col)
            checks.append(RowCheck(ast.BinOp("=", ref, ref), f"{col} is null (PARTITION BY)"))
        return tuple(checks)

    def describe(self) -> list[tuple[str, str]]:
        return explain_lines(self)

    def explain_lines(self) -> list[tuple[str, str]]:
        return explain_lines(self)

    # ---- running
    def new_state(self) -> MrState:
        return MrState()

    def process(self, state: MrState, events: pd.DataFrame, *, owned=None) -> pd.DataFrame:
        ticks = self.check_time_order(events, state.latest)
        if len(ticks):
            top = int(ticks.max())
            state.latest = top if state.latest is None else max(state.latest, top)
        frame = events.assign(
            **{CTX: False, COV: False, OWN: True if owned is None else np.asarray(owned)}
        )
        if state.buffer is not None and len(state.buffer):
            frame = self.in_order(pd.concat([state.buffer, frame], ignore_index=True))
        else:
            frame = frame.reset_index(drop=True)
        return self._scan(state, frame, final=False)

    def advance(self, state: MrState, to: int) -> pd.DataFrame:
        """No row before `to` will come: attempts whose window closed are decided."""
        state.horizon = to if state.horizon is None else max(state.horizon, to)
        pending = state.buffer
        if pending is None or not len(pending) or self.plan.window is None:
            return self.empty(pending)
        return self._scan(state, pending, final=False)

    def flush(self, state: MrState) -> pd.DataFrame:
        pending = state.buffer
        if pending is None or not len(pending):
            return self.empty(pending)
        out = self._scan(state, pending, final=True)
        state.buffer = None
        return out

    def is_empty(self, state: MrState) -> bool:
        no_rows = state.buffer is None or not len(state.buffer)
        if not self.query.needs_partition_history:
            return no_rows
        return no_rows and (state.segments is None or not len(state.segments))

    # ---- the scan
    def _scan(self, state: MrState, frame: pd.DataFrame, final: bool) -> pd.DataFrame:
        q, seg_cols = self.query, self.segments_of(frame)
        horizon = state.horizon
        if state.latest is not None:
            horizon = max(horizon or state.latest + 1, state.latest + 1)
        bounds = _segment_bounds(frame, seg_cols)
        lengths = [hi - lo for lo, hi in bounds]
        segment = np.repeat(np.arange(len(bounds)), lengths)
        vecs = {c: column_vec(frame[c]) for c in q.columns}
        ticks = frame_ticks(frame, self.options.time_col)
        rows = q.rows(vecs, ticks, segment, final=final, horizon=horizon)
        marks = Marks(frame)
        known = _segment_states(state.segments, seg_cols)
        key_values = [frame[c].tolist() for c in seg_cols]
        collector = RowCollector(q, self.budget.meter())
        for lo, hi in bounds:
            key = tuple(values[lo] for values in key_values)
            offset, mn = known.get(key, (0, 0))
            pos, mn = self._scan_segment(rows.part(lo, hi, offset), marks, mn, collector)
            keep_from = hi if final else max(lo, pos - q.lookback)
            marks.keep(keep_from, pos, hi)
            known[key] = (offset + keep_from - lo, mn)
        state.buffer = marks.kept(frame)
        if self.query.needs_partition_history:
            state.segments = _segments_frame(known, seg_cols, frame)
        result = collector.frame(frame) if len(collector) else self.empty(frame)
        if self.names is not None and len(result):
            result.insert(0, QUERY, self.names[0])
        return result

    def _scan_segment(self, seg, marks: Marks, mn: int, collector: RowCollector):
        """Attempts from the partition's first row not yet passed; returns where the scan
        stopped (an undecided attempt, or the end) and the match count."""
        spec = self.spec
        matcher = RowPatternMatcher(self.query, seg)
        covered, owned = marks.covered, marks.owned
        pos = seg.lo + marks.context(seg.lo, seg.n)
        unmatched = spec.rows == "all" and spec.empty == "unmatched"
        show_empty = spec.rows == "one" or spec.empty != "omit"
        following = seg.next_candidate
        while pos < seg.n:
            if following is not None and following[pos] > pos:  # no match can start here
                stop = min(following[pos], seg.n)
                for p in range(pos, stop) if unmatched else ():
                    if not covered[p] and owned[p]:
                        collector.add(seg, UNMATCHED, p)
                pos = stop
                continue
            result = matcher.attempt(pos, mn + 1)
            if result is UNDECIDED:
                break
            if result is NO_MATCH:
                if unmatched and not covered[pos] and owned[pos]:
                    collector.add(seg, UNMATCHED, pos)
                pos += 1
                continue
            labels, bounds = result
            mn += 1
            if not labels:
                if show_empty and owned[pos]:
                    collector.add(seg, EMPTY, pos, mn=mn)
                pos += 1
                continue
            if owned[pos]:
                collector.add(seg, MATCH, pos, labels, bounds, mn)
            covered[pos : pos + len(labels)] = True
            pos = self._skip(pos, labels, marks.frame)
        return pos, mn

    def _skip(self, start: int, labels: list[int], rows: pd.DataFrame) -> int:
        skip = self.spec.skip
        if skip.mode == "past_last":
            return start + len(labels)
        if skip.mode == "next_row":
            return start + 1
        members = self.query.compiler.sets[skip.var]
        hits = [start + i for i, lab in enumerate(labels) if lab in members]
        where = self._where(rows, start, start + len(labels) - 1)
        if not hits:
            raise SparkcepError(
                f"AFTER MATCH SKIP TO {skip.mode.upper()} {skip.var} failed: the match {where} "
                f"has no row mapped to {skip.var}"
            )
        target = hits[0] if skip.mode == "first" else hits[-1]
        if target == start:
            raise SparkcepError(
                f"AFTER MATCH SKIP TO {skip.mode.upper()} {skip.var} failed: it would resume at "
                f"the first row of the match {where}, and find the same match forever"
            )
        return target

    def _where(self, rows, first: int, last: int) -> str:
        time = self.options.time_col
        text = f"from {time} {rows[time].iloc[first]} to {rows[time].iloc[last]}"
        if self.spec.partition:
            keys = ", ".join(f"{c} = {rows[c].iloc[first]}" for c in self.spec.partition)
            text += f" ({keys})"
        return text


class Marks:
    """Per row of the frame being scanned: context (kept for PREV only), covered (in a
    match found), owned (may anchor output); and which rows the state keeps."""

    def __init__(self, frame: pd.DataFrame):
        self.frame = frame
        self.ctx = frame[CTX].to_numpy(dtype=bool)
        self.covered = frame[COV].to_numpy(dtype=bool).copy()
        self.owned = frame[OWN].to_numpy(dtype=bool)
        self._keep = np.zeros(len(frame), dtype=bool)
        self._ctx = np.zeros(len(frame), dtype=bool)

    def context(self, lo: int, hi: int) -> int:
        """How many rows at the start of lo .. hi - 1 are context (they lead)."""
        return int(self.ctx[lo:hi].sum())

    def keep(self, start: int, pos: int, hi: int):
        self._keep[start:hi] = True
        self._ctx[start:pos] = True

    def kept(self, frame: pd.DataFrame) -> pd.DataFrame | None:
        if not self._keep.any():
            return None
        out = frame[self._keep].copy()
        out[CTX] = self._ctx[self._keep]
        out[COV] = self.covered[self._keep]
        return out.reset_index(drop=True)


def _segment_bounds(frame: pd.DataFrame, cols: list[str]) -> list[tuple[int, int]]:
    n = len(frame)
    if not n:
        return []
    if not cols:
        return [(0, n)]
    change = np.zeros(n, dtype=bool)
    change[0] = True
    for c in cols:
        values = frame[c].to_numpy()
        change[1:] |= values[1:] != values[:-1]
    starts = np.flatnonzero(change)
    ends = np.r_[starts[1:], n]
    return list(zip(starts.tolist(), ends.tolist()))


def _segment_states(segments: pd.DataFrame | None, cols: list[str]) -> dict:
    if segments is None or not len(segments):
        return {}
    keys = segments[cols].itertuples(index=False, name=None) if cols else [()] * len(segments)
    return {
        tuple(k): (int(o), int(m))
        for k, o, m in zip(keys, segments[OFF].tolist(), segments[MN].tolist())
    }


def _segments_frame(known: dict, cols: list[str], like: pd.DataFrame) -> pd.DataFrame | None:
    if not known:
        return None
    keys = list(known)
    data = {c: pd.Series([k[i] for k in keys], dtype=like[c].dtype) for i, c in enumerate(cols)}
    data[OFF] = np.array([known[k][0] for k in keys], dtype=np.int64)
    data[MN] = np.array([known[k][1] for k in keys], dtype=np.int64)
    return pd.DataFrame(data)


SKIP_WORDS = {
    "past_last": "PAST LAST ROW: the next attempt starts after the match's last row",
    "next_row": "TO NEXT ROW: the next attempt starts at the match's second row",
    "first": "TO FIRST {var}: the next attempt starts at the match's first row mapped to {var}",
    "last": "TO LAST {var}: the next attempt starts at the match's last row mapped to {var}",
}
ROWS_WORDS = {
    ("one", "show"): "ONE ROW PER MATCH: partition columns and measures, one row per match",
    ("all", "show"): "ALL ROWS PER MATCH (SHOW EMPTY MATCHES): one row per row of a match",
    ("all", "omit"): "ALL ROWS PER MATCH OMIT EMPTY MATCHES",
    ("all", "unmatched"): "ALL ROWS PER MATCH WITH UNMATCHED ROWS: every input row at least once",
}


def explain_lines(program: MrProgram) -> list[tuple[str, str]]:
    spec, q, plan = program.spec, program.query, program.plan
    lines = [("pattern", mr.pattern_text(spec.pattern))]
    if spec.partition:
        lines.append(("partition", ", ".join(spec.partition) + ": each matched on its own"))
    order = [program.options.time_col, *([plan.tiebreak] if plan.tiebreak else [])]
    id_col = program.options.id_col
    row_id = "the row number in the input" if id_col in (None, ROW) else f"the id column {id_col}"
    if order == [ORDER_COL]:
        lines.append(("order", "no ORDER BY: the input's row order"))
    else:
        lines.append(
            ("order", ", ".join(order) + f", then {row_id}: rows with equal values are in sequence")
        )
    if plan.window is not None:
        unit = "us" if plan.time_kind == "timestamp" else program.options.time_unit
        written = spec.query.within
        within = (written.amount, written.unit) if written is not None else None
        lines.append(
            ("window", describe_window(plan.window, unit, within, "last - first < the window"))
        )
    lines.append(("rows", ROWS_WORDS[(spec.rows, spec.empty)]))
    lines.append(("skip", SKIP_WORDS[spec.skip.mode].format(var=spec.skip.var)))
    for name, members in spec.subsets.items():
        lines.append(("subset", f"{name} = ({', '.join(members)})"))
    for label, var in enumerate(q.variables):
        expr = spec.defines.get(var)
        if expr is None:
            lines.append(("define", f"{var}: any row"))
            continue
        local = [mr.expr_text(c) for c in q.row_local[label]]
        hist = [mr.expr_text(c) for c in ast.conjuncts(expr) if not q.compiler.row_local(c, label)]
        text = f"{var}: " + " AND ".join([*local, *hist])
        if hist:
            text += f"  (read from the match so far: {' AND '.join(hist)})"
        lines.append(("define", text))
    for m in spec.measures:
        lines.append(("measure", f"{m.name} = {mr.expr_text(m.expr)}"))
    if spec.partition:
        layout = f"partitioned by {', '.join(spec.partition)}"
    elif program.reach[0] is not None:
        layout = "no PARTITION BY: Spark splits time into ranges that overlap by the window"
    else:
        layout = "no PARTITION BY: one partition, matched in order by one worker"
    lines.append(("layout", layout))
    return lines
