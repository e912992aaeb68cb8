"""A micro-batch's fixed costs (issue 16 §4): a new stream keeps its state in one partition
per core, not in `spark.sql.shuffle.partitions`; a restarted stream keeps the partitions
its checkpoint started with."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_streaming import batch_lines, events, heartbeat, in_order, read_rows, stream_lines

import sparkcep
from sparkcep.runners.streaming.pipeline import read_stream, start

QUERY = "PATTERN SEQ(A a, B b, C c) WHERE [k] WITHIN 400 ms"


def partitions_of(checkpoint: Path) -> list[str]:
    """The state store's partitions: one numbered folder each under state/<operator>/."""
    return sorted(p.name for p in (checkpoint / "state" / "0").iterdir() if p.name.isdigit())


def write_parts(frame, folder: Path, parts: list[range]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i, rows in enumerate(parts):
        frame.iloc[list(rows)].to_csv(folder / f"part-{i:03d}.csv", index=False)
    in_order(folder)


def run(spark, folder: Path, tmp: Path, **kw):
    ckpt = tmp / "ckpt"
    source = read_stream(spark, str(folder), max_files=1, checkpoint=str(ckpt))
    rows = sparkcep.stream(source, QUERY, id_col="id", time_unit="ms")
    running, _ = start(
        rows, output=str(tmp / "out"), late=str(tmp / "late"), rejected=str(tmp / "rejected"),
        checkpoint=str(ckpt), trigger="available-now", **kw,
    )  # fmt: skip
    running.awaitTermination()
    return running


@pytest.fixture(scope="module")
def new_stream(spark, tmp_path_factory):
    """A new stream of two files and no heartbeat (its last events stay held in the state),
    started in the test session: local[2] (2 cores), spark.sql.shuffle.partitions set to 3
    here (another test's in-process run may have left another value); the running query,
    its folder, and the session's setting after the start."""
    tmp = tmp_path_factory.mktemp("new_stream")
    frame = events(300, seed=3)
    write_parts(frame, tmp / "in", [range(0, 150), range(150, 300)])
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "3")
    try:
        running = run(spark, tmp / "in", tmp)
        after = spark.conf.get("spark.sql.shuffle.partitions")
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)
    return running, tmp, after


@pytest.mark.spark
def test_a_new_stream_keeps_its_state_in_one_partition_per_core(new_stream):
    """The stream's state goes to 2 partitions; the session's setting is left as it was.
    (Its rows are the batch rows: every other stream test runs in these partitions.)"""
    running, tmp, after = new_stream
    assert partitions_of(tmp / "ckpt") == ["0", "1"]
    assert {p["stateOperators"][0]["numShufflePartitions"] for p in running.recentProgress} == {2}
    assert after == "3"


@pytest.mark.spark
def test_a_restarted_stream_keeps_the_partitions_it_started_with(spark, tmp_path):
    """Started in 3 state partitions, restarted where the default is 2: Spark reads the
    checkpoint's number back, every partition's state goes on, and the rows are the
    batch answer, each once."""
    frame = events(600, seed=8)
    folder = tmp_path / "in"
    write_parts(frame, folder, [range(0, 200), range(200, 400)])
    run(spark, folder, tmp_path, state_partitions=3)
    assert partitions_of(tmp_path / "ckpt") == ["0", "1", "2"]
    first = len(read_rows(tmp_path / "out"))
    frame.iloc[400:].to_csv(folder / "part-002.csv", index=False)
    heartbeat(frame).to_csv(folder / "part-999.csv", index=False)
    in_order(folder)
    running = run(spark, folder, tmp_path)
    assert {p["stateOperators"][0]["numShufflePartitions"] for p in running.recentProgress} == {3}
    assert partitions_of(tmp_path / "ckpt") == ["0", "1", "2"]
    lines = stream_lines(tmp_path / "out")
    assert 0 < first < len(lines)
    assert lines == batch_lines(frame, QUERY)  # each once


@pytest.mark.spark
def test_held_events_keep_no_cells_as_read(spark, new_stream):
    """The cells as read (`__raw_<i>`) serve the reasons of rejected rows, computed before
    the shuffle: the events held in the state until the watermark passes them have the
    input's typed columns, and no copy of their text."""
    from sparkcep.engines.state import decode_bucket, decode_state

    _, tmp, _ = new_stream
    held = []
    for row in spark.read.format("statestore").load(str(tmp / "ckpt")).collect():
        for _, blob in decode_bucket(bytes(row.value.groupState.blob)).values():
            pending, _ = decode_state(blob)
            if pending is not None:
                held.append(pending)
    assert held  # the last file's events wait for a watermark past them
    for pending in held:
        assert {"id", "type", "ts", "k", "v"} <= set(pending.columns)
        assert not [c for c in pending.columns if c.startswith("__raw_")]


