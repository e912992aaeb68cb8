"""A query's error before the input is read (runners/spark/query_first.py): given only when
planning fails against every schema Spark's checking pass can give the rows, so that the
run would have ended with a query error whatever the rows hold. The oracle is the
checking pass itself: the schema it gives the rows, and planning against it."""

from __future__ import annotations

import gzip

import pytest
from helpers import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_bad_inputs import sparkcep

from sparkcep.engines.registry import compile_jobs
from sparkcep.errors import SparkcepError
from sparkcep.files import HEAD_ROWS
from sparkcep.inputs import ROW
from sparkcep.plan import Options, plan_queries
from sparkcep.plan.columns import named_columns
from sparkcep.prep.table import TICKS
from sparkcep.runners.spark.driver_check import ENV as DRIVER_ENV
from sparkcep.runners.spark.query_first import raise_sure_error, valid_schemas
from sparkcep.runners.spark.rows import check_rows, schema_of

HEADER = "ts,type,k,x\n"
MISSPELT = "PATTERN SEQ(A a, B b) WHERE [k] AND a.xx > 1 WITHIN 10"


def test_the_schemas_are_every_typing_of_the_read_text_columns():
    from pyspark.sql import types as T

    fields = [T.StructField(n, T.StringType()) for n in ("ts", "type", "k", "x", "unread")]
    schema = T.StructType([*fields, T.StructField("n", T.LongType())])
    head = {"ts": ["1", "2"], "k": ["a", "b"], "x": ["1.5", "2"]}
    schemas = valid_schemas(schema, "ts", "type", {"k", "x", "n", "ts", "type"}, head)
    assert len(schemas) == 2 * 5 * 5
    assert schemas[0] == {  # the guess first
        "ts": "int", "type": "string", "k": "string", "x": "float", "unread": "string", "n": "int",
    }  # fmt: skip
    assert {s["ts"] for s in schemas} == {"int", "timestamp"}
    assert {s["x"] for s in schemas} == {"int", "float", "bool", "timestamp", "string"}
    assert {(s["type"], s["unread"], s["n"]) for s in schemas} == {("string", "string", "int")}
    typed = {"type": "string", "k": "string", "x": "string", "unread": "string", "n": "int"}
    # no inference (Parquet's text columns stay text): a time in text still reads two ways
    assert valid_schemas(schema, "ts", "type", None, head) == [
        {"ts": "int", **typed},
        {"ts": "timestamp", **typed},
    ]
    many = T.StructType([T.StructField(f"c{i}", T.StringType()) for i in range(6)])
    assert valid_schemas(many, "c0", None, {f"c{i}" for i in range(6)}, {}) is None


CELLS = st.sampled_from(["1", "-7", "2.5", "1e3", "true", "false", "2024-01-02", "w", "", "NA"])
TIMES = st.sampled_from(["1", "5", "12", "2024-01-02 10:00:00", "x", ""])
QUERIES = [
    "PATTERN SEQ(A a, B b) WHERE a.x > 1 WITHIN 10",
    "PATTERN SEQ(A a, B b) WHERE a.x = 'w' WITHIN 10",
    "PATTERN SEQ(A a, B b) WHERE a.x = true WITHIN 10",
    "PATTERN SEQ(A a, B b) WHERE a.x + 1 > b.x WITHIN 10",
    "PATTERN SEQ(A a, B b) WHERE [k] AND a.x < b.k WITHIN 10",
    "PATTERN SEQ(A a, B b) WHERE [k] WITHIN 5 s",
    "PATTERN SEQ(A a, B b) WHERE [x] WITHIN 10",
    "PATTERN SEQ(A a, B b) GROUP BY k AGG SUM(b.x) AS s WITHIN 10",
    "PATTERN SEQ(A a, B b) AGG MAX(a.k) AS m WITHIN 10",
    MISSPELT,
]
# Each query names both k and x (in a comment where it reads one): the checking pass
# types both for every query, so one pass per example gives each query's schema.
QUERIES = [q + " -- k x" for q in QUERIES]


