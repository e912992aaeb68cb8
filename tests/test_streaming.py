"""Streaming gives the batch answer: several micro-batches, late events, a killed process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import sparkcep
from sparkcep.cli import main
from sparkcep.engines.registry import engines
from sparkcep.runners.streaming.pipeline import read_stream, start

pytestmark = pytest.mark.spark


def events(n=600, seed=11, keys=4) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    ts = 1_700_000_000_000 + np.cumsum(rng.integers(0, 40, n))  # ms, with equal times
    return pd.DataFrame(
        {
            "id": np.arange(n),
            "type": rng.choice(list("ABCD"), n),
            "ts": ts,
            "k": rng.integers(0, keys, n),
            "v": rng.integers(0, 10, n),
        }
    )


def heartbeat(frame: pd.DataFrame) -> pd.DataFrame:
    """An event a day after the others, in a partition of its own and of a type no query
    names: it moves the watermark past the last real events, which a stream reports only
    once the watermark has passed them."""
    last = frame.iloc[[-1]].copy()
    last["id"], last["type"], last["k"] = 10**9, "END", -1
    last["ts"] = frame["ts"].max() + (
        pd.Timedelta(days=1) if isinstance(frame["ts"].max(), pd.Timestamp) else 86_400_000
    )
    return last


def in_order(folder: Path) -> None:
    """Spark picks new files by modification time: make it the name order."""
    base = time.time() - 1000
    for i, path in enumerate(sorted(folder.glob("part-*"))):
        os.utime(path, (base + i, base + i))


def write_files(frame: pd.DataFrame, folder: Path, parts: int, beat_apart: bool = True) -> None:
    """`parts` files of the rows and the heartbeat, in a file of its own (a micro-batch of
    its own) or, `beat_apart=False`, with the last rows (one micro-batch less)."""
    folder.mkdir(parents=True, exist_ok=True)
    chunks = [frame.iloc[rows] for rows in np.array_split(np.arange(len(frame)), parts)]
    if beat_apart:
        chunks.append(heartbeat(frame))
    else:
        chunks[-1] = pd.concat([chunks[-1], heartbeat(frame)])
    for i, chunk in enumerate(chunks):
        chunk.to_csv(folder / f"part-{i:03d}.csv", index=False)
    in_order(folder)


def read_rows(folder: Path) -> list[dict]:
    rows = []
    for path in sorted(folder.glob("batch-*.jsonl")):
        rows += [json.loads(line) for line in path.read_text().splitlines() if line]
    return rows


def stream_lines(folder: Path, fmt: str = "jsonl") -> list[bytes]:
    """The lines of the stream's micro-batch files, in order of their bytes (micro-batches
    split the batch run's order)."""
    return sorted(line for path in folder.glob(f"batch-*.{fmt}") for line in _lines(path))


def batch_lines(frame: pd.DataFrame, query: str, *options: str, fmt: str = "jsonl") -> list[bytes]:
    """The lines `sparkcep run --local` writes for the same events, read from CSV as the
    stream reads them, in order of their bytes. `options`: CLI options (default: the
    time in ms)."""
    with tempfile.TemporaryDirectory() as tmp:
        frame.to_csv(f"{tmp}/events.csv", index=False)
        output = Path(tmp) / f"matches.{fmt}"
        run = ["run", query, "--input", f"{tmp}/events.csv", "--output", str(output)]
        main([*run, "--local", "--id", "id", *(options or ("--time-unit", "ms"))])
        return sorted(_lines(output))


def _lines(path: Path) -> list[bytes]:
    """A JSON lines file's lines; a parquet file's rows as Arrow reads them (exactly),
    each with the file's column types."""
    if path.suffix == ".parquet":
        table = pq.read_table(path)
        types = [f"{field.name}: {field.type}" for field in table.schema]
        return [repr((types, row)).encode() for row in table.to_pylist()]
    return path.read_bytes().splitlines()


