"""A CSV input checked with one read (issue 16 §1, runners/spark/one_read.py): `sparkcep run`
through Spark's checking pass gives the same rows, rejected rows (cells and reasons),
summary and warnings whether it reads the files once, with the types guessed from the
first rows and confirmed by the counts, or twice (SPARKCEP_ONE_READ=0, the reference).
A guess the counts do not confirm falls back to the two reads. Both ways run in this
process, in the test session's Spark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_bad_inputs import sparkcep
from test_driver_check import table

from sparkcep.files import HEAD_ROWS
from sparkcep.input_types import choose_kind
from sparkcep.runners.spark import batch as spark_runner
from sparkcep.runners.spark import one_pass as spark_pass
from sparkcep.runners.spark import one_read as spark_once
from sparkcep.runners.spark.driver_check import ENV as DRIVER_ENV

QUERY = "PATTERN SEQ(A a, B b) WHERE [k] AND b.v > a.v WITHIN 10"


def jsonl(path: Path) -> list[dict] | None:
    if not path.exists():
        return None
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def run_way(capsys, monkeypatch, way: str, folder: Path, args) -> dict:
    """One Spark run with Spark's checking pass: on the rows' way to the matcher
    ('pass'), in a job of its own reading once ('1') or twice ('0'); `taken`: whether
    that way's guess held (None: not tried)."""
    monkeypatch.setenv(DRIVER_ENV, "0")
    monkeypatch.setenv(spark_pass.ENV, "1" if way == "pass" else "0")
    monkeypatch.setenv(spark_once.ENV, "0" if way == "0" else "1")
    tried: list = []
    if way == "pass":
        settle = spark_pass.Pending.settle

        def spy(self, checked):  # the real method; only its answer is noted
            try:
                settle(self, checked)
            except spark_pass.GuessWrong:
                tried.append(False)
                raise
            tried.append(True)

        monkeypatch.setattr(spark_pass.Pending, "settle", spy)
    else:
        once = spark_once.check_rows_once

        def spy(*a, **k):  # the real function; only its answer is noted
            checked = once(*a, **k)
            tried.append(checked is not None)
            return checked

        monkeypatch.setattr(spark_runner, "check_rows_once", spy)
    out = folder / way[0] / "m.jsonl"  # one letter each: the summary cuts long paths
    code, stdout, err = sparkcep(capsys, "run", *args, "-o", out)
    assert code == 0, err
    summary = table(stdout)
    warned = [line for line in err.splitlines() if line.startswith("warning")]
    if way == "pass" and tried == [False]:  # the guess did not hold: said, then as before
        assert sum("did not hold" in w for w in warned) == 1, err
        warned = [w for w in warned if "did not hold" not in w]
    return {
        "taken": tried[0] if tried else None,
        "summary": {k: v for k, v in summary.items() if k not in ("seconds", "events/s")},
        "rows": jsonl(out),
        "rejected": jsonl(folder / way[0] / "m.rejected.jsonl"),
        "warnings": sorted(warned),
    }


def same_as_two_reads(capsys, monkeypatch, tmp_path, ways, *args) -> list[dict]:
    """The run each of `ways` and read twice: everything the user sees is equal."""
    twice = run_way(capsys, monkeypatch, "0", tmp_path, args)
    assert twice["taken"] is None
    there = str(tmp_path / "0")
    runs = []
    for way in ways:
        run = run_way(capsys, monkeypatch, way, tmp_path, args)
        here = str(tmp_path / way[0])
        assert {k: v.replace(here, there) for k, v in run["summary"].items()} == twice["summary"]
        for what in ("rows", "rejected", "warnings"):
            assert run[what] == twice[what], (way, what)
        runs.append(run)
    return runs


def both_ways(capsys, monkeypatch, tmp_path, *args) -> tuple[dict, dict]:
    """Checked on the way and read once, each against two reads."""
    passed, once = same_as_two_reads(capsys, monkeypatch, tmp_path, ("pass", "1"), *args)
    return passed, once


