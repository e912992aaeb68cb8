"""What went wrong, in one line for the user: the one place that maps exceptions to messages.

Two entry points:

- `reading(path)` wraps the reading of one input file in this process (pandas, gzip,
  Arrow): a damaged, truncated, non-gzip, non-UTF-8 or unreadable file becomes a
  `DataError` that names the file and what to do.
- `user_message(exc)` gives the one line the command prints for any exception that is
  the user's to fix, Spark's included: an error raised inside a Spark task (a sparkcep
  error such as `TooManyMatches`, wrapped in a Py4J or Python exception with hundreds of
  lines of traces) comes back as its own message; a file Spark cannot read, a damaged
  checkpoint, a Spark analysis error each as one line. It returns None for what is not
  the user's to fix (a bug: the command shows its traceback).

>>> user_message(DataError("the input 'x.csv' does not exist"))
"the input 'x.csv' does not exist"
>>> trace = '''Traceback (most recent call last):
...   File "nfa/matcher.py", line 9, in run
... sparkcep.engines.nfa.matcher.TooManyMatches: more than 20 partial matches: add a key'''
>>> user_message(RuntimeError("[PYTHON_EXCEPTION] An exception was thrown from the Python "
...                           "worker.\\n" + trace))
'more than 20 partial matches: add a key'
"""

from __future__ import annotations

import contextlib
import gzip
import os
import re
import zlib
from collections.abc import Iterator

from sparkcep.errors import DataError, SparkcepError

# The last line of a Python traceback that a sparkcep error ended, inside a Spark task.
_TASK_ERROR = re.compile(r"^sparkcep(?:\.\w+)*\.(\w+): (.+)$", re.MULTILINE)
_FILE = re.compile(r"reading file (\S+?)\.?\s+(?:SQLSTATE|Could not|$)", re.MULTILINE)
_CAUSE = re.compile(r"^Caused by: [\w.$]+: (.+)$", re.MULTILINE)
_CHECKPOINT_FILES = re.compile(r"(\S*/(?:offsets|commits|state|sources)/\S*)")
# Errors of a stream that only its checkpoint's files cause (no path in the message).
_CHECKPOINT_MARKS = ("CANNOT_LOAD_STATE_STORE", "JsonParseException", "JsonMappingException",
                     "INVALID_CHECKPOINT", "checkpoint")  # fmt: skip
_SPARK_CLASS = re.compile(r"^\[([A-Z_.]+)\]\s*")
_PY4J_HEAD = re.compile(r"^An error occurred while calling [\w.]+\.\s*:?\s*", re.MULTILINE)


def _shown(path: str) -> str:
    return path.removeprefix("file://").removeprefix("file:")


@contextlib.contextmanager
def _one_line(message_of, subject: str, passing: tuple = ()) -> Iterator[None]:
    """Run the block: an error for which `message_of(error, subject)` has a line becomes
    one DataError with that line; `passing` errors and the others go on as they are."""
    try:
        yield
    except passing:
        raise
    except Exception as exc:
        message = message_of(exc, subject)
        if message is None:
            raise
        raise DataError(message) from None


def reading(path: str):
    """Read one input file: any error of reading it becomes one DataError naming it."""
    return _one_line(read_message, path, passing=(SparkcepError,))


def read_message(exc: BaseException, path: str) -> str | None:
    """The line for an error met while reading the file `path` in this process."""
    import pandas as pd

    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, PermissionError):
        return f"cannot read '{path}': permission denied (check the file's permissions)"
    if isinstance(exc, gzip.BadGzipFile) or "Not a gzipped file" in text:
        return f"'{path}' is not gzip data although it is named .gz: rename it or compress it"
    if isinstance(exc, EOFError | zlib.error) or "end-of-stream marker" in text:
        return f"'{path}' is truncated or damaged ({text}): re-create it, or remove it"
    if isinstance(exc, UnicodeDecodeError):
        return (
            f"'{path}' is not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset "
            f"{exc.start}): convert it, e.g. iconv -f latin1 -t utf-8"
        )
    if isinstance(exc, pd.errors.EmptyDataError):
        return f"the file '{path}' is empty: it needs a header line and events"
    if isinstance(exc, pd.errors.ParserError):
        quote = re.search(r"EOF inside string starting at row (\d+)", text)
        if quote:
            return (
                f"'{path}', row {int(quote.group(1))}: a quoted field is never closed "
                "(the quote runs to the end of the file): close it or remove it"
            )
        return f"cannot read '{path}' as CSV ({text}): fix the row it names"
    if type(exc).__module__.startswith("pyarrow") or "Parquet" in text:
        return f"'{path}' is not a readable Parquet file ({text}): re-write it, or remove it"
    if isinstance(exc, OSError):
        return f"cannot read '{path}': {exc.strerror or text}"
    return None


