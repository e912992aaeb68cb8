"""Test set-up: helper modules on the path, one SparkSession for the whole run.

`make test` runs the suite on two workers (pytest-xdist, `--dist loadgroup`): every test that
uses Spark is in one group, so one worker holds the run's only SparkSession and the other runs
the tests that need no Spark (pure Python, and the few that start a process of their own)."""

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


def pytest_itemcollected(item):
    # Here, not in pytest_collection_modifyitems: xdist reads the groups in that hook.
    if "spark" in getattr(item, "fixturenames", ()):
        item.add_marker(pytest.mark.xdist_group("spark"))


_spark_accounted_for = False  # the fixture started it, or a test was already told


@pytest.fixture(autouse=True)
def _no_spark_behind_the_fixtures_back(request):
    """A test that starts Spark in this process without asking for the `spark` fixture would
    start a second JVM on the worker meant for tests without Spark: make it ask."""
    global _spark_accounted_for
    yield
    if _spark_accounted_for or "pyspark" not in sys.modules:
        return
    from pyspark import SparkContext

    if SparkContext._active_spark_context is not None:
        _spark_accounted_for = True  # said once: the tests after it did not start it
        pytest.fail(
            f"{request.node.nodeid} started Spark without the `spark` fixture: ask for it "
            "(one SparkSession per run, on the worker that runs the Spark tests)"
        )


@pytest.fixture(scope="session")
def spark():
    from sparkcep.runners.spark.compiled_home import build
    from sparkcep.runners.spark.session import spark_session

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    build()  # at once, as `sparkcep warmup` does: this session's Python processes use it
    session = spark_session(
        "local[2]",
        app_name="sparkcep-tests",
        # A short CLI run's driver and settings (light_driver): the tests' inputs are tiny, and
        # compiling code for each new query cost more than running it (test_spark.py: 101 -> 83 s).
        input_bytes=0,
        **{"spark.sql.shuffle.partitions": "3", "spark.default.parallelism": "2"},
    )
    global _spark_accounted_for
    _spark_accounted_for = True
    yield session
    session.stop()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not DATA.exists():
        pytest.skip(f"the shared data folder {DATA} is not here")
    return DATA