HEADER = "ts,type,k,v,note\n"
CLEAN = "".join(f"{t},{'AB'[t % 2]},{t % 3},{t * 1.5},x{t}\n" for t in range(1, 60))
# The rows the guess reads, then rows that contradict it (the guess is not kept).
GUESSED = "".join(f"{t},{'AB'[t % 2]},{t % 3},{t},x\n" for t in range(HEAD_ROWS))
LATER = HEAD_ROWS + 10
# name: (the file's text, whether the one read is kept, extra options or ["QUERY", query])
CASES = {
    # v: 1 word in 60 values (a column of numbers; the word's row is rejected later,
    # with its cells as read, its k too); the guess from clean rows is kept
    "a_word_among_numbers": (
        HEADER + CLEAN + "70,B,1,oops,y\n", True, [],
    ),
    # a rejected row whose note (a column no query reads) is blank: null as read
    "a_blank_cell_no_query_reads": (
        HEADER + CLEAN + "70,B,1,oops,  \n71,,1,2,\n", True, [],
    ),
    # v starts with integers, then mostly words: not numbers after all
    "integers_then_words": (
        HEADER + GUESSED + "".join(f"{t},B,1,w{t},z\n" for t in range(LATER, LATER + 300)),
        False, [],
    ),
    # v starts with integers, then decimals: numbers, not integers
    "integers_then_decimals": (
        HEADER + GUESSED + "".join(f"{t},B,1,{t}.5,z\n" for t in range(LATER, LATER + 300)),
        False, [],
    ),
    # the first times are integers, then one row's time is only a timestamp
    "integer_times_then_a_timestamp": (
        HEADER + GUESSED + "2024-01-01 10:00:00,A,1,1,a\n", False, [],
    ),
    "timestamps": (
        HEADER + "".join(f"2024-01-01 10:00:{s:02d},{'AB'[s % 2]},1,{s},c\n" for s in range(50))
        + "soon,A,1,1,d\n", True, ["QUERY", QUERY.replace("WITHIN 10", "WITHIN 10 s")],
    ),
    "bad_rows": (
        HEADER + "1,A,1,1.0,a\n,B,1,2,b\n2,,1,3,c\n3,B,1,4,d,extra\n  ,A,1,1,e\n"
        + "4,B, ,9,f\n5,B,1,8,g\n4611686018427387905,A,1,1,h\n6,B,1,\xe9,i\n",
        True, [],
    ),
    # k: booleans in the first rows, a number later (a column of text)
    "booleans_then_a_number": (
        HEADER + "".join(f"{t},{'AB'[t % 2]},{'true' if t % 2 else 'false'},{t},c\n"
                         for t in range(HEAD_ROWS)) + f"{LATER},A,7,1,c\n",
        False, [],
    ),
    # a `*` in a query: it may read any column (named_columns is None), all are kept
    "a_star_in_the_query": (
        HEADER + CLEAN + "70,B,1,oops,y\n", True,
        ["QUERY", "PATTERN SEQ(A a, B b) WHERE [k] AND b.v * 2 > a.v WITHIN 10"],
    ),
    # ids given (some repeat: a warning), and a key of text that is mostly numbers
    "ids_given_and_a_text_key_mostly_numbers": (
        "id," + HEADER + "".join(f"{t % 30},{t},{'AB'[t % 2]},{t % 4 if t % 3 else 'n'},{t},c\n"
                                 for t in range(1, 40)),
        True, ["--id", "id"],
    ),
}  # fmt: skip


@pytest.mark.spark
@pytest.mark.parametrize("case", list(CASES))
def test_one_read_gives_what_two_reads_give(spark, capsys, monkeypatch, tmp_path, case):
    text, kept, options = CASES[case]
    query = options[1] if options[:1] == ["QUERY"] else QUERY
    options = [] if options[:1] == ["QUERY"] else options
    path = tmp_path / "e.csv"
    path.write_bytes(text.encode("latin-1"))
    passed, once = both_ways(capsys, monkeypatch, tmp_path, query, "-i", path, *options)
    assert once["taken"] is kept
    assert passed["taken"] is kept  # every query here runs in one pass


