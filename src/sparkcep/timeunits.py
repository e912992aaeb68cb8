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


# Integer times in a unit count from 1970 (the Unix epoch); those of real events lie
# within these years (docs/input.md). Times outside them were most likely given the
# wrong --time-unit, a mistake that changes every window without an error.
PLAUSIBLE_YEARS = (1970, 2100)
_YEAR_NANOS = 31_556_952 * 10**9  # a Gregorian year
_PLAUSIBLE_NANOS = (0, 4_133_980_800 * 10**9)  # 1970-01-01 .. 2101-01-01 (exclusive)


def implausible_times(first: int | None, last: int | None, unit: str | None, time_col: str):
    """A warning when integer times read in `unit` fall outside PLAUSIBLE_YEARS, naming
    the unit that would fit them (the coarsest), else None.

    >>> warning = implausible_times(1086217263125, 1086217963125, "s", "ts")
    >>> print(warning)  # doctest: +NORMALIZE_WHITESPACE
    the times of 'ts' read in s lie in the years 36390..36390, outside 1970..2100:
    ms would fit them (2004..2004); check --time-unit
    >>> implausible_times(1086217263125, 1086217963125, "ms", "ts") is None
    True
    """
    if first is None or last is None or unit not in TIME_UNITS:
        return None

    def fits(u: str) -> bool:
        lo, hi = _PLAUSIBLE_NANOS
        return lo <= first * NANOS[u] and last * NANOS[u] < hi

    def years(u: str) -> str:
        a, b = (1970 + (t * NANOS[u]) // _YEAR_NANOS for t in (first, last))
        return f"{a}..{b}"

    if fits(unit):
        return None
    lo, hi = PLAUSIBLE_YEARS
    other = next((u for u in ("s", "ms", "us", "ns") if u != unit and fits(u)), None)
    hint = f"{other} would fit them ({years(other)})" if other else "no unit would fit them"
    return (
        f"the times of '{time_col}' read in {unit} lie in the years {years(unit)}, outside "
        f"{lo}..{hi}: {hint}; check --time-unit"
    )