@pytest.mark.spark
def test_spark_sends_each_bucket_id_where_the_layout_says(spark):
    """`spark_partition_of` is Spark's hash partitioning of a long (Murmur3, seed 42), so
    each bucket of `one_per_partition` has a state partition of its own."""
    from pyspark.sql import functions as F

    from sparkcep.runners.streaming.pipeline import BucketLayout, spark_partition_of

    values = [0, 1, 2, 7, 15, -1, 2**31, -(2**40) + 3, 2**63 - 1]
    for n in (2, 3, 4, 7):
        df = spark.createDataFrame([(v,) for v in values], "v long")
        got = df.select(F.pmod(F.hash("v"), F.lit(n)).alias("p")).collect()
        assert [r.p for r in got] == [spark_partition_of(v, n) for v in values], n
        layout = BucketLayout.one_per_partition(n)
        assert sorted(spark_partition_of(i, n) for i in layout.ids) == list(range(n))


@pytest.mark.spark
def test_a_new_stream_has_one_bucket_per_state_partition(new_stream):
    """Its buckets are kept in the checkpoint, one per partition, each bucket's state in
    its own partition."""
    import json

    from sparkcep.runners.streaming.pipeline import BUCKETS_FILE, spark_partition_of

    _, tmp, _ = new_stream
    ids = json.loads((tmp / "ckpt" / BUCKETS_FILE).read_text())["bucket_ids"]
    assert sorted(spark_partition_of(i, 2) for i in ids) == [0, 1]


@pytest.mark.spark
def test_a_stream_started_in_sixteen_buckets_restarts_in_them(spark, tmp_path, monkeypatch):
    """A stream an earlier version started (16 buckets, no file of them in its checkpoint)
    restarts in its 16 buckets: every key finds its state, and the rows are the batch
    answer, each once."""
    from sparkcep.runners.streaming import pipeline

    # 40 keys, each with an A and a B before the restart and its C after it: a key whose
    # state were not found would lose its match.
    keys = np.arange(40)
    t0 = 1_700_000_000_000
    frame = pd.DataFrame({
        "id": np.arange(120),
        "type": ["A"] * 40 + ["B"] * 40 + ["C"] * 40,
        "ts": np.concatenate([t0 + 2 * keys, t0 + 100 + 2 * keys, t0 + 300 + 2 * keys]),
        "k": np.tile(keys, 3),
        "v": 1,
    })  # fmt: skip
    folder = tmp_path / "in"
    write_parts(frame, folder, [range(0, 80)])
    with monkeypatch.context() as m:  # the earlier version: LEGACY always, no file
        m.setattr(pipeline, "bucket_layout", lambda *_: pipeline.BucketLayout.LEGACY)
        run(spark, folder, tmp_path)
    assert not (tmp_path / "ckpt" / pipeline.BUCKETS_FILE).exists()
    frame.iloc[80:].to_csv(folder / "part-002.csv", index=False)
    heartbeat(frame).to_csv(folder / "part-999.csv", index=False)
    in_order(folder)
    run(spark, folder, tmp_path)
    assert not (tmp_path / "ckpt" / pipeline.BUCKETS_FILE).exists()
    lines = stream_lines(tmp_path / "out")
    assert len(lines) == 40
    assert lines == batch_lines(frame, QUERY)


@pytest.mark.parametrize("text", ["not json", "{}", '{"bucket_ids": []}', '{"bucket_ids": ["a"]}'])
def test_a_damaged_file_of_buckets_is_one_line_saying_so(tmp_path, text):
    """A checkpoint whose file of buckets is damaged stops the stream with a DataError
    naming it, never a guess of the buckets."""
    from sparkcep.errors import DataError
    from sparkcep.runners.streaming.pipeline import BUCKETS_FILE, bucket_layout

    (tmp_path / BUCKETS_FILE).write_text(text)
    with pytest.raises(DataError, match=BUCKETS_FILE):
        bucket_layout(str(tmp_path), 2)
