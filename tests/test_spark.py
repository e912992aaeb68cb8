"""The Spark batch runner gives exactly the local runner's output."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from helpers import rows_of

from sparkcep.engines.registry import engines
from sparkcep.errors import QueryError
from sparkcep.runners.local import run_local
from sparkcep.runners.spark.batch import match, run
from sparkcep.runners.spark.files import read_spark, write_spark

pytestmark = pytest.mark.spark

QUERIES = [
    # keyed
    "PATTERN SEQ(A a, B b, C c) WHERE [k] AND a.v < c.v WITHIN 40",
    "PATTERN SEQ(A a, B b, C c) WHERE [k] STRATEGY SKIP_TILL_NEXT_MATCH WITHIN 40",
    "PATTERN SEQ(A a, B b) WHERE [k] STRATEGY STRICT_CONTIGUITY WITHIN 30 ORDER BY ts, seq",
    "PATTERN SEQ(A a, B+ b[], C c) WHERE [k] AND prev(b.v) <= b.v WITHIN 25 "
    "RETURN sum(b.v) AS total, b.v AS values",
    "PATTERN SEQ(A a, C c, !B x) WHERE [k] WITHIN 30",
    # unkeyed: time ranges overlapping by the window
    "PATTERN SEQ(A a, B b, C c) WHERE a.v < b.v WITHIN 15",
    "PATTERN SEQ(!D d, A a, B b) STRATEGY SKIP_TILL_NEXT_MATCH WITHIN 12",
    "PATTERN SEQ(A a, ANY b, C c) STRATEGY STRICT_CONTIGUITY WITHIN 10",
    "PATTERN SEQ(A a, !B x, C c) WHERE x.v = a.v WITHIN 20 RETURN a.v * 2 AS twice",
]


def events(n=400, seed=7) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    ts = np.sort(rng.integers(0, n // 2, n))  # many equal times
    v = rng.integers(0, 10, n).astype(float)
    v[rng.random(n) < 0.05] = np.nan
    return pd.DataFrame(
        {
            "type": rng.choice(list("ABCD"), n),
            "ts": ts,
            "k": rng.integers(0, 4, n),
            "v": v,
            "seq": rng.integers(0, 3, n),
        }
    ).sample(frac=1.0, random_state=seed)  # input order is not time order


@pytest.fixture(scope="module")
def stream(spark):
    pdf = events().reset_index(drop=True)
    return pdf, spark.createDataFrame(pdf).repartition(3)


@pytest.mark.parametrize(
    "queries",
    [QUERIES[:3] + QUERIES[4:5], QUERIES[3:4], QUERIES[5:]],  # (b is a list in QUERIES[3])
    ids=["keyed", "keyed kleene", "unkeyed: time ranges"],
)
def test_spark_equals_local(stream, queries):
    """The queries run together (one Spark job; each query's rows told apart by the
    `query` column), compared with the local run query by query."""
    pdf, _ = stream
    # Ids: an id column makes the rows' identity independent of Spark's partitioning.
    pdf = pdf.assign(id=np.arange(len(pdf)))
    sdf = stream[1].sparkSession.createDataFrame(pdf).repartition(3)
    local = run_local(pdf, queries, id_col="id").matches
    result = run(sdf, queries, id_col="id")
    got = result.matches.toPandas()
    assert list(got.columns) == list(local.columns)
    for i, query in enumerate(queries):
        name = f"q{i + 1}"
        mine, theirs = (f[f["query"] == name] if "query" in f else f for f in (got, local))
        assert len(theirs) > 0, f"{query} should match something"
        cols = list(local.columns)  # (several programs' rows: ordered by query only)
        assert sorted(rows_of(mine, cols), key=str) == sorted(rows_of(theirs, cols), key=str)
    if not any(p.key for p in result.plans):
        assert "time ranges" in result.layout and result.partitions > 1


def test_match_api_numbers_rows_in_dataframe_order(spark):
    pdf = events(60, seed=3).reset_index(drop=True)
    sdf = spark.createDataFrame(pdf.assign(pos=np.arange(len(pdf))), schema=None).coalesce(1)
    got = match(sdf, "PATTERN SEQ(ANY a) WITHIN 1 RETURN a.pos AS pos").toPandas()
    assert len(got) == len(pdf)
    assert (got["a"] == got["pos"]).all()


def test_row_numbers_follow_input_order_across_files_and_splits(spark, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    frames = []
    start = 0
    for name, n in (("b.csv", 300), ("a.csv", 40), ("c.csv", 500)):
        df = pd.DataFrame({"type": "E", "ts": np.arange(n) % 50, "rid": 0})
        frames.append((name, df))
    for name, df in sorted(frames):  # files are read in name order
        df["rid"] = np.arange(start, start + len(df))
        start += len(df)
        df.to_csv(folder / name, index=False)
    old = spark.conf.get("spark.sql.files.maxPartitionBytes")
    spark.conf.set("spark.sql.files.maxPartitionBytes", "1500")  # split files into blocks
    try:
        source = read_spark(spark, str(folder))
        assert source.df.rdd.getNumPartitions() > 3
        result = run(source.df, "PATTERN SEQ(E a) WITHIN 1 RETURN a.rid AS rid", **source.options())
        got = result.unordered.toPandas()
    finally:
        spark.conf.set("spark.sql.files.maxPartitionBytes", old)
    assert len(got) == start
    assert (got["a"] == got["rid"]).all()


@pytest.mark.parametrize("one_pass", [True, False])
def test_row_numbers_of_one_file_in_many_splits_follow_its_order(spark, tmp_path, one_pass):
    """One file is numbered by Spark's partitions of it (its splits, in order: a
    partition's number costs nothing where the offset is a column read per row),
    checked on the way to the matcher or in a pass of its own."""
    from sparkcep.plan import Options
    from sparkcep.runners.spark.batch import execute

    n = 700
    df = pd.DataFrame({"type": "E", "ts": np.arange(n) // 3, "k": np.arange(n) % 4})
    df["rid"] = np.arange(n)
    path = tmp_path / "e.csv"
    df.to_csv(path, index=False)
    old = spark.conf.get("spark.sql.files.maxPartitionBytes")
    spark.conf.set("spark.sql.files.maxPartitionBytes", "1500")  # split the file into blocks
    try:
        source = read_spark(spark, str(path))
        assert source.df.rdd.getNumPartitions() > 3
        query = "PATTERN SEQ(E a) WHERE [k] WITHIN 1 RETURN a.rid AS rid"
        result = execute(
            source.df, query, Options(), source=source, one_pass=one_pass, **source.options()
        )  # fmt: skip
        got = result.unordered.toPandas()
        result.settle()
        assert (result.checked.pending is not None) is one_pass
    finally:
        spark.conf.set("spark.sql.files.maxPartitionBytes", old)
    assert len(got) == n and result.checked.events_read == n
    assert (got["a"] == got["rid"]).all()


def test_bad_rows_are_rejected_with_a_reason_and_nothing_is_lost(spark, tmp_path):
    path = tmp_path / "events.csv"
    path.write_text(
        "type,ts,v\n"
        "A,1,5\n"
        "B,2,6\n"
        ",3,7\n"  # type missing
        "A,,8\n"  # time missing
        "A,soon,9\n"  # time unreadable
        "A,4,10,extra\n"  # malformed: one field too many
        "B,5,11\n"
    )
    source = read_spark(spark, str(path))
    result = run(source.df, "PATTERN SEQ(A a, B b) WITHIN 10", **source.options())
    rejected = result.rejected.toPandas().sort_values("__row")
    assert result.checked.events_read == 7
    assert result.checked.rejected_count == 4
    assert list(rejected["reason"]) == [
        "type is missing",
        "ts is missing",
        "ts is not an integer or a timestamp",
        "malformed row",
    ]
    assert list(rejected["__row"]) == [2, 3, 4, 5]
    got = result.matches.toPandas()
    assert rows_of(got, ["a", "b"]) == [(0, 1), (0, 6)]
    out = tmp_path / "rejected.jsonl"
    assert write_spark(result.rejected, str(out)) == 4


def test_types_are_inferred_from_text_columns(spark, tmp_path):
    path = tmp_path / "events.csv"
    path.write_text(
        "type,ts,n,x,flag,when,name\n"
        "A,1,5,1.5,true,2026-01-01 10:00:00,a\n"
        "B,2,-6,2,false,2026-01-02 10:00:00,7\n"
    )
    source = read_spark(spark, str(path))
    query = (
        "PATTERN SEQ(A a, B b) WHERE a.n > b.n AND a.flag AND a.x < b.x AND a.`when` < b.`when` "
        "AND a.name != b.name WITHIN 5"
    )
    result = run(source.df, query, **source.options())
    schema = {f.name: f.dataType.simpleString() for f in result.checked.valid.schema.fields}
    assert schema["n"] == "bigint" and schema["x"] == "double" and schema["flag"] == "boolean"
    assert schema["when"] == "timestamp" and schema["name"] == "string"
    assert len(result.matches.toPandas()) == 1


def test_only_the_columns_a_query_names_are_typed(spark, tmp_path):
    """the checking pass infers types only for the columns the queries can
    read; the others stay text as read (also in the rejected rows)."""
    path = tmp_path / "events.csv"
    path.write_text(
        "type,ts,v,w\n"
        + "".join(f"A,{t},{t},{t}.50\n" for t in range(1, 11))
        + "B,11,unknown,11.50\nB,12,12,12.50\n"
    )
    source = read_spark(spark, str(path))
    result = run(source.df, "PATTERN SEQ(A a, B b) WHERE a.v < b.v WITHIN 5", **source.options())
    schema = {f.name: f.dataType.simpleString() for f in result.checked.valid.schema.fields}
    assert schema["v"] == "bigint" and schema["w"] == "string"
    rejected = result.rejected.toPandas()
    assert list(rejected["reason"]) == ["v: 'unknown' is not a number"]
    assert list(rejected["w"]) == ["11.50"]  # as read (typed, it would be 11.5)
    # WITHIN 5: end - start < 5, so the A events at 8, 9, 10 (ids 7-9) with B at 12 (id 11)
    assert rows_of(result.matches.toPandas(), ["a", "b"]) == [(7, 11), (8, 11), (9, 11)]
    # a `*` may stand for every column (SELECT *, A.*): then every column is typed
    query = "PATTERN SEQ(A a, B b) WHERE a.v * 2 < b.v WITHIN 5"
    result = run(source.df, query, **source.options())
    assert result.checked.valid.schema["w"].dataType.simpleString() == "double"


AGG_QUERIES = [
    "PATTERN SEQ(A a, B b, C c) WHERE [k] GROUP BY k AGG COUNT, SUM(b.v) AS s WITHIN 40",
    "PATTERN SEQ(A a, B b, !D x, C c) AGG COUNT, MAX(a.v) AS m, AVG(c.v) AS av WITHIN 30",
    "PATTERN SEQ(A a, B b) WHERE a.v < b.v GROUP BY k AGG COUNT WITHIN 20",  # enumeration
    [
        "QUERY one: PATTERN SEQ(A a, B b, C c) AGG COUNT WITHIN 25",
        "QUERY two: PATTERN SEQ(D d, A a, B b, C c) AGG COUNT, MIN(d.v) AS m WITHIN 25",
        "QUERY three: PATTERN SEQ(A a, B b) AGG COUNT WITHIN 25",
    ],
]


@pytest.mark.parametrize("queries", AGG_QUERIES, ids=lambda q: str(q)[:40])
def test_spark_aggregates_equal_local(stream, queries, monkeypatch):
    from sparkcep.engines.aseq import forest
    from sparkcep.runners.local import run_aggregate_local

    monkeypatch.setattr(forest, "CHOP_MIN_STEPS", 1)  # cut every shared tail
    from sparkcep.runners.spark.batch import run_aggregate

    pdf, _ = stream
    pdf = pdf.assign(id=np.arange(len(pdf)))
    sdf = stream[1].sparkSession.createDataFrame(pdf).repartition(3)
    local = run_aggregate_local(pdf, queries, id_col="id").matches
    # Spark chops and connects; the local run shares prefixes only (the default).
    result = run_aggregate(sdf, queries, id_col="id", sharing="chop")
    got = result.rows.toPandas()
    assert len(local) > 0
    assert list(got.columns) == list(local.columns)
    # Equal-time triggers of one group give equal rows, so compare as sorted rows.
    cols = list(local.columns)
    assert sorted(rows_of(got, cols), key=str) == sorted(rows_of(local, cols), key=str)
    if not result.plans[0].aggregate.group_by:
        assert "time ranges" in result.layout


TIMES_CSV = (
    "type,ts\n"
    "A,1\n"
    "B,99999999999999999999\n"  # beyond int64: wrapped to -2^63 and matched, once
    "B,4611686018427387904\n"  # 2^62: out of range
    "B,-4611686018427387904\n"
    "A,1700000000000000123\n"  # nanoseconds since 1970: 19 digits, in range
    "B,1700000000000000124\n"
    "B,2\n"
)
OUT_OF_RANGE = "ts is out of range (integer times lie within ±2^62)"


def check_times(matches, rejected):
    # the window spans every valid time: each A matches each later B
    assert rows_of(matches, ["start", "end"]) == [
        (1, 2),
        (1, 1700000000000000124),
        (1700000000000000123, 1700000000000000124),
    ]
    assert list(rejected["reason"]) == [OUT_OF_RANGE] * 3


def test_out_of_range_times_are_rejected_locally(tmp_path):
    from sparkcep.files import read_pandas

    path = tmp_path / "events.csv"
    path.write_text(TIMES_CSV)
    # A window beyond what int64 ticks hold is as long as any span of valid times.
    result = run_local(read_pandas(str(path)), "PATTERN SEQ(A a, B b) WITHIN 1e400")
    check_times(result.matches, result.rejected)


@pytest.mark.spark
def test_out_of_range_times_are_rejected_by_spark(spark, tmp_path):
    path = tmp_path / "events.csv"
    path.write_text(TIMES_CSV)
    source = read_spark(spark, str(path))
    query = "PATTERN SEQ(A a, B b) WITHIN 100000000000000000000"
    result = run(source.df, query, **source.options())
    rejected = result.rejected.toPandas().sort_values("__row")
    check_times(result.matches.toPandas(), rejected)


# ---- every registered engine: Spark equals local on its examples ---------------------

ENGINES = engines()
ENGINE_EXAMPLES = {
    name: list(engine.examples) for name, engine in ENGINES.items() if engine.examples
}


def _one_engine_a_package() -> list:
    """The engines with examples; the default run takes one engine per package (the first
    the registry names): the runner's contract is the probes' (tests/test_runners.py) and
    each engine's rows the conformance suite's, in pandas."""
    params, packages = [], set()
    for name in ENGINE_EXAMPLES:
        package = ".".join(type(ENGINES[name]).__module__.split(".")[:3])  # sparkcep.engines.x
        # covered by: this test on the first engine of the package, test_runners' probes
        marks = [pytest.mark.slow] if package in packages else []
        packages.add(package)
        params.append(pytest.param(name, marks=marks))
    return params


@pytest.fixture(scope="module")
def engine_stream(spark):
    from sparkcep.checks import random_events

    pdf = random_events(n=300, seed=5)
    return pdf, spark.createDataFrame(pdf.sample(frac=1.0, random_state=2)).repartition(3)


def together(queries: list[str], pdf: pd.DataFrame, name: str) -> list[list[str]]:
    """The queries in groups that may run together (a group gives no column two types)."""
    groups: list[list[str]] = []
    for query in queries:
        for group in groups:
            try:
                run_local(pdf.iloc[:0], [*group, query], id_col="id", algorithm=name)
            except QueryError:
                continue
            group.append(query)
            break
        else:
            groups.append([query])
    return groups


@pytest.mark.parametrize("name", _one_engine_a_package())
def test_every_engine_spark_equals_local(engine_stream, name):
    """Each engine's examples, run together (one Spark job a group), give the local rows."""
    pdf, sdf = engine_stream
    for queries in together(ENGINE_EXAMPLES[name], pdf, name):
        local = run_local(pdf, queries, id_col="id", algorithm=name).matches
        got = run(sdf, queries, id_col="id", algorithm=name).rows.toPandas()
        assert list(got.columns) == list(local.columns)
        cols = list(local.columns)
        assert sorted(rows_of(got, cols), key=str) == sorted(rows_of(local, cols), key=str)