@pytest.mark.spark
def test_a_folder_of_files_numbers_rows_in_file_order(spark, capsys, monkeypatch, tmp_path):
    """Row numbers run through the files in name order, each file's rows in order, as
    with two reads; the second file's first rows are not the guess's."""
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(3):
        rows = "".join(
            f"{t},{'AB'[t % 2]},{t // 2 % 3},{t + i}\n" for t in range(i * 20, i * 20 + 20)
        )
        (folder / f"part-{i}.csv").write_text("ts,type,k,v\n" + rows)
    passed, once = both_ways(capsys, monkeypatch, tmp_path, QUERY, "-i", folder)
    assert once["taken"] is True and passed["taken"] is True
    assert once["rows"]  # the query matches: row numbers are compared, not only counts


CELLS = st.sampled_from(["1", "2", "17", "-3", "2.5", "1e3", "x", "true", "NA", "", " 4 "])
TIMES = st.sampled_from(["1", "2", "3", "5", "8", "13", "2024-01-01", "soon", "", "1.0"])


@pytest.mark.spark
@settings(
    max_examples=examples(2), deadline=None,  # each example: two Spark runs of ~3 s
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)  # fmt: skip
@given(
    rows=st.lists(
        st.tuples(TIMES, st.sampled_from(["A", "B", "C", ""]), CELLS, CELLS),
        min_size=1, max_size=40,
    )
)  # fmt: skip
def test_random_files_give_the_same_either_way(spark, capsys, monkeypatch, tmp_path, rows):
    """Any mix of cells: a confirmed guess or a fallback, the same answer."""
    folder = tmp_path / f"h{abs(hash(tuple(rows)))}"
    folder.mkdir()
    path = folder / "e.csv"
    # a column no query reads: the valid rows leave it out, the rejected ones show it
    lines = [",".join(r) + f",n{i}\n" for i, r in enumerate(rows)]
    path.write_text("ts,type,k,v,note\n" + "".join(lines))
    # (one pass against two reads: the one read is compared on the cases above)
    same_as_two_reads(capsys, monkeypatch, folder, ("pass",), QUERY, "-i", path)


@pytest.mark.spark
def test_the_valid_rows_keep_only_the_columns_the_programs_read(spark, tmp_path):
    """A column the programs do not read is not kept with the valid rows (query_first.
    kept_columns); a row rejected after the check (a word in a column of numbers) still
    shows that column's cell as read, and the rows are those of two reads (above)."""
    from sparkcep.plan import Options
    from sparkcep.runners.spark.files import read_spark

    rows = [
        f"{t},{'AB'[t % 2]},{t % 3},{'oops' if t == 2500 else t % 7},n{t}\n" for t in range(3000)
    ]
    path = tmp_path / "e.csv"
    path.write_text(HEADER + "".join(rows))
    source = read_spark(spark, str(path))
    run = spark_runner.execute(source.df, QUERY, Options(), source=source, **source.options())
    assert run.checked.cached is not None  # read once
    # kept only among the cells as read (of the rows that are, or may be, rejected)
    assert "note" not in run.checked.cached.columns
    assert "note" not in run.checked.valid.columns
    rejected = [r.asDict() for r in run.rejected.collect()]
    run.checked.release()
    assert [(r["v"], r["note"], r["reason"]) for r in rejected] == [
        ("oops", "n2500", "v: 'oops' is not a number")
    ]