def user_message(exc: BaseException) -> str | None:
    """One line for an exception that is the user's to fix (None: a bug)."""
    if isinstance(exc, SparkcepError):
        return str(exc)
    text = _exception_text(exc)
    if text is None:
        return None
    found = _TASK_ERROR.findall(text)
    if found:
        return found[-1][1].strip()
    if "FAILED_READ_FILE" in text:
        return _read_file_message(text)
    if "JAVA_GATEWAY_EXITED" in text or "Java gateway process exited" in text:
        return _java_not_started()
    return "Spark: " + _first_line(text)


def _java_not_started() -> str:
    """Spark's JVM did not start: the lines above are Java's (or its launcher's) own."""
    java_home = os.environ.get("JAVA_HOME")
    where = f"JAVA_HOME is '{java_home}'" if java_home else "java from the PATH"
    return (
        f"Spark's Java did not start ({where}): the lines above say why. Spark needs Java "
        "17 or 21 (`sparkcep run --local` needs none)"
    )


def _exception_text(exc: BaseException) -> str | None:
    """The text of a Spark or Py4J exception (None for any other exception)."""
    module = type(exc).__module__
    if not module.startswith(("pyspark", "py4j")) and "PYTHON_EXCEPTION" not in str(exc):
        return None
    parts = [str(exc)]
    java = getattr(exc, "java_exception", None)
    if java is not None:
        with contextlib.suppress(Exception):
            parts.append(str(java.toString()))
    desc = getattr(exc, "desc", None)
    if isinstance(desc, str):
        parts.append(desc)
    return "\n".join(parts)


def _read_file_message(text: str) -> str:
    where = _FILE.search(text)
    path = _shown(where.group(1)) if where else "an input file"
    if "CANNOT_READ_FILE_FOOTER" in text or "not a Parquet file" in text:
        return f"'{path}' is not a readable Parquet file (no footer): re-write it, or remove it"
    cause = _CAUSE.findall(text)
    detail = cause[-1].strip() if cause else _first_line(text)
    if "end of input stream" in detail or "Not in GZIP format" in detail or "gzip" in detail:
        return f"'{path}' is truncated or not gzip data ({detail}): re-create it, or remove it"
    if "header does not conform" in detail or "CSV header" in text:
        return (
            f"'{path}' has other columns than the folder's first file: give one folder one header"
        )
    return f"cannot read '{path}' ({detail}): fix or remove the file"


def streaming(checkpoint: str):
    """Run a stream on `checkpoint`: an error that comes from its files (damaged or from
    another query, our own StateError too) becomes one DataError naming the checkpoint
    and what to do."""
    return _one_line(checkpoint_message, checkpoint)


def checkpoint_message(exc: BaseException, checkpoint: str) -> str | None:
    """The line for a stream's error that comes from its checkpoint's files (None: not)."""
    from sparkcep.engines.state import StateError

    where = checkpoint
    if not isinstance(exc, StateError):
        text = _exception_text(exc)
        if text is None:
            return None
        root = os.path.realpath(checkpoint)
        files = [_shown(m) for m in _CHECKPOINT_FILES.findall(text) if root in _shown(m)]
        task = _TASK_ERROR.findall(text)
        if task and task[-1][0] != "StateError":
            return None
        if not task and not files and not any(m in text for m in _CHECKPOINT_MARKS):
            return None
        where = files[0].rstrip(".,;:'\"") if files else checkpoint
    return damaged_checkpoint(checkpoint, where)


def damaged_checkpoint(checkpoint: str, where: str) -> str:
    return (
        f"the checkpoint '{checkpoint}' is damaged ({where}): restore it from a copy, or "
        "delete it to start the stream over (its files are then read again)"
    )


def _first_line(text: str) -> str:
    text = _PY4J_HEAD.sub("", text.strip())
    for line in text.splitlines():
        line = line.strip().lstrip(": ").strip()
        if line and not line.startswith(("at ", "Traceback", "JVM stacktrace")):
            return _SPARK_CLASS.sub("", line)
    return "failed"
