"""The demo's start (benchmarks/results/demo_timeline.md): a tiny input runs
with interpreted expressions and without adaptive execution (and gives the same rows and
rejected rows), and the command ends without Python's module teardown once its output
is out."""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
from test_examples import EXAMPLES, example_files, read_jsonl

from sparkcep.files import data_bytes, read_pandas
from sparkcep.plan import Options
from sparkcep.runners.local import run_local
from sparkcep.runners.spark.files import read_spark, write_spark
from sparkcep.runners.spark.session import TINY_INPUT_BYTES, light_driver

ROOT = Path(__file__).parent.parent
DEMO = ROOT / "examples" / "cpu_overload"
FACTORY = "spark.sql.codegen.factoryMode"


def test_a_tiny_input_interprets_expressions_a_larger_one_compiles_them():
    _, tiny = light_driver(12 * 40)
    assert tiny[FACTORY] == "NO_CODEGEN"
    assert tiny["spark.sql.codegen.wholeStage"] == "false"
    assert tiny["spark.sql.adaptive.enabled"] == "false"  # one job per query, not per shuffle
    _, small = light_driver(TINY_INPUT_BYTES)
    assert small == {}  # Spark's code generation and adaptive execution
    assert light_driver(None) == ([], {})  # a DataFrame of unknown size: Spark's defaults


