"""Memory that stays bounded (issue 10.2): the nfa matcher works in bounded chunks,
`--max-matches N` stops the search at N matches, and a run whose matches would exceed
the memory budget stops with one line naming the cause and the remedies; locally, in
Spark and in a stream. The blow-up cases run as real processes under an address-space
limit (RLIMIT_AS), which a run that held everything would exceed; the others run the
command in this process."""

from __future__ import annotations

import itertools
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from test_bad_inputs import sparkcep

from sparkcep import run_local
from sparkcep.engines.nfa import TooManyMatches, matcher
from sparkcep.errors import raised_in_worker

KLEENE = "PATTERN SEQ(A+ a[], B b) WITHIN 1000"
CUBIC = "PATTERN SEQ(A a, B b, C c) WITHIN 10000"
MB = 2**20


def kleene_events(n: int) -> pd.DataFrame:
    """n A's at times 1..n, then one B: under skip-till-any every nonempty subset of the
    A's (in time order) with the B is a match, 2^n - 1 of them."""
    return pd.DataFrame({"ts": range(1, n + 2), "type": ["A"] * n + ["B"]})


def cubic_events(n: int) -> pd.DataFrame:
    """n A's, then n B's, then n C's, all within the window: n^3 matches."""
    return pd.DataFrame({"ts": range(3 * n), "type": ["A"] * n + ["B"] * n + ["C"] * n})


# ---- in process: exact answers, whatever the chunk size --------------------------


@pytest.mark.parametrize("chunk", [1, 7, 1000, matcher.CHUNK_ROWS])
def test_kleene_matches_are_every_subset_whatever_the_chunk(monkeypatch, chunk):
    monkeypatch.setattr(matcher, "CHUNK_ROWS", chunk)
    monkeypatch.setattr(matcher, "KEEP_ROWS", max(chunk, 3))
    n = 10
    rows = run_local(kleene_events(n), KLEENE).matches
    expected = {(tuple(s), n) for k in range(1, n + 1) for s in itertools.combinations(range(n), k)}
    assert len(rows) == 2**n - 1
    assert {(tuple(a), b) for a, b in zip(rows["a"], rows["b"])} == expected


@pytest.mark.parametrize("chunk", [1, 5, matcher.CHUNK_ROWS])
def test_cubic_matches_are_every_triple_whatever_the_chunk(monkeypatch, chunk):
    monkeypatch.setattr(matcher, "CHUNK_ROWS", chunk)
    n = 6
    rows = run_local(cubic_events(n), CUBIC).matches
    expected = set(itertools.product(range(n), range(n, 2 * n), range(2 * n, 3 * n)))
    assert len(rows) == n**3
    assert set(zip(rows["a"], rows["b"], rows["c"])) == expected


@pytest.mark.parametrize("chunk", [1, 3, matcher.CHUNK_ROWS])
def test_a_negation_with_a_condition_is_exact_whatever_the_chunk(monkeypatch, chunk):
    monkeypatch.setattr(matcher, "CHUNK_ROWS", chunk)
    types = list("ACBCACBBAC")
    values = [8, 7, 0, 3, 9, 9, 0, 0, 2, 4]
    events = pd.DataFrame({"ts": range(10), "type": types, "v": values})
    query = "PATTERN SEQ(A a, !C c, B b) WHERE c.v > a.v WITHIN 100"
    rows = run_local(events, query).matches
    # by the definition: an A before a B with no C between them whose v exceeds the A's
    expected = {
        (i, j)
        for i, j in itertools.combinations(range(10), 2)
        if types[i] == "A" and types[j] == "B"
        and not any(types[k] == "C" and values[k] > values[i] for k in range(i + 1, j))
    }  # fmt: skip
    # by hand: A@0 (v 8) is killed after C@5 (v 9), A@4 (v 9) by no C, A@8 has no B
    assert expected == {(0, 2), (4, 6), (4, 7)}
    assert set(zip(rows["a"], rows["b"])) == expected


@pytest.mark.parametrize("n", [24, 60])
def test_max_matches_stops_the_search_with_n_true_matches(n):
    rows = run_local(kleene_events(n), KLEENE, max_matches=1000).matches
    assert len(rows) == 1000
    subsets = {tuple(a) for a in rows["a"]}
    assert len(subsets) == 1000  # distinct matches
    assert all(list(a) == sorted(set(a)) and a and a[0] >= 0 and a[-1] < n for a in subsets)
    assert set(rows["b"]) == {n}