def test_the_guess_counts_only_the_types_that_decide():
    """A column guessed as integers is not read as booleans or timestamps; text is read
    every way (the choice rests on every count)."""
    assert spark_once.counted_kinds("long") == ("zeros", "long")
    assert spark_once.counted_kinds("double") == ("zeros", "long", "double")
    assert spark_once.counted_kinds("string") == ("zeros", *spark_once.KINDS)
    # 9 of 10 present cells are integers: integers (input_types.NUMERIC_SHARE is 0.9)
    assert choose_kind({"any": 10, "zeros": 0, "long": 9}) == "long"
    # 8 of 10: not integers, and the double count is needed to say more
    assert choose_kind({"any": 10, "zeros": 0, "long": 8}) is None
    assert choose_kind({"any": 10, "zeros": 0, "long": 8, "double": 10}) == "double"
    assert choose_kind({"any": 0, "zeros": 0, "long": 0}) == "string"
    # a number written with a leading zero ('007'): text, whatever the others are
    assert choose_kind({"any": 10, "zeros": 1, "long": 10}) == "string"
    assert choose_kind({"any": 10, "long": 10}) is None  # zeros not counted


def kept_rdds(spark) -> int:
    return spark.sparkContext._jsc.getPersistentRDDs().size()


@pytest.mark.spark
def test_the_kept_rows_are_dropped_when_the_run_ends(spark, capsys, monkeypatch, tmp_path):
    """After a run, and after a query error found once the rows were checked, Spark keeps
    nothing of the input (a later run over the same file reads it again)."""
    monkeypatch.setenv(DRIVER_ENV, "0")
    path = tmp_path / "e.csv"
    path.write_text(HEADER + CLEAN)
    before = kept_rdds(spark)
    code, _, err = sparkcep(capsys, "run", QUERY, "-i", path, "-o", tmp_path / "m.jsonl")
    assert code == 0, err
    assert kept_rdds(spark) == before
    # 'nope' is no column: the plan fails after the checking pass
    bad = QUERY.replace("b.v > a.v", "b.nope > a.v")
    code, _, err = sparkcep(capsys, "run", bad, "-i", path, "-o", tmp_path / "m.jsonl")
    assert code == 2 and "nope" in err
    assert kept_rdds(spark) == before
    code, _, err = sparkcep(capsys, "run", QUERY, "-i", path, "-o", tmp_path / "n.jsonl")
    assert code == 0, err
    assert (tmp_path / "m.jsonl").read_text() == (tmp_path / "n.jsonl").read_text()


@pytest.mark.spark
def test_an_input_over_the_size_is_read_twice(spark, capsys, monkeypatch, tmp_path):
    """Over spark_files.ONE_READ_BYTES (unpacked) nothing is guessed or kept."""
    from sparkcep.runners.spark import files as spark_files

    path = tmp_path / "e.csv"
    path.write_text(HEADER + CLEAN)
    monkeypatch.setattr(spark_files, "ONE_READ_BYTES", path.stat().st_size)
    ran = run_way(capsys, monkeypatch, "1", tmp_path, (QUERY, "-i", path))
    assert ran["taken"] is None
    monkeypatch.setattr(spark_files, "ONE_READ_BYTES", path.stat().st_size + 1)
    ran = run_way(capsys, monkeypatch, "1", tmp_path / "again", (QUERY, "-i", path))
    assert ran["taken"] is True


@pytest.mark.spark
def test_a_file_damaged_past_the_guess_fails_in_one_line_and_keeps_nothing(
    spark, capsys, monkeypatch, tmp_path
):
    """The first rows read well (the guess is made), the file's end is damaged: Spark's
    read fails, the error names the file in one line, and Spark keeps nothing of the run."""
    import gzip

    rows = "".join(f"{t},{'AB'[t % 2]},{t % 3},{t},x\n" for t in range(HEAD_ROWS * 3))
    data = gzip.compress((HEADER + rows).encode())
    path = tmp_path / "e.csv.gz"
    # 200 bytes of the compressed rows zeroed, the trailer kept (its size is read)
    path.write_bytes(data[:-208] + bytes(200) + data[-8:])
    monkeypatch.setenv(DRIVER_ENV, "0")
    before = kept_rdds(spark)
    code, _, err = sparkcep(capsys, "run", QUERY, "-i", path, "-o", tmp_path / "m.jsonl")
    assert code == 2
    assert "e.csv.gz" in err and "Traceback" not in err
    assert kept_rdds(spark) == before


