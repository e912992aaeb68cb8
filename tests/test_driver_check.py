"""A small input checked in the driver (issue 16 §3): `sparkcep run` through Spark gives
the same rows, rejected rows, summary and warnings whether the rows are checked in the
driver (input under SPARKCEP_DRIVER_CHECK_BYTES) or by Spark's checking pass (0: never),
and says which it did. Both ways run in this process, in the test session's Spark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_bad_inputs import sparkcep
from test_examples import EXAMPLES, example_files

from sparkcep.files import data_bytes
from sparkcep.runners.spark.driver_check import ENV

FLAGS = {"time_col": "--time", "type_col": "--type", "id_col": "--id", "time_unit": "--time-unit"}
DRIVER = "rows checked in the driver (input under 1 MiB)"
# the value of SPARKCEP_DRIVER_CHECK_BYTES; each way writes to a folder of its name (one
# letter: the summary's paths have the same length, cut at the same place)
WAYS = {"d": None, "s": "0"}


def table(out: str) -> dict[str, str]:
    """The summary's rows: label -> value (a wrapped value joined into one line)."""
    rows: dict[str, str] = {}
    label = None
    for line in out.splitlines():
        if not line.strip():
            continue
        if line.startswith(" ") and label is not None:
            rows[label] += " " + line.strip()
            continue
        words = line.split("  ", 1)
        label = words[0].strip()
        rows[label] = words[1].strip() if len(words) > 1 else ""
    return rows


def jsonl(path: Path) -> list[dict] | None:
    if not path.exists():
        return None
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def as_text(rows: list[dict] | None) -> list[dict] | None:
    if rows is None:
        return None
    return [{k: None if v is None else str(v) for k, v in row.items()} for row in rows]


def run_way(capsys, monkeypatch, way: str, tmp_path: Path, *args) -> dict:
    """One Spark run (in this process) of `sparkcep run ARGS -o ...`: what it gave."""
    if WAYS[way] is None:
        monkeypatch.delenv(ENV, raising=False)
    else:
        monkeypatch.setenv(ENV, WAYS[way])
    folder = tmp_path / way
    out = folder / "m.jsonl"
    code, stdout, err = sparkcep(capsys, "run", *args, "-o", out)
    assert code == 0, err
    summary = table(stdout)
    return {
        "mode": summary.pop("mode"),
        "summary": {k: v for k, v in summary.items() if k not in ("seconds", "events/s")},
        "rows": jsonl(out),
        "rejected": jsonl(folder / "m.rejected.jsonl"),
        "warnings": sorted(line for line in err.splitlines() if line.startswith("warning")),
    }


def both_ways(capsys, monkeypatch, tmp_path, *args) -> tuple[dict, dict]:
    driver = run_way(capsys, monkeypatch, "d", tmp_path, *args)
    spark = run_way(capsys, monkeypatch, "s", tmp_path, *args)
    assert DRIVER not in spark["mode"]
    here, there = str(tmp_path / "d"), str(tmp_path / "s")
    # the same summary, but the folder written to
    assert {k: v.replace(here, there) for k, v in driver["summary"].items()} == spark["summary"]
    for what in ("rows", "warnings"):
        assert driver[what] == spark[what], what
    # the same rejected rows and cells; a cell's JSON type may differ (docs/input.md: a
    # row rejected by the queries' own checks keeps the time and numbers read locally)
    assert as_text(driver["rejected"]) == as_text(spark["rejected"])
    return driver, spark


def example_args(folder) -> tuple[list, str, list]:
    """(`sparkcep run` arguments, the events' path, the expected rows) of an example."""
    _, events, options, expected = example_files(folder)
    if data_bytes([events]) >= 2**20:
        pytest.skip("over 1 MiB unpacked: Spark's checking pass either way")
    flags = [x for k, v in options.items() for x in (FLAGS[k], v)]
    # the command runs a file's one named query without a query column
    expected = [{k: v for k, v in r.items() if k != "query"} for r in expected]
    return [folder / "query.cep", "-i", events, *flags], events, expected