def test_max_matches_with_after_match_skip_keeps_the_skips_choice():
    # the skip picks the leftmost, then longest match, (A@0, B@3); stopping the search at
    # one candidate would have given it (A@0, B@2) to choose from
    events = pd.DataFrame({"ts": [0, 1, 2, 3], "type": list("AABB")})
    query = "PATTERN SEQ(A a, B b) WITHIN 100 AFTER MATCH SKIP PAST LAST EVENT"
    rows = run_local(events, query, max_matches=1).matches
    assert rows[["a", "b"]].values.tolist() == [[0, 3]]


def test_a_run_beyond_the_budget_stops_with_the_cause_and_the_remedies():
    with pytest.raises(TooManyMatches) as info:
        run_local(kleene_events(22), KLEENE, memory_budget=50 * MB)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("stopped after ")
    assert "memory budget of 50 MB" in message
    for remedy in ("key", "smaller window", "--max-matches", "--memory-budget"):
        assert remedy in message


def test_the_same_run_under_a_larger_budget_completes():
    rows = run_local(kleene_events(14), KLEENE, memory_budget=50 * MB).matches
    assert len(rows) == 2**14 - 1


KLEENE_COUNT = "PATTERN SEQ(A+ a[], B b) AGG COUNT AS n WITHIN 1000"


def test_an_agg_query_answered_by_enumeration_stops_at_its_budget():
    # a Kleene AGG query enumerates its matches: 2^20 - 1 of them exceed 5 MB
    with pytest.raises(TooManyMatches, match="memory budget of 5 MB"):
        run_local(kleene_events(20), KLEENE_COUNT, memory_budget=5 * MB)
    # within the budget it finishes: the B at 11 ends every nonempty subset of 10 A's
    rows = run_local(kleene_events(10), KLEENE_COUNT, memory_budget=5 * MB).matches
    assert rows["n"].tolist() == [2**10 - 1]


# ---- real processes under an address-space limit ----------------------------------

LIMIT = 1500 * MB  # the process's address space: Python, pandas and a 300 MB budget fit


def write_csv(frame: pd.DataFrame, path: Path) -> Path:
    frame.to_csv(path, index=False)
    return path


def limited(*args, limit=LIMIT) -> subprocess.CompletedProcess:
    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return subprocess.run(
        [sys.executable, "-m", "sparkcep.cli", *map(str, args)],
        capture_output=True,
        text=True,
        env=dict(os.environ, COLUMNS="200"),
        preexec_fn=cap,
        timeout=600,
    )


# Runs the commands given as JSON, one after the other, in this one process: (exit
# code, stderr) of each, as JSON, to the file named last.
EACH = """
import contextlib, io, json, sys
from sparkcep import cli
done = []
for args in json.loads(sys.argv[1]):
    err, code = io.StringIO(), 0
    try:
        with contextlib.redirect_stderr(err):
            cli.main(args)
    except SystemExit as e:
        code = e.code
    done.append((code, err.getvalue()))
open(sys.argv[2], "w").write(json.dumps(done))
"""


