"""The conformance suite every engine passes (as River's `check_estimator`).

`check_engine(engine)` runs every check over the engine's example queries on a random
stream; `yield_checks(engine)` yields the checks one by one, each a function of a
compiled program and an events frame, so a test suite can run them on streams and
queries of its own (tests/test_engines.py does, with hypothesis). A new engine gets
the whole suite by registering and listing a few `examples`.

The checks, for the events of each partition of the stream fed in time order:

- batches cut anywhere between two instants, with the state stored and read back
  (`engines.state`) between them, give the one-shot output;
- `advance(to)` up to the next batch, then that batch, gives the same output;
- after time passes every window, `advance` leaves the state empty (`is_empty`);
- events that go back in time raise the same `DataError`;
- empty input and a single event give rows of the declared columns;
- the output has exactly the declared columns, in order, and the same input gives the
  same rows in the same order;
- `count` is the number of rows `run` gives (with events owned by a time range too).

And, for the engine itself (`check_memory_budget`): its `crowded_example` over a crowded
stream stops with the budget's error under a small memory budget and finishes under the
default one; an engine that holds no matches keeps a state that does not grow with the
stream instead.

>>> from sparkcep.engines.registry import choose
>>> from sparkcep.plan import analyze
>>> check_engine(choose(analyze("PATTERN SEQ(A a, B b) WITHIN 3")))
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable, Iterator
from dataclasses import replace

import numpy as np
import pandas as pd

from sparkcep.budget import TooManyMatches
from sparkcep.engines.base import Engine, Program
from sparkcep.engines.registry import compile_jobs
from sparkcep.engines.state import decode_state, encode_state
from sparkcep.errors import DataError
from sparkcep.plan import Options, plan_queries
from sparkcep.prep.table import frame_ticks

Check = Callable[[Program, pd.DataFrame], None]
COLUMNS = {"id": "int", "type": "string", "ts": "int", "v": "float", "k": "int", "seq": "int"}


def random_events(n: int = 40, seed: int = 0, types: str = "ABCD") -> pd.DataFrame:
    """A small stream with equal times, two keys and a few null values."""
    rng = np.random.default_rng(seed)
    v = rng.integers(0, 5, n).astype(float)
    v[rng.random(n) < 0.1] = np.nan
    return pd.DataFrame(
        {
            "id": np.arange(n),
            "type": rng.choice(list(types), n),
            "ts": np.sort(rng.integers(0, n // 2, n)),
            "v": v,
            "k": rng.integers(0, 2, n),
            "seq": rng.integers(0, 4, n),
        }
    )


def compile_one(query: str, events: pd.DataFrame, options: Options | None = None) -> Program:
    """The one program of `query` over a frame with an `id` column."""
    options = options or Options(id_col="id")
    schema = {c: COLUMNS.get(c, "unknown") for c in events.columns}
    plans, names = plan_queries(query, schema, options)
    (program,) = compile_jobs(plans, names, replace(options, id_col="id"))
    return program


def yield_checks(engine: Engine) -> Iterator[Check]:
    del engine  # every engine gets every check; the argument keeps River's shape
    yield check_batches_and_stored_state
    yield check_advance_then_events
    yield check_empty_after_the_window
    yield check_out_of_order_is_a_data_error
    yield check_empty_input_and_one_event
    yield check_declared_columns_and_determinism
    yield check_count_is_the_number_of_rows


def check_engine(engine: Engine, events: pd.DataFrame | None = None, seeds: int = 3) -> None:
    """Every check, over each of the engine's example queries and a few streams."""
    for query in engine.examples:
        for seed in range(seeds):
            stream = events if events is not None else random_events(seed=seed)
            program = compile_one(query, stream)
            for check in yield_checks(engine):
                check(program, stream)
    check_memory_budget(engine)


SMALL_BUDGET = 16 * 2**10  # bytes: far below what the crowded example holds


