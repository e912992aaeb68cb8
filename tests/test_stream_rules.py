"""`sparkcep stream --rules DIR`: rules added, changed and removed between micro-batches
give, rule by rule, what a batch run of each rule over the events from its start gives;
a rule with an error is left out in one line; a kill -9 between a rule change and its
first rows loses and repeats nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from test_bad_inputs import sparkcep as in_process

from sparkcep.files import write_pandas
from sparkcep.runners.local import run_local
from sparkcep.runners.streaming.rules import RuleStreams

AB = "PATTERN SEQ(A a, B b) WHERE [k] WITHIN 100\n"
AC = "PATTERN SEQ(A a, C c) WHERE [k] WITHIN 100\n"
BC = "PATTERN SEQ(B b, C c) WHERE [k] WITHIN 100\n"
ABV = "PATTERN SEQ(A a, B b) WHERE [k] AND a.v < b.v WITHIN 100\n"
FILES = {  # (each second file's event moves the watermark past the first's matches)
    "f1": [(1, "A", 1, "x", 1), (2, "B", 5, "x", 0), (3, "C", 9, "x", 2), (4, "A", 20, "y", 3),
           (5, "C", 30, "y", 1), (6, "B", 40, "y", 5)],
    "f1z": [(7, "D", 1000, "z", 0)],
    "f2": [(8, "A", 2001, "x", 1), (9, "B", 2005, "x", 4), (10, "C", 2009, "x", 0),
           (11, "A", 2020, "y", 2), (12, "B", 2030, "y", 1), (13, "C", 2040, "y", 3)],
    "f2z": [(14, "D", 3000, "z", 0)],
}  # fmt: skip
COLUMNS = ["id", "type", "ts", "k", "v"]


def add_files(folder: Path, *names: str) -> None:
    for name in names:
        pd.DataFrame(FILES[name], columns=COLUMNS).to_csv(folder / f"{name}.csv", index=False)
        time.sleep(0.02)  # (files are read in order of modification time)


def batch_lines(query: str, names: list[str], tmp: Path, rule: str) -> list[bytes]:
    """The JSON lines `sparkcep run --local` writes for the query, named after its rule
    (`QUERY rule: ...;`), over these files."""
    query = f"QUERY {rule}: {query.strip()};"
    frame = pd.DataFrame([e for n in names for e in FILES[n]], columns=COLUMNS)
    out = tmp / f"batch-{abs(hash((query, *names)))}.jsonl"
    write_pandas(run_local(frame, query, id_col="id", time_unit="ms").matches, str(out))
    return out.read_bytes().splitlines()


def streamed_lines(folder: Path) -> list[bytes]:
    """The rows a rule's stream wrote: OUTPUT/NAME/HASH/batch-N.jsonl (each version's)."""
    files = sorted(folder.glob("*/batch-*.jsonl"))
    return [line for f in files for line in f.read_bytes().splitlines()]


def stream_args(tmp: Path) -> list[str]:
    return ["stream", "--rules", str(tmp / "rules"), "--input", str(tmp / "in"),
            "--output", str(tmp / "out"), "--checkpoint", str(tmp / "ck"), "--id", "id",
            "--max-files-per-trigger", "1", "--time-unit", "ms"]  # fmt: skip


def test_rules_added_changed_and_removed_give_each_rule_its_batch_rows(spark, tmp_path, capsys):
    rules, inputs = tmp_path / "rules", tmp_path / "in"
    rules.mkdir()
    inputs.mkdir()
    add_files(inputs, "f1", "f1z")
    said = []  # (an empty folder is said once)
    RuleStreams(None, str(rules), str(inputs), "", str(tmp_path / "ck0"), None).sync(said.append)
    assert said == [f"the rules folder '{rules}' holds no .cep file: no rule runs yet"]
    (rules / "r1.cep").write_text(AB)
    (rules / "r2.cep").write_text(AC)
    code, _, err = in_process(capsys, *stream_args(tmp_path))
    assert code == 0, err
    assert "rule r1 added: it reads every file" in err
    # between runs (the stream's micro-batch boundaries): r1 removed, r2 changed, r3 and a
    # rule with an error added; then new files
    (rules / "r1.cep").unlink()
    (rules / "r2.cep").write_text(BC)
    (rules / "r3.cep").write_text(ABV)
    (rules / "bad.cep").write_text("PATTERN SEQ(A a, B b WITHIN 100\n")
    code, _, err = in_process(capsys, *stream_args(tmp_path))
    assert code == 0, err
    lines = err.splitlines()
    assert "rule r1 removed" in lines and "rule r2 changed: its old query stopped" in lines
    assert any(line.startswith("rule bad left out: line 1, column") for line in lines), err
    assert "rule r3 added: it reads the files that arrive after the 2 present now" in lines
    add_files(inputs, "f2", "f2z")
    code, _, err = in_process(capsys, *stream_args(tmp_path))
    assert code == 0, err
    assert "rule bad left out" in err  # said again by a new run (not twice by one)
    result = tmp_path / "out"
    assert streamed_lines(result / "r1") == batch_lines(AB, ["f1", "f1z"], tmp_path, "r1")
    assert sorted(streamed_lines(result / "r2")) == sorted(
        batch_lines(AC, ["f1", "f1z"], tmp_path, "r2")
        + batch_lines(BC, ["f2", "f2z"], tmp_path, "r2")
    )
    assert streamed_lines(result / "r3") == batch_lines(ABV, ["f2", "f2z"], tmp_path, "r3")
    assert streamed_lines(result / "r3") and streamed_lines(result / "r1")  # (not vacuous)
    assert b'"query":"r3"' in streamed_lines(result / "r3")[0]  # rows carry their rule
    manifest = json.loads((tmp_path / "ck" / "sparkcep-rules.json").read_text())
    assert sorted(manifest) == ["r2", "r3"]
    assert sorted(p.name.split("-")[0] for p in (tmp_path / "ck" / "rules").iterdir()) == [
        "r2",
        "r3",
    ]  # the removed rule's state is dropped


@pytest.mark.slow  # covered by: test_rules_added_changed_and_removed_give_each_rule_its_batch_rows
def test_a_kill_between_a_rule_change_and_its_first_rows_loses_nothing(tmp_path):
    """A stream on an interval trigger; a rule added while it runs; the process killed
    (SIGKILL) as soon as the rule is in force, before its first rows; a restart gives
    the rule the rows of the files that arrived after it, once."""
    rules, inputs = tmp_path / "rules", tmp_path / "in"
    rules.mkdir()
    inputs.mkdir()
    (rules / "r1.cep").write_text(AB)
    add_files(inputs, "f1", "f1z")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    args = [sys.executable, "-m", "sparkcep.cli", *stream_args(tmp_path)]
    live = subprocess.Popen([*args, "--trigger", "1 second", "--timeout", "120"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)  # fmt: skip
    manifest = tmp_path / "ck" / "sparkcep-rules.json"
    try:
        _wait_for(lambda: streamed_lines(tmp_path / "out" / "r1"), live)
        (rules / "r3.cep").write_text(ABV)
        _wait_for(lambda: manifest.exists() and "r3" in json.loads(manifest.read_text()), live)
        add_files(inputs, "f2", "f2z")
        os.killpg(live.pid, signal.SIGKILL)
    finally:
        live.wait(timeout=60)
    assert not streamed_lines(tmp_path / "out" / "r3")  # killed before its first rows
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert streamed_lines(tmp_path / "out" / "r3") == batch_lines(
        ABV, ["f2", "f2z"], tmp_path, "r3"
    )
    assert sorted(streamed_lines(tmp_path / "out" / "r1")) == sorted(
        batch_lines(AB, ["f1", "f1z", "f2", "f2z"], tmp_path, "r1")
    )


def _wait_for(condition, process, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if process.poll() is not None:
            raise AssertionError(process.stderr.read().decode()[-3000:])
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.2)


def test_the_folder_is_read_again_when_a_micro_batch_ends(spark, tmp_path):
    """On an interval trigger the rules' loop wakes when any rule's micro-batch ends, not
    only on its clock: with the clock set to ten minutes, a rule added while the stream
    runs is in force as soon as the next micro-batch ends."""
    import threading

    from sparkcep.plan.model import Options
    from sparkcep.runners.streaming.rules import rule_streams

    rules, inputs = tmp_path / "rules", tmp_path / "in"
    rules.mkdir()
    inputs.mkdir()
    (rules / "r1.cep").write_text(AB)
    add_files(inputs, "f1", "f1z")
    streams = rule_streams(
        spark, str(rules), str(inputs), str(tmp_path / "out"), str(tmp_path / "ck"),
        options=Options(id_col="id", time_unit="ms"), trigger="1 second", max_files=1,
    )  # fmt: skip
    streams.sync()
    stop, said = threading.Event(), []
    loop = threading.Thread(
        target=streams.wait,
        kwargs={"until_done": False, "timeout": 120, "stop": stop, "report": said.append,
                "every": 600},
    )  # fmt: skip
    loop.start()
    try:
        _wait_for_rows(lambda: streamed_lines(tmp_path / "out" / "r1"))
        (rules / "r3.cep").write_text(ABV)
        add_files(inputs, "f2")  # a micro-batch of r1 ends: the folder is read
        _wait_for_rows(lambda: "r3" in streams.running, timeout=60)
    finally:
        stop.set()
        loop.join(timeout=60)
    assert any(line.startswith("rule r3 added") for line in said), said


def _wait_for_rows(condition, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)
