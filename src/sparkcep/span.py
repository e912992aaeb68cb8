"""Where a piece of a query was written: the parser gives every node one, errors point
at one."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Span:
    """Where a piece of the query was written (1-based line and column; end is exclusive)."""

    line: int
    column: int
    end_line: int
    end_column: int

    @staticmethod
    def unknown() -> Span:
        return Span(0, 0, 0, 0)
