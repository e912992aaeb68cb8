"""Output files keep every value exactly: floats round-trip, times keep microseconds."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from sparkcep import run_local
from sparkcep.files import write_pandas
from sparkcep.runners.spark.files import write_spark

FLOATS = [1e-11, 0.1 + 0.2, 7.690000000409782, 1e16 + 2, -2.5e-300, 123456.789]
QUERY = "PATTERN SEQ(A a, B b) WITHIN 10 RETURN a.v AS x, b.t AS when"


def events() -> pd.DataFrame:
    n = len(FLOATS)
    return pd.DataFrame(
        {
            "type": ["A", "B"] * n,
            "ts": [10 * i + j for i in range(n) for j in (0, 1)],
            "v": [v for v in FLOATS for _ in (0, 1)],
            "t": pd.to_datetime(["2026-01-02 03:04:05.123456"] * (2 * n)),
        }
    )


def read_back(path: str, fmt: str) -> list[float]:
    if fmt == "parquet":
        return pd.read_parquet(path)["x"].tolist()
    if fmt == "csv":
        return [float(x) for x in pd.read_csv(path, dtype={"x": str})["x"]]
    with open(path) as f:
        return [json.loads(line)["x"] for line in f]


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_local_outputs_round_trip_floats(tmp_path, fmt):
    matches = run_local(events(), QUERY).matches
    path = str(tmp_path / f"m.{fmt}")
    write_pandas(matches, path)
    assert read_back(path, fmt) == FLOATS


def test_json_lines_keep_microseconds(tmp_path):
    matches = run_local(events(), QUERY).matches
    path = tmp_path / "m.jsonl"
    write_pandas(matches, str(path))
    first = json.loads(path.read_text().splitlines()[0])
    assert first["when"] == "2026-01-02T03:04:05.123456Z"


@pytest.mark.spark
def test_spark_outputs_round_trip_floats(spark, tmp_path):
    from sparkcep.runners.spark.batch import run

    result = run(spark.createDataFrame(events()), QUERY)  # checked once, written 3 ways
    for fmt in ("jsonl", "csv", "parquet"):
        path = str(tmp_path / f"m.{fmt}")
        write_spark(result.unordered, path, order=result.order)
        assert read_back(path, fmt) == FLOATS, fmt
    with open(tmp_path / "m.jsonl") as f:
        first = json.loads(f.readline())
    assert first["when"] == "2026-01-02T03:04:05.123456Z"


@pytest.mark.parametrize("gz", [False, True])
def test_json_lines_file_is_one_object_per_row_with_text_beyond_ascii(tmp_path, gz):
    """write_pandas writes Arrow's joined lines as bytes (issue 16 §5): each line must
    still be the row's own object, also where text is more than one byte a character."""
    import gzip

    frame = pd.DataFrame(
        {
            "name": ["é", None, "naïve ☃", 'q"uote'],
            "n": pd.array([1, None, -3, 2**40], dtype="Int64"),
            "ok": [True, False, True, False],
            "ids": [[1], [2, 3], [], [4]],
        }
    )
    path = tmp_path / ("m.jsonl.gz" if gz else "m.jsonl")
    write_pandas(frame.iloc[1:], str(path))  # a slice: its index starts at 1
    raw = gzip.decompress(path.read_bytes()) if gz else path.read_bytes()
    assert raw.endswith(b"\n")
    rows = [json.loads(line) for line in raw.decode("utf-8").splitlines()]
    assert rows == [
        {"name": None, "n": None, "ok": False, "ids": [2, 3]},
        {"name": "naïve ☃", "n": -3, "ok": True, "ids": []},
        {"name": 'q"uote', "n": 2**40, "ok": False, "ids": [4]},
    ]


def test_whole_floats_stay_floats_in_json_lines():
    # A reader that types JSON numbers must read a float column as floats, as Spark
    # writes it (96.0), whichever way the run went.
    import pandas as pd

    from sparkcep.jsonlines import json_lines

    frame = pd.DataFrame({"v": [96.0, -3.0, 0.5, 1e-11, 0.0], "n": [1, 2, 3, 4, 5]})
    lines = [json.loads(line) for line in json_lines(frame)]
    assert [type(r["v"]) for r in lines] == [float] * 5
    assert [type(r["n"]) for r in lines] == [int] * 5
    assert json_lines(frame)[0] == '{"v":96.0,"n":1}'


