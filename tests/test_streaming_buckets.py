"""Streaming with keys in hash buckets (issue 16 §4): many keys give the batch answer, keys
that share a bucket close on their own, and a key whose state empties leaves the bucket's
stored value (read back from the checkpoint with Spark's state reader)."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F
from test_streaming import (
    batch_lines,
    events,
    heartbeat,
    in_order,
    read_rows,
    run_stream,
    stream_lines,
)

from sparkcep.engines.state import decode_bucket, decode_state
from sparkcep.runners.streaming.pipeline import ALL_KEYS, BUCKETS

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000  # ms

MANY_KEYS = [
    # nfa, the bucket's keys in one state (Program.keys_together)
    "PATTERN SEQ(A a, B b, C c) WHERE [k] STRATEGY SKIP_TILL_NEXT_MATCH WITHIN 15 s",
    "PATTERN SEQ(A a, B b, !C x) WHERE [k] WITHIN 15 s",
    # one state per key within the bucket: AFTER MATCH SKIP, and A-Seq's counters
    "PATTERN SEQ(A a, B b) WHERE [k] WITHIN 15 s AFTER MATCH SKIP PAST LAST EVENT",
    "PATTERN SEQ(A a, B b, C c) WHERE [k] GROUP BY k AGG COUNT, SUM(b.v) AS s WITHIN 15 s",
]


# Queries of one program share a stream (each row names its query).
STREAMED_TOGETHER = {
    "keys-together": "".join(f"QUERY q{i}: {q};\n" for i, q in enumerate(MANY_KEYS[:2])),
    "skip": MANY_KEYS[2],
    "aseq": MANY_KEYS[3],
}


@pytest.mark.parametrize("query", STREAMED_TOGETHER.values(), ids=STREAMED_TOGETHER.keys())
def test_many_keys_out_of_order_equal_batch_and_late_rows_stay_per_event(spark, tmp_path, query):
    """150 keys (many per bucket), rows shuffled within each file and a few moved into the
    next file (within the lateness), three stale events of three keys in the last file."""
    frame = events(3000, seed=31, keys=150)
    ordered = frame.sort_values(["ts", "id"]).reset_index(drop=True)
    parts = [ordered.iloc[r] for r in np.array_split(np.arange(len(ordered)), 3)]
    files = [p.sample(frac=1.0, random_state=i) for i, p in enumerate(parts)]
    for i in range(2):  # the last rows of each file come with the next one
        moved = parts[i].tail(4)
        files[i] = files[i].drop(moved.index)
        files[i + 1] = pd.concat([files[i + 1], moved])
    stale = parts[2].head(3).assign(id=[900_001, 900_002, 900_003], k=[3, 77, 140], type="A")
    stale["ts"] = int(frame.ts.min()) - 600_000  # ten minutes before everything: late
    files[2] = pd.concat([files[2], stale, heartbeat(frame)])  # and the heartbeat
    folder = tmp_path / "in"
    folder.mkdir()
    for i, part in enumerate(files):
        part.to_csv(folder / f"part-{i:03d}.csv", index=False)
    in_order(folder)
    _, writer = run_stream(spark, folder, query, tmp_path, lateness="1 s")
    expected = batch_lines(frame, query)
    assert len(expected) > 20
    for i in range(query.count("QUERY ")):  # each query has matches to compare
        assert any(f'"query":"q{i}"'.encode() in line for line in expected), i
    assert stream_lines(tmp_path / "out") == expected
    late = read_rows(tmp_path / "late")
    assert sorted(r["id"] for r in late) == [900_001, 900_002, 900_003]
    assert sorted(r["k"] for r in late) == [3, 77, 140]
    assert all("before the watermark" in r["reason"] for r in late)
    assert writer.totals["late"] == 3


@functools.cache  # one Spark job for the tests that share it
def same_bucket_keys(spark, count: int) -> list[int]:
    """`count` keys that the stream hashes into one bucket (its own expression of the key)."""
    key = F.to_json(F.array(F.col("id").cast("string")))
    df = spark.range(0, 500).select("id", F.pmod(F.xxhash64(key), F.lit(BUCKETS)).alias("b"))
    rows = df.collect()
    by_bucket: dict[int, list[int]] = {}
    for r in rows:
        by_bucket.setdefault(r.b, []).append(r.id)
    return next(ks[:count] for ks in by_bucket.values() if len(ks) >= count)


def stored(spark, checkpoint: Path) -> dict[str, tuple[int, object]]:
    """Every bucket's keys in the stream's state store: key -> (wake, decoded state)."""
    df = spark.read.format("statestore").load(str(checkpoint))
    out = {}
    for row in df.collect():
        for key, (wake, blob) in decode_bucket(bytes(row.value.groupState.blob)).items():
            out[key] = (wake, decode_state(blob))
    return out


def write_part(folder: Path, i: int, rows: list[tuple]) -> None:
    """rows: (id, type, ms after T0, key)."""
    frame = pd.DataFrame(rows, columns=["id", "type", "ts", "k"]).assign(v=1)
    frame["ts"] += T0
    folder.mkdir(exist_ok=True)
    frame.to_csv(folder / f"part-{i:03d}.csv", index=False)
    in_order(folder)


SHARED = [
    # x: a match whose trailing negation closes at 2,000 ms while y goes on; z: one A
    lambda x, y, z: [(0, "A", 1000, x), (1, "B", 1100, x), (2, "A", 1050, y), (3, "A", 1000, z)],
    lambda x, y, z: [(4, "B", 1500, y), (5, "C", 1600, y)],
    lambda x, y, z: [(6, "A", 2500, y)],
    lambda x, y, z: [(7, "B", 3000, y)],
    lambda x, y, z: [(8, "END", 86_400_000, -1)],
]


def test_keys_sharing_a_bucket_close_apart_and_leave_its_state(spark, tmp_path):
    """Three keys of one bucket: x's trailing-negation match comes out in the batch whose
    watermark passes its window, while y's events are still held; once the watermark is
    past their windows, x's and z's events are gone from the bucket's state, y's stay."""
    x, y, z = same_bucket_keys(spark, 3)
    query = "PATTERN SEQ(A a, B b, !C c) WHERE [k] WITHIN 1 s"
    folder = tmp_path / "in"
    for i in range(3):
        write_part(folder, i, SHARED[i](x, y, z))
    running, _ = run_stream(spark, folder, query, tmp_path)
    # After 3 files: the watermark is at 2,500 ms; the buffer keeps events after 1,500.
    state = stored(spark, tmp_path / "ckpt")
    assert list(state) == [ALL_KEYS]  # nfa: the bucket's keys in one state
    wake, (pending, nfa) = state[ALL_KEYS]
    assert sorted(nfa.buffer["id"].tolist()) == [5]  # y's C at 1,600 ms
    assert pending is not None and pending["id"].tolist() == [6]  # y's A at 2,500 ms
    assert wake == T0 + 2500 + 1  # the watermark must pass the held A
    batches = {p["batchId"]: p["eventTime"].get("watermark") for p in running.recentProgress}
    for i in range(3, 5):
        write_part(folder, i, SHARED[i](x, y, z))
    running, _ = run_stream(spark, folder, query, tmp_path)
    batches |= {p["batchId"]: p["eventTime"].get("watermark") for p in running.recentProgress}
    assert stored(spark, tmp_path / "ckpt") == {}  # every key's window has closed
    rows_of = {}
    for path in sorted((tmp_path / "out").glob("batch-*.jsonl")):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            rows_of[(row["k"], row["a"], row["b"])] = int(path.stem.split("-")[1])
    assert set(rows_of) == {(x, 0, 1), (y, 6, 7)}
    # x's row: in the first batch run with a watermark past 2,000 ms (A at 1,000 + 1 s).
    first = min(
        b for b, wm in batches.items() if wm and pd.Timestamp(wm).value // 10**6 >= T0 + 2000
    )
    assert rows_of[(x, 0, 1)] == first
    assert stream_lines(tmp_path / "out") == (
        batch_lines(pd.concat([_frame(SHARED[i](x, y, z)) for i in range(5)]), query)
    )


def _frame(rows):
    frame = pd.DataFrame(rows, columns=["id", "type", "ts", "k"]).assign(v=1)
    frame["ts"] += T0
    return frame


def test_a_key_whose_state_empties_leaves_the_bucket(spark, tmp_path):
    """One state per key (A-Seq's counters): x and z, whose windows the watermark passed,
    have no entry left in the bucket; y, with events in its window, has one."""
    x, y, z = same_bucket_keys(spark, 3)
    query = "PATTERN SEQ(A a, B b) WHERE [k] GROUP BY k AGG COUNT WITHIN 1 s"
    folder = tmp_path / "in"
    for i in range(3):
        write_part(folder, i, SHARED[i](x, y, z))
    run_stream(spark, folder, query, tmp_path)
    state = stored(spark, tmp_path / "ckpt")
    assert set(state) == {json.dumps([str(y)])}
    for i in range(3, 5):
        write_part(folder, i, SHARED[i](x, y, z))
    run_stream(spark, folder, query, tmp_path)
    assert stored(spark, tmp_path / "ckpt") == {}
    frame = pd.concat([_frame(SHARED[i](x, y, z)) for i in range(5)])
    assert stream_lines(tmp_path / "out") == batch_lines(frame, query)


def test_after_match_skip_fed_with_a_watermark_after_each_batch_equals_one_shot():
    """A stream advances each key to its watermark after each batch: AFTER MATCH SKIP's
    skip points must outlive that while events before them are still in the window (they
    were dropped at the horizon, and later batches gave 4 matches a skip had removed)."""
    from sparkcep.checks import compile_one, same_rows
    from sparkcep.plan import Options

    query = "PATTERN SEQ(A a, B b) WHERE [k] WITHIN 5 s AFTER MATCH SKIP PAST LAST EVENT"
    frame = events(600, seed=31, keys=30)  # 12 s of events: windows close within them
    program = compile_one(query, frame, Options(id_col="id", time_unit="ms"))
    expected = program.run(program.in_order(frame))
    outs = []
    for _, part in frame.groupby("k"):
        state, part = program.new_state(), program.in_order(part)
        for rows in np.array_split(np.arange(len(part)), 3):
            batch = part.iloc[rows]
            outs += [program.process(state, batch)]
            outs += [program.advance(state, int(batch["ts"].max()) + 1)]
        outs.append(program.flush(state))
    assert len(expected) > 40
    same_rows(program, program.concat(outs, frame), expected, "advanced after each batch")


def test_a_bucket_with_nothing_new_sleeps_until_its_window_passes(spark, tmp_path):
    """nfa without trailing negation: advancing only forgets events (`idle_until`), so a
    bucket whose keys got nothing new is left as it is until the watermark passes its
    newest event's window, and then emptied."""
    x, y, z = same_bucket_keys(spark, 3)
    query = "PATTERN SEQ(A a, B b) WHERE [k] WITHIN 1 s"
    folder = tmp_path / "in"
    for i in range(3):
        write_part(folder, i, SHARED[i](x, y, z))
    write_part(folder, 3, [(9, "X", 2600, -1)])  # no query wants X: it moves the watermark
    run_stream(spark, folder, query, tmp_path)
    ((wake, (pending, nfa)),) = stored(spark, tmp_path / "ckpt").values()
    assert pending is None and nfa.buffer["id"].tolist() == [6]  # y's A at 2,500 ms
    assert (wake, nfa.latest) == (T0 + 2500 + 1000, T0 + 2600)
    write_part(folder, 4, [(10, "X", 3000, -1)])  # the watermark moves to 3,000: too early
    run_stream(spark, folder, query, tmp_path)
    ((wake, (pending, nfa)),) = stored(spark, tmp_path / "ckpt").values()
    assert (wake, nfa.latest) == (T0 + 3500, T0 + 2600)  # not advanced to 3,000
    write_part(folder, 5, [(11, "X", 4000, -1)])  # past 3,500: the window has closed
    run_stream(spark, folder, query, tmp_path)
    assert stored(spark, tmp_path / "ckpt") == {}
    frame = pd.concat([_frame(SHARED[i](x, y, z)) for i in range(3)])
    assert stream_lines(tmp_path / "out") == batch_lines(frame, query)
