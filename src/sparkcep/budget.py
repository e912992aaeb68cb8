"""The memory budget of a run: how much the matches and partial matches a program
holds may take (`--memory-budget`, `Options.memory_budget`), and sizes as written."""

from __future__ import annotations

import re

from sparkcep.errors import DataError

DEFAULT_MEMORY_BUDGET = 2 * 2**30  # 2 GiB: fits a laptop next to Spark's JVM

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