@pytest.mark.spark
@pytest.mark.parametrize("folder", EXAMPLES, ids=lambda p: p.name)
def test_every_example_through_the_driver_check(spark, capsys, monkeypatch, tmp_path, folder):
    """CSV under 1 MiB is checked in the driver; JSON lines take Spark's checking pass. The
    hospital trace (0.95 MB of gzip, 18.7 MB of CSV) takes Spark's checking pass either
    way: tests/test_examples.py runs it through Spark."""
    args, events, expected = example_args(folder)
    driver = run_way(capsys, monkeypatch, "d", tmp_path, *args)
    assert (DRIVER in driver["mode"]) == events.endswith(".csv")
    assert driver["rows"] == expected


# covered by: test_every_example_through_the_driver_check, test_checks_give_the_same_both_ways
# and test_examples::test_example_through_spark (each example through Spark's checking pass)
@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.parametrize("folder", EXAMPLES, ids=lambda p: p.name)
def test_every_example_gives_the_same_both_ways(spark, capsys, monkeypatch, tmp_path, folder):
    args, events, expected = example_args(folder)
    if not events.endswith(".csv"):
        pytest.skip("JSON lines: Spark's checking pass either way")
    driver, _ = both_ways(capsys, monkeypatch, tmp_path, *args)
    assert driver["rows"] == expected


CASES = {
    # Rows rejected by each check, in one file: a malformed row, a time that is none, a
    # missing type, a cell of a column of numbers that is not one (v: 9 numbers of 10
    # values read), and a cell of spaces (Spark trims it: a null).
    "every_reason": (
        "ts,type,v,w\n1,A,1.5,x\n2,B,2.5,x,9\n3,B,3,x\nsoon,B,2,x\n5,,2,x\n6,B,oops,x\n"
        "7,B,0.5,  \n8,B,1.0,x\n9,C,4,x\n10,C,5,x\n10,B,5,x\n",
        "PATTERN SEQ(A a, B b) WHERE b.v > a.v RETURN b.w AS w WITHIN 10",
        [],
    ),
    # Ids from a column (its numbers are ids; one repeats: a warning), a type no event has.
    "ids_and_types": (
        "id,ts,type\n7,1,A\n7,2,B\n8,3,B\n9,4,Bb\n",
        "PATTERN SEQ(A a, B b, Cc c) WITHIN 10",
        ["--id", "id"],
    ),
    # Timestamps, a key, integers with a null among them, and a column that is mostly
    # numbers but read as text (a warning); a headerless file with another separator.
    "timestamps_key_nulls": (
        "2026-01-01 00:00:01;A;1;3;2\n2026-01-01 00:00:02;B;1;;x\n2026-01-01 00:00:03;B;1;5;3\n"
        "2026-01-01 00:00:03;B;2;4;4\n2026-01-01 00:00:04;A;2;1;5\n2026-01-01 00:00:09;B;2;2;1\n",
        "PATTERN SEQ(A a, B b) WHERE [k] AND b.n > a.n AND b.m > a.m WITHIN 10 s "
        "RETURN b.n AS n, a.m AS m",
        ["--columns", "ts,type,k,n,m", "--sep", ";"],
    ),
    # The one A is in a malformed row: Spark counts its type among those that occur
    # (its cells as the reader fills them), so no warning that no event is an A.
    "a_type_only_in_a_malformed_row": (
        "ts,type,v\n1,A,1,9\n2,B,2\n",
        "PATTERN SEQ(A a, B b) WITHIN 5",
        [],
    ),
}


