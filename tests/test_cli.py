"""The `sparkcep` command: outputs, summaries and clear errors.

The command runs in this process (`sparkcep.cli.main`, which the console entry point runs),
so that Spark runs share the test session; a few tests run it as a real process, where
the process is the point (a fresh JVM's run, the modules a process imports, a terminal)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_bad_inputs import sparkcep as in_process

ROOT = Path(__file__).parent.parent
EXAMPLE = ROOT / "examples" / "cpu_overload"
SPARKCEP = [sys.executable, "-m", "sparkcep.cli"]


def command(*args, cwd=None, **env_vars) -> subprocess.CompletedProcess:
    """`sparkcep ARGS` as a process of its own."""
    env = dict(os.environ, COLUMNS="200", **env_vars)
    return subprocess.run(
        [*SPARKCEP, *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env, timeout=600
    )


@pytest.fixture
def sparkcep(capsys, monkeypatch):
    """`sparkcep ARGS` run in this process, in `cwd` with `env_vars` set: its exit code
    and output as a process's."""
    monkeypatch.setenv("COLUMNS", "200")

    def run(*args, cwd=None, **env_vars) -> subprocess.CompletedProcess:
        with monkeypatch.context() as m:
            if cwd is not None:
                m.chdir(cwd)
            for name, value in env_vars.items():
                m.setenv(name, value)
            code, out, err = in_process(capsys, *args)
        return subprocess.CompletedProcess(args, code, out, err)

    return run


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_run_local_writes_matches_rejected_rows_and_a_summary(sparkcep, tmp_path):
    out = tmp_path / "out" / "matches.jsonl"
    done = sparkcep(
        "run", EXAMPLE / "query.cep", "--input", EXAMPLE / "events.csv", "--output", out, "--local"
    )
    assert done.returncode == 0, done.stderr
    assert read_jsonl(out) == read_jsonl(EXAMPLE / "expected.jsonl")
    rejected = read_jsonl(tmp_path / "out" / "matches.rejected.jsonl")
    assert sorted(r["reason"] for r in rejected) == ["ts is missing", "type is missing"]
    for word in ("events read", "12", "rejected", "matches", "seconds", "events/s"):
        assert word in done.stdout


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_output_formats(sparkcep, tmp_path, fmt):
    import pandas as pd

    out = tmp_path / f"matches.{fmt}"
    done = sparkcep(
        "run", EXAMPLE / "query.cep", "-i", EXAMPLE / "events.csv", "-o", out, "--local"
    )
    assert done.returncode == 0, done.stderr
    frame = pd.read_csv(out) if fmt == "csv" else pd.read_parquet(out)
    assert list(frame["b"]) == [1, 3]


def test_max_matches_caps_the_output(sparkcep, tmp_path):
    out = tmp_path / "m.jsonl"
    done = sparkcep(
        "run",
        EXAMPLE / "query.cep",
        "-i",
        EXAMPLE / "events.csv",
        "-o",
        out,
        "--local",
        "--max-matches",
        1,
    )
    assert done.returncode == 0, done.stderr
    assert len(read_jsonl(out)) == 1
    assert "max-matches" in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--input", "no/such/file.csv"], "does not exist"),
        (["--input", EXAMPLE / "events.csv", "--time", "when"], "time column 'when'"),
        (["--input", EXAMPLE / "events.csv", "--output", "m.xlsx"], "name the output"),
        (["--input", EXAMPLE / "query.cep"], "cannot tell the format"),
    ],
)
def test_user_mistakes_give_a_message_and_exit_2(sparkcep, tmp_path, args, message):
    done = sparkcep("run", EXAMPLE / "query.cep", "--local", *args, cwd=tmp_path)
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr + done.stdout