def test_string_functions_and_no_type_column_in_spark(spark):
    from test_language import STRING_EVENTS

    pdf = pd.DataFrame(STRING_EVENTS)
    sdf = spark.createDataFrame(pdf)
    for query in (
        "PATTERN SEQ(ANY a) WHERE a.name LIKE 'A%' OR lower(a.name) = 'bob'",
        "PATTERN SEQ(ANY a) WHERE coalesce(a.tag, a.alt, 'none') IN ('x', 'none')",
        "PATTERN SEQ(ANY a) WHERE length(a.name) > 3 AND NOT contains(a.name, 'l')",
        "PATTERN SEQ(`Admission NC` a, ANY b) WHERE startswith(b.type, 'Lab') WITHIN 9",
    ):
        local = run_local(pdf, query).matches
        got = run(sdf, query).rows.toPandas()
        assert rows_of(got, list(local.columns)) == rows_of(local, list(local.columns)), query
    typeless = spark.createDataFrame(pd.DataFrame({"ts": [1, 2, 3], "v": [5, 50, 70]}))
    got = run(typeless, "PATTERN SEQ(ANY a, ANY b) WHERE a.v < 10 WITHIN 9").rows.toPandas()
    assert got[["a", "b"]].values.tolist() == [[0, 1], [0, 2]]


