"""sparkcep on a Spark Connect session: every engine's first example gives the rows the
classic session gives, through the Python API and the CLI (`--remote`).

The Spark Connect server runs in the test run's own JVM (the `spark` fixture's, started
as `SparkSession.builder.remote("local")` would start one); its client is another
Python process, as PySpark picks a function's kind (classic or Connect) for the whole
process."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from connect_cases import CASES, rows_of, streamed

TESTS = Path(__file__).parent
EXAMPLES = TESTS.parent / "examples"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def connect_url(spark):
    """A Spark Connect server in the test run's JVM (stopped with the JVM)."""
    context = spark.sparkContext._jsc.sc()
    port = _free_port()
    context.conf().set("spark.connect.grpc.binding.address", "127.0.0.1")
    context.conf().set("spark.connect.grpc.binding.port", str(port))
    spark._jvm.org.apache.spark.sql.connect.service.SparkConnectService.start(context)
    return f"sc://127.0.0.1:{port}"


def _client_env() -> dict:
    env = dict(os.environ)
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)
    env.pop("SPARK_REMOTE", None)
    return env


def test_every_engine_through_spark_connect_gives_the_classic_rows(spark, connect_url, tmp_path):
    client = subprocess.run(
        [sys.executable, str(TESTS / "connect_cases.py"), connect_url, str(tmp_path / "connect")],
        capture_output=True, text=True, timeout=300, env=_client_env(),
    )  # fmt: skip
    assert client.returncode == 0, client.stderr[-3000:]
    through_connect = {r["case"]: r for r in map(json.loads, client.stdout.splitlines())}
    assert set(through_connect) == {*CASES, "stream"}
    for name in CASES:
        connect = through_connect[name]
        assert "error" not in connect, f"{name}: {connect['error']}"
        classic = rows_of(spark, name)
        assert all(connect["rows"]), f"{name}: no rows (the case should have some)"
        assert connect["rows"] == classic["rows"], name
        assert connect["explain"] == classic["explain"], name
    stream = through_connect["stream"]
    assert "error" not in stream, stream["error"]
    assert stream["rows"] == [streamed(spark, str(tmp_path / "classic"))]
    assert [(r["a"], r["b"], r["c"]) for r in stream["rows"][0]] == [(1, 2, 4), (3, 5, 6)]


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sparkcep.cli", *args],
        capture_output=True, text=True, timeout=300, env=_client_env(), cwd=cwd,
    )  # fmt: skip


def test_the_command_line_runs_on_a_spark_connect_server(connect_url, tmp_path):
    """`sparkcep run --remote sc://...` writes the bytes `--local` writes, and says so
    when equal times matter (the tie count comes back as an observed metric)."""
    tied = tmp_path / "tied.csv"
    tied.write_text("type,ts,v\nA,1,1\nB,2,1\nB,2,2\nC,3,1\n")
    larger = tmp_path / "larger.csv"  # over the size checked in the driver: Spark checks it
    larger.write_text("id,type,ts,k,v\n" + "".join(
        f"{i},{'ABC'[i * 7 % 3]},{i * 10},{i % 97},{i * 13 % 10}\n" for i in range(80_000)))  # fmt: skip
    runs = [
        (str(EXAMPLES / "cpu_overload" / "query.cep"), str(EXAMPLES / "cpu_overload/events.csv")),
        ("PATTERN SEQ(A a, B b) WITHIN 10", str(tied)),
        ("PATTERN SEQ(A a, B b, C c) WHERE [k] AND a.v < c.v WITHIN 5000", str(larger)),
    ]
    for i, (query, events) in enumerate(runs):
        outputs = {}
        for mode in (["--local"], ["--remote", connect_url]):
            out = tmp_path / f"{i}{mode[0]}.jsonl"
            done = _cli("run", query, "--input", events, "--output", str(out), *mode, cwd=tmp_path)
            assert done.returncode == 0, done.stderr[-3000:]
            outputs[mode[0]] = (out.read_bytes(), done.stderr + done.stdout)
        assert outputs["--remote"][0] == outputs["--local"][0]
        rows = len(outputs["--local"][0].splitlines())
        assert rows == 2 if i < 2 else rows > 1_000  # (the larger: the same as --local)
        assert "through Spark Connect" in outputs["--remote"][1]
        said = "2 events share a time" in outputs["--remote"][1]
        assert said == (i == 1) == ("2 events share a time" in outputs["--local"][1])


def test_no_server_at_the_address_is_one_line_at_once(tmp_path):
    port = _free_port()  # (closed again: nothing listens there)
    events = EXAMPLES / "cpu_overload" / "events.csv"
    query = "PATTERN SEQ(A a, B b) WITHIN 10"
    done = _cli("run", query, "--input", str(events), "--output", str(tmp_path / "m.jsonl"),
                "--remote", f"sc://127.0.0.1:{port}", cwd=tmp_path)  # fmt: skip
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert lines == [f"error: no Spark Connect server answers at sc://127.0.0.1:{port} "
                     "(Connection refused)"]  # fmt: skip
    stream = _cli("stream", query, "--input", str(tmp_path), "--output", str(tmp_path / "o"),
                  "--checkpoint", str(tmp_path / "c"), "--id", "id",
                  "--remote", f"sc://127.0.0.1:{port}",
                  cwd=tmp_path)  # fmt: skip
    assert stream.returncode != 0
    assert stream.stderr.strip().splitlines() == [
        "error: sparkcep stream runs on a local or cluster master, not through Spark Connect: "
        "there, call sparkcep.stream(streaming_df, query) and start its DataFrames' "
        "writeStream yourself (docs/spark.md)"
    ]


def test_the_matching_stage_follows_the_cores_not_the_shuffle_setting(spark):
    """A session's 200 shuffle partitions (Spark's default, meant for joins of large
    tables) do not become 200 matching tasks: two a core, fewer for a small input."""
    from sparkcep.runners.spark.batch import matching_partitions, run
    from sparkcep.runners.spark.session import setting

    cores = spark.sparkContext.defaultParallelism
    with setting(spark, "spark.sql.shuffle.partitions", "200"):
        assert matching_partitions(spark) == 2 * cores
        assert matching_partitions(spark, 20) == min(2 * cores, 4)
        assert matching_partitions(spark, 10**9) == 2 * cores
        df = spark.read.csv(str(EXAMPLES / "ticker_v_shapes" / "events.csv"), header=True,
                            inferSchema=True)  # fmt: skip
        query = (EXAMPLES / "ticker_v_shapes" / "query.cep").read_text()
        done = run(df, "PATTERN SEQ(A a, B b) WHERE [symbol] WITHIN 5", time_col="day",
                   type_col="symbol")  # fmt: skip
        assert done.partitions == min(2 * cores, 4)
        assert len(sparkcep_rows(df, query)) == 4


def sparkcep_rows(df, query):
    import sparkcep

    return sparkcep.match_recognize(df, query).collect()