def _plans(queries, schema, options) -> SparkcepError | None:
    try:
        plans, names = plan_queries(queries, schema, options)
        compile_jobs(plans, names, Options(id_col=ROW))
    except SparkcepError as e:
        return e
    return None


@pytest.mark.spark
# each example: a checking pass in Spark (~2 s); HYPOTHESIS_SCALE searches wider
@settings(max_examples=examples(2), deadline=None, suppress_health_check=list(HealthCheck))
@given(
    rows=st.lists(st.tuples(TIMES, st.sampled_from("AB"), CELLS, CELLS), min_size=1, max_size=12),
    head=st.integers(0, 12),
)
def test_an_early_error_is_one_the_checked_rows_give(spark, rows, head):
    """For every query, an error given before reading is one planning against the schema
    of the checked rows gives too (and the same message when the guess was right); the
    misspelt column is found early whatever the rows."""
    frame = spark.createDataFrame(rows, "ts string, type string, k string, x string")
    options = Options()
    roles = {"time_col": "ts", "type_col": "type", "id_col": None}
    head_cells = {c: [r[i] for r in rows[:head]] for i, c in enumerate(("ts", "type", "k", "x"))}
    schemas: dict = {}  # the checked rows' schema
    early_errors = 0
    for query in QUERIES:
        read = named_columns(query, frame.columns, options)
        assert read == {"ts", "type", "k", "x"}
        if not schemas:
            schemas["all"] = _checked_schema(frame, read, roles)
        schema = schemas["all"]
        if schema is None:  # no valid row at all: the run ends with that, not a query error
            continue
        real = _plans(query, schema, options)
        try:
            raise_sure_error(frame.schema, query, options, roles, read, head_cells)
        except SparkcepError as early:
            early_errors += 1
            assert real is not None, (query, schema)
            if schema == _likeliest(frame, read, head_cells):
                assert str(early) == str(real)
    assert early_errors >= 1  # MISSPELT


def _checked_schema(frame, read, roles):
    """The schema Spark's checking pass gives the valid rows (as `spark.execute` takes it)."""
    try:
        checked = check_rows(frame, infer_types=True, split_cols=None, read=read, **roles)
    except SparkcepError:
        return None
    schema = schema_of(checked.valid, ignore=(TICKS, ROW, *checked.coerced.values()))
    schema["ts"] = checked.time_kind
    return schema


def _likeliest(frame, read, head):
    return valid_schemas(frame.schema, "ts", "type", read, head)[0]


@pytest.mark.spark
def test_a_misspelt_column_is_reported_before_a_damaged_file_is_read(
    spark, capsys, monkeypatch, tmp_path
):
    """The query's error comes from the header and the first rows, before Spark reads the
    file: the damage past the first rows (which the run reports when the query is right)
    is not reached."""
    rows = "".join(f"{t},{'AB'[t % 2]},{t % 3},{t}\n" for t in range(HEAD_ROWS * 3))
    data = gzip.compress((HEADER + rows).encode())
    path = tmp_path / "e.csv.gz"
    path.write_bytes(data[:-208] + bytes(200) + data[-8:])  # the rows' end zeroed
    monkeypatch.setenv(DRIVER_ENV, "0")
    code, _, err = sparkcep(capsys, "run", MISSPELT, "-i", path, "-o", tmp_path / "m.jsonl")
    assert code == 2
    assert err.startswith("query error: line 1, column 37: 'xx' is not a column of the input")
    right = MISSPELT.replace("xx", "x")
    code, _, err = sparkcep(capsys, "run", right, "-i", path, "-o", tmp_path / "m.jsonl")
    assert code == 2 and "e.csv.gz" in err and "query error" not in err