def crowded_events(n: int = 200) -> pd.DataFrame:
    """Types A, B, C, D in turn, one per tick, one key: within a window of 1000 every A
    comes before every later B: 1,275 (A, B) pairs of 50 A's and 50 B's."""
    return pd.DataFrame(
        {
            "id": np.arange(n),
            "type": np.array(list("ABCD"))[np.arange(n) % 4],
            "ts": np.arange(n),
            "v": (np.arange(n) % 5).astype(float),
            "k": np.zeros(n, dtype=np.int64),
            "seq": np.zeros(n, dtype=np.int64),
        }
    )


def check_memory_budget(engine: Engine) -> None:
    """The engine's crowded example stops with the budget's error under a small memory
    budget and finishes under the default one; an engine that holds no matches keeps a
    state that does not grow with the stream."""
    assert engine.crowded_example, f"{engine.name} names no crowded_example"
    events = crowded_events()
    if not engine.holds_matches:
        check_state_stays_bounded(engine, events)
        return
    options = Options(id_col="id", algorithm=engine.name)
    small = compile_one(
        engine.crowded_example, events, replace(options, memory_budget=SMALL_BUDGET)
    )
    try:
        small.run(small.in_order(events))
    except TooManyMatches:
        pass
    else:
        raise AssertionError(
            f"{engine.name}: the crowded example ran within {SMALL_BUDGET:,} bytes"
        )
    program = compile_one(engine.crowded_example, events, options)
    assert len(program.run(program.in_order(events))), "the default budget gave no rows"


def check_state_stays_bounded(engine: Engine, events: pd.DataFrame) -> None:
    """Fed the crowded stream in batches, the stored state of the second half of the
    stream is no larger than that of the first half (it holds no match)."""
    options = Options(id_col="id", algorithm=engine.name)
    program = compile_one(engine.crowded_example, events, options)
    state, sizes = program.new_state(), []
    for lo in range(0, len(events), 10):
        program.process(state, program.in_order(events.iloc[lo : lo + 10]))
        sizes.append(len(encode_state(state)))
    half = len(sizes) // 2
    assert max(sizes[half:]) <= max(sizes[:half]) * 1.1, f"{engine.name}: the state grows"


# ---- helpers ---------------------------------------------------------------------------


def one_shot(program: Program, events: pd.DataFrame) -> pd.DataFrame:
    """`run` over the events in processing order: what every way of feeding them must
    give. The checks of one program and frame share it (each would run it again)."""
    seen = _ONE_SHOTS.get(program)
    if seen is None or seen[0] is not events:
        seen = (events, program.run(program.in_order(events)))
        _ONE_SHOTS[program] = seen
    return seen[1].copy()


_ONE_SHOTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # program: (events, rows)


def partitions(program: Program, events: pd.DataFrame) -> list[pd.DataFrame]:
    """The events of each partition of the stream, in time order (as a stream feeds them)."""
    cols = list(program.partition_cols)
    ordered = events.sort_values([program.options.time_col, "id"], kind="stable")
    if not cols:
        return [ordered]
    return [part for _, part in ordered.groupby(cols, sort=True, dropna=True)]


def instants(part: pd.DataFrame, program: Program) -> np.ndarray:
    """Positions where a new instant starts: batches may be cut there."""
    ticks = frame_ticks(part, program.options.time_col)
    return np.flatnonzero(np.r_[True, ticks[1:] != ticks[:-1]])


def batches(part: pd.DataFrame, program: Program, cuts) -> list[pd.DataFrame]:
    starts = instants(part, program)
    bounds = sorted({0, len(part), *[int(starts[c % len(starts)]) for c in cuts if len(starts)]})
    return [program.in_order(part.iloc[lo:hi]) for lo, hi in itertools.pairwise(bounds)]


def same_rows(program: Program, got: pd.DataFrame, expected: pd.DataFrame, what: str) -> None:
    from sparkcep.engines.output import sort_rows

    cols = list(expected.columns)
    a = sort_rows(got[cols], program.order) if len(got) else got
    b = sort_rows(expected, program.order) if len(expected) else expected
    assert _rows(a) == _rows(b), f"{what}: {program.plans[0].text}\n{a}\n!=\n{b}"


def _rows(frame: pd.DataFrame) -> list[tuple]:
    return [tuple(_plain(v) for v in row) for row in frame.itertuples(index=False)]