# A column of numbers with one cell that is not (1 in 20: under 10%, so numbers): the
# same rule locally and in Spark.
MIXED_CSV = (
    "type,ts,v,note\n"
    "A,1,1,x\nB,2,2,x\nC,3,unknown,x\nA,4,10,x\nC,5,9,NA\nA,6,3,\nC,7,1,x\nA,8,8,x\nC,9,20,5\n"
    + "".join(f"B,{t},{t},x\n" for t in range(10, 21))
)
EXPECTED = {"a.v < c.v": [(1, 5), (6, 9), (8, 9)], "a.v < 5": [(1, 5), (6, 7), (6, 9)]}


def test_a_column_of_numbers_with_a_bad_cell(spark, tmp_path):
    """Both conditions' queries in one run (one read, one checking pass), locally and in
    Spark."""
    from sparkcep.files import read_pandas
    from sparkcep.plan import Options
    from sparkcep.runners.spark.batch import execute

    path = tmp_path / "events.csv"
    path.write_text(MIXED_CSV)
    queries = [f"PATTERN SEQ(A a, C c) WHERE {where} WITHIN 5" for where in EXPECTED]
    local = run_local(read_pandas(str(path)), queries)
    source = read_spark(spark, str(path))
    result = execute(source.df, queries, Options(), **source.options())
    for rows, rejected in (
        (local.matches, local.rejected),
        (result.rows.toPandas(), result.rejected.toPandas()),
    ):
        # numbers compare as numbers (10 > 9, not "10" < "9"); the row with 'unknown' is
        # rejected with its cell as read
        for i, where in enumerate(EXPECTED):
            mine = rows[rows["query"] == f"q{i + 1}"].sort_values(["start", "end"])
            assert rows_of(mine, ["start", "end"]) == EXPECTED[where], where
        assert list(rejected["reason"]) == ["v: 'unknown' is not a number"]
        assert list(rejected["v"]) == ["unknown"]
    # a query that does not read v keeps the row
    assert len(run_local(read_pandas(str(path)), "PATTERN SEQ(C c) WITHIN 5").rejected) == 0