@pytest.mark.spark
def test_a_parquet_input_s_query_error_comes_before_the_checking_pass(
    spark, capsys, monkeypatch, tmp_path
):
    """Parquet columns have their types: one schema, and its error is sure. No Spark job
    runs after the input's schema is read."""
    import pandas as pd

    from sparkcep.runners.spark import run_file as spark_file

    path = tmp_path / "e.parquet"
    pd.DataFrame({"ts": [1, 2], "type": ["A", "B"], "k": [1, 1], "x": [1.0, 2.0]}).to_parquet(path)
    tracker = spark.sparkContext.statusTracker()
    jobs: dict = {}
    read = spark_file.read_spark

    def reading(*a, **k):  # the real reader; the jobs run so far are noted after it
        source = read(*a, **k)
        jobs["after reading"] = set(tracker.getJobIdsForGroup())
        return source

    monkeypatch.setattr(spark_file, "read_spark", reading)
    code, _, err = sparkcep(capsys, "run", MISSPELT, "-i", path, "-o", tmp_path / "m.jsonl")
    assert code == 2
    assert err.startswith("query error: line 1, column 37: 'xx' is not a column of the input")
    assert set(tracker.getJobIdsForGroup()) == jobs["after reading"]
    right = "PATTERN SEQ(A a, B b) WHERE [k] WITHIN 5 s"  # integer times with no unit
    code, _, err = sparkcep(capsys, "run", right, "-i", path, "-o", tmp_path / "m.jsonl")
    assert code == 2 and "holds plain integers: give their unit" in err
    assert set(tracker.getJobIdsForGroup()) == jobs["after reading"]


@pytest.mark.spark
def test_a_missing_column_s_error_names_the_input_s_columns_only(
    capsys, monkeypatch, tmp_path, spark
):
    """Spark's reader adds a column of its own for malformed rows; the error lists the
    input's columns, not that one (it did before the check moved here), in the file's
    order, as a local run does."""
    path = tmp_path / "e.jsonl"
    path.write_text('{"ts": 1, "type": "A", "k": 1}\n{"ts": 2, "type": "B", "k": 1}\nnot json\n')
    monkeypatch.setenv(DRIVER_ENV, "0")
    query = "PATTERN SEQ(A a, B b) WHERE [k] WITHIN 5"
    args = ("run", query, "-i", path, "--time", "tt", "-o", tmp_path / "m.jsonl")
    code, _, err = sparkcep(capsys, *args)
    assert code == 2
    assert err.strip() == "error: the time column 'tt' is not in the input (columns: ts, type, k)"
    code, _, local = sparkcep(capsys, *args, "--local")
    assert code == 2 and local == err


def _without_java(tmp_path, *args) -> tuple[int, str]:
    """`sparkcep ...` in a process of its own whose JAVA_HOME leads nowhere: Spark cannot
    start. (exit code, stderr)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "JAVA_HOME": str(tmp_path / "no-java")}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    done = subprocess.run(
        [sys.executable, "-m", "sparkcep.cli", *map(str, args)],
        env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    return done.returncode, done.stderr


def test_a_sure_query_error_needs_no_java(tmp_path):
    """`run` and `stream` give a misspelt column's error before Spark starts: with no
    Java at all, the error is the query's; a right query says that Java is missing."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "e.csv").write_text(HEADER + "".join(f"{t},{'AB'[t % 2]},1,{t}\n" for t in range(50)))
    out = tmp_path / "out"
    code, err = _without_java(tmp_path, "run", MISSPELT, "-i", folder, "-o", out / "m.jsonl")
    assert code == 2 and "query error: line 1, column 37: 'xx' is not a column" in err
    stream = (
        "stream",
        MISSPELT,
        "-i",
        folder,
        "-o",
        out,
        "--checkpoint",
        tmp_path / "c",
        "--id",
        "k",
    )
    code, err = _without_java(tmp_path, *stream)
    assert code == 2 and "query error: line 1, column 37: 'xx' is not a column" in err
    right = MISSPELT.replace("xx", "x")
    code, err = _without_java(tmp_path, "run", right, "-i", folder, "-o", out / "m.jsonl")
    assert code == 2 and "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"error: Spark's Java did not start (JAVA_HOME is '{tmp_path}/no-java')")