@contextmanager
def settings_of(spark, settings: dict[str, str]):
    """The session with these SQL settings for a while, then as it was."""
    before = {key: spark.conf.get(key) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield spark
    finally:
        for key, value in before.items():
            spark.conf.set(key, value)


def tiny_settings() -> dict[str, str]:
    """The SQL settings of a tiny input's run (light_driver)."""
    return light_driver(12 * 40)[1]


def compiled_settings() -> dict[str, str]:
    """Spark's own settings (code generation, adaptive execution), whatever the test
    session's are: a larger input's run."""
    return {"spark.sql.codegen.wholeStage": "true", FACTORY: "FALLBACK",
            "spark.sql.adaptive.enabled": "true"}  # fmt: skip


def _spark_run(spark, events: str, query: str, options: dict, tmp_path: Path, name: str):
    from sparkcep.runners.spark.batch import execute

    source = read_spark(spark, events)
    result = execute(source.df, query, Options(**options), **source.options())
    rows, rejected = tmp_path / f"{name}.jsonl", tmp_path / f"{name}-rejected.jsonl"
    write_spark(result.unordered, str(rows), order=result.order)
    write_spark(result.rejected, str(rejected))
    return read_jsonl(rows), sorted(read_jsonl(rejected), key=lambda r: r["__row"])


@pytest.mark.slow  # covered by: test_examples::test_example_through_spark (with these settings)
@pytest.mark.spark
@pytest.mark.parametrize("folder", EXAMPLES, ids=lambda p: p.name)
def test_interpreted_expressions_give_each_examples_rows(folder, tmp_path, spark):
    query, events, options, expected = example_files(folder)
    if data_bytes([events]) >= TINY_INPUT_BYTES:
        pytest.skip("a run over this input compiles its expressions (light_driver)")
    with settings_of(spark, tiny_settings()):
        rows, rejected = _spark_run(spark, events, query, options, tmp_path, "tiny")
    assert rows == expected
    # the same rows rejected for the same reasons as by the local runner, which rejects
    # as Spark's compiled checking pass does (test_bad_inputs, both ways)
    local = run_local(read_pandas(events), query, **options).rejected
    assert [r["reason"] for r in rejected] == list(local["reason"])


BAD = (
    "ts,type,v,note\n"
    "1,A,1.5,x\n"
    ",B,2,y\n"  # ts is missing
    "3,B,2.5,z\n"
    "4,B,3,w\n"
    "5,,3,v\n"  # type is missing
    "6,B,oops,u\n"  # v is not a number (the query reads v)
    "7,B,0.5,t\n"
    "8,B,1.0,s\n"
    "9,C,4,r\n"
    "10,C,5,q\n"
)


@pytest.mark.spark
def test_interpreted_expressions_reject_the_same_bad_rows(tmp_path, spark):
    # 'v' is read as numbers (9 of its 10 values are: inputs.NUMERIC_SHARE), 'note' stays
    # text; the query reads v, so the row where it is 'oops' is rejected.
    events = tmp_path / "events.csv"
    events.write_text(BAD)
    query = "PATTERN SEQ(A a, B b) WHERE b.v > a.v WITHIN 5"
    with settings_of(spark, tiny_settings()):
        rows, rejected = _spark_run(spark, str(events), query, {}, tmp_path, "tiny")
    # a (ts 1, v 1.5), then a valid B with v > 1.5 less than 5 ticks later: ts 3 and 4
    assert [(r["a"], r["b"]) for r in rows] == [(0, 2), (0, 3)]
    assert {r["__row"]: r["reason"] for r in rejected} == {
        1: "ts is missing",
        4: "type is missing",
        5: "v: 'oops' is not a number",
    }
    assert rejected[2]["v"] == "oops"  # the cell as read
    with settings_of(spark, compiled_settings()):
        compiled = _spark_run(spark, str(events), query, {}, tmp_path, "compiled")
    assert (rows, rejected) == compiled


@pytest.mark.spark
def test_interpreted_expressions_guard_their_casts(tmp_path, spark):
    # A time that is no time: the cast to an integer is guarded by a test of its digits
    # (spark_rows._text_to_long); interpreted, the guard holds as it does compiled.
    events = tmp_path / "events.csv"
    events.write_text("ts,type,v\n1,A,1\nsoon,B,2\n3,B,3\n")
    query = "PATTERN SEQ(A a, B b) WITHIN 5"
    with settings_of(spark, tiny_settings()):
        rows, rejected = _spark_run(spark, str(events), query, {}, tmp_path, "tiny")
    assert [(r["a"], r["b"]) for r in rows] == [(0, 2)]
    assert [(r["__row"], r["ts"], r["reason"]) for r in rejected] == [
        (1, "soon", "ts is not an integer or a timestamp")
    ]


def _command(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sparkcep.cli", *args],
        env=env or dict(os.environ),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_command_exits_fast_after_its_output_is_out(tmp_path):
    out = tmp_path / "m.jsonl"
    done = _command("run", str(DEMO / "query.cep"), "-i", str(DEMO / "events.csv"),
                    "-o", str(out), "--local")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "matches" in done.stdout and "events read" in done.stdout  # the summary is out
    assert read_jsonl(out) == read_jsonl(DEMO / "expected.jsonl")
    # an error still leaves the normal way, with its code and its one line
    failed = _command("run", "PATTERN SEQ(A a", "-i", str(DEMO / "events.csv"), "--local")
    assert failed.returncode == 2 and failed.stderr.startswith("query error: ")


def test_the_exit_functions_run_before_the_fast_exit(tmp_path):
    # A user's exit function (here a file written at exit) still runs.
    marker = tmp_path / "exited"
    script = (
        "import atexit, sys\n"
        f"atexit.register(lambda: open({str(marker)!r}, 'w').write('done'))\n"
        "from sparkcep import cli\n"
        "sys.argv = ['sparkcep', 'explain', 'PATTERN SEQ(A a, B b) WITHIN 5']\n"
        "cli.command()\n"
        "raise SystemExit(3)  # not reached: command() ended the process\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert marker.read_text() == "done"
    assert "SEQ(A a, B b)" in done.stdout  # flushed before the end


# ---- the JVM started before the command's imports (sparkcep._early) ------------------


def test_only_a_spark_run_of_one_file_starts_early(tmp_path):
    from sparkcep._early import run_target

    events = str(DEMO / "events.csv")
    assert run_target(["run", "q.cep", "-i", events, "-o", "m.jsonl"]) == (None, events)
    assert run_target(["run", "q.cep", f"--input={events}", "--master", "local[2]"]) == (
        "local[2]",
        events,
    )
    assert run_target(["run", "q.cep", "-i", events, "--local"]) is None
    assert run_target(["run", "--help"]) is None
    assert run_target(["explain", "q.cep", "-i", events]) is None
    assert run_target(["run", "q.cep", "-i", str(tmp_path)]) is None  # a folder
    assert run_target(["run", "q.cep", "-i", events, "-i", events]) is None  # twice
    assert run_target(["run", "q.cep", "-i"]) is None  # no value


EARLY = (
    "import sys\n"
    "sys.argv = ['sparkcep', 'run', 'q.cep', '-i', {events!r}, '--master', 'local[1]']\n"
    "import sparkcep\n"
    "from sparkcep import _early\n"
    "started = _early.started('local[1]', {size})\n"
    "print(started, flush=True)\n"
    "if started:\n"
    "    _early.taken('local[1]', {size}).stop()\n"
)


@pytest.mark.spark
@pytest.mark.parametrize(
    "switch",
    [
        # covered by: test_fast_start::test_the_first_spark_run_records_the_archive_the_second_uses_it
        pytest.param(None, marks=pytest.mark.slow),
        "0",
    ],
)
def test_the_command_starts_spark_before_its_imports(tmp_path, switch):
    """`sparkcep run` through Spark: importing sparkcep starts the session (in a thread)
    before it imports pandas; SPARKCEP_EARLY_START=0 leaves it to the command."""
    events = DEMO / "events.csv"
    script = EARLY.format(events=str(events), size=events.stat().st_size)
    env = {k: v for k, v in os.environ.items() if k != "SPARKCEP_EARLY_START"}
    if switch is not None:
        env["SPARKCEP_EARLY_START"] = switch
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", script],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(switch is None)]
    imported = [line.split("|")[-1].strip() for line in done.stderr.splitlines() if "|" in line]
    # importtime lists a module when its import ends: the session's module (pyspark with
    # it) before pandas; without the early start, `import sparkcep` does not import it
    if switch is None:
        assert imported.index("sparkcep.runners.spark.session") < imported.index("pandas")
    else:
        assert "sparkcep.runners.spark.session" not in imported


def test_a_gzip_file_counts_its_bytes_unpacked(tmp_path):
    """The settings of a run follow the data, not its packing: a gzipped CSV of 2 MiB
    that packs into a few KiB is not a tiny input (the hospital trace: 0.95 MB packed,
    18.7 MB of CSV)."""
    import bz2
    import gzip

    from sparkcep.files import UNKNOWN_RATIO

    text = b"ts,type\n" + b"".join(b"%d,A\n" % (i % 10) for i in range(2**20 // 4))
    (tmp_path / "e.csv.gz").write_bytes(gzip.compress(text))
    (tmp_path / "e.csv").write_bytes(text)
    (tmp_path / "e.csv.bz2").write_bytes(bz2.compress(text))
    packed = (tmp_path / "e.csv.gz").stat().st_size
    assert packed < TINY_INPUT_BYTES <= len(text)
    assert data_bytes([str(tmp_path / "e.csv.gz")]) == len(text)
    assert data_bytes([str(tmp_path / "e.csv")]) == len(text)
    bz = (tmp_path / "e.csv.bz2").stat().st_size
    assert data_bytes([str(tmp_path / "e.csv.bz2")]) == bz * UNKNOWN_RATIO
    assert data_bytes([str(tmp_path / n) for n in ("e.csv.gz", "e.csv")]) == 2 * len(text)
    assert light_driver(data_bytes([str(tmp_path / "e.csv.gz")]))[1] == {}