# Two queries in one file, one with a Kleene list, one without, on one engine; ids above
# 2^53 (9007199254740993 is no float64) and times in ns.
SEVERAL = (
    "QUERY q1: PATTERN SEQ(A a, B+ b[]) WITHIN 10 seconds;\n"
    "QUERY q2: PATTERN SEQ(A a, C c) WITHIN 10 seconds;\n"
)
BIG = 2**53 + 1
SECOND = 10**9
# Each query's rows fill only its own columns: the other's are null (a list too), and
# ids stay exact integers. q1: A then any nonempty run of the B's ({b1}, {b1,b2}, {b2});
# q2: A then C. By query, end, start, then the ids.
SEVERAL_ROWS = [
    f'{{"query":"q1","start":{SECOND},"end":{2 * SECOND},"a":{BIG},"b":[{BIG + 2}],"c":null}}',
    f'{{"query":"q1","start":{SECOND},"end":{3 * SECOND},"a":{BIG},"b":[{BIG + 2},{BIG + 4}],'
    '"c":null}',
    f'{{"query":"q1","start":{SECOND},"end":{3 * SECOND},"a":{BIG},"b":[{BIG + 4}],"c":null}}',
    f'{{"query":"q2","start":{SECOND},"end":{4 * SECOND},"a":{BIG},"b":null,"c":{BIG + 6}}}',
]


@pytest.mark.spark
@pytest.mark.parametrize("matched", ["both", "q1"])
def test_queries_of_one_file_write_the_same_exact_rows_locally_and_in_spark(
    spark, capsys, tmp_path, matched
):
    """Both queries match, or q1 alone (no C): q2's column is there, null, all the same."""
    from sparkcep import cli

    query, events = tmp_path / "q.cep", tmp_path / "e.jsonl"
    query.write_text(SEVERAL)
    rows = [("A", 1, BIG), ("B", 2, BIG + 2), ("B", 3, BIG + 4), ("C", 4, BIG + 6)]
    rows = rows if matched == "both" else rows[:3]
    events.write_text("".join(f'{{"type":"{t}","ts":{s * SECOND},"id":{i}}}\n' for t, s, i in rows))
    written = {}
    for mode in ("local", "spark"):
        out = tmp_path / f"{mode}.jsonl"
        flags = ["--local"] if mode == "local" else []
        args = ["run", query, "-i", events, "-o", out, "--id", "id", "--time-unit", "ns", *flags]
        try:
            cli.main([str(a) for a in args])
        except SystemExit as e:  # an error: its message is on stderr
            pytest.fail(f"exit {e.code}: {capsys.readouterr().err}")
        written[mode] = out.read_bytes()
    assert written["local"] == written["spark"]
    expected = SEVERAL_ROWS if matched == "both" else SEVERAL_ROWS[:3]
    assert written["local"].decode().splitlines() == expected


@pytest.mark.spark
def test_a_csv_of_timestamps_is_the_same_locally_and_in_spark(spark, capsys, tmp_path):
    """Times in a CSV output as in JSON lines (ISO 8601, UTC, microseconds), whichever
    runner wrote it; a null time (a row of no match) is an empty cell."""
    from sparkcep import cli

    events = tmp_path / "e.csv"
    events.write_text(
        "type,ts,v\nA,2014/10/22 11:15:41.000,1.5\nB,2014-10-22 11:15:42.250,2\n"
        "A,2014-10-22 11:15:50,\nB,2014-10-22 11:15:51.5,3\n"
    )
    query = "PATTERN SEQ(A a, B b) AGG COUNT, SUM(a.v) AS s WITHIN 5 seconds"
    written = {}
    for mode in ("local", "spark"):
        out = tmp_path / f"{mode}.csv"
        flags = ["--local"] if mode == "local" else []
        try:
            cli.main(["run", query, "-i", str(events), "-o", str(out), *flags])
        except SystemExit as e:
            pytest.fail(f"exit {e.code}: {capsys.readouterr().err}")
        written[mode] = out.read_text()
    assert written["local"] == written["spark"]
    assert written["local"].splitlines() == [
        "ts,count,s",
        "2014-10-22T11:15:42.250000Z,1,1.5",
        "2014-10-22T11:15:51.500000Z,1,",
    ]