def run_stream(spark, folder, query, tmp, lateness="0 s", max_files=1, fmt="jsonl", unit="ms"):
    source = read_stream(spark, str(folder), max_files=max_files, checkpoint=str(tmp / "ckpt"))
    rows = sparkcep.stream(source, query, id_col="id", time_unit=unit, lateness=lateness)
    out, ckpt = tmp / "out", tmp / "ckpt"
    running, writer = start(
        rows, output=str(out), late=str(tmp / "late"), rejected=str(tmp / "rejected"),
        checkpoint=str(ckpt), trigger="available-now", fmt=fmt,
    )  # fmt: skip
    running.awaitTermination()
    return running, writer


QUERIES = [
    "PATTERN SEQ(A a, B b, C c) WHERE [k] WITHIN 400 ms",
    "PATTERN SEQ(A a, B b, C c) WHERE [k] STRATEGY SKIP_TILL_NEXT_MATCH WITHIN 600 ms",
    "PATTERN SEQ(A a, B b) WHERE [k] STRATEGY STRICT_CONTIGUITY WITHIN 300 ms",
    "PATTERN SEQ(A a, B b, !C x) WHERE [k] WITHIN 300 ms",
    "PATTERN SEQ(A a, B b, C c) WHERE [k] GROUP BY k AGG COUNT, SUM(b.v) AS s WITHIN 500 ms",
    "PATTERN SEQ(A a, !D x, B b) AGG COUNT WITHIN 200 ms",
]


# (queries streamed together must partition the stream alike)
STREAMED_TOGETHER = [
    pytest.param(QUERIES[:4], id="keyed"),
    # covered by: test_streaming_buckets' many keys [aseq] (this query, 150 keys, other window)
    pytest.param(QUERIES[4:5], id="grouped", marks=pytest.mark.slow),
    pytest.param(QUERIES[5:], id="one"),
]


@pytest.mark.parametrize("group", STREAMED_TOGETHER)
def test_streaming_equals_batch(spark, tmp_path, group):
    """The queries of a group together in one stream (each row names its query). The
    keyed group's files all have one modification time, one per micro-batch: taken in
    name order, so the events of part-000 are not late behind part-001's (2,686 of 13,654
    matches were lost when Spark took them in another order)."""
    frame = events()
    keyed = len(group) > 1
    parts = 6 if keyed else 2
    write_files(frame, tmp_path / "in", parts=parts, beat_apart=keyed)
    if keyed:
        same = time.time() - 500
        for path in (tmp_path / "in").glob("part-*"):
            os.utime(path, (same, same))
    queries = "".join(f"QUERY q{i}: {query};\n" for i, query in enumerate(group))
    queries = group[0] if len(group) == 1 else queries
    _, writer = run_stream(spark, tmp_path / "in", queries, tmp_path)
    assert writer.totals["batches"] >= parts  # one file per micro-batch
    expected = batch_lines(frame, queries)
    assert len(expected) > 0
    for i in range(len(group) * (len(group) > 1)):  # each query has matches to compare
        assert any(f'"query":"q{i}"'.encode() in line for line in expected), i
    assert stream_lines(tmp_path / "out") == expected
    assert writer.totals["late"] == 0