@pytest.mark.spark
@pytest.mark.parametrize("case", list(CASES))
def test_checks_give_the_same_both_ways(spark, capsys, monkeypatch, tmp_path, case):
    data, query, flags = CASES[case]
    path = tmp_path / "e.csv"
    path.write_text(data)
    driver, _ = both_ways(capsys, monkeypatch, tmp_path, query, "-i", path, *flags)
    assert DRIVER in driver["mode"]
    if case == "every_reason":
        assert [r["reason"] for r in driver["rejected"]] == [
            "malformed row", "ts is not an integer or a timestamp", "type is missing",
            "v: 'oops' is not a number",
        ]  # fmt: skip
        # The A (ts 1, v 1.5) with each later valid B within 10 whose v is larger: row 2
        # (v 3) and row 10 (v 5); rows 6 and 7 (0.5, 1.0) are smaller.
        assert [(r["a"], r["b"], r["w"]) for r in driver["rows"]] == [(0, 2, "x"), (0, 10, "x")]
    elif case == "ids_and_types":
        assert driver["rows"] == []
        said = " ".join(driver["warnings"])
        assert "1 event has the id of another event (--id id)" in said
        assert "no event has the type 'Cc'" in said
    elif case == "a_type_only_in_a_malformed_row":
        assert driver["rows"] == [] and driver["warnings"] == []
        assert [(r["type"], r["reason"]) for r in driver["rejected"]] == [("A", "malformed row")]
    else:
        # key 1: A (n 3, m '2') then B (n 5, m '3') at row 2 (row 1's n is null); key 2:
        # A (n 1, m '5') and no later B with a larger m ('1' < '5'). m is text (5 of its 6
        # values are numbers), n integers.
        assert [(r["a"], r["b"], r["n"], r["m"]) for r in driver["rows"]] == [(0, 2, 5, "2")]
        assert any("column 'm' is read as text" in w for w in driver["warnings"])


# Columns of other types than numbers and text, typed in the driver as Spark's checking
# pass types them (input_types.choose_kind), and so in --local too; each case its own key
# c and column, empty in the other cases' rows. Rows 0-2: true = TRUE as booleans, not as
# text. Rows 3-5: timestamps compare as instants, 10:00+01:00 is before 2026-01-01 09:30
# (UTC). Rows 6-16: 10 integers and a decimal, integers: the decimal's row (the A) is
# rejected.
TYPED_BY_THE_ONE_RULE = (
    "c,ts,type,ok,due,n\nb,1,A,true,,\nb,2,B,false,,\nb,3,B,TRUE,,\n"
    "t,1,A,,2026-01-01 10:00+01:00,\nt,2,B,,2025-01-01,\nt,3,B,,2026-01-01 09:30,\n"
    + "".join(f"i,{i},B,,,{i}\n" for i in range(1, 11))
    + "i,0,A,,,0.5\n"
)
TYPED_QUERIES = {"booleans": "b.ok = a.ok", "timestamps": "b.due > a.due", "integers": "b.n > a.n"}
TYPED_PAIRS = {"booleans": [(0, 2)], "timestamps": [(3, 5)], "integers": []}


@pytest.mark.spark
def test_columns_typed_by_the_one_rule_are_checked_in_the_driver(
    spark, capsys, monkeypatch, tmp_path
):
    path = tmp_path / "e.csv"
    path.write_text(TYPED_BY_THE_ONE_RULE)
    query = tmp_path / "q.cep"
    query.write_text(
        "".join(
            f"QUERY {name}: PATTERN SEQ(A a, B b) WHERE [c] AND {condition} WITHIN 20;\n"
            for name, condition in TYPED_QUERIES.items()
        )
    )
    driver, _ = both_ways(capsys, monkeypatch, tmp_path, query, "-i", path)
    assert DRIVER in driver["mode"]
    local = tmp_path / "local.jsonl"
    code, _, err = sparkcep(capsys, "run", query, "-i", path, "-o", local, "--local")
    assert code == 0, err
    for done in (
        driver,
        {"rows": jsonl(local), "rejected": jsonl(tmp_path / "local.rejected.jsonl")},
    ):
        assert [r["reason"] for r in done["rejected"]] == ["n: '0.5' is not a number"]
        pairs = {name: [] for name in TYPED_QUERIES}
        for r in done["rows"]:
            pairs[r["query"]].append((r["a"], r["b"]))
        assert {name: sorted(p) for name, p in pairs.items()} == TYPED_PAIRS


