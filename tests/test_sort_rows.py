"""`sort_rows`, the one order every engine's rows are put in, against a plain Python sort
of the same rows by the same keys (stable; nulls first; lists of ids as tuples)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkcep.engines.arrays import lexsort
from sparkcep.engines.output import sort_rows

# Few distinct values, so that ties (and so stability) are common.
KINDS = {
    "int": st.integers(-2, 2),
    "big": st.sampled_from([-(2**63), -1, 0, 2**63 - 1]),
    "float": st.sampled_from([-1.5, -0.0, 0.0, 2.0, float("inf"), float("-inf"), None]),
    "Int64": st.one_of(st.integers(-2, 2), st.none()),
    "boolean": st.one_of(st.booleans(), st.none()),
    "bool": st.booleans(),
    "time": st.one_of(st.integers(0, 3), st.none()),
    "utc": st.one_of(st.integers(0, 3), st.none()),
    "text": st.one_of(st.sampled_from(["", "a", "b", "ab"]), st.none()),
    "list": st.lists(st.integers(0, 2), max_size=3),
}


def column(kind: str, values: list) -> pd.Series:
    if kind in ("Int64", "boolean"):
        return pd.Series(pd.array(values, dtype=kind))
    if kind in ("time", "utc"):
        times = pd.to_datetime([None if v is None else v * 10**9 for v in values])
        return pd.Series(times.tz_localize("UTC") if kind == "utc" else times)
    if kind == "float":
        return pd.Series([np.nan if v is None else v for v in values], dtype="float64")
    if kind in ("text", "list"):
        out = pd.Series([None] * len(values), dtype=object)
        out[:] = values
        return out
    return pd.Series(values, dtype="int64" if kind != "bool" else "bool")


@st.composite
def frames(draw):
    kinds = draw(st.lists(st.sampled_from(sorted(KINDS)), min_size=1, max_size=4))
    n = draw(st.integers(0, 12))
    cols = {f"c{i}": column(k, draw(st.lists(KINDS[k], min_size=n, max_size=n)))
            for i, k in enumerate(kinds)}  # fmt: skip
    frame = pd.DataFrame({**cols, "row": np.arange(n)})
    order = draw(st.permutations(list(cols)))[: draw(st.integers(1, len(cols)))]
    return frame, order


def python_key(value):
    """A plain Python sort key: nulls first, lists as tuples."""
    if isinstance(value, list):
        return (1, tuple(value))
    if value is None or value is pd.NaT or value is pd.NA:
        return (0,)
    if isinstance(value, float) and np.isnan(value):
        return (0,)
    return (1, value)


def python_sorted(frame: pd.DataFrame, order: list[str]) -> pd.DataFrame:
    rows = [tuple(python_key(frame[c].iloc[i]) for c in order) for i in range(len(frame))]
    positions = sorted(range(len(frame)), key=lambda i: rows[i])  # stable
    return frame.iloc[positions].reset_index(drop=True)


@settings(max_examples=300, deadline=None)
@given(frames())
def test_sort_rows_is_a_stable_sort_by_the_keys(case):
    frame, order = case
    got = sort_rows(frame, order)
    pd.testing.assert_frame_equal(got, python_sorted(frame, order))


@settings(max_examples=100, deadline=None)
@given(frames())
def test_rows_already_in_order_are_returned_as_they_are(case):
    frame, order = case
    ordered = python_sorted(frame, order)
    if len(ordered) >= 2:
        assert sort_rows(ordered, order) is ordered
    shifted = ordered.set_axis(np.arange(len(ordered)) + 5)  # not a 0..n-1 index
    pd.testing.assert_frame_equal(sort_rows(shifted, order), ordered)


def test_sort_rows_orders_nulls_first_then_values():
    frame = pd.DataFrame(
        {
            "x": pd.array([3, None, 1, None, 2], dtype="Int64"),
            "f": [np.nan, 2.0, np.nan, -1.0, 0.5],
            "row": range(5),
        }
    )
    assert sort_rows(frame, ["x"])["row"].tolist() == [1, 3, 2, 4, 0]
    assert sort_rows(frame, ["f"])["row"].tolist() == [0, 2, 3, 4, 1]
    ids = pd.DataFrame({"b": [[2, 1], [1, 5, 0], [1, 5], [2]], "row": range(4)})
    assert sort_rows(ids, ["b"])["row"].tolist() == [2, 1, 3, 0]  # (1,5) < (1,5,0) < (2,)


@st.composite
def key_lists(draw):
    """Keys of one length: small and large integers (some negative), bools, floats, and
    keys that repeat another (left out by `lexsort`)."""
    n = draw(st.integers(0, 15))
    elements = [
        st.integers(0, 3),
        st.integers(-2, 2),
        st.integers(2**31 - 2, 2**31 + 1),
        st.booleans(),
        st.floats(allow_nan=False, width=32),
    ]
    keys = []
    for _ in range(draw(st.integers(1, 5))):
        if keys and draw(st.integers(0, 3)) == 0:
            keys.append(keys[draw(st.integers(0, len(keys) - 1))].copy())
        else:
            values = draw(st.lists(draw(st.sampled_from(elements)), min_size=n, max_size=n))
            keys.append(np.array(values) if values else np.zeros(0, dtype=np.int64))
    return keys


@settings(max_examples=300, deadline=None)
@given(key_lists())
def test_lexsort_in_fewer_passes_is_numpys_lexsort(keys):
    assert lexsort(keys).tolist() == np.lexsort(keys).tolist()
