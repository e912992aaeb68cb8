"""Shared helpers: an engine's rows, compared with the oracle's as plain tuples."""

from __future__ import annotations

import math

import pandas as pd


def normalize(value):
    """A comparable, hashable form of one output value."""
    if value is None:
        return None
    if isinstance(value, list | tuple):
        return tuple(normalize(v) for v in value)
    if hasattr(value, "tolist") and not isinstance(value, str):
        return normalize(value.tolist())
    if isinstance(value, pd.Timestamp):
        return value.value // 1000
    try:
        if pd.isna(value):
            return None
    except (TypeError, ValueError):
        pass
    if isinstance(value, float):
        if math.isfinite(value) and value == int(value):
            return int(value)
        return round(value, 9)
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value
    return value


def rows_of(frame: pd.DataFrame, columns: list[str]) -> list[tuple]:
    return [tuple(normalize(v) for v in row) for row in frame[columns].itertuples(index=False)]


def oracle_rows(matches: list[dict], columns: list[str]) -> list[tuple]:
    return [tuple(normalize(m.get(c)) for c in columns) for m in matches]


def engine_rows(events: pd.DataFrame, queries, **options) -> pd.DataFrame:
    """The rows of `queries`' one program over `events`, in output order: the engine
    alone, compiled and run as the conformance suite does. The runner's checks of the
    input are tested in test_runners; in an oracle test they would cost half of each
    example."""
    from sparkcep.checks import compile_one, one_shot
    from sparkcep.engines.output import sort_rows
    from sparkcep.plan import Options

    options.setdefault("id_col", "id")
    program = compile_one(queries, events, Options(**options))
    return sort_rows(one_shot(program, events), program.order)


def examples(n: int) -> int:
    """Hypothesis examples per test: n, times HYPOTHESIS_SCALE (e.g. 20 to explore)."""
    import os

    return n * int(os.environ.get("HYPOTHESIS_SCALE", "1"))