# Floats on both sides of Java's plain range [1e-3, 1e7), in a column and in lists.
LAID_OUT = [1e20, 1.5e-5, 12345678.9, 1e-4, 1e7, 9999999.0, 1e-3, 123.0, -2.5e-7, 1e300,
            1e16, 0.1, 0.0, -0.0, 2e-3, 4.35e-4, 123456789012345.6]  # fmt: skip


@pytest.mark.spark
def test_json_lines_floats_are_the_same_bytes_locally_and_in_spark(spark, tmp_path):
    frame = pd.DataFrame({"x": LAID_OUT, "xs": [[v, -v] for v in LAID_OUT]})
    local = tmp_path / "local.jsonl"
    write_pandas(frame, str(local))
    sdf = spark.createDataFrame(frame, "x double, xs array<double>")
    write_spark(sdf.coalesce(1), str(tmp_path / "spark.jsonl"), order=None)
    assert (tmp_path / "spark.jsonl").read_bytes() == local.read_bytes()
    assert [json.loads(line)["x"] for line in local.read_text().splitlines()] == LAID_OUT
    assert local.read_text().splitlines()[0] == '{"x":1.0E20,"xs":[1.0E20,-1.0E20]}'


@pytest.mark.spark
def test_csv_floats_are_the_same_bytes_locally_and_in_spark(spark, tmp_path):
    values = [*LAID_OUT, math.inf, -math.inf, math.nan]
    frame = pd.DataFrame({"x": values, "n": range(len(values))})
    local = tmp_path / "local.csv"
    write_pandas(frame, str(local))
    write_spark(spark.createDataFrame(frame, "x double, n long").coalesce(1), str(tmp_path / "s.csv"),
                order=None)  # fmt: skip
    assert (tmp_path / "s.csv").read_bytes() == local.read_bytes()
    assert local.read_text().splitlines()[1] == "1.0E20,0"


# Text cells a CSV writer can get wrong: quotes (doubled, as RFC 4180 writes them), the
# separator, blanks at either end (kept), a line break, and nulls.
AWKWARD_TEXT = ['say "hi", ok', "  padded  ", "two\nlines", "plain", None, 'end"', "a,b"]


@pytest.mark.spark
@pytest.mark.parametrize("columns", [1, 2])
def test_csv_text_is_the_same_bytes_locally_and_in_spark(spark, tmp_path, columns):
    """And reads back as written; with one column, a null is `""` (an empty line would
    be no row: Spark's writer used to drop the row)."""
    frame = pd.DataFrame({"x": AWKWARD_TEXT, "n": range(len(AWKWARD_TEXT))}).iloc[:, :columns]
    local = tmp_path / "local.csv"
    write_pandas(frame, str(local))
    schema = "x string, n long" if columns == 2 else "x string"
    write_spark(spark.createDataFrame(frame, schema).coalesce(1), str(tmp_path / "s.csv"),
                order=None)  # fmt: skip
    assert (tmp_path / "s.csv").read_bytes() == local.read_bytes()
    back = pd.read_csv(tmp_path / "s.csv", keep_default_na=False, na_values=[""])
    assert back["x"].where(back["x"].notna(), None).tolist() == AWKWARD_TEXT


@pytest.mark.spark
def test_a_one_column_csv_with_a_null_and_its_warnings_are_the_same_locally_and_in_spark(
    spark, capsys, tmp_path
):
    from sparkcep import cli

    events = tmp_path / "t.csv"
    events.write_text("t,price,x\n1,5,p\n2,4,\n3,6,q\n4,3,r\n")
    query = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY t MEASURES B.x AS bx ONE ROW PER MATCH "
        "PATTERN (A B) DEFINE B AS price < PREV(price))"
    )
    written, said = {}, {}
    for mode in ("local", "spark"):
        out = tmp_path / f"{mode}.csv"
        flags = ["--local"] if mode == "local" else []
        try:
            cli.main(["run", query, "-i", str(events), "-o", str(out), *flags])
        except SystemExit as e:
            pytest.fail(f"exit {e.code}: {capsys.readouterr().err}")
        written[mode] = out.read_text()
        said[mode] = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert written["local"] == written["spark"] == 'bx\n""\nr\n'  # the null row kept
    assert said["local"] == said["spark"] and len(said["local"]) == 1, said
