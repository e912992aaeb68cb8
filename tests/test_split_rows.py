"""The rows of each split of one CSV file, counted in Python (`split_rows`), against the
rows Spark's own reader gives each of its partitions of the file; and a run whose counts
do not hold (a count that is not Spark's) never uses them."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparkcep.runners.spark.files import read_spark
from sparkcep.runners.spark.one_pass import lines_by_split
from sparkcep.runners.spark.session import setting
from sparkcep.runners.spark.split_rows import rows_per_split

ROWS = ["A,1,2", "B,22,3.5", ' "C",3,x', "A,4", "B,5,6,7", "\tA,6,1", "A,7,8 "]
BLANKS = ["", "   ", "\t", " \t ", "\x0b"]
LINE = st.one_of(st.sampled_from(ROWS), st.sampled_from(BLANKS))


@st.composite
def csv_files(draw) -> tuple[bytes, bool]:
    """A small CSV file as Spark and Python read it: rows, malformed rows, blank lines
    (spaces, tabs, empty), lines ended by '\\n' or '\\r\\n', the last line ended or not,
    a header or none, sometimes a lone '\\r' (which Hadoop also ends a line with)."""
    header = draw(st.booleans())
    lines = draw(st.lists(LINE, min_size=1, max_size=30))
    lines.insert(draw(st.integers(0, len(lines))), ROWS[0])  # a row at least
    if header:  # (sparkcep reads the header from the first line)
        lines = ["type,ts,v", *lines]
    ends = draw(st.lists(st.sampled_from(["\n", "\r\n"]), min_size=len(lines), max_size=len(lines)))
    text = "".join(line + end for line, end in zip(lines, ends))
    if not draw(st.booleans()):  # the last line unended
        text = text.rstrip("\r\n") or text
    if draw(st.integers(0, 9)) == 0:
        at = draw(st.integers(len("type,ts,v\n") if header else 0, len(text)))
        text = text[:at] + "\r" + text[at:]
    return text.encode(), header


def spark_rows_per_split(spark, path: str, header: bool) -> tuple[list[int], int | None]:
    """Spark's rows of each of its partitions of the file (the reader sparkcep runs), and
    the split size sparkcep reckons Spark cuts it into."""
    columns = None if header else ["type", "ts", "v"]
    source = read_spark(spark, path, columns=columns)
    counted = lines_by_split(source.df, source.split_cols, ["s"])
    found = {r["s"]: r["n"] for r in counted}
    parts = source.df.rdd.getNumPartitions()
    size = source.split_rows.split_bytes if source.split_rows is not None else None
    return [found.get(i, 0) for i in range(parts)], size


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(csv_files(), st.integers(3, 60))
def test_rows_per_split_are_sparks(spark, tmp_path_factory, case, limit):
    data, header = case
    path = tmp_path_factory.mktemp("split") / "e.csv"
    path.write_bytes(data)
    with setting(spark, "spark.sql.files.maxPartitionBytes", str(limit)):
        try:
            spark_counts, size = spark_rows_per_split(spark, str(path), header)
        except Exception as e:  # no row at all (only a header): nothing to count
            if "holds no events" in str(e):
                return
            raise
    assert size is not None
    ours = rows_per_split(str(path), size, header)
    lone_return = b"\r" in data.replace(b"\r\n", b"")
    if ours is None:  # where Python's count may not be Spark's, it gives none
        assert lone_return or header
        return
    assert not lone_return
    assert ours == spark_counts


def test_a_count_that_does_not_hold_is_not_used(spark, tmp_path, monkeypatch):
    """Counts that are not Spark's (here: made wrong on purpose) are found by the job
    that reads the rows: the run checks its rows first instead, and its row numbers are
    those of the file."""
    from sparkcep.plan import Options
    from sparkcep.runners.spark import split_rows
    from sparkcep.runners.spark.batch import execute
    from sparkcep.runners.spark.one_pass import GuessWrong

    n = 300
    frame = pd.DataFrame({"type": "E", "ts": range(n), "k": [i % 3 for i in range(n)]})
    frame["rid"] = range(n)
    path = tmp_path / "e.csv"
    frame.to_csv(path, index=False)
    real = split_rows.rows_per_split

    def moved(*args, **kwargs):  # the same total, one row counted in the wrong split
        counts = real(*args, **kwargs)
        counts[0], counts[-1] = counts[0] - 1, counts[-1] + 1
        return counts

    monkeypatch.setattr("sparkcep.runners.spark.files.rows_per_split", moved)
    query = "PATTERN SEQ(E a) WHERE [k] WITHIN 1 RETURN a.rid AS rid"
    with setting(spark, "spark.sql.files.maxPartitionBytes", "500"):
        source = read_spark(spark, str(path))
        assert source.df.rdd.getNumPartitions() > 2
        result = execute(
            source.df, query, Options(), source=source, one_pass=True, **source.options()
        )
        result.unordered.toPandas()
        with pytest.raises(GuessWrong, match="splits"):
            result.settle()