def test_one_micro_batch_writes_the_batch_runs_file_byte_for_byte(spark, tmp_path):
    """Ids above 2**53 and times in ns, which a float cannot hold: every integer is
    written as the batch run writes it (it was 9.007199254740992e+15, another event's
    id), and a stream of one micro-batch writes the batch run's file, in its order."""
    big, t0 = 2**53 + 1, 1_700_000_000_000_000_001
    frame = pd.DataFrame(
        {
            "id": [big, big + 1, big + 2, big + 3, big + 4, 1],
            "type": ["A", "A", "C", "B", "B", "END"],
            "ts": [t0, t0 + 1, t0 + 2, t0 + 3, t0 + 4, t0 + 10**11],  # END: the watermark
            "k": [1, 2, 1, 1, 2, 9],
        }
    )
    (tmp_path / "in").mkdir()
    frame.to_csv(tmp_path / "in" / "events.csv", index=False)
    query = "PATTERN SEQ(A a, B b) WHERE [k] WITHIN 10 s"
    run_stream(spark, tmp_path / "in", query, tmp_path, max_files=None, unit="ns")
    with tempfile.TemporaryDirectory() as tmp:
        frame.to_csv(f"{tmp}/e.csv", index=False)
        main(["run", query, "-i", f"{tmp}/e.csv", "-o", f"{tmp}/m.jsonl", "--local",
              "--id", "id", "--time-unit", "ns"])  # fmt: skip
        expected = Path(f"{tmp}/m.jsonl").read_bytes()
    assert expected == (
        b'{"start":1700000000000000001,"end":1700000000000000004,"k":1,'
        b'"a":9007199254740993,"b":9007199254740996}\n'
        b'{"start":1700000000000000002,"end":1700000000000000005,"k":2,'
        b'"a":9007199254740994,"b":9007199254740997}\n'
    )
    [written] = (tmp_path / "out").glob("batch-*.jsonl")
    assert written.read_bytes() == expected


def test_parquet_output_holds_the_batch_rows(spark, tmp_path):
    """Of the batch run's types too: timestamps, lists of ids."""
    frame = events(300, seed=2)
    frame["ts"] = pd.to_datetime(frame["ts"], unit="ms")  # written as ISO text
    write_files(frame, tmp_path / "in", parts=2, beat_apart=False)
    query = "PATTERN SEQ(A a, B+ b[]) WHERE [k] AND a.v < b.v WITHIN 300 ms"
    run_stream(spark, tmp_path / "in", query, tmp_path, fmt="parquet", unit=None)
    expected = batch_lines(frame, query, "--time", "ts", fmt="parquet")
    assert len(expected) > 0
    assert stream_lines(tmp_path / "out", "parquet") == expected


def test_out_of_order_within_lateness_and_late_events(spark, tmp_path):
    frame = events(400, seed=5)
    ordered = frame.sort_values("ts").reset_index(drop=True)
    parts = [ordered.iloc[rows] for rows in np.array_split(np.arange(len(ordered)), 4)]
    # Within a file, rows come in any order; the second file also holds events up to
    # 150 ms older than the first file's latest: within the allowed lateness of 1 s.
    shuffled = [p.sample(frac=1.0, random_state=i) for i, p in enumerate(parts)]
    moved = parts[0].tail(3)
    shuffled[0] = shuffled[0].drop(moved.index)
    shuffled[1] = pd.concat([shuffled[1], moved])
    # The last file holds one event 10 minutes old: beyond the lateness, so late.
    stale = parts[3].head(1).assign(id=999_999, ts=int(frame.ts.min()) - 600_000, type="A")
    shuffled[3] = pd.concat([shuffled[3], stale, heartbeat(frame)])
    folder = tmp_path / "in"
    folder.mkdir()
    for i, part in enumerate(shuffled):
        part.to_csv(folder / f"part-{i:03d}.csv", index=False)
    in_order(folder)
    query = "PATTERN SEQ(A a, B b, C c) WHERE [k] WITHIN 400 ms"
    _, writer = run_stream(spark, folder, query, tmp_path, lateness="1 s")
    assert stream_lines(tmp_path / "out") == batch_lines(frame, query)
    late = read_rows(tmp_path / "late")
    assert [r["id"] for r in late] == [999_999]
    assert "before the watermark" in late[0]["reason"]
    assert writer.totals["late"] == 1