def _tasks_per_stage(spark, group: str) -> list[int]:
    """The number of tasks of each stage the jobs of a job group ran (Spark's status)."""
    tracker = spark.sparkContext.statusTracker()
    counts = []
    for job in tracker.getJobIdsForGroup(group):
        info = tracker.getJobInfo(job)
        for stage in info.stageIds if info else []:
            stage_info = tracker.getStageInfo(stage)
            if stage_info is not None and stage_info.numCompletedTasks:
                counts.append(stage_info.numTasks)
    return counts


def test_every_core_matches(spark, tmp_path):
    """the matching stage of a keyed query has a task per core at least,
    also when the input is one small file (one split) and the output one file."""
    pdf = events(600, seed=11).assign(k=lambda f: np.arange(len(f)) % 16)
    path = tmp_path / "events.csv"
    pdf.to_csv(path, index=False)
    query = QUERIES[1]
    source = read_spark(spark, str(path))
    assert source.df.rdd.getNumPartitions() == 1
    result = run(source.df, query, **source.options())
    cores = spark.sparkContext.defaultParallelism
    assert cores >= 2 and result.partitions >= cores
    sc = spark.sparkContext
    sc.setJobGroup("issue16-every-core", "matching and writing")
    try:
        n = write_spark(result.unordered, str(tmp_path / "out.jsonl"), order=result.order)
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    # Stages: the read (one split), the matching, the single output file. Only the
    # matching stage can run more than one task.
    tasks = _tasks_per_stage(spark, "issue16-every-core")
    assert max(tasks) >= cores, tasks
    from sparkcep.files import read_pandas

    local = run_local(read_pandas(str(path)), query).matches
    got = read_pandas(str(tmp_path / "out.jsonl"))
    assert n == len(local) > 0
    assert rows_of(got, list(local.columns)) == rows_of(local, list(local.columns))
