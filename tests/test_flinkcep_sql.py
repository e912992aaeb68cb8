"""The FlinkCEP peer's query (benchmarks/flinkcep_job.py) means G2's query: checked with
sparkcep's own MATCH_RECOGNIZE, which reads the same text. No Flink here (CI has none);
benchmarks/flinkcep.py checks Flink's matches against the same hand-worked file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import sparkcep

ROOT = Path(__file__).parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.flinkcep import HAND_MATCHES, by_times, hand_frame  # noqa: E402
from benchmarks.flinkcep_job import match_recognize_sql  # noqa: E402
from benchmarks.generators import G2_QUERY, g2  # noqa: E402


def _as_tuples(rows) -> set:
    return {tuple(int(x) for x in row) for row in rows[["k", "a_ts", "b_ts", "c_ts"]].values}


def test_hand_file_matches_worked_out_by_hand_with_the_sql_and_the_native_query():
    frame = hand_frame()
    expected = by_times(frame, HAND_MATCHES)
    sql = sparkcep.match_recognize_local(frame, match_recognize_sql(order_by="ts"),
                                         time_unit="ms")  # fmt: skip
    assert _as_tuples(sql) == expected
    native = sparkcep.run_local(frame, G2_QUERY, time_col="ts", time_unit="ms").matches
    ids = {(int(a), int(b), int(c)) for a, b, c in native[["a", "b", "c"]].values}
    assert ids == HAND_MATCHES


def test_the_sql_equals_the_native_query_on_a_g2_prefix():
    frame = g2(20_000)  # 100 keys, ~200 events each, gaps 1..20 ms: windows of ~250 events
    native = sparkcep.run_local(frame, G2_QUERY, time_col="ts", time_unit="ms").matches
    ids = [tuple(int(x) for x in row) for row in native[["a", "b", "c"]].values]
    sql = sparkcep.match_recognize_local(frame, match_recognize_sql(order_by="ts"),
                                         time_unit="ms")  # fmt: skip
    assert len(ids) > 20
    assert len(sql) == len(ids)
    assert _as_tuples(sql) == by_times(frame, ids)


def test_without_flink_the_benchmark_says_not_measured_and_exits_0(tmp_path):
    env = {**os.environ, "SPARKCEP_FLINK_PYTHON": str(tmp_path / "no-such-python")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.flinkcep", "--results", str(tmp_path / "out")],
        cwd=ROOT, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "out" / "flinkcep.md").read_text()
    assert "not measured: apache-flink not installed" in text
    assert "pip install apache-flink" in text
    targets = (tmp_path / "out" / "flinkcep.targets.json").read_text()
    assert '"measured": null' in targets
