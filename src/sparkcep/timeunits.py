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

# Each way to write a unit, in the language (WITHIN 10 sec) and in the options
# (--time-unit sec, --lateness '2 min'), and the unit it names.
UNITS = {
    "ns": "ns", "nanosecond": "ns", "nanoseconds": "ns",
    "us": "us", "microsecond": "us", "microseconds": "us",
    "ms": "ms", "millisecond": "ms", "milliseconds": "ms", "msec": "ms",
    "s": "s", "sec": "s", "secs": "s", "second": "s", "seconds": "s",
    "min": "min", "mins": "min", "minute": "min", "minutes": "min",
    "h": "h", "hr": "h", "hrs": "h", "hour": "h", "hours": "h",
    "d": "days", "day": "days", "days": "days",
}  # fmt: skip

TIME_UNITS = ("ns", "us", "ms", "s")  # units an integer time column may be declared in


def unit_named(text: str) -> str:
    """The unit a spelling names ('sec' -> 's'); an unknown spelling as it is.

    >>> unit_named("sec"), unit_named("Milliseconds"), unit_named("fortnight")
    ('s', 'ms', 'fortnight')
    """
    return UNITS.get(text.strip().lower(), text)


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
