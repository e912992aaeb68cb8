"""Why a MATCH_RECOGNIZE query did not match: for each row a match could start at and
did not, how many rows its attempt matched before every partial match died, and why
each died on the next row — the variable it wanted there and the DEFINE condition that
was false on that row (with the values it compared), or the window, or the
partition's end. Ranked by the rows matched, then by the start row (the `why` command's
near misses for row patterns; `misses.py` has them for native patterns).

    >>> import pandas as pd
    >>> rows = pd.DataFrame({"t": range(5), "price": [5, 4, 3, 3, 2]})
    >>> query = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY t MEASURES A.price AS p "
    ...          "PATTERN (A B+ C) DEFINE B AS price < PREV(price), C AS price > PREV(price))")
    >>> misses = row_near_misses(rows, query)
    >>> print(misses.loc[0, "reason"])
    row t=3: B (price < PREV(price)) was false: 3 < 3; C (price > PREV(price)) was false: 3 > 3
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sparkcep.engines.match_recognize.matcher import RowPatternMatcher
from sparkcep.engines.match_recognize.pattern import DONE
from sparkcep.errors import SparkcepError
from sparkcep.expressions import column_vec
from sparkcep.language import ast
from sparkcep.language.ast import bare_text
from sparkcep.language.match_recognize import expr_text
from sparkcep.plan import Options
from sparkcep.prep.table import frame_ticks

COLUMNS = ["depth", "bound", "stopped_at", "reason"]


def row_near_misses(events, query: str, options: Options | None = None, *, key=None,
                    near: int = 5, start=None, end=None) -> pd.DataFrame:  # fmt: skip
    """The `near` failed attempts that matched the most rows, one row each: the
    partition's columns, `depth` (rows matched), `bound` (each row's variable),
    `stopped_at` (the variables wanted next) and `reason`. `start`, `end`: only the
    rows whose ORDER BY value lies in [start, end] are looked at (the rows before
    `start` are not there for PREV, as if the input began at `start`)."""
    checked, program, frame, options = _rows(events, query, options, key, start, end)
    q, parts = program.query, list(program.spec.partition)
    found: list[tuple] = []
    groups = frame.groupby(parts, sort=False) if parts else [((), frame)]
    attempts = 0
    for value, part in groups:
        tracer = _Tracer(q, part.reset_index(drop=True), options)
        if end is not None:  # (the partition may go on past the range)
            tracer.ends = "the rows looked at end"
        for start in range(len(part)):
            attempts += 1
            miss = tracer.trace(start)
            if miss is not None:
                found.append((value if isinstance(value, tuple) else (value,), *miss))
    found.sort(key=lambda m: (-m[1], m[2]))
    rows = [
        {**dict(zip(parts, k, strict=True)), "depth": d, "bound": b, "stopped_at": s, "reason": r}
        for k, d, _, b, s, r in found[:near]
    ]
    out = pd.DataFrame(rows, columns=[*parts, *COLUMNS])
    matched = attempts - len(found)
    out.attrs["summary"] = (
        f"{len(frame):,} rows, {matched:,} attempt{'s' * (matched != 1)} matched (one from "
        f"each row), {len(found):,} did not"
    ) + checked.rejected_note()
    return out


def _rows(events, query: str, options: Options | None, key, start, end):
    """The checked rows of a MATCH_RECOGNIZE query in its order, those of the key and
    the range [start, end] of ORDER BY values: (checked, program, frame, options)."""
    from sparkcep.misses import _tick
    from sparkcep.plan.match_recognize import query_options
    from sparkcep.runners.local import check_events

    options = query_options(query, options or Options())
    checked = check_events(pd.DataFrame(events), query, options)
    program = checked.programs[0]
    frame = program.in_order(checked.valid)
    if start is not None or end is not None:
        order = frame[options.time_col]
        ticks = pd.Series(frame_ticks(frame, options.time_col), index=frame.index)
        if start is not None:
            frame = frame[ticks >= _tick(start, order)]
        if end is not None:
            frame = frame[ticks.loc[frame.index] <= _tick(end, order)]
    parts = list(program.spec.partition)
    if key is not None:
        wanted = key if isinstance(key, tuple) else (key,)
        if len(wanted) != len(parts):
            raise SparkcepError(f"the query's PARTITION BY is {parts or 'none'}: one value each")
        for col, value in zip(parts, wanted, strict=True):
            frame = frame[frame[col].astype(str) == str(value)]
    return checked, program, frame, options


EXPLAINED = ["match", "var", "event", "why", "others"]


def row_matches_explained(events, query: str, options: Options | None = None, *, match,
                          key=None, start=None, end=None) -> pd.DataFrame:  # fmt: skip
    """Why the match that starts at row `match` (its id: the `id_col` value, or its row
    number in the input) took the rows it did: one row per row of the match — `var` its
    variable, `event` the row, `why` the DEFINE that held there (with the values it
    compared), `others` how many other variables' DEFINE held on that row too — and a
    last row on how the match ended and where AFTER MATCH SKIP goes on. When no match
    starts there, one row says why: the row lies inside an earlier match that AFTER
    MATCH SKIP passes, or the attempt from it fails (why, as a near miss says)."""
    checked, program, frame, options = _rows(events, query, options, key, start, end)
    ids = frame[options.id_col] if options.id_col else frame["__row"]
    at = np.flatnonzero(ids.astype(str).to_numpy() == str(match))
    if not len(at):
        raise SparkcepError(f"no row has the id {match} (among the rows looked at)")
    parts = list(program.spec.partition)
    row = frame.iloc[at[0]]
    part = frame
    for col in parts:
        part = part[part[col].astype(str) == str(row[col])]
    part = part.reset_index(drop=True)
    position = int(np.flatnonzero(part["__row"].to_numpy() == row["__row"])[0])
    tracer = _Tracer(program.query, part, options)
    out = tracer.explain_match(position, program)
    found = out["match"].nunique() if len(out) else 0
    out.attrs["summary"] = (
        f"{found} match{'es' * (found != 1)} start{'s' * (found == 1)} at {tracer._row(position)}"
    ) + checked.rejected_note()
    return out


class _Tracer(RowPatternMatcher):
    """The matcher of one partition, whose attempts say where and why they died."""

    def __init__(self, query, part: pd.DataFrame, options: Options):
        vecs = {c: column_vec(part[c]) for c in query.columns}
        ticks = frame_ticks(part, options.time_col)
        segment = np.zeros(len(part), dtype=np.int64)
        rows = query.rows(vecs, ticks, segment, final=True)
        super().__init__(query, rows.part(0, len(part), 0))
        self.part, self.order_col = part, options.time_col
        self.ends = "the partition ends"
        self.local = [
            [(c, query.compiler.vector(c, label, vecs, segment)) for c in conjuncts]
            for label, conjuncts in enumerate(query.row_local)
        ]
        self.sides = {}  # (label, conjunct index) -> (left Vec, right Vec) of a comparison
        for label, conjuncts in enumerate(query.row_local):
            for k, c in enumerate(conjuncts):
                if isinstance(c, ast.BinOp) and c.op not in ("and", "or"):
                    self.sides[(label, k)] = (
                        query.compiler.vector(c.left, label, vecs, segment),
                        query.compiler.vector(c.right, label, vecs, segment),
                    )
        self.history_text = [
            [c for c in ast.conjuncts(query.spec.defines.get(v)) if c not in query.row_local[i]]
            for i, v in enumerate(query.variables)
        ]

    def trace(self, start: int):
        """None when an attempt from row `start` matches; else (rows matched, start,
        bound, stopped_at, reason)."""
        seg, q = self.seg, self.q
        ticks, okbits = seg.ticks, seg.okbits
        t0 = ticks[start]
        feat0 = self.layout.initial() if self.layout else None
        current: list = []
        self._schedule(current, set(), 0, None, feat0, None, start)
        best, j = None, start
        while current:
            if any(t[0] >= 0 and self.program.op[t[0]] == DONE for t in current):
                return None  # a match (the preferred one, or one at least)
            if j >= seg.n:
                return self._miss(start, j, current, f"{self.ends} after {self._row(j - 1)}")
            if q.window is not None and ticks[j] - t0 >= q.window:
                return self._miss(start, j, current, f"{self._row(j)} is past the window")
            if feat0 is None:
                nxt, best = self._step(current, best, j, okbits[j], q.history, start, 0)
            else:
                nxt, best = self._step_with_features(current, best, j, okbits[j], start, 0)
            if best is not None:
                return None
            if not nxt:
                return self._miss(start, j, current, self._why_row(current, j, start))
            current, j = nxt, j + 1
        return None if best is not None else self._miss(start, j, [], "no partial match")

    # ---- a match, explained -------------------------------------------------------------

    def explain_match(self, position: int, program) -> pd.DataFrame:
        """The rows of `row_matches_explained` for the match from row `position`, the
        partition scanned as the engine scans it (AFTER MATCH SKIP) to know whether one
        starts there."""
        pos, mn = 0, 0
        while pos <= position and pos < self.seg.n:
            result = self.attempt(pos, mn + 1)
            labels = result[0] if isinstance(result, tuple) else None
            if pos == position:
                break
            if labels:  # a match: the next attempt where AFTER MATCH SKIP says
                mn += 1
                following = program._skip(pos, labels, self.part)
                if following > position:
                    return self._inside(position, pos, len(labels), mn, program)
                pos = following
            else:
                mn += 1 if labels is not None else 0  # (an empty match is numbered too)
                pos += 1
        if not isinstance(result, tuple) or not result[0]:
            miss = self.trace(position)
            why = miss[4] if miss is not None else "the match there is empty"
            return pd.DataFrame(
                [{"match": None, "var": "", "event": self._row(position),
                  "why": f"no match starts here: {why}", "others": None}],
                columns=EXPLAINED,
            )  # fmt: skip
        labels = result[0]
        rows = []
        for i, label in enumerate(labels):
            j = position + i
            others = sum(
                1 for other in range(len(self.q.variables))
                if other != label and (self.seg.okbits[j] >> other) & 1
            )  # fmt: skip
            rows.append({"match": mn + 1, "var": self.q.variables[label], "event": self._row(j),
                         "why": self._held(label, j), "others": others})  # fmt: skip
        after = program._skip(position, labels, self.part)
        skip = program.spec.skip.mode.replace("_", " ")
        rows.append({"match": mn + 1, "var": "", "event": "",
                     "why": f"{self._ended(position, labels)}; AFTER MATCH SKIP "
                            f"({skip}) goes on at {self._next_at(after)}",
                     "others": None})  # fmt: skip
        out = pd.DataFrame(rows, columns=EXPLAINED)
        return out.astype({"others": "Int64"})

    def _inside(self, position, first, length, mn, program) -> pd.DataFrame:
        last = first + length - 1
        skip = program.spec.skip.mode.replace("_", " ")
        why = (
            f"no match starts here: the row lies inside match {mn} ({self._row(first)} to "
            f"{self._row(last)}), and AFTER MATCH SKIP ({skip}) goes on after it"
        )
        return pd.DataFrame(
            [{"match": None, "var": "", "event": self._row(position), "why": why,
              "others": None}],
            columns=EXPLAINED,
        )  # fmt: skip

    def _held(self, label: int, j: int) -> str:
        """The DEFINE of variable `label` on row j, which held, with its values."""
        said = [
            bare_text(expr_text(c)) + self._values(label, k, j)
            for k, (c, _) in enumerate(self.local[label])
        ]
        said += [
            f"{bare_text(expr_text(c))} (with the rows before)" for c in self.history_text[label]
        ]
        return "; ".join(said) + " held" if said else "no DEFINE: any row"

    def _ended(self, start: int, labels: list[int]) -> str:
        """Why the match took no more rows: the next row, and why each variable the
        pattern could take there (before stopping, by its preference) was refused."""
        end = start + len(labels)
        if end >= self.seg.n:
            return f"{self.ends} after {self._row(end - 1)}"
        if (
            self.q.window is not None
            and self.seg.ticks[end] - self.seg.ticks[start] >= self.q.window
        ):
            return f"{self._row(end)} is past the window"
        wanting, more = self._continuations(start, labels)
        if wanting:
            return "it takes no further row: " + self._why_row(wanting, end, start)
        last = self.q.variables[labels[-1]]
        if more:  # (a reluctant quantifier: stopping is preferred to one more row)
            return f"the pattern prefers to stop at {self._row(end - 1)} to taking more rows"
        return f"the pattern ends with {last} at {self._row(end - 1)}"

    def _continuations(self, start: int, labels: list[int]) -> tuple[list, bool]:
        """The threads that bound exactly the match's rows and, preferred to stopping,
        wanted one more row; and whether less preferred ones wanted more."""
        feat0 = self.layout.initial() if self.layout else None
        current: list = []
        self._schedule(current, set(), 0, None, feat0, None, start)
        for i in range(len(labels)):
            j = start + i
            if feat0 is None:
                current, _ = self._step(
                    current, None, j, self.seg.okbits[j], self.q.history, start, 0
                )
            else:
                current, _ = self._step_with_features(
                    current, None, j, self.seg.okbits[j], start, 0
                )
            current = [t for t in current if _history(t) == labels[: i + 1]]
        done = next(
            (i for i, t in enumerate(current) if t[0] >= 0 and self.program.op[t[0]] == DONE),
            len(current),
        )
        wanting = [t for t in current[:done] if t[0] >= 0]
        return wanting, any(t[0] >= 0 for t in current[done + 1 :])

    def _next_at(self, position: int) -> str:
        return self._row(position) if position < self.seg.n else "the partition's end"

    def _why_row(self, current, j: int, start: int) -> str:
        """Why no partial match in `current` takes row j: each wanted variable's DEFINE."""
        said = []
        for label in dict.fromkeys(self.program.a[t[0]] for t in current if t[0] >= 0):
            var = self.q.variables[label]
            if not (self.seg.okbits[j] >> label) & 1:
                for k, (conjunct, truth) in enumerate(self.local[label]):
                    if not truth.truth()[j]:
                        said.append(
                            f"{var} ({bare_text(expr_text(conjunct))}) was false"
                            + self._values(label, k, j)
                        )
                        break
            else:
                texts = " AND ".join(bare_text(expr_text(c)) for c in self.history_text[label])
                said.append(f"{var} ({texts}) was false with the rows matched so far")
        return f"{self._row(j)}: " + "; ".join(said)

    def _values(self, label: int, k: int, j: int) -> str:
        sides = self.sides.get((label, k))
        if sides is None:
            return ""
        shown = []
        for side in sides:
            null = side.null is not None and side.null[j]
            value = side.values[j]
            shown.append("null" if null else repr(value) if isinstance(value, str) else str(value))
        op = self.q.row_local[label][k].op
        return f": {shown[0]} {op} {shown[1]}"

    def _miss(self, start: int, j: int, current, reason: str):
        labels = []
        node = current[0][1] if current else None
        while node is not None:
            labels.append(node[0])
            node = node[1]
        labels.reverse()
        bound = ", ".join(
            f"{self.q.variables[label]}={self._row(start + i)}" for i, label in enumerate(labels)
        )
        wanted = {self.q.variables[self.program.a[t[0]]] for t in current
                  if t[0] >= 0 and self.program.op[t[0]] != DONE}  # fmt: skip
        return len(labels), start, bound, ", ".join(sorted(wanted)), reason

    def _row(self, i: int) -> str:
        return f"row {self.order_col}={self.part[self.order_col].iloc[i]}"


def _history(thread) -> list[int]:
    """The labels a thread bound, first to last."""
    labels, node = [], thread[1]
    while node is not None:
        labels.append(node[0])
        node = node[1]
    return labels[::-1]