def test_state_stays_bounded_with_short_lived_keys(spark, tmp_path):
    # 8 files of 60 events; each key lives for 30 events and is never seen again.
    n = 480
    frame = events(n, seed=3)
    frame["k"] = np.arange(n) // 30
    write_files(frame, tmp_path / "in", parts=8, beat_apart=False)
    query = "PATTERN SEQ(A a, B b, C c) WHERE [k] WITHIN 300 ms"
    source = read_stream(spark, str(tmp_path / "in"), max_files=1)
    rows = sparkcep.stream(source, query, id_col="id", time_unit="ms")
    running, _ = start(
        rows, output=str(tmp_path / "out"), late=str(tmp_path / "late"),
        rejected=str(tmp_path / "rej"), checkpoint=str(tmp_path / "ckpt"), trigger="available-now",
    )  # fmt: skip
    running.awaitTermination()
    progress = [p for p in running.recentProgress if p["stateOperators"]]
    state_rows = [p["stateOperators"][0]["numRowsTotal"] for p in progress]
    assert len(state_rows) >= 8
    # 16 keys in all; only the current two or three have state: it levels off.
    assert max(state_rows[3:]) <= 4, state_rows
    assert stream_lines(tmp_path / "out") == batch_lines(frame, query)


def test_ctrl_c_stops_the_stream_quietly_with_its_summary(tmp_path):
    """SIGINT to a running `sparkcep stream`: it stops between micro-batches, prints its
    summary and exits with 130, with no trace (py4j's, the JVM's) and no FutureWarning.
    Its rows, printed (`--format console`), are the lines of a batch run. (PySpark's
    FutureWarning comes with a timestamp column among the rows.)"""
    (tmp_path / "in").mkdir()
    times = ["2024-01-01T00:00:01", "2024-01-01T00:00:02", "2024-01-01T00:01:30"]
    frame = pd.DataFrame({"id": [0, 1, 2], "type": ["A", "B", "END"], "ts": times})
    frame.to_csv(tmp_path / "in" / "e.csv", index=False)
    query = "PATTERN SEQ(A a, B b) WITHIN 10 s"
    args = [
        sys.executable, "-m", "sparkcep.cli", "stream", query, "--input", str(tmp_path / "in"),
        "--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "ckpt"), "--id", "id",
        "--trigger", "1 second", "--format", "console", "--master", "local[1]",
    ]  # fmt: skip
    env = dict(os.environ, SPARKCEP_CDS=os.environ.get("SPARKCEP_CDS", "1"), COLUMNS="200")
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    with open(out, "w") as stdout, open(err, "w") as stderr:
        proc = subprocess.Popen(
            args, stdout=stdout, stderr=stderr, env=env, start_new_session=True
        )  # fmt: skip
        try:
            deadline = time.time() + 240
            while "match\t" not in out.read_text():  # a micro-batch wrote the match
                assert proc.poll() is None and time.time() < deadline, err.read_text()
                time.sleep(0.2)
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    shown = out.read_text() + err.read_text()
    assert proc.returncode == 130, shown[-2000:]
    for noise in ("Traceback", "py4j", "FutureWarning", "Exception"):
        assert noise not in shown, shown[-3000:]
    assert "micro-batches" in shown and "stopped (Ctrl-C)" in shown
    rows = [line[6:].encode() for line in shown.splitlines() if line.startswith("match\t")]
    row = b'{"start":"2024-01-01T00:00:01.000000Z","end":"2024-01-01T00:00:02.000000Z","a":0,"b":1}'
    assert rows == [row] == batch_lines(frame, query, "--time", "ts")


