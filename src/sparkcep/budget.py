"""The memory budget of a run: how much the matches and partial matches a program
holds may take (`--memory-budget`, `Options.memory_budget`) and how many matches it
needs (`--max-matches`), as one `Budget` every matcher is given; and sizes as written."""

from __future__ import annotations

import re
from dataclasses import dataclass

from sparkcep.errors import DataError, SparkcepError

DEFAULT_MEMORY_BUDGET = 2 * 2**30  # 2 GiB: fits a laptop next to Spark's JVM
CELL_BYTES = 72  # one cell of a match (a position, an id), with its copies on the way out

_UNITS = {"": 1, "b": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def parse_size(text: str) -> int:
    """Bytes from a size as written: '2GB', '500 MB', '1.5g', '4194304' (bytes).

    >>> parse_size("2GB"), parse_size("500 MB"), parse_size("1.5g"), parse_size("4194304")
    (2147483648, 524288000, 1610612736, 4194304)
    """
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*", text.lower())
    if not found:
        raise DataError(f"--memory-budget '{text}' is not a size: write e.g. 2GB or 500MB")
    value = int(float(found.group(1)) * _UNITS[found.group(2)])
    if value < 2**20:
        raise DataError(f"--memory-budget '{text}' is below 1 MB")
    return value


def describe_size(n: int) -> str:
    """
    >>> describe_size(2 * 2**30), describe_size(300 * 2**20)
    ('2.0 GB', '300 MB')
    """
    if n >= 2**30:
        return f"{n / 2**30:.1f} GB"
    return f"{n / 2**20:.0f} MB"


class TooManyMatches(SparkcepError):
    """A run stopped because what it must hold exceeds the memory budget."""


def budget_message(found: int, budget: int) -> str:
    """The one line a run that cannot go on stops with: the cause, then the remedies."""
    return (
        f"stopped after {found:,} matches: holding more would exceed the memory budget of "
        f"{describe_size(budget)}; give a key (WHERE [k]), a smaller window, or "
        "--max-matches N, or raise --memory-budget"
    )


@dataclass(frozen=True)
class Budget:
    """What the matchers of one program may hold: `memory` bytes of matches and partial
    matches, and `max_matches` (None: no cap; the search may stop once it has them).
    Every program has one, from its options (`Program.budget`), and hands it to each
    matcher it builds; a matcher counts what it holds on a `Meter`.

    >>> meter = Budget(memory=2**20).meter()
    >>> meter.hold(2**19, matches=3)
    >>> meter.hold(2**19 + 1, matches=1)
    Traceback (most recent call last):
    ...
    sparkcep.budget.TooManyMatches: stopped after 4 matches: holding more would exceed \
the memory budget of 1 MB; give a key (WHERE [k]), a smaller window, or --max-matches N, \
or raise --memory-budget
    """

    memory: int = DEFAULT_MEMORY_BUDGET
    max_matches: int | None = None

    @staticmethod
    def of(options) -> Budget:
        """The budget a run's `Options` give (`memory_budget` None: the default)."""
        return Budget(options.memory_budget or DEFAULT_MEMORY_BUDGET, options.max_matches)

    def meter(self) -> Meter:
        return Meter(self)


class Meter:
    """What one matcher holds now (bytes) and the matches it found, against its budget."""

    def __init__(self, budget: Budget):
        self.budget = budget
        self.held = 0
        self.found = 0

    def hold(self, nbytes: int, matches: int = 0) -> None:
        """`nbytes` more held (and `matches` more found); stops beyond the budget."""
        self.held += nbytes
        self.found += matches
        self.check()

    def hold_each(self, nbytes: int, count: int) -> None:
        """`count` matches of `nbytes` each: as `count` calls of hold(nbytes, 1), in one
        step while they fit (it stops at the same match).

        >>> meter = Budget(memory=2**20).meter()
        >>> meter.hold_each(2**18, 3)
        >>> meter.hold_each(2**18, 5)
        Traceback (most recent call last):
        ...
        sparkcep.budget.TooManyMatches: stopped after 5 matches: holding more would exceed \
the memory budget of 1 MB; give a key (WHERE [k]), a smaller window, or --max-matches N, \
or raise --memory-budget
        """
        fit = count if nbytes <= 0 else max(0, (self.budget.memory - self.held) // nbytes)
        if fit >= count:
            self.held += count * nbytes
            self.found += count
            return
        self.held += fit * nbytes
        self.found += fit
        self.hold(nbytes, matches=1)  # the first that does not fit: stops

    def release(self, nbytes: int) -> None:
        self.held -= nbytes

    def check(self, also: int = 0) -> None:
        """Stops the run when what is held, and `also` bytes on the way, exceed the budget."""
        if self.held + also > self.budget.memory:
            raise TooManyMatches(budget_message(self.found, self.budget.memory))

    @property
    def capped(self) -> bool:
        """Whether `max_matches` matches have been found (the search may stop)."""
        cap = self.budget.max_matches
        return cap is not None and self.found >= cap
