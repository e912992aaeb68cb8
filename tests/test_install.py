"""sparkcep as a user installs it: a wheel built from this checkout, installed with pip
into a fresh virtual environment (its declared dependencies, pyspark among them, come from
the package index or pip's cache), then used from there: `sparkcep --version`, the demo
query through Spark and with --local, and the Python API.

Nothing here imports the checkout's sources: each command runs with the fresh
environment's Python, in a folder of its own, without PYTHONPATH or the suite's Spark
variables. The tests start their own processes (no `spark` fixture), one group of
processes a command, and wait for each group to be gone. Building the environment takes
about 25 s (pip install: 12-17 s, with pyspark's wheel in pip's cache, as `make test`'s own
install leaves it; pyarrow and the small packages come from the index); it is removed at
the end (0.9 GB).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
EXAMPLE = ROOT / "examples" / "cpu_overload"
PACKAGE_DATA = ("language/*.lark", "log4j2.properties", "py.typed")  # pyproject's package-data

# All on one worker: the environment is built once (a module fixture per worker otherwise).
pytestmark = pytest.mark.xdist_group("install")


def _processes_gone(group: int, seconds: float) -> None:
    """Wait for every process of `group` to exit (the JVM outlives the command by a moment),
    then kill what remains."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)


def run(args, *, cwd: Path, env: dict, timeout: float) -> subprocess.CompletedProcess:
    """`args` as a process group of its own: killed whole on timeout, and waited for whole
    after it exits, so that no process of it is left behind."""
    process = subprocess.Popen(
        [str(a) for a in args], cwd=cwd, env=env, text=True, start_new_session=True,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise
    finally:
        _processes_gone(process.pid, 30)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def user_env(venv: Path, **values: str) -> dict:
    """A user's environment with `venv` first on PATH: none of this suite's Python or Spark
    variables (PYSPARK_PYTHON names the checkout's Python once a test has started Spark)."""
    dropped = ("PYTHON", "PYSPARK_", "SPARK_", "SPARKCEP_", "VIRTUAL_ENV", "CONDA_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return {**env, **values}


def _source_copy(target: Path) -> Path:
    """What the wheel is built from: pyproject, readme and src, copied (setuptools builds in
    the source folder: in the checkout it would leave build/ and an egg-info there, and a
    module deleted from src would stay in build/lib and still go into the wheel)."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    shutil.copytree(ROOT / "src", target / "src", ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, target / name)
    for extra in ROOT.glob("LICEN[CS]E*"):
        shutil.copy2(extra, target / extra.name)
    return target


def _build_isolation_flags() -> list[str]:
    """--no-build-isolation when this Python has the build backend pyproject asks for
    (setuptools>=77, wheel): nothing downloaded; else pip builds in an isolated environment
    with setuptools and wheel from its usual sources (the index, or its cache)."""
    try:
        setuptools = int(importlib.metadata.version("setuptools").split(".")[0])
        importlib.metadata.version("wheel")
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return []
    return ["--no-build-isolation"] if setuptools >= 77 else []


class Installed:
    def __init__(self, venv: Path, wheel: Path, source: Path, seconds: dict[str, float]):
        self.venv, self.wheel, self.source, self.seconds = venv, wheel, source, seconds
        self.python = venv / "bin" / "python"
        self.sparkcep = venv / "bin" / "sparkcep"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    """A wheel of this checkout, pip-installed into a fresh virtual environment."""
    base = tmp_path_factory.mktemp("install")
    seconds: dict[str, float] = {}
    source = _source_copy(base / "source")
    env = user_env(base / "none")

    started = time.monotonic()
    wheels = base / "wheels"
    built = run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", *_build_isolation_flags(),
         "-w", wheels, source],
        cwd=base, env=env, timeout=600,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
    [wheel] = wheels.glob("sparkcep-*.whl")
    seconds["wheel"] = time.monotonic() - started

    venv = base / "venv"
    started = time.monotonic()
    made = run([sys.executable, "-m", "venv", venv], cwd=base, env=env, timeout=300)
    assert made.returncode == 0, made.stderr
    seconds["venv"] = time.monotonic() - started

    started = time.monotonic()
    env = user_env(venv)
    pip = [venv / "bin" / "python", "-m", "pip"]
    done = run([*pip, "install", "--no-input", wheel], cwd=base, env=env, timeout=1500)
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-5000:]
    seconds["pip install"] = time.monotonic() - started
    checked = run([*pip, "check"], cwd=base, env=env, timeout=300)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    print("install seconds:", {k: round(v, 1) for k, v in seconds.items()})

    yield Installed(venv, wheel, source, seconds)
    shutil.rmtree(venv, ignore_errors=True)  # about 0.9 GB (pyspark)


def test_the_version_is_pyprojects():
    import sparkcep

    with open(ROOT / "pyproject.toml", "rb") as f:
        assert sparkcep.__version__ == tomllib.load(f)["project"]["version"]


def test_the_installed_command_prints_its_version(installed, tmp_path):
    done = run(
        [installed.sparkcep, "--version"], cwd=tmp_path, env=user_env(installed.venv), timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"sparkcep {installed.wheel.name.split('-')[1]}\n"


def test_the_installed_package_has_its_modules_and_data(installed, tmp_path):
    """Every module of src and the package data (the grammars, Spark's log settings,
    py.typed) are in the wheel and installed; the metadata's version is __version__."""
    script = """if True:
        import importlib.metadata, json, sys
        from pathlib import Path
        import sparkcep
        root = Path(sparkcep.__file__).parent
        print(json.dumps({
            "root": str(root), "prefix": sys.prefix, "version": sparkcep.__version__,
            "metadata": importlib.metadata.version("sparkcep"),
            "files": sorted(str(p.relative_to(root)) for p in root.rglob("*")
                            if p.is_file() and "__pycache__" not in p.parts),
        }))
    """
    done = run([installed.python, "-c", script], cwd=tmp_path, env=user_env(installed.venv), timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert Path(found["root"]).is_relative_to(installed.venv)  # not the checkout's src
    assert found["version"] == found["metadata"] == installed.wheel.name.split("-")[1]
    package = installed.source / "src" / "sparkcep"
    wanted = {str(p.relative_to(package)) for p in package.rglob("*.py")}
    for pattern in PACKAGE_DATA:
        matched = {str(p.relative_to(package)) for p in package.glob(pattern)}
        assert matched, f"{pattern}: nothing in src to check"
        wanted |= matched
    assert sorted(wanted - set(found["files"])) == []


@pytest.mark.skipif(shutil.which("java") is None, reason="needs Java (java on PATH) for Spark")
def test_the_installed_command_runs_the_demo_through_spark(installed, tmp_path):
    """`sparkcep run` of the demo through Spark local mode, from the installed package only
    (Spark's Python workers too): the rows of --local and of the example's expected.jsonl.
    No background helper (the JVM class archive's recorder, the compiled home's builder):
    they would outlive the test."""
    for name in ("query.cep", "events.csv"):
        shutil.copy2(EXAMPLE / name, tmp_path / name)
    env = user_env(
        installed.venv, SPARK_LOCAL_IP="127.0.0.1", SPARKCEP_CDS="0",
        SPARKCEP_COMPILED_HOME="0", XDG_CACHE_HOME=str(tmp_path / "cache"), COLUMNS="200",
    )  # fmt: skip
    demo = [installed.sparkcep, "run", "query.cep", "--input", "events.csv", "--output"]
    started = time.monotonic()
    spark = run([*demo, tmp_path / "matches.jsonl"], cwd=tmp_path, env=env, timeout=600)
    print(f"sparkcep run through Spark: {time.monotonic() - started:.1f} s")
    assert spark.returncode == 0, spark.stdout + spark.stderr
    mode = next(line for line in spark.stdout.splitlines() if line.startswith("mode"))
    assert "Spark (local" in mode
    local = run([*demo, tmp_path / "local.jsonl", "--local"], cwd=tmp_path, env=env, timeout=300)
    assert local.returncode == 0, local.stdout + local.stderr

    rows = read_jsonl(tmp_path / "matches.jsonl")
    assert len(rows) == 2
    assert rows == read_jsonl(tmp_path / "local.jsonl") == read_jsonl(EXAMPLE / "expected.jsonl")


def test_the_installed_python_api_matches_locally(installed, tmp_path):
    for name in ("query.cep", "events.csv"):
        shutil.copy2(EXAMPLE / name, tmp_path / name)
    script = """if True:
        import json, warnings
        import pandas as pd
        import sparkcep
        events = pd.read_csv("events.csv")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the two rows without a time or a type
            matches = sparkcep.match_local(events, open("query.cep").read())
        print(json.dumps(matches[["a", "b", "c", "d", "peak"]].to_dict("records")))
    """
    env = user_env(installed.venv, XDG_CACHE_HOME=str(tmp_path / "cache"))
    done = run([installed.python, "-c", script], cwd=tmp_path, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert len(rows) == 2
    expected = read_jsonl(EXAMPLE / "expected.jsonl")
    assert rows == [{k: row[k] for k in ("a", "b", "c", "d", "peak")} for row in expected]


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
