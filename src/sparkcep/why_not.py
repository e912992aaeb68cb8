"""`sparkcep why`: which explainer a query takes — the native pattern's near misses
(`misses.py`), an event set pattern's (`set_misses.py`) or a MATCH_RECOGNIZE query's
(`row_misses.py`) — over the events of a key and a time range.

    >>> import pandas as pd
    >>> events = pd.DataFrame({"type": ["A", "B", "C", "C"], "ts": [1, 2, 4, 30],
    ...                        "v": [5, 1, 3, 9]})
    >>> misses = near_misses(events, "PATTERN SEQ(A a, B b, C c) WHERE c.v > a.v WITHIN 10")
    >>> print(misses.loc[0, "reason"])
    c.v > a.v was false for C 2 at 4: 3 > 5 (the first C of 1 in the window)
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sparkcep.errors import SparkcepError
from sparkcep.misses import NEAR, _Explorer, _supported, _tick, draw
from sparkcep.plan import Options
from sparkcep.plan.model import Plan
from sparkcep.prep.table import time_ticks


def near_misses(  # noqa: PLR0913 (the options of `sparkcep why`)
    events: pd.DataFrame,
    query: str,
    options: Options | None = None,
    *,
    key=None,
    start=None,
    end=None,
    near: int = NEAR,
    plot: str | None = None,
    match=None,
) -> pd.DataFrame:
    """The `near` partial matches of `query` over `events` that got furthest (see the
    module's docstring), one row each: the key's columns, `depth` (positive components
    bound) `of` (how many there are), `bound` (var=id@time, ...), `stopped_at` (the
    component not bound) and `reason`. `key`: one key's value (a tuple for several
    key columns); `start`, `end`: the time range [start, end] of the events considered;
    `plot`: a picture of them and the near misses (`draw`) written there (.png, .svg);
    `match`: an event id: instead, why the matches that start with that event bound the
    events they did (`_Explorer.explained_matches`). The frame's `attrs["summary"]` says
    what was looked at (and matches found)."""
    from sparkcep.plan.match_recognize import is_match_recognize
    from sparkcep.runners.local import check_events

    if is_match_recognize(query):
        from sparkcep.row_misses import row_near_misses

        if plot is not None:
            raise SparkcepError("why draws native and event set patterns, not MATCH_RECOGNIZE")
        if match is not None:
            from sparkcep.row_misses import row_matches_explained

            return row_matches_explained(
                events, query, options, match=match, key=key, start=start, end=end
            )
        return row_near_misses(events, query, options, key=key, near=near, start=start, end=end)
    options = options or Options()
    checked = check_events(pd.DataFrame(events), query, options)
    if len(checked.plans) != 1:
        raise SparkcepError("why explains one query at a time: give one (--query NAME)")
    plan = checked.plans[0]
    _supported(plan)
    valid = checked.valid
    ticks = time_ticks(valid[options.time_col])
    keep = np.ones(len(valid), dtype=bool)
    if start is not None:
        keep &= ticks >= _tick(start, valid[options.time_col])
    if end is not None:
        keep &= ticks <= _tick(end, valid[options.time_col])
    valid, ticks = valid[keep], ticks[keep]
    ids = valid[options.id_col] if options.id_col else valid["__row"]
    frame = valid.assign(__ticks=ticks, __id=ids.to_numpy())
    if key is not None:
        wanted = key if isinstance(key, tuple) else (key,)
        if len(wanted) != len(plan.key):
            raise SparkcepError(
                f"the query's key is {list(plan.key) or 'none'}: give one value for each"
            )
        for col, value in zip(plan.key, wanted, strict=True):
            frame = frame[frame[col].astype(str) == str(value)]
    order = [*plan.key, "__ticks", *([plan.tiebreak] if plan.tiebreak else []), "__row"]
    frame = frame.sort_values(order, kind="stable")
    explorer = _explorer(plan, options, near)
    explorer.wanted = match
    groups = frame.groupby(list(plan.key), sort=False) if plan.key else [((), frame)]
    for value, part in groups:
        if match is not None and not (part["__id"].astype(str) == str(match)).any():
            continue  # (a match starting at `match` lies in its key)
        explorer.partition(value if isinstance(value, tuple) else (value,), part)
    if match is not None:
        explained = explorer.explained_matches()
        explained.attrs["summary"] += checked.rejected_note()
        return explained
    misses = explorer.result(frame, len(groups) if plan.key else 1)
    misses.attrs["summary"] += checked.rejected_note() + _absent_types(checked, plan, options)
    if plot is not None:
        draw(misses, frame, plan, options, plot)
    return misses


def _absent_types(checked, plan: Plan, options: Options) -> str:
    """A line for each component type no event of the input has (said once, not under
    every key), in the words of a run's warning."""
    from sparkcep.runners.local import unknown_types

    if options.type_col not in checked.valid.columns:
        return ""
    present = set(checked.valid[options.type_col].unique())
    return "".join(f"\n{note}" for note in unknown_types([plan], present))


def _explorer(plan: Plan, options: Options, near: int) -> _Explorer:
    """The search of the partial matches: of an event set pattern (set_misses.py), or of
    a native pattern."""
    from sparkcep.plan.sets import SesSpec

    if isinstance(plan.spec, SesSpec):
        from sparkcep.set_misses import SetExplorer

        return SetExplorer(plan, options, near)
    return _Explorer(plan, options, near)
