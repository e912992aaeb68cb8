"""The rows programs give: the output contract's columns (`OutputColumn`), the empty
frame and the merged output of queries run together, rows of several programs put
together and sorted, and the tie warning. Engines and runners share these helpers; what
an engine implements is `engines.base`."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from sparkcep.engines.arrays import lexsort
from sparkcep.schema import Kind

QUERY = "query"  # the output column naming the query, when several run together


@dataclass(frozen=True)
class OutputColumn:
    """One output column: a kind, or the type of an input column (`like`)."""

    name: str
    kind: Kind = "unknown"
    is_list: bool = False
    like: str | None = None  # an input column whose type this column has (time, key, id)


PANDAS_DTYPES = {
    "int": "Int64",
    "float": "float64",
    "bool": "boolean",
    "timestamp": "datetime64[ns]",
}


def empty_frame(output: Sequence[OutputColumn], frame: pd.DataFrame | None) -> pd.DataFrame:
    """No rows, with the output's columns and their types (from `frame` for `like`).

    Programs ask for it at every call that gives no rows; building a frame of empty
    Series costs ~100 times a copy, so each shape is built once (a copy is handed out:
    callers may add columns)."""
    likes = tuple(
        frame[col.like].dtype if frame is not None and col.like in frame else None
        for col in output
        if col.like is not None and not col.is_list
    )
    return _empty_template(tuple(output), likes).copy()


@functools.lru_cache(maxsize=256)
def _empty_template(output: tuple[OutputColumn, ...], likes: tuple) -> pd.DataFrame:
    like_dtypes = iter(likes)
    cols = {}
    for col in output:
        if col.is_list:
            dtype: Any = object
        elif col.like is not None:
            dtype = next(like_dtypes)
            dtype = object if dtype is None else dtype
        else:
            dtype = PANDAS_DTYPES.get(col.kind, object)
        cols[col.name] = pd.Series([], dtype=dtype)
    return pd.DataFrame(cols)


def merged_output(columns_of, plans, names, first=()) -> tuple[OutputColumn, ...]:
    """The output of queries run together: `first`, then each plan's columns
    (`columns_of(plan)`) once, a `query` column when the queries are named; a column two
    queries give different types is a query error, pointing where the later one makes it."""
    cols: dict[str, OutputColumn] = {}
    made_by: dict[str, str | None] = {}  # the query that gave a column its type
    if names is not None:
        cols[QUERY] = OutputColumn(QUERY, "string")
    for col in first:
        cols[col.name] = col
    for plan, name in zip(plans, names or [None] * len(plans)):
        for col in columns_of(plan):
            made_by.setdefault(col.name, name)
            if cols.setdefault(col.name, col) != col:
                raise plan.error(
                    f"queries run together give the column '{col.name}' different types "
                    f"(in {name} and {made_by[col.name]}): name it differently in one of them",
                    plan.span_of(col.name),
                )
    return tuple(cols.values())


def concat_rows(parts: list[pd.DataFrame], empty: pd.DataFrame | None = None) -> pd.DataFrame:
    """The rows of frames whose columns may differ (queries run together), in the columns
    of `empty` (the output), then any other in the order they come. A column a frame lacks
    is null in its rows and keeps its type: pandas alone makes such integers floats (an id
    above 2^53 loses its last digits) and fills lists with NaN (not a list to Arrow).

    >>> kleene = pd.DataFrame({"a": [9007199254740993], "b": [[9007199254740995]]})
    >>> single = pd.DataFrame({"a": [1], "c": [9007199254740997]})
    >>> rows = concat_rows([kleene, single])
    >>> rows["b"].tolist(), rows["c"].tolist()
    ([[9007199254740995], None], [<NA>, 9007199254740997])
    >>> rows.dtypes.astype(str).tolist()
    ['int64', 'object', 'Int64']
    >>> concat_rows([single], empty=rows.iloc[:0]).columns.tolist()  # the output's columns
    ['a', 'b', 'c']
    """
    first = list(empty.columns) if empty is not None else []
    names = list(dict.fromkeys([*first, *(c for p in parts for c in p.columns)]))
    if len(parts) == 1 and len(parts[0].columns) == len(names):
        return parts[0]
    dtypes = {}
    for name in names:
        present = [p[name].dtype for p in parts if name in p.columns]
        dtype = present[0] if present else empty[name].dtype  # type: ignore[index]
        if any(d.kind == "O" for d in present):  # e.g. counts beyond 64 bits: Python ints
            dtype = np.dtype(object)
        elif len(present) < len(parts) or len(set(map(str, present))) > 1:
            dtype = _NULLABLE.get(dtype.kind, dtype)  # null in some rows: a nullable type
        dtypes[name] = dtype
    filled = []
    for part in parts:
        cols = {}
        for name, dtype in dtypes.items():
            if name in part.columns:
                col = part[name]
                cols[name] = col if col.dtype == dtype else col.astype(dtype)
            elif dtype.kind == "O":  # lists, text: None (pandas would give NaN)
                cols[name] = pd.Series([None] * len(part), index=part.index, dtype=object)
            else:
                cols[name] = pd.Series(None, index=part.index, dtype=dtype)
        filled.append(pd.DataFrame(cols, index=part.index))
    return pd.concat(filled, ignore_index=True)


_NULLABLE = {"i": pd.Int64Dtype(), "u": pd.Int64Dtype(), "b": pd.BooleanDtype()}


def sort_rows(frame: pd.DataFrame, order: tuple[str, ...] | list[str]) -> pd.DataFrame:
    """Rows sorted by `order` (lists of ids compare as tuples), stably; nulls come first.
    A frame already in that order (with a 0..n-1 index) is returned as it is."""
    if len(frame) < 2 or not order:
        return frame.reset_index(drop=True)
    keys = []  # least significant first, as np.lexsort takes them
    for name in reversed(order):
        keys += sort_keys(frame[name])
    if in_lexical_order(keys):
        return frame if _plain_index(frame.index) else frame.reset_index(drop=True)
    return frame.iloc[lexsort(keys)].reset_index(drop=True)


def sort_keys(values: pd.Series) -> list[np.ndarray]:
    """Arrays whose lexical order (the last one first) is the order of `values`: nulls
    first, then the values ascending (lists as tuples). Numbers and times are compared as
    they are; other values are ranked first (factorized)."""
    dtype = values.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "iub":
        return [values.to_numpy()]
    if isinstance(dtype, np.dtype) and dtype.kind == "f":
        numbers = values.to_numpy()
        missing = np.isnan(numbers)
        return [np.where(missing, 0.0, numbers), ~missing] if missing.any() else [numbers]
    if isinstance(dtype, pd.api.extensions.ExtensionDtype) and dtype.kind in "iub":
        missing = values.isna().to_numpy()
        numbers = values.to_numpy(dtype=dtype.numpy_dtype, na_value=0)
        return [numbers, ~missing] if missing.any() else [numbers]
    if dtype.kind in "mM" and isinstance(dtype, np.dtype | pd.DatetimeTZDtype):
        return [values.array.asi8]  # NaT is the smallest integer: first, as nulls are
    if dtype.kind == "O" and isinstance(values.iloc[0], list):
        values = values.map(tuple)
    return [pd.factorize(values, sort=True)[0]]


def in_lexical_order(keys: list[np.ndarray]) -> bool:
    """Whether the rows are in lexical order of `keys` (the last one first), each row
    against the next."""
    undecided = np.ones(len(keys[0]) - 1, dtype=bool)
    for key in reversed(keys):
        before, after = key[:-1], key[1:]
        if (undecided & (after < before)).any():
            return False
        undecided &= after == before
        if not undecided.any():
            return True
    return True


def _plain_index(index: pd.Index) -> bool:
    return isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1


def tie_warning(tied: int) -> str:
    return (
        f"{tied:,} events share a time with another event of the same partition; equal "
        "times are never in sequence — add ORDER BY ts, col (or --tiebreak col) to order them"
    )