def limited_each(commands: list[list], tmp_path: Path) -> list[tuple[int, str]]:
    """(exit code, stderr) of each command, run in turn in one process under the
    address-space limit (one Python start for them all; each run stops under its own
    limits, or the next one would not fit)."""

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))

    report = tmp_path / "done.json"
    done = subprocess.run(
        [sys.executable, "-c", EACH, json.dumps([[str(a) for a in c] for c in commands]), report],
        capture_output=True, text=True, env=dict(os.environ, COLUMNS="200"), preexec_fn=cap,
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return [tuple(r) for r in json.loads(report.read_text())]


BLOWUPS = {
    "kleene-24": (KLEENE, lambda: kleene_events(24)),
    "kleene-25": (KLEENE, lambda: kleene_events(25)),
    "kleene-60": (KLEENE, lambda: kleene_events(60)),
    "cubic-300": (CUBIC, lambda: cubic_events(300)),
}


def blowups(tmp_path: Path, *flags) -> list[tuple[str, Path, list]]:
    """Each blow-up case: its name, its output and its command with `flags`."""
    cases = []
    for case, (query, events) in BLOWUPS.items():
        source = write_csv(events(), tmp_path / f"{case}.csv")
        out = tmp_path / f"{case}.jsonl"
        cases.append((case, out, ["run", query, "-i", source, "-o", out, "--local", *flags]))
    return cases


def test_max_matches_writes_exactly_n_rows_and_says_so(tmp_path):
    cases = blowups(tmp_path, "--max-matches", 1000)
    for (case, out, _), (code, err) in zip(cases, limited_each([c for *_, c in cases], tmp_path)):
        assert code == 0, (case, err)
        assert len(out.read_text().splitlines()) == 1000, case
        assert "stopped after 1,000 matches (--max-matches)" in err, case


def test_a_blowup_stops_with_one_line_under_the_budget(tmp_path):
    cases = blowups(tmp_path, "--memory-budget", "300MB")
    for (case, _, _), (code, err) in zip(cases, limited_each([c for *_, c in cases], tmp_path)):
        assert code == 2, (case, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1, (case, err)
        assert lines[0].startswith("error: stopped after "), case
        assert "memory budget of 300 MB" in lines[0], case


def test_the_default_budget_holds_kleene_24(tmp_path):
    # 16.7 M matches died of MemoryError at 5.5 GB; under the default budget (2 GiB) the
    # run stops with its line, within an address space of 3.5 GB
    source = write_csv(kleene_events(24), tmp_path / "events.csv")
    done = limited("run", KLEENE, "-i", source, "-o", tmp_path / "m.jsonl", "--local",
                   limit=3500 * MB)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().startswith("error: stopped after ")
    assert "memory budget of 2.0 GB" in done.stderr


def test_a_negation_over_many_events_is_checked_in_bounded_chunks(tmp_path):
    # 10,000 A's, then 10,000 C's, then one B: each of the 10,000 runs (a, b) has 10,000
    # C's to check in its gap, 10^8 pairs; no C's v exceeds an A's, so every run matches
    n = 10_000
    events = pd.DataFrame(
        {
            "ts": range(2 * n + 1),
            "type": ["A"] * n + ["C"] * n + ["B"],
            "v": [1] * n + [0] * (n + 1),
        }
    )
    source = write_csv(events, tmp_path / "events.csv")
    out = tmp_path / "m.jsonl"
    query = "PATTERN SEQ(A a, !C c, B b) WHERE c.v > a.v WITHIN 100000"
    done = limited("run", query, "-i", source, "-o", out, "--local")
    assert done.returncode == 0, done.stderr
    assert len(out.read_text().splitlines()) == n


def test_a_bad_memory_budget_is_one_line(tmp_path, capsys):
    source = write_csv(kleene_events(3), tmp_path / "events.csv")
    code, _, err = sparkcep(
        capsys, "run", KLEENE, "-i", source, "--local", "--memory-budget", "lots"
    )
    assert code == 2
    assert err.strip() == "error: --memory-budget 'lots' is not a size: write e.g. 2GB or 500MB"


# ---- Spark and streaming ---------------------------------------------------------


@pytest.mark.spark
def test_spark_max_matches_and_budget(spark):
    from sparkcep.runners.spark.batch import run

    df = spark.createDataFrame(kleene_events(20))
    rows = run(df, KLEENE, max_matches=1000).rows.toPandas()
    assert len(rows) == 1000
    assert len({tuple(a) for a in rows["a"]}) == 1000
    with pytest.raises(Exception) as info:
        run(df, KLEENE, memory_budget=50 * MB).rows.toPandas()
    line = raised_in_worker(info.value)
    assert line is not None and line.startswith("stopped after ")
    assert "memory budget of 50 MB" in line


@pytest.mark.spark
def test_a_stream_beyond_the_budget_stops_with_its_line(spark, tmp_path):
    from sparkcep.runners.streaming.pipeline import read_stream, start, stream

    folder = tmp_path / "in"
    folder.mkdir()
    events = kleene_events(22).assign(id=range(23))
    later = pd.DataFrame({"ts": [5000], "type": ["C"], "id": [99]})  # moves the watermark
    pd.concat([events, later]).to_csv(folder / "part-000.csv", index=False)
    source = read_stream(spark, str(folder), checkpoint=str(tmp_path / "ckpt"))
    rows = stream(source, KLEENE, id_col="id", memory_budget=50 * MB)
    running, _ = start(
        rows, output=str(tmp_path / "out"), late=str(tmp_path / "late"),
        rejected=str(tmp_path / "rejected"), checkpoint=str(tmp_path / "ckpt"),
        trigger="available-now", fmt="jsonl",
    )  # fmt: skip
    with pytest.raises(Exception) as info:
        running.awaitTermination()
    line = raised_in_worker(info.value)
    assert line is not None and line.startswith("stopped after ")
    assert "memory budget of 50 MB" in line


def test_rows_of_a_capped_run_are_valid_json(tmp_path, capsys):
    source = write_csv(kleene_events(8), tmp_path / "events.csv")
    out = tmp_path / "m.jsonl"
    code, _, err = sparkcep(
        capsys, "run", KLEENE, "-i", source, "-o", out, "--local", "--max-matches", 5
    )
    assert code == 0, err
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 5 and all(r["b"] == 8 for r in rows)