def _plain(v):
    if isinstance(v, list | tuple | np.ndarray):
        return tuple(_plain(x) for x in v)
    if v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA or v is pd.NaT:
        return None
    if isinstance(v, float | np.floating):
        return round(float(v), 9)
    if isinstance(v, np.integer):
        return int(v)
    return v


def fed(program: Program, events: pd.DataFrame, cuts, store_at=(), advance=False) -> pd.DataFrame:
    """The output of feeding each partition's events in batches cut at `cuts`."""
    outs = []
    for part in partitions(program, events):
        state = program.new_state()
        parts = batches(part, program, cuts)
        for i, batch in enumerate(parts):
            if advance and len(batch):
                to = int(frame_ticks(batch, program.options.time_col).min())
                outs.append(program.advance(state, to))
            outs.append(program.process(state, batch))
            if i in store_at:
                state = decode_state(encode_state(state))
        outs.append(program.flush(state))
    return program.concat(outs, events)


# ---- the checks ----------------------------------------------------------------------------


def check_batches_and_stored_state(program: Program, events: pd.DataFrame) -> None:
    expected = one_shot(program, events)
    for cuts, store_at in (([3, 7], {0}), ([1, 2, 5, 11], {0, 1, 2}), ([4], set())):
        got = fed(program, events, cuts, store_at)
        same_rows(program, got, expected, f"batches cut at {cuts}, stored after {store_at}")


def check_advance_then_events(program: Program, events: pd.DataFrame) -> None:
    expected = one_shot(program, events)
    got = fed(program, events, [2, 5, 9], advance=True)
    same_rows(program, got, expected, "advance(to) before each batch")


def check_empty_after_the_window(program: Program, events: pd.DataFrame) -> None:
    before, after = program.reach
    if before is None or not len(events):
        return
    for part in partitions(program, events):
        state = program.new_state()
        program.process(state, program.in_order(part))
        end = int(frame_ticks(part, program.options.time_col).max())
        program.advance(state, end + max(before, after or 0) + 1)
        assert program.is_empty(state), "the state outlives the window"


def check_out_of_order_is_a_data_error(program: Program, events: pd.DataFrame) -> None:
    parts = [p for p in partitions(program, events) if len(instants(p, program)) > 1]
    if not parts:
        return
    part = parts[0]
    starts = instants(part, program)
    later, earlier = part.iloc[starts[-1] :], part.iloc[: starts[-1]]
    state = program.new_state()
    program.process(state, program.in_order(later))
    try:
        program.process(state, program.in_order(earlier))
    except DataError:
        return
    raise AssertionError("events that go back in time were accepted")


def check_empty_input_and_one_event(program: Program, events: pd.DataFrame) -> None:
    names = [c.name for c in program.output]
    empty = program.run(events.iloc[:0])
    assert list(empty.columns) == names and len(empty) == 0
    for i in range(min(len(events), 3)):
        one = program.run(program.in_order(events.iloc[i : i + 1]))
        assert list(one.columns) == names


def check_declared_columns_and_determinism(program: Program, events: pd.DataFrame) -> None:
    names = [c.name for c in program.output]
    first = one_shot(program, events)
    second = one_shot(program, events.sample(frac=1.0, random_state=1))
    assert list(first.columns) == names, (list(first.columns), names)
    assert first.equals(second), "the same events in another input order gave other rows"
    for col in program.output:
        if col.is_list and len(first):
            assert all(isinstance(v, list | np.ndarray) for v in first[col.name])


def check_count_is_the_number_of_rows(program: Program, events: pd.DataFrame) -> None:
    ordered = program.in_order(events)
    assert program.count(ordered) == len(one_shot(program, events)), "count is not len(rows)"
    if program.reach[0] is None or not len(ordered):
        return  # a program without reach runs whole, never on a time range
    owned = np.random.default_rng(len(ordered)).random(len(ordered)) < 0.7
    rows = program.run(ordered, owned=owned)
    assert program.count(ordered, owned=owned) == len(rows), "count is not len(rows), owned"
