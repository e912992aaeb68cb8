"""Every folder of examples/ runs, locally and through Spark, to its expected output.

The expected outputs were worked out by hand from the queries' meaning (each folder's
query file explains it); they are not copies of what the engine printed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparkcep.files import read_pandas, write_pandas
from sparkcep.runners.local import run_local
from sparkcep.runners.spark.files import read_spark, write_spark

# Folders with their events and expected output (an example derived from the shared data
# instead, e.g. examples/hadoop_load, has a test of its own).
EXAMPLES = sorted(
    p
    for p in (Path(__file__).parent.parent / "examples").iterdir()
    if p.is_dir() and (p / "expected.jsonl").exists()
)


def example_files(folder: Path):
    query = (folder / "query.cep").read_text()
    events = next(p for p in folder.iterdir() if p.name.startswith("events."))
    if events.suffix == ".path":  # a shared data file, by its path from the repository
        events = folder.parent.parent / events.read_text().strip()
        if not events.exists():
            pytest.skip(f"{events} is not here (the shared data folder)")
    options_file = folder / "options.json"
    options = json.loads(options_file.read_text()) if options_file.exists() else {}
    expected = [json.loads(line) for line in (folder / "expected.jsonl").read_text().splitlines()]
    return query, str(events), options, expected


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("folder", EXAMPLES, ids=lambda p: p.name)
def test_example_locally(folder, tmp_path):
    query, events, options, expected = example_files(folder)
    result = run_local(read_pandas(events), query, **options)
    out = tmp_path / "matches.jsonl"
    write_pandas(result.matches, str(out))
    assert read_jsonl(out) == expected


@pytest.mark.parametrize("folder", EXAMPLES, ids=lambda p: p.name)
def test_example_counted_locally(folder):
    """`run --local --count`'s path counts as many rows as the expected output has."""
    from sparkcep.plan import Options
    from sparkcep.runners.local import execute_local

    query, events, options, expected = example_files(folder)
    result = execute_local(read_pandas(events), query, Options(**options), count_only=True)
    assert result.matches is None and result.row_count == len(expected)


def through_spark() -> list:
    """The examples through Spark: those over a shared data file (150k rows of gzip: 24 s)
    in the full run only."""
    return [
        pytest.param(
            folder,
            # covered by: test_example_locally (its rows); test_one_read (a shared gzip trace)
            marks=[pytest.mark.slow] if (folder / "events.path").exists() else [],
        )
        for folder in EXAMPLES
    ]


@pytest.mark.spark
@pytest.mark.parametrize("folder", through_spark(), ids=lambda p: p.name)
def test_example_through_spark(folder, tmp_path, spark):
    """As `sparkcep run` reads it: a CSV input once, given the first rows' cells
    (runners/spark/one_read.py, keeping only the columns the query reads); JSON lines twice;
    with the settings the input's size gives (a tiny one's expressions interpreted:
    session.light_driver). Its rows, and the rows rejected for the same reasons as by the
    local runner. (Two reads of CSV, the Python API's way, are compared with one in
    test_one_read.)"""
    from test_demo_start import settings_of

    from sparkcep.files import data_bytes
    from sparkcep.plan import Options
    from sparkcep.runners.spark.batch import execute
    from sparkcep.runners.spark.session import light_driver

    query, events, options, expected = example_files(folder)
    out, rejected = tmp_path / "matches.jsonl", tmp_path / "rejected.jsonl"
    with settings_of(spark, light_driver(data_bytes([events]))[1]):
        source = read_spark(spark, events)
        result = execute(source.df, query, Options(**options), source=source, **source.options())
        read_once = result.checked.cached is not None
        try:
            write_spark(result.unordered, str(out), order=result.order)
            write_spark(result.rejected, str(rejected))
        finally:
            result.checked.release()
    assert read_once == (".csv" in events)  # .csv, .csv.gz
    assert read_jsonl(out) == expected
    # the same rows rejected for the same reasons as by the local runner, which rejects
    # as Spark's compiled checking pass does (test_bad_inputs, both ways)
    local = run_local(read_pandas(events), query, **options).rejected
    reasons = [r["reason"] for r in sorted(read_jsonl(rejected), key=lambda r: r["__row"])]
    assert reasons == list(local["reason"])


def test_rejected_rows_of_the_demo_example():
    query, events, options, _ = example_files(
        Path(__file__).parent.parent / "examples" / "cpu_overload"
    )
    result = run_local(read_pandas(events), query, **options)
    assert result.events_read == 12
    assert sorted(result.rejected["reason"]) == ["ts is missing", "type is missing"]