# covered by: test_ctrl_c_stops_the_stream_quietly_with_its_summary (a real stream process)
# and test_held_events_are_counted_until_a_later_event_releases_them (restarts on a checkpoint)
@pytest.mark.slow
def test_killed_stream_restarts_on_its_checkpoint_exactly_once(tmp_path):
    frame = events(600, seed=21)
    write_files(frame, tmp_path / "in", parts=6)
    query = "PATTERN SEQ(A a, B b, C c) WHERE [k] WITHIN 400 ms"
    args = [
        sys.executable, "-m", "sparkcep.cli", "stream", query,
        "--input", str(tmp_path / "in"), "--output", str(tmp_path / "out"),
        "--checkpoint", str(tmp_path / "ckpt"), "--id", "id", "--time-unit", "ms",
        "--max-files-per-trigger", "1", "--master", "local[2]",
    ]  # fmt: skip
    env = dict(os.environ, SPARKCEP_CDS=os.environ.get("SPARKCEP_CDS", "1"))
    first = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True
    )
    out = tmp_path / "out"
    deadline = time.time() + 240
    while time.time() < deadline and len(list(out.glob("batch-*.jsonl"))) < 2:
        time.sleep(0.2)
        assert first.poll() is None, first.stderr.read().decode()[-2000:]
    os.killpg(first.pid, signal.SIGKILL)  # the driver and its JVM, mid-run
    assert first.wait() == -signal.SIGKILL  # killed, not finished
    assert len(list(out.glob("batch-*.jsonl"))) >= 2
    second = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)
    assert second.returncode == 0, second.stderr[-2000:]
    lines = stream_lines(out)
    assert lines == batch_lines(frame, query)  # each once: none lost, none repeated


# ---- every registered engine: streaming equals batch on its first examples ---------------

ENGINES = engines()


# Engines whose package other default tests stream already, on queries of their own.
STREAMED_ELSEWHERE = {
    "nfa": "test_streaming_equals_batch[keyed]",
    "aseq": "test_streaming_equals_batch[one]",
    "funnel": "test_native_extensions.py::test_streaming_equals_batch[funnel]",
}


def _engine_examples() -> list:
    """The first example of each engine (the batch conformance suite runs every example);
    the default run streams one engine per package, the first the registry names, unless
    another default test streams that package (STREAMED_ELSEWHERE): the probes of
    tests/test_runners.py test the streaming runner's contract for all."""
    params, packages = [], set()
    for name, engine in ENGINES.items():
        if not engine.examples:
            continue
        package = ".".join(type(engine).__module__.split(".")[:3])  # sparkcep.engines.<x>
        # covered by: this test on the first engine of the package (or STREAMED_ELSEWHERE),
        # test_runners' probes
        slow = package in packages or name in STREAMED_ELSEWHERE
        marks = [pytest.mark.slow] if slow else []
        packages.add(package)
        params.append(pytest.param(name, engine.examples[0], marks=marks))
    return params


ENGINE_EXAMPLES = _engine_examples()


@pytest.mark.parametrize(("name", "query"), ENGINE_EXAMPLES, ids=lambda x: str(x)[:40])
def test_every_engine_streaming_equals_batch(spark, tmp_path, name, query):
    from sparkcep.checks import random_events

    frame = random_events(n=240, seed=9)  # integer times of no unit: bare windows, in ticks
    # two micro-batches (the heartbeat with the second): state crosses one
    write_files(frame, tmp_path / "in", parts=2, beat_apart=False)
    source = read_stream(spark, str(tmp_path / "in"), max_files=1)
    result = sparkcep.stream(source, query, id_col="id", algorithm=name)
    running, writer = start(
        result, output=str(tmp_path / "out"), late=str(tmp_path / "late"),
        rejected=str(tmp_path / "rej"), checkpoint=str(tmp_path / "ckpt"), trigger="available-now",
    )  # fmt: skip
    running.awaitTermination()
    assert writer.totals["late"] == 0
    assert stream_lines(tmp_path / "out") == batch_lines(frame, query, "--algorithm", name)


