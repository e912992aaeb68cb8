"""The lossy RFID example on the real reads (examples/lossy_rfid/evaluate.py): with a
tenth of the zone sightings dropped, ayac finds walks the precise engine loses, and keeps
most of its precision. Skipped when ../shared/data is absent."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).parent.parent / "examples" / "lossy_rfid" / "evaluate.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("lossy_rfid_evaluate", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not module.DATA.exists():
        pytest.skip(f"the RFID reads are not at {module.DATA}")
    return module


def test_ayac_recovers_walks_the_precise_engine_loses(example):
    sightings = example.zone_sightings()
    results = example.evaluate(
        sightings, drop_rates=(0.0, 0.1), thresholds=(0.05,), variants=("all sightings",)
    )
    walk = results[results["pattern"] == "walk"].set_index(["drop", "engine"])
    # Nothing dropped: both find exactly the truth.
    assert walk.loc[(0.0, "precise"), "recall"] == 1.0
    assert walk.loc[(0.0, "ayac"), ["recall", "precision"]].tolist() == [1.0, 1.0]
    # A tenth dropped: the precise engine loses walks (each needs three sightings);
    # ayac infers the missed ones, at the cost of some walks the readers never saw whole.
    precise, ayac = walk.loc[(0.1, "precise")], walk.loc[(0.1, "ayac")]
    assert precise["precision"] == 1.0  # no negation: what it finds is true
    assert ayac["recall"] >= precise["recall"] + 0.05
    assert ayac["recall"] >= 0.85 and ayac["precision"] >= 0.7
