"""Rules that change while a stream runs: the queries of a folder of query files
(`sparkcep stream --rules DIR`), read again and again while the stream runs.

Each rule (a `.cep` file; its name is the file's name without `.cep`) runs as a
streaming query of its own over the same input folder, with its own checkpoint
(`CHECKPOINT/rules/NAME-HASH`) and output folder (`OUTPUT/NAME/HASH`, late events and
rejected rows beneath it; HASH names the rule's text, so a changed rule's rows go beside
the old ones). So a rule that did not change keeps its state, and gives, exactly once
across restarts, the rows it would have given without the change.

- A new file's rule starts at the files that arrive after it: the files present when it
  is added are marked read in its checkpoint (at a stream's first start, no file is:
  every rule reads everything).
- A removed file's rule stops; its checkpoint (its state) is dropped. Its rows stay.
- A changed file (another text) is a removal, then an addition.
- A file whose query has an error is reported once (its name and the error's line) and
  left out; the others keep running.
- A rule's rows carry its name in a `query` column (its file's name, for a file of one
  unnamed query; a file of named queries names its own).

The rules in force are kept in `CHECKPOINT/sparkcep-rules.json` (written before a rule's
stream starts, and again after one stops): a restart goes on with the same rules, each
from its own checkpoint, and then applies what changed in the folder meanwhile.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from sparkcep.errors import SparkcepError
from sparkcep.runners.streaming.folder import SEEN_FILE, TYPES_FILE
from sparkcep.runners.streaming.folder_source import listing

MANIFEST = "sparkcep-rules.json"


def rule_files(folder: str) -> dict[str, str]:
    """name -> query text of the folder's `.cep` files."""
    if not os.path.isdir(folder):
        raise SparkcepError(f"the rules folder '{folder}' is not a folder")
    return {
        p.stem: p.read_text(encoding="utf-8")
        for p in sorted(Path(folder).glob("*.cep"))
        if not p.name.startswith(".")
    }


def rule_text(name: str, text: str) -> str:
    """The rule's query, named after its file when it is one unnamed pattern query (so
    that its rows carry the rule's name in a `query` column); as written otherwise."""
    from sparkcep.language.forms import is_match_recognize

    body = text.strip().rstrip(";").strip()
    if not re.fullmatch(r"[A-Za-z_]\w*", name) or is_match_recognize(body):
        return text
    if re.match(r"(QUERY|RULE)\b", body, re.IGNORECASE) or ";" in body:
        return text  # named queries (or several) carry their own names
    return f"QUERY {name}: {body};"


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Running:
    query: object  # the StreamingQuery
    writer: object  # its BatchWriter
    digest: str


