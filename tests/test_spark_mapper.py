"""The Spark matching stage's function over one partition (`batch.ProgramMapper`): a
key larger than its chunk runs in bounded parts, its state carried from part to part,
and gives the rows one `run` over all the events gives; so do the partition's batches
cut anywhere. No Spark here: the mapper is the pandas function Spark calls."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from helpers import examples
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sparkcep.plan import Options
from sparkcep.prep.layout import choose_layout
from sparkcep.prep.table import TICKS
from sparkcep.runners.local import _seen, check_events
from sparkcep.runners.spark.batch import ProgramMapper

QUERIES = [
    "PATTERN SEQ(A a, B b) WHERE [k] AND b.v > a.v WITHIN 4",
    "PATTERN SEQ(A a, B b, C c) WHERE [k] STRATEGY SKIP_TILL_NEXT_MATCH WITHIN 6",
    "PATTERN SEQ(A a, B+ b[], C c) WHERE [k] STRATEGY SKIP_TILL_ANY_MATCH WITHIN 5",
    "PATTERN SEQ(A a, !X x, C c) WHERE [k] WITHIN 5",
    "PATTERN SEQ(A a, B b, !X x) WHERE [k] WITHIN 3",  # its matches wait for the window's end
    "PATTERN SEQ(A a, B b) WHERE [k] AGG COUNT WITHIN 5",  # a count over every key
    "PATTERN SEQ(A a, B b) WHERE [k] GROUP BY k AGG COUNT WITHIN 5",
]

EVENTS = st.lists(
    st.tuples(
        st.integers(0, 3),  # time step (0: the same instant as the event before)
        st.sampled_from("ABCX"),
        st.sampled_from([0, 0, 0, 0, 1, 2]),  # key 0 holds most events
        st.integers(0, 9),
    ),
    min_size=1,
    max_size=80,
)
# key 0 in parts of two events, a match of the last waiting for the window's end
LONG_KEY = [(1, "AB"[i % 2], 0, i) for i in range(6)] + [(1, "A", 1, 0), (1, "B", 1, 1)]


def sorted_rows(frame: pd.DataFrame) -> list:
    rows = [tuple(str(v) for v in r) for r in frame.astype(object).itertuples(index=False)]
    return sorted(rows)


@pytest.mark.parametrize("query", QUERIES)
@settings(max_examples=examples(40), deadline=None)
@given(events=EVENTS, chunk=st.integers(1, 8), cuts=st.lists(st.integers(1, 9), min_size=1))
@example(events=LONG_KEY, chunk=2, cuts=[1])
def test_a_large_key_in_bounded_parts_gives_what_one_run_gives(query, events, chunk, cuts):
    steps, types, keys, values = zip(*events)
    frame = pd.DataFrame(
        {"ts": np.cumsum(steps), "type": list(types), "k": list(keys), "v": list(values)}
    )
    checked = check_events(frame.assign(__row=np.arange(len(frame))), query, Options())
    (program,) = checked.programs
    seen = program.in_order(_seen(program, checked.valid))
    seen[TICKS] = seen["ts"].to_numpy(dtype=np.int64)
    expected = program.run(seen)
    layout = choose_layout(
        program.partition_cols, before=None, after=None, min_tick=None, max_tick=None,
        events=len(seen), parts=2,
    )  # fmt: skip
    mapper = ProgramMapper(program, layout)
    mapper.chunk_rows = chunk
    batches, at = [], 0
    for i in range(len(seen)):  # the partition's batches, cut at random sizes
        size = cuts[i % len(cuts)]
        if at < len(seen):
            batches.append(seen.iloc[at : at + size].reset_index(drop=True))
            at += size
    got = list(mapper(iter(batches)))
    out = pd.concat(got, ignore_index=True) if got else program.empty(seen)
    assert list(out.columns) == list(expected.columns)
    assert sorted_rows(out) == sorted_rows(expected)


@pytest.mark.spark
@pytest.mark.parametrize("query", [QUERIES[1], QUERIES[5], QUERIES[4]])
def test_spark_with_small_chunks_gives_the_local_rows(spark, monkeypatch, query):
    """Through Spark, every partition larger than its chunk: a count over every key's
    matches (no GROUP BY) was cut between keys and gave wrong counts past 500,000 events
    in a partition (G2 4M in one partition: 7,454 of 151,303 rows); a large key runs in
    parts. The rows are those of the local runner."""
    from sparkcep.runners.local import execute_local
    from sparkcep.runners.spark.batch import run as spark_run

    rng = np.random.default_rng(7)
    n = 400
    frame = pd.DataFrame({
        "ts": np.cumsum(rng.integers(0, 3, n)),
        "type": rng.choice(list("ABCX"), n),
        "k": rng.choice([0, 0, 0, 0, 1, 2, 3], n),
        "v": rng.integers(0, 10, n),
    })  # fmt: skip
    expected = execute_local(frame, query, Options()).matches
    monkeypatch.setattr(ProgramMapper, "CHUNK_ROWS", 9)
    ran = spark_run(spark.createDataFrame(frame), query, options=Options(), partitions=1)
    got = ran.rows.toPandas()
    assert len(expected) > 5
    assert sorted_rows(got[list(expected.columns)]) == sorted_rows(expected)