def test_a_bad_cell_in_a_streamed_file_is_a_rejected_row(spark, tmp_path):
    """The column types are decided once and kept with the checkpoint: a later file with
    a bad time or a bad number gives rejected rows, and the stream goes on."""
    frame = events(300, seed=6)
    folder = tmp_path / "in"
    write_files(frame, folder, parts=2, beat_apart=False)
    late_file = folder / "part-001.csv"
    lines = late_file.read_text().splitlines()
    lines[1] = lines[1].split(",", 2)[0] + ",A,soon," + lines[1].split(",", 3)[3]
    lines[2] = ",".join([*lines[2].split(",")[:4], "many"])
    late_file.write_text("\n".join(lines) + "\n")
    in_order(folder)
    query = "PATTERN SEQ(A a, B b, C c) WHERE [k] AND a.v < c.v WITHIN 400 ms"
    _, writer = run_stream(spark, folder, query, tmp_path)
    rejected = read_rows(tmp_path / "rejected")
    assert sorted(r["reason"] for r in rejected) == [
        "ts is not an integer or a timestamp",
        "v: 'many' is not a number",
    ]
    assert writer.totals["batches"] >= 2
    assert (tmp_path / "ckpt" / "sparkcep-types.json").exists()


def test_held_events_are_counted_until_a_later_event_releases_them(spark, tmp_path):
    """A micro-batch releases the events the previous one's watermark passed: what came
    last is held (and said so) until later events arrive."""
    folder = tmp_path / "in"
    folder.mkdir()
    query = "PATTERN SEQ(A a, B b, C c) WITHIN 10 s"
    files = [
        {"id": [0, 1, 2], "type": list("ABC"), "ts": [1_000, 2_000, 5_000]},  # ms
        {"id": [3], "type": ["X"], "ts": [100_000]},
        {"id": [4], "type": ["X"], "ts": [200_000]},
    ]
    seen = []
    for i, rows in enumerate(files):
        pd.DataFrame(rows).to_csv(folder / f"part-{i:03d}.csv", index=False)
        in_order(folder)
        _, writer = run_stream(spark, folder, query, tmp_path, lateness="0 s")
        seen.append((writer.totals["match"], writer.held))
    # 1st run: the watermark reaches 5 s and releases A and B; C, at 5 s, is held. 2nd:
    # X (which no query wants, so never held) moves it to 100 s: C goes, the match comes
    # out. 3rd: nothing more.
    assert seen == [(0, 1), (1, 0), (0, 0)]
    assert [(r["a"], r["b"], r["c"]) for r in read_rows(tmp_path / "out")] == [(0, 1, 2)]


def test_a_stream_warns_of_times_no_real_event_has(spark, tmp_path, capsys):
    """Millisecond times streamed with `--time-unit s` lie tens of millennia ahead: the
    summary warns as `run` does, once, over the times of every micro-batch (the first
    file holds the first time, the second the last). By hand: 1086217263125 s is 34420
    Gregorian years (31556952 s each) and more after 1970, the year 36390; in ms, 2004. A
    row rejected for its missing type (its time 0, the year 1970) is not counted, as in a
    batch run. No event has the type C (nor one close to it: A, B), as `run` says too."""
    folder = tmp_path / "in"
    folder.mkdir()
    first, last = 1_086_217_263_125, 1_086_217_963_125
    files = [
        {"id": [0, 1, 99], "type": ["A", "B", ""], "ts": [first, first + 100_000, 0]},
        {"id": [2, 3], "type": ["A", "B"], "ts": [first + 200_000, last]},
    ]
    for i, rows in enumerate(files):
        pd.DataFrame(rows).to_csv(folder / f"part-{i:03d}.csv", index=False)
    in_order(folder)
    args = ["stream", "PATTERN SEQ(A a, B b, C c) WITHIN 10 s", "--input", str(folder)]
    args += ["--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "ckpt")]
    main([*args, "--id", "id", "--time-unit", "s", "--max-files-per-trigger", "1"])
    warnings = [w for w in capsys.readouterr().err.splitlines() if w.startswith("warning")]
    assert warnings == [
        "warning: no event has the type 'C': its component never matches",
        "warning: the times of 'ts' read in s lie in the years 36390..36390, outside "
        "1970..2100: ms would fit them (2004..2004); check --time-unit",
    ]