@dataclass
class RuleStreams:
    """The streams of a rules folder, kept in step with it by `sync`."""

    spark: object
    rules: str
    input: str
    output: str
    checkpoint: str
    start_rule: object  # (name, text, checkpoint, output) -> (StreamingQuery, BatchWriter)
    trigger: str = "available-now"  # (available-now and once: sync at start only)
    running: dict[str, Running] = field(default_factory=dict)
    history: list[str] = field(default_factory=list)  # rules added and removed, when
    errors: dict[str, str] = field(default_factory=dict)  # name -> the text reported
    finished: dict[tuple, object] = field(default_factory=dict)  # (name, hash) -> writer
    said_empty: bool = False

    def __post_init__(self):
        self.root = Path(self.checkpoint)
        self.manifest_path = self.root / MANIFEST
        self.fresh = not self.manifest_path.exists()
        self.manifest = self._read_manifest()
        self.root.mkdir(parents=True, exist_ok=True)
        self._drop_orphans()

    # ---- the rules in force --------------------------------------------------------------

    def _read_manifest(self) -> dict:
        if self.fresh:
            return {}
        try:
            value = json.loads(self.manifest_path.read_text(encoding="utf-8"))
        except ValueError:
            value = None
        if not isinstance(value, dict):
            raise SparkcepError(
                f"the checkpoint's rules file '{self.manifest_path}' is damaged: start on a "
                "new checkpoint folder"
            )
        return value

    def _write_manifest(self) -> None:
        partial = self.manifest_path.with_suffix(".tmp")
        partial.write_text(json.dumps(self.manifest, indent=1), encoding="utf-8")
        os.replace(partial, self.manifest_path)  # whole, or not at all

    def _folder(self, name: str, digest: str) -> Path:
        return self.root / "rules" / f"{name}-{digest}"

    def _drop_orphans(self) -> None:
        """Rule checkpoints the manifest does not name (a crash between their making and
        the manifest's writing, or after a removal): never in force, so dropped."""
        kept = {self._folder(n, r["hash"]).name for n, r in self.manifest.items()}
        folder = self.root / "rules"
        if folder.is_dir():
            for child in folder.iterdir():
                if child.name not in kept:
                    shutil.rmtree(child, ignore_errors=True)

    # ---- keeping in step with the folder ---------------------------------------------------

    def sync(self, report=None) -> None:
        """Apply what changed in the rules folder: stop removed and changed rules, start
        new ones (and, after a restart, the rules in force). `report(text)` is told."""
        report = report or (lambda text: None)
        found = rule_files(self.rules)
        if not found and not self.manifest and not self.said_empty:
            self.said_empty = True  # (said once: a stream may wait for its first rule)
            report(f"the rules folder '{self.rules}' holds no .cep file: no rule runs yet")
        digests = {name: text_hash(text) for name, text in found.items()}
        for name in list(self.manifest):
            if digests.get(name) != self.manifest[name]["hash"]:
                self._remove(name, report, changed=name in found)
        for name, text in found.items():
            if name in self.manifest and name not in self.running:
                self._start(name, text)  # in force: goes on from its checkpoint
            elif name not in self.manifest:
                self._add(name, text, digests[name], report)
        for name in [n for n in self.errors if n not in found]:
            del self.errors[name]
        self.fresh = False  # a rule added from now on reads the files that arrive after it

    def _add(self, name: str, text: str, digest: str, report) -> None:
        if self.errors.get(name) == digest:
            return  # reported once already
        from sparkcep.language.parser import parse_file
        from sparkcep.plan import analyze

        try:
            for query in parse_file(text):
                analyze(query)
        except SparkcepError as error:
            self.errors[name] = digest
            report(f"rule {name} left out: {str(error).splitlines()[0]}")
            return
        folder = self._folder(name, digest)
        folder.mkdir(parents=True, exist_ok=True)
        shared_types = self.root / TYPES_FILE
        if shared_types.exists():
            shutil.copyfile(shared_types, folder / TYPES_FILE)
        since = "every file"
        if not self.fresh:  # added while the stream runs: from the files after now
            present = [file for _, file in listing(self.input, _format(self.input))]
            (folder / SEEN_FILE).write_text("".join(f + "\n" for f in present))
            since = f"the files that arrive after the {len(present):,} present now"
        self.manifest[name] = {"hash": digest, "added": _now(), "from": since}
        self._write_manifest()
        try:
            self._start(name, text)
        except SparkcepError as error:  # an error against the stream's columns
            self.manifest.pop(name)
            self._write_manifest()
            shutil.rmtree(folder, ignore_errors=True)
            self.errors[name] = digest
            report(f"rule {name} left out: {str(error).splitlines()[0]}")
            return
        self.history.append(f"{_now()} added {name} (reads {since})")
        report(f"rule {name} added: it reads {since}")

    def _start(self, name: str, text: str) -> None:
        digest = self.manifest[name]["hash"]
        folder = self._folder(name, digest)
        query, writer = self.start_rule(name, text, str(folder), self.output_of(name, digest))
        self.running[name] = Running(query, writer, digest)
        types = folder / TYPES_FILE
        if types.exists() and not (self.root / TYPES_FILE).exists():
            shutil.copyfile(types, self.root / TYPES_FILE)  # every later rule reads these

    def output_of(self, name: str, digest: str) -> str:
        """A rule's rows: OUTPUT/NAME/HASH (a changed rule's new rows beside its old)."""
        return os.path.join(self.output, name, digest)

    def _remove(self, name: str, report, changed: bool) -> None:
        running = self.running.pop(name, None)
        if running is not None:
            running.query.stop()
            self.finished[(name, running.digest)] = running.writer
        digest = self.manifest.pop(name)["hash"]
        self._write_manifest()
        shutil.rmtree(self._folder(name, digest), ignore_errors=True)
        what = "changed: its old query stopped" if changed else "removed"
        self.history.append(f"{_now()} {name} {what}")
        report(f"rule {name} {what}")

    # ---- running ------------------------------------------------------------------------

    def wait(self, *, until_done: bool, timeout: float | None, stop, report=None,
             every: float = 1.0) -> None:  # fmt: skip
        """Keep in step with the folder after each micro-batch of any rule (and every
        `every` seconds) until every rule's stream has ended (`until_done`: available-now and once triggers), `timeout`, or `stop`
        (an Event: Ctrl-C)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        boundary = BatchEnds.listening(self.spark) if not until_done else None
        try:
            while not stop.is_set():
                if until_done and all(not r.query.isActive for r in self.running.values()):
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    break
                if boundary is None:
                    stop.wait(every)
                else:
                    boundary.wait(every, stop)
                if not until_done:
                    self.sync(report)
        finally:
            if boundary is not None:
                boundary.close()
        for running in self.running.values():
            if running.query.isActive:
                running.query.stop()

    def writers(self) -> dict[str, tuple[str, object]]:
        """(name, hash) -> the writer of each rule version run by this process."""
        return {**self.finished, **{(n, r.digest): r.writer for n, r in self.running.items()}}


class BatchEnds:
    """Wakes the rules' loop when any of the session's streams ends a micro-batch, so
    the folder is read again at micro-batch boundaries (and at least every second when
    none ends): a Spark streaming-query listener. Where the session cannot take a
    Python listener, the loop reads the folder every second only."""

    def __init__(self, spark):
        import threading

        from pyspark.sql.streaming import StreamingQueryListener

        self.spark, self.ended = spark, threading.Event()
        ended = self.ended

        class Listener(StreamingQueryListener):
            def onQueryStarted(self, event):
                pass

            def onQueryProgress(self, event):
                ended.set()

            def onQueryIdle(self, event):
                ended.set()

            def onQueryTerminated(self, event):
                ended.set()

        self.listener = Listener()
        spark.streams.addListener(self.listener)

    @classmethod
    def listening(cls, spark) -> BatchEnds | None:
        try:
            return cls(spark)
        except Exception:  # no listener here: the every-second reading alone
            return None

    def wait(self, every: float, stop) -> None:
        """Until a micro-batch ends, `every` seconds pass, or `stop` is set."""
        deadline = time.monotonic() + every
        while not stop.is_set() and time.monotonic() < deadline:
            if self.ended.wait(min(0.05, max(0.0, deadline - time.monotonic()))):
                break
        self.ended.clear()

    def close(self) -> None:
        with contextlib.suppress(Exception):  # a stopped session: nothing to remove
            self.spark.streams.removeListener(self.listener)


def rule_streams(spark, rules: str, input: str, output: str, checkpoint: str, *, options,  # noqa: PLR0913
                 lateness: str = "0", trigger: str = "available-now", fmt: str = "jsonl",
                 max_files: int | None = None, reading: dict | None = None) -> RuleStreams:  # fmt: skip
    """The streams of the rules folder `rules` over the input folder `input`, not started
    yet (`run_rules` starts them). `options`: the `Options` of every rule (`id_col`
    needed); `reading`: how the input's files are read (sep, columns, null_values)."""
    from sparkcep.plan.match_recognize import query_options
    from sparkcep.runners.streaming.pipeline import read_stream, start
    from sparkcep.runners.streaming.pipeline import stream as make_stream

    def start_rule(name, text, rule_checkpoint, rule_output):
        source = read_stream(
            spark, input, max_files=max_files, checkpoint=rule_checkpoint, **(reading or {})
        )
        text = rule_text(name, text)
        result = make_stream(source, text, options=query_options(text, options), lateness=lateness)
        late, rejected = os.path.join(rule_output, "late"), os.path.join(rule_output, "rejected")
        return start(
            result, output=rule_output, late=late, rejected=rejected,
            checkpoint=rule_checkpoint, trigger=trigger, fmt=fmt,
        )  # fmt: skip

    return RuleStreams(spark, rules, input, output, checkpoint, start_rule, trigger)


def run_rules(streams: RuleStreams, *, timeout: float | None = None, stop=None,
              report=None) -> RuleStreams:  # fmt: skip
    """Start the rules' streams and keep them in step with their folder until they end
    (available-now, once), `timeout` seconds pass, or `stop` (a threading.Event) is set."""
    import threading

    streams.sync(report)
    once = streams.trigger in ("available-now", "once")
    streams.wait(until_done=once, timeout=timeout, stop=stop or threading.Event(), report=report)
    return streams


def _format(folder: str) -> str:
    from sparkcep.files import input_files

    _, fmt = input_files(folder)
    return fmt