@pytest.mark.spark
def test_the_size_limit_is_read_at_each_run(spark, capsys, monkeypatch, tmp_path):
    path = tmp_path / "e.csv"
    path.write_text("ts,type\n1,A\n2,B\n")  # 16 bytes
    query = "PATTERN SEQ(A a, B b) WITHIN 5"
    monkeypatch.setenv(ENV, "17")
    code, out, err = sparkcep(capsys, "run", query, "-i", path, "-o", tmp_path / "a.jsonl")
    assert code == 0, err
    assert "rows checked in the driver (input under 17 bytes)" in " ".join(out.split())
    monkeypatch.setenv(ENV, "16")  # not under 16 bytes: the full path
    code, out, err = sparkcep(capsys, "run", query, "-i", path, "-o", tmp_path / "b.jsonl")
    assert code == 0, err
    assert "checked in the driver" not in out
    assert (
        jsonl(tmp_path / "a.jsonl")
        == jsonl(tmp_path / "b.jsonl")
        == [{"start": 1, "end": 2, "a": 0, "b": 1}]
    )


def test_explain_says_where_a_spark_run_checks_the_rows(capsys, monkeypatch, tmp_path):
    events = tmp_path / "e.csv"
    events.write_text("ts,type\n1,A\n2,B\n")  # 16 bytes
    (tmp_path / "e.jsonl").write_text('{"ts": 1, "type": "A"}\n')
    query = "PATTERN SEQ(A a, B b) WITHIN 5"

    def said(path) -> str:
        code, out, err = sparkcep(capsys, "explain", query, "-i", path)
        assert code == 0, err
        words = " ".join(out.split())
        return words[words.index("rows checked ") :]

    monkeypatch.delenv(ENV, raising=False)
    assert said(events) == "rows checked in the driver by a Spark run (CSV under 1 MiB)"
    assert said(tmp_path / "e.jsonl") == "rows checked by Spark's checking pass (json input)"
    monkeypatch.setenv(ENV, "16")
    assert said(events) == "rows checked by Spark's checking pass (16 bytes, not under 16 bytes)"
    monkeypatch.setenv(ENV, "0")
    assert said(events) == f"rows checked by Spark's checking pass ({ENV}=0)"


@pytest.mark.spark
@pytest.mark.parametrize("way", list(WAYS))
def test_a_run_resolves_its_input_once(spark, capsys, monkeypatch, tmp_path, way):
    """A Spark run lists its input's files, sizes them, checks their header and reads
    their first rows once (files.InputSource), whichever way it checks the rows."""
    from sparkcep import files

    calls: dict[str, int] = {}

    def counted(name):
        real = getattr(files, name)

        def call(*a, **k):
            calls[name] = calls.get(name, 0) + 1
            return real(*a, **k)

        monkeypatch.setattr(files, name, call)

    for name in ("input_files", "data_bytes", "check_headers", "csv_head"):
        counted(name)
    path = tmp_path / "e.csv"
    path.write_text("ts,type,v\n1,A,1\n2,B,2\n3,B,0\n")
    done = run_way(capsys, monkeypatch, way, tmp_path, "PATTERN SEQ(A a, B b) WITHIN 5", "-i", path)
    assert (DRIVER in done["mode"]) == (way == "d")
    assert [(r["a"], r["b"]) for r in done["rows"]] == [(0, 1), (0, 2)]
    assert calls == {"input_files": 1, "data_bytes": 1, "check_headers": 1, "csv_head": 1}