def test_empty_input_is_an_error(sparkcep, tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("ts,type\n")
    done = sparkcep(
        "run", EXAMPLE / "query.cep", "-i", empty, "-o", tmp_path / "m.jsonl", "--local"
    )
    assert done.returncode == 2
    assert "no events" in done.stderr
    assert "Traceback" not in done.stderr


def test_query_errors_show_line_column_and_caret(sparkcep, tmp_path):
    query = tmp_path / "bad.cep"
    query.write_text("PATTERN SEQ(TaskStart a, CPU b)\nWHERE b.valu > 95\nWITHIN 15 s\n")
    done = sparkcep(
        "run", query, "-i", EXAMPLE / "events.csv", "-o", tmp_path / "m.jsonl", "--local"
    )
    assert done.returncode == 2
    assert "line 2, column 7" in done.stderr
    assert "'valu' is not a column" in done.stderr
    assert "WHERE b.valu > 95" in done.stderr and "^^^^^^" in done.stderr
    assert "Traceback" not in done.stderr


def test_inline_query_and_explain(sparkcep):
    done = sparkcep("explain", "PATTERN SEQ(A a, B b) WHERE [k] AND a.v > 1 WITHIN 10")
    assert done.returncode == 0, done.stderr
    assert "partitioned by k" in done.stdout and "a: type = 'A' AND (a.v > 1)" in done.stdout


def test_explain_checks_against_the_input_columns(sparkcep):
    done = sparkcep("explain", EXAMPLE / "query.cep", "--input", EXAMPLE / "events.csv")
    assert done.returncode == 0, done.stderr
    assert "15000000" in done.stdout  # 15 seconds in microseconds: the column holds timestamps


def check_the_demo_through_spark(done, out: Path, in_driver: bool) -> None:
    """The demo's run through Spark local mode: its matches, its two rejected rows, and
    the summary's word on where its 12 rows were checked."""
    assert done.returncode == 0, done.stderr
    assert read_jsonl(out) == read_jsonl(EXAMPLE / "expected.jsonl")
    rejected = read_jsonl(out.parent / "matches.rejected.jsonl")
    assert [(r["__row"], r["reason"]) for r in rejected] == [
        (10, "ts is missing"),
        (11, "type is missing"),
    ]
    mode = next(line for line in done.stdout.splitlines() if line.startswith("mode"))
    driver = "Spark (local[2]), rows checked in the driver (input under 1 MiB)"
    assert (driver in mode) == in_driver and "Spark (local[2])" in mode


@pytest.mark.slow  # covered by: test_fast_start::test_the_first_spark_run_records_the_archive_the_second_uses_it
@pytest.mark.spark
def test_run_through_spark_in_a_fresh_process(tmp_path):
    """The demo: the main job through Spark local mode in a process of its own, as
    `make demo` runs it; its 12 rows checked in the driver."""
    out = tmp_path / "matches.jsonl"
    done = command(
        "run", EXAMPLE / "query.cep", "--input", EXAMPLE / "events.csv", "--output", out,
        "--master", "local[2]",
    )  # fmt: skip
    check_the_demo_through_spark(done, out, in_driver=True)


@pytest.mark.spark
def test_run_through_spark_checking_the_rows_in_spark(sparkcep, spark, tmp_path):
    """The demo's rows checked by Spark (SPARKCEP_DRIVER_CHECK_BYTES=0): the same outputs."""
    out = tmp_path / "matches.jsonl"
    done = sparkcep(
        "run", EXAMPLE / "query.cep", "--input", EXAMPLE / "events.csv", "--output", out,
        "--master", "local[2]", SPARKCEP_DRIVER_CHECK_BYTES="0",
    )  # fmt: skip
    check_the_demo_through_spark(done, out, in_driver=False)


def test_count_counts_the_matches_and_writes_nothing(sparkcep, tmp_path):
    """`--count` counts the rows without writing them; rejected rows are written only where
    --rejected says."""
    _counts_and_writes_nothing(sparkcep, tmp_path, ["--local"])


def test_count_counts_the_matches_and_writes_nothing_through_spark(sparkcep, tmp_path, spark):
    _counts_and_writes_nothing(sparkcep, tmp_path, ["--master", "local[2]"])  # takes `spark`


def _counts_and_writes_nothing(sparkcep, tmp_path, where):
    args = ["run", EXAMPLE / "query.cep", "-i", EXAMPLE / "events.csv", "--count", *where]
    done = sparkcep(*args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    expected = len(read_jsonl(EXAMPLE / "expected.jsonl"))
    line = next(row for row in done.stdout.splitlines() if row.startswith("matches"))
    assert line.split()[1:] == [str(expected), "(counted,", "not", "written)"]
    line = next(row for row in done.stdout.splitlines() if row.startswith("rejected"))
    assert line.split()[1:] == ["2"]  # counted, not written: no "-> path"
    assert list(tmp_path.iterdir()) == []  # no matches file, no rejected file
    rejected = tmp_path / "bad" / "rejected.jsonl"
    done = sparkcep(*args, "--rejected", rejected, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert sorted(r["reason"] for r in read_jsonl(rejected)) == [
        "ts is missing",
        "type is missing",
    ]
    assert [p.name for p in tmp_path.iterdir()] == ["bad"]


@pytest.mark.parametrize(
    "query",
    [
        "PATTERN SEQ(A a, B b, C c) WITHIN 30",
        "PATTERN SEQ(A a, B+ b[]) WHERE [k] WITHIN 20 AFTER MATCH SKIP PAST LAST EVENT",
        "PATTERN SEQ(A a, B b) WHERE [k] GROUP BY k AGG COUNT WITHIN 25",
        "QUERY x: PATTERN SEQ(A a, C c, !B b) WITHIN 20; QUERY y: PATTERN SEQ(C c, A a) WITHIN 9;",
    ],
)
@pytest.mark.parametrize("cap", [None, 40])
def test_local_count_prints_the_number_of_rows_written(sparkcep, tmp_path, query, cap):
    """`--local --count` counts without building the rows where it can; the
    number is the one of the rows a run writes, --max-matches too."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(5)
    n = 300
    events = pd.DataFrame(
        {"type": rng.choice(list("ABC"), n), "k": rng.integers(0, 3, n), "ts": np.arange(n)}
    )
    events.to_csv(tmp_path / "events.csv", index=False)
    args = ["run", query, "-i", "events.csv", "--local"]
    args += ["--max-matches", cap] if cap else []
    written = sparkcep(*args, "-o", "rows.jsonl", cwd=tmp_path)
    counted = sparkcep(*args, "--count", cwd=tmp_path)
    assert written.returncode == 0 and counted.returncode == 0, written.stderr + counted.stderr
    line = next(x for x in counted.stdout.splitlines() if "(counted, not written)" in x)
    rows = len(read_jsonl(tmp_path / "rows.jsonl"))
    assert int(line.split()[1].replace(",", "")) == rows
    assert rows > 0 and (cap is None or rows <= cap)


def _in_a_terminal(args: list, cwd: Path) -> tuple[int, str]:
    """Run the command with a pseudo-terminal as its stdin, stdout and stderr; its exit
    code and everything it wrote."""
    import pty

    env = dict(os.environ, COLUMNS="300", TERM="xterm")
    pid, fd = pty.fork()
    if pid == 0:  # the child
        os.chdir(cwd)
        os.execve(sys.executable, [sys.executable, *map(str, args)], env)
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), b"".join(chunks).decode(errors="replace")


def progress_events(folder: Path, n: int) -> None:
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(1)
    pd.DataFrame(
        {"type": rng.choice(list("ABC"), n), "k": rng.integers(0, 50, n), "ts": np.arange(n)}
    ).to_csv(folder / "events.csv", index=False)


PROGRESS_RUN = ["run", "PATTERN SEQ(A a, B b) WHERE [k] WITHIN 3", "-i", "events.csv",
                "--count", "--master", "local[2]"]  # fmt: skip


@pytest.mark.spark
def test_spark_progress_shows_on_a_terminal_only(sparkcep, spark, tmp_path, monkeypatch):
    """on a terminal, a run that lasts more than 2 s (here: from its start,
    so that a short run shows it) shows Spark's stage and tasks done; with stderr
    captured (not a terminal: a notebook, a log), a short run writes nothing of it, a
    long one (here: from its start) plain lines."""
    import io

    from rich.console import Console

    from sparkcep import cli
    from sparkcep.runners.spark.session import SparkProgress

    defaults = {**SparkProgress.__init__.__kwdefaults__, "after": 0.0, "every": 0.01}
    monkeypatch.setattr(SparkProgress.__init__, "__kwdefaults__", defaults)
    progress_events(tmp_path, 20_000)
    done = sparkcep(*PROGRESS_RUN, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Spark stage" not in done.stderr + done.stdout
    monkeypatch.setattr(cli, "PLAIN_PROGRESS_AFTER", 0.0)
    monkeypatch.setattr(cli, "PLAIN_PROGRESS_EVERY", 0.01)
    done = sparkcep(*PROGRESS_RUN, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if "Spark stage" in line]
    assert lines and all(" tasks" in line and "\x1b" not in line for line in lines)
    assert len(lines) == len(set(lines))  # each only when it changed
    terminal = io.StringIO()
    monkeypatch.setattr(cli, "err", Console(file=terminal, force_terminal=True, width=300))
    done = sparkcep(*PROGRESS_RUN, cwd=tmp_path)
    assert done.returncode == 0, terminal.getvalue()
    shown = terminal.getvalue()
    assert "Spark stage" in shown and "tasks" in shown


@pytest.mark.slow  # covered by: test_spark_progress_shows_on_a_terminal_only
@pytest.mark.spark
def test_spark_progress_shows_in_a_real_terminal_only(tmp_path):
    """The same as processes of their own, one with a pseudo-terminal as its stdin,
    stdout and stderr, over a run that lasts more than 2 s."""
    progress_events(tmp_path, 400_000)
    code, shown = _in_a_terminal(["-m", "sparkcep.cli", *PROGRESS_RUN], tmp_path)
    assert code == 0, shown
    assert "Spark stage" in shown and "tasks" in shown
    done = command(*PROGRESS_RUN, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Spark stage" not in done.stderr + done.stdout


def test_local_run_does_not_import_pyspark(tmp_path):
    """`run --local` starts without Spark's Python package (its import is a
    good part of a short run's time)."""
    env = dict(os.environ, COLUMNS="200")
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "sparkcep.cli", "run", EXAMPLE / "query.cep",
         "-i", EXAMPLE / "events.csv", "--count", "--local"],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    imported = [line.split("|")[-1].strip() for line in done.stderr.splitlines() if "|" in line]
    assert "sparkcep.runners.local" in imported
    assert not [name for name in imported if name.split(".")[0] in ("pyspark", "py4j")]


def test_run_several_agg_queries_together(sparkcep, tmp_path):
    query = tmp_path / "q.cep"
    query.write_text(
        "QUERY de: PATTERN SEQ(D d, E e) AGG COUNT WITHIN 9;\n"
        "QUERY abcde: PATTERN SEQ(A a, B b, C c, D d, E e) AGG COUNT WITHIN 9;\n"
    )
    events = tmp_path / "e.csv"
    events.write_text("type,ts\nA,1\nB,2\nC,3\nA,4\nB,5\nD,6\nC,7\nA,8\nD,9\nE,10\n")
    out = tmp_path / "rows.jsonl"
    for algorithm in ("aseq", "twostep"):
        done = sparkcep("run", query, "-i", events, "-o", out, "--local", "--algorithm", algorithm)
        assert done.returncode == 0, done.stderr
        # Example 8 of the A-Seq paper: one (A,B,C,D,E) match at e1, two (D,E).
        assert read_jsonl(out) == [
            {"query": "abcde", "ts": 10, "count": 1},
            {"query": "de", "ts": 10, "count": 2},
        ]
        assert "rows" in done.stdout


def test_headerless_csv_with_column_names(sparkcep, tmp_path, shared_data):
    """The stock trades come without a header line: --columns names them (they used to
    need rewriting: "'ts' is not in the input (columns: B, 8, 7, 100, 27.85, ...)")."""
    import numpy as np
    import pandas as pd

    trades = shared_data / "stocks" / "trades.csv.gz"
    names = "side,tx_id,stock_id,volume,price,time_ms"
    query = "PATTERN SEQ(B a, S b) WHERE [stock_id] AND b.price > a.price WITHIN 1 s"
    out = tmp_path / "m.jsonl"
    done = sparkcep(
        "run", query, "--input", trades, "--output", out, "--local", "--columns", names,
        "--time", "time_ms", "--type", "side", "--time-unit", "ms",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = read_jsonl(out)
    # The same query by hand over the same rows, in pandas: each B, each later S of the
    # same stock within 1 s at a higher price (times in ms; equal times never match).
    frame = pd.read_csv(trades, header=None, names=names.split(","))
    frame["row"] = np.arange(len(frame))
    expected = []
    for _, stock in frame.groupby("stock_id"):
        b, s = stock[stock.side == "B"], stock[stock.side == "S"]
        s_time = s.time_ms.to_numpy()
        lo = np.searchsorted(s_time, b.time_ms.to_numpy(), side="right")
        hi = np.searchsorted(s_time, b.time_ms.to_numpy() + 1000, side="left")
        counts = np.maximum(hi - lo, 0)
        bi = np.repeat(np.arange(len(b)), counts)  # every (B, later S within 1 s) pair
        si = np.concatenate([np.arange(x, y) for x, y in zip(lo, hi)] or [[]]).astype(int)
        up = s.price.to_numpy()[si] > b.price.to_numpy()[bi]
        expected += list(zip(b.row.to_numpy()[bi[up]].tolist(), s.row.to_numpy()[si[up]].tolist()))
    assert sorted((r["a"], r["b"]) for r in rows) == sorted(expected)
    assert len(rows) > 0


def test_local_summary_names_the_key_even_without_matches(sparkcep, tmp_path):
    events = tmp_path / "e.csv"
    events.write_text("ts,type,k\n1,A,1\n2,B,2\n3,A,3\n4,B,3\n")
    for query, expected in [
        ("PATTERN SEQ(A a, B b) WHERE [k] WITHIN 9", "keyed by k (1 key has rows)"),
        ("PATTERN SEQ(B b, A a) WHERE [k] WITHIN 9", "keyed by k"),  # no match
        ("PATTERN SEQ(A a, B b) WITHIN 9", "1 (no key)"),
    ]:
        done = sparkcep("run", query, "-i", events, "-o", tmp_path / "m.jsonl", "--local")
        assert done.returncode == 0, done.stderr
        line = next(x for x in done.stdout.splitlines() if x.startswith("partitions"))
        assert line.split(None, 1)[1].strip() == expected