def test_the_sepsis_log_through_spark_reads_its_timestamps(
    spark, capsys, monkeypatch, tmp_path, shared_data
):
    """The sepsis log writes its times `2014/10/22 11:15:41.000` and names a case `NA`.
    Spark's checking pass took the time column for integers and rejected every row; the
    case NA was a null key and lost its match. The log's first 3,000 rows (past the rows
    the guess reads, case NA among them), as written, through Spark's checking pass; the
    pairs are worked out here by brute force over them."""
    import csv
    import datetime as dt
    import gzip
    from collections import defaultdict

    lines = gzip.decompress((shared_data / "medical" / "sepsis.csv.gz").read_bytes())
    lines = lines.split(b"\n")[: HEAD_ROWS + 1001]  # the header and 3,000 rows
    path = tmp_path / "sepsis.csv.gz"
    path.write_bytes(gzip.compress(b"\n".join(lines) + b"\n"))
    with gzip.open(path, "rt", newline="") as f:
        rows = list(csv.DictReader(f, delimiter=";"))
    assert len(rows) == HEAD_ROWS + 1000
    cases = defaultdict(list)
    for i, r in enumerate(rows):
        when = dt.datetime.strptime(r["Complete Timestamp"], "%Y/%m/%d %H:%M:%S.%f")
        cases[r["Case ID"]].append((i, r["Activity"], when))
    hour = dt.timedelta(hours=1)
    expected = sorted(
        (a, b)
        for events in cases.values()
        for a, x, ta in events
        if x == "ER Registration"
        for b, y, tb in events
        if y == "Leucocytes" and dt.timedelta(0) < tb - ta < hour
    )
    assert any(rows[a]["Case ID"] == "NA" for a, _ in expected)
    query = "PATTERN SEQ(`ER Registration` a, Leucocytes b) WHERE [`Case ID`] WITHIN 1 h"
    out = tmp_path / "m.jsonl"
    monkeypatch.setenv(DRIVER_ENV, "0")  # the whole log is over the size checked in the driver
    code, stdout, err = sparkcep(
        capsys, "run", query, "-i", path, "-o", out, "--sep", ";",
        "--time", "Complete Timestamp", "--type", "Activity",
    )  # fmt: skip
    assert code == 0, err
    assert "rows checked in the driver" not in stdout
    assert table(stdout)["rejected"] == "0"
    assert sorted((r["a"], r["b"]) for r in jsonl(out)) == expected


@pytest.mark.spark
def test_no_match_under_adaptive_execution_keeps_the_counts(spark, capsys, monkeypatch, tmp_path):
    """Adaptive execution (on in a run over a larger input; the tests' session has it off)
    replaces what follows a stage that gives no row with an empty relation, and took the
    one pass's observed counts with it: Spark failed to give them. The one pass keeps
    them (`one_pass.keep_observed`) and a run that matches nothing is as read twice."""
    query = "PATTERN SEQ(A a, B b) WHERE [k] AND b.v < 0 WITHIN 10"
    path = tmp_path / "e.csv"
    path.write_text(HEADER + CLEAN)
    from sparkcep.runners.spark import session

    monkeypatch.setattr(session, "TINY_INPUT_BYTES", 0)  # the run leaves it on
    key = "spark.sql.adaptive.enabled"
    before = spark.conf.get(key)
    spark.conf.set(key, "true")
    try:
        passed, _ = both_ways(capsys, monkeypatch, tmp_path, query, "-i", path)
    finally:
        spark.conf.set(key, before)
    assert passed["taken"] is True
    assert passed["rows"] == [] and passed["summary"]["events read"] == "59"
