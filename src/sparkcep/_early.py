"""`sparkcep run` through Spark starts the JVM before the command's heavy imports (pandas,
pyarrow, the parser: about 0.5 s), so that the work that needs no JVM overlaps its start:
`sparkcep/__init__` imports this module first, and importing it calls `start()`.

Only when this process is the command (the console script `sparkcep`, or `python -m
sparkcep.cli`), its arguments say `run` without `--local` or `--help`, and `--input`
names one file: then the session starts in a daemon thread with the master and input
size the command would give it, and `cli._start_spark` takes it (`taken`). Anything
else (a library import, another command, a folder) starts nothing here, nor does
SPARKCEP_EARLY_START=0 (the command starts the session itself, as it did). This module
imports nothing of sparkcep but the session's own module.
"""

from __future__ import annotations

import os
import sys
import threading

_early: dict = {}  # master, input_bytes, thread, and the session or the error


def command_args() -> list[str] | None:
    """The command's arguments when this process is the `sparkcep` command, else None."""
    if os.path.basename(sys.argv[0]) == "sparkcep":
        return list(sys.argv[1:])
    orig = list(getattr(sys, "orig_argv", []))
    if "-m" in orig:  # python -m sparkcep.cli: sys.argv[0] is '-m' while it is found
        at = orig.index("-m")
        if orig[at + 1 : at + 2] == ["sparkcep.cli"]:
            return orig[at + 2 :]
    return None


def run_target(args: list[str]) -> tuple[str | None, str] | None:
    """(master, input file) of `run ... --input FILE [--master M]` through Spark, or None
    (another command, --local, --help, an input that is not one file, an option given
    twice or that cannot be read here)."""
    if not args or args[0] != "run":
        return None
    values: dict[str, list[str]] = {}
    names = {"--input": "input", "-i": "input", "--master": "master", "--remote": "master"}
    for i, arg in enumerate(args[1:], 1):
        if arg in ("--local", "--help"):
            return None
        key, _, value = arg.partition("=")
        if key in names:
            if not value:
                if i + 1 >= len(args):
                    return None
                value = args[i + 1]
            values.setdefault(names[key], []).append(value)
    inputs, masters = values.get("input", []), values.get("master", [None])
    if len(inputs) != 1 or len(masters) != 1 or not os.path.isfile(inputs[0]):
        return None
    return masters[0], inputs[0]


def start() -> None:
    """Start the session now when this process is `sparkcep run` through Spark."""
    if _early or os.environ.get("SPARKCEP_EARLY_START") == "0":
        return
    args = command_args()
    target = run_target(args) if args is not None else None
    if target is None:
        return
    master, path = target
    from sparkcep.runners.spark.session import spark_session
    from sparkcep.sizes import data_bytes

    size = data_bytes([path])  # as the command sizes it (cli._start_spark)

    def starting() -> None:
        try:
            _early["session"] = spark_session(master, input_bytes=size)
        except BaseException as e:  # given to the command when it takes the session
            _early["error"] = e

    thread = threading.Thread(target=starting, name="sparkcep-early-start", daemon=True)
    _early.update(master=master, input_bytes=size, thread=thread)
    thread.start()


def started(master: str | None, input_bytes: int) -> bool:
    """Whether a session was started early for this master and input size."""
    return bool(_early) and (_early["master"], _early["input_bytes"]) == (master, input_bytes)


def taken(master: str | None, input_bytes: int):
    """The session started early for this master and input size (waited for), or None
    when none was. One started for others is waited for and stopped (never the case
    when the command reads its arguments as `run_target` does)."""
    if not _early:
        return None
    _early["thread"].join()
    if "error" in _early:
        raise _early["error"]
    session = _early["session"]
    if not started(master, input_bytes):
        session.stop()
        _early.clear()
        return None
    return session


start()
