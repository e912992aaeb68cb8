"""Durations and time units: the engines work on int64 times in one unit per query."""

from __future__ import annotations

import math

# Length of each unit in nanoseconds.
NANOS = {
    "ns": 1,
    "us": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "min": 60_000_000_000,
    "h": 3_600_000_000_000,
    "days": 86_400_000_000_000,
}

TIME_UNITS = ("ns", "us", "ms", "s")  # units an integer time column may be declared in

# Engines compute on int64 ticks. Times must lie strictly within ±TIME_LIMIT (±4.6e18:
# nanoseconds since 1970 until the year 2116) and a window is at most WINDOW_LIMIT, so
# that a time plus or minus a window never overflows. Other times are rejected rows.
TIME_LIMIT = 2**62
WINDOW_LIMIT = 2**62


def convert(amount: float, unit: str, target: str) -> float:
    """Express `amount` of `unit` in `target` units.

    >>> convert(5, "s", "ms")
    5000.0
    >>> convert(1, "days", "s")
    86400.0
    """
    return amount * NANOS[unit] / NANOS[target]


def window_ticks(amount: float, unit: str | None, target: str | None) -> int:
    """The exclusive window `w` as a whole number of time-column ticks.

    Times are integers, so `last − first < w` is the same as `last − first < ceil(w)`.

    >>> window_ticks(1.5, "s", "s")
    2
    >>> window_ticks(11, None, None)
    11

    Windows longer than WINDOW_LIMIT ticks (146 years in nanoseconds) are WINDOW_LIMIT.
    """
    try:
        value = float(amount) if unit is None or target is None else convert(amount, unit, target)
    except OverflowError:  # WITHIN 1 followed by 400 zeros
        return WINDOW_LIMIT
    if not value < WINDOW_LIMIT:  # also inf, from WITHIN 1e400
        return WINDOW_LIMIT
    return math.ceil(value - 1e-9)


def describe_duration(ticks: int, unit: str | None) -> str:
    """A window of `ticks` in the largest unit that writes it exactly, e.g. '7 days';
    `unit` is what one tick is (None: plain ticks of no unit).

    >>> describe_duration(604_800_000_000, "us"), describe_duration(1500, "ms")
    ('7 days', '1500 ms')
    >>> describe_duration(11, None)
    '11 ticks'
    """
    if unit is None:
        return f"{ticks} ticks"
    nanos = ticks * NANOS[unit]
    for name in ("days", "h", "min", "s", "ms", "us", "ns"):
        if nanos % NANOS[name] == 0 and nanos >= NANOS[name]:
            amount = nanos // NANOS[name]
            return f"{amount} {'day' if name == 'days' and amount == 1 else name}"
    return f"{ticks} {unit}"


def duration_text(ticks: int, unit: str | None, written) -> str:
    """A duration in words: in the largest unit that writes it exactly when one tick's
    `unit` is known; else as `written` in the query (amount, unit or None), which is all
    there is to say without the time column (a bare number is ticks).

    >>> duration_text(300, "ms", (0.3, "s")), duration_text(1, None, (300, "ms"))
    ('300 ms', '300 ms')
    """
    if unit is not None:
        return describe_duration(ticks, unit)
    amount, written_unit = written if written is not None else (ticks, None)
    if written_unit is None:
        return f"{ticks} ticks"
    number = str(int(amount)) if float(amount).is_integer() else f"{amount:g}"
    return f"{number} {written_unit}"


def describe_window(ticks: int, unit: str | None, written, meaning: str) -> str:
    """A window for `explain`: its duration (`duration_text`), then `meaning` and its
    ticks, which depend on the time column's unit when the window has a unit and the
    ticks have none (no input, no --time-unit).

    >>> describe_window(10_000, "ms", (10, "s"), "last - first < the window")
    '10 s (last - first < the window, 10000 ticks)'
    >>> describe_window(1, None, (10, "ms"), "last - first < the window")
    "10 ms (last - first < the window; its ticks depend on the time column's unit)"
    >>> describe_window(11, None, (11, None), "last - first < the window")
    '11 ticks (last - first < the window)'
    """
    text = duration_text(ticks, unit, written)
    if unit is not None:
        return f"{text} ({meaning}, {ticks} ticks)"
    if written is None or written[1] is None:
        return f"{text} ({meaning})"
    return f"{text} ({meaning}; its ticks depend on the time column's unit)"
