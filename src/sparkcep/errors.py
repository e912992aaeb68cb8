"""Errors that are the user's to fix. The CLI prints them without a traceback."""

from __future__ import annotations

import re

from sparkcep.span import Span

SEPARATORS = {";": ";", "\t": "\\t", "|": "|"}  # (a separator other than ',': as written)


def missing_column(role: str, col: str, columns) -> str:
    """The message for a time, type or id column not in the input. One column whose
    name holds another separator is a file read with the wrong one: say which to give.

    >>> missing_column("time", "ts", ["ts", "type"])
    "the time column 'ts' is not in the input (columns: ts, type)"
    >>> missing_column("time", "ts", ["ts;type;v"])
    "the time column 'ts' is not in the input (columns: ts;type;v): is the file ';'-separated? give --sep ';'"
    """
    names = [str(c) for c in columns]
    shown = ", ".join(n.replace("\t", "\\t") for n in names)  # (a terminal widens a tab)
    message = f"the {role} column '{col}' is not in the input (columns: {shown})"
    if len(names) == 1:
        for sep, written in SEPARATORS.items():
            if sep in names[0]:
                return message + f": is the file '{written}'-separated? give --sep '{written}'"
    return message


class SparkcepError(Exception):
    """Base class of every error caused by a user's query, data or options."""


class QueryError(SparkcepError):
    """A syntax or meaning error in a query, pointing at line and column.

    >>> print(QueryError("unknown variable 'x'", "PATTERN SEQ(A a)\\nWHERE x.v > 1",
    ...                  Span(2, 7, 2, 10)))
    line 2, column 7: unknown variable 'x'
      WHERE x.v > 1
            ^^^
    """

    def __init__(self, message: str, text: str = "", span: Span | None = None):
        self.message = message
        self.text = text
        self.span = span or Span.unknown()
        super().__init__(self.render())

    @property
    def line(self) -> int:
        return self.span.line

    @property
    def column(self) -> int:
        return self.span.column

    def render(self) -> str:
        span = self.span
        if span.line <= 0:
            return self.message
        head = f"line {span.line}, column {span.column}: {self.message}"
        lines = self.text.splitlines()
        if not 1 <= span.line <= len(lines):
            return head
        source = lines[span.line - 1]
        width = 1
        if span.end_line == span.line and span.end_column > span.column:
            width = span.end_column - span.column
        caret = " " * (span.column - 1) + "^" * max(1, min(width, len(source) - span.column + 1))
        return f"{head}\n  {source}\n  {caret}"


class DataError(SparkcepError):
    """The input cannot be used: a missing file or column, an empty input, a bad option."""


_RAISED = re.compile(r"^sparkcep\.[\w.]*?\.?(\w+): (.+)$", re.MULTILINE)


def raised_in_worker(error: BaseException) -> str | None:
    """The message of a sparkcep error that a Spark task raised, from the text of the
    exception that reached the driver (a PythonException, or a StreamingQueryException
    around one), so that it is printed as its own line; None for any other error.

    >>> raised_in_worker(RuntimeError(
    ...     "Traceback (most recent call last):\\n  File ...\\n"
    ...     "sparkcep.engines.nfa.matcher.TooManyMatches: stopped after 5 matches: more"))
    'stopped after 5 matches: more'
    >>> raised_in_worker(RuntimeError("java.lang.OutOfMemoryError")) is None
    True
    """
    text = str(error).replace("\\n", "\n")
    found = [m for m in _RAISED.finditer(text) if _is_user_error(m.group(1))]
    if not found:
        return None
    return found[-1].group(2).strip()


def _is_user_error(name: str) -> bool:
    return name in {cls.__name__ for cls in _subclasses(SparkcepError)}


def _subclasses(cls: type) -> list[type]:
    out = [cls]
    for sub in cls.__subclasses__():
        out += _subclasses(sub)
    return out
