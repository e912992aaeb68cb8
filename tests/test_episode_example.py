"""The traffic example end to end on the real detector data (skipped without it):
rules mined on the first 70%, predictions on the rest beat intervals placed at random."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parent.parent / "examples" / "traffic_episodes" / "traffic.py"


def test_traffic_example_mines_predicts_and_plots(shared_data, tmp_path):
    data = shared_data / "traffic"
    if not any(data.glob("*.csv")):
        pytest.skip(f"no traffic data in {data}")
    spec = importlib.util.spec_from_file_location("traffic_example", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    summary = module.run(data, tmp_path)
    assert summary["rules"] > 0 and summary["predictions"] > 0
    assert summary["history"] > 2 * summary["held_out"] > 0
    assert summary["precision"] > summary["chance"]  # better than intervals put at random
    for name in ("rules.cep", "report.csv", "predictions.png", "summary.md"):
        assert (tmp_path / name).stat().st_size > 0
    assert "RULE m1:" in (tmp_path / "rules.cep").read_text()
