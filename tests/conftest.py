"""Test set-up: helper modules on the path, one SparkSession for the whole run."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

# CI runs the same examples every time (a red build must be reproducible); set
# HYPOTHESIS_PROFILE=explore to search new random examples (HYPOTHESIS_SCALE=20: more).
settings.register_profile("ci", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

TESTS = Path(__file__).parent
sys.path.insert(0, str(TESTS))

ROOT = TESTS.parent
DATA = ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def spark():
    from sparkcep.runners.spark.session import spark_session

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = spark_session(
        "local[2]",
        app_name="sparkcep-tests",
        **{
            "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
            "spark.sql.shuffle.partitions": "3",
            "spark.default.parallelism": "2",
        },
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not DATA.exists():
        pytest.skip(f"the shared data folder {DATA} is not here")
    return DATA
