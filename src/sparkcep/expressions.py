"""Vectorised evaluation of query expressions over numpy columns, with SQL's null logic.

A value is a `Vec`: an array of values and a mask of nulls. Comparisons with a null are
unknown (null); AND/OR/NOT follow three-valued logic; a condition holds only when TRUE.
This matches what Spark computes for the same expression, so the local runner and the
Spark runner agree.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd

from sparkcep.functions import FUNCTIONS
from sparkcep.language import ast
from sparkcep.vec import Vec


def column_vec(series: pd.Series) -> Vec:
    """An input column as a `Vec` (timestamps become int64 microseconds)."""
    null = series.isna().to_numpy()
    has_null = bool(null.any())
    dtype = series.dtype
    if pd.api.types.is_bool_dtype(dtype) and not has_null:
        return Vec(series.to_numpy(dtype=bool))
    if pd.api.types.is_datetime64_any_dtype(dtype):
        values = series.dt.tz_localize(None) if getattr(dtype, "tz", None) else series
        micros = values.to_numpy(dtype="datetime64[us]").astype(np.int64)
        return Vec(np.where(null, 0, micros), null if has_null else None)
    if pd.api.types.is_integer_dtype(dtype):
        if has_null:  # nullable Int64
            return Vec(series.fillna(0).to_numpy(dtype=np.int64), null)
        return Vec(series.to_numpy(dtype=np.int64))
    if pd.api.types.is_float_dtype(dtype):
        values = series.to_numpy(dtype=np.float64)
        return Vec(np.where(null, 0.0, values), null if has_null else None)
    values = series.to_numpy(dtype=object)
    if has_null:
        values = values.copy()
        values[null] = "" if not pd.api.types.is_bool_dtype(dtype) else False
    if len(values) and all(isinstance(v, bool | np.bool_) for v in values[~null]):
        return Vec(values.astype(bool), null if has_null else None)
    return Vec(values, null if has_null else None)


def _or_null(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
    if a is None:
        return b
    if b is None:
        return a
    return a | b


def _literal(value, n: int) -> Vec:
    if isinstance(value, str):
        arr = np.empty(n, dtype=object)
        arr[:] = value
        return Vec(arr)
    if isinstance(value, bool):
        return Vec(np.full(n, value, dtype=bool))
    if isinstance(value, int):
        return Vec(np.full(n, value, dtype=np.int64))
    return Vec(np.full(n, value, dtype=np.float64))


_COMPARE = {
    "=": np.equal,
    "!=": np.not_equal,
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
}

Resolver = Callable[[ast.Expr], Vec]


def evaluate(expr: ast.Expr, resolve: Resolver, n: int) -> Vec:
    """Evaluate `expr` over `n` rows; `resolve` gives the Vec of an attribute or aggregate."""
    if isinstance(expr, ast.Literal):
        return _literal(expr.value, n)
    if isinstance(expr, ast.AttrRef):
        return resolve(expr)
    if isinstance(expr, ast.Call):
        if expr.name in LIST_FUNCTIONS:
            return _list_function(expr.name, evaluate(expr.args[0], resolve, n))
        if expr.name == TIME_POINTS:
            micros = evaluate(expr.args[0], resolve, n)
            return Vec(micros.values.astype(np.int64) // expr.args[1].value, micros.null)
        if expr.name in FUNCTIONS:
            args = [evaluate(a, resolve, n) for a in expr.args]
            return FUNCTIONS[expr.name].apply(args)
        return resolve(expr)  # prev() and aggregates: the engine knows them
    if isinstance(expr, ast.Negate):
        inner = evaluate(expr.operand, resolve, n)
        return Vec(-inner.values, inner.null)
    if isinstance(expr, ast.Not):
        inner = evaluate(expr.operand, resolve, n)
        return Vec(~inner.values.astype(bool), inner.null)
    if isinstance(expr, ast.InList):
        inner = evaluate(expr.operand, resolve, n)
        values = [v.value for v in expr.values]
        hit = np.isin(
            inner.values, np.array(values, dtype=object if isinstance(values[0], str) else None)
        )
        if expr.negated:
            hit = ~hit
        return Vec(hit, inner.null)
    if isinstance(expr, ast.BinOp):
        if expr.op in ("and", "or"):
            return _logic(
                expr.op, evaluate(expr.left, resolve, n), evaluate(expr.right, resolve, n)
            )
        left = evaluate(expr.left, resolve, n)
        right = evaluate(expr.right, resolve, n)
        null = _or_null(left.null, right.null)
        if expr.op in _COMPARE:
            with np.errstate(invalid="ignore"):
                return Vec(
                    np.asarray(_COMPARE[expr.op](left.values, right.values), dtype=bool), null
                )
        return _arithmetic(expr.op, left, right, null)
    raise TypeError(f"cannot evaluate {expr!r}")


# Functions of a list value (a column holding lists: an interval time's pmf). Not part
# of the query language: programs use them in row checks (`engines.base.RowCheck`);
# runners/spark/expr.py computes the same in Spark. A null list, or a list with a null or
# NaN element, gives null (as Spark's aggregate does); a value that is not a list too.
LIST_FUNCTIONS = ("cardinality", "list_sum", "list_min")

# time_points(ts, n): a timestamp as whole points of n microseconds (floor), the integer
# points of an interval time over a timestamp column (plan/intervals.py). Not part of the
# query language either: the analysis writes it into an interval's bounds.
TIME_POINTS = "time_points"


def _list_function(name: str, arg: Vec) -> Vec:
    out = np.zeros(len(arg), dtype=np.int64 if name == "cardinality" else np.float64)
    null = arg.nulls().copy()
    for i, value in enumerate(arg.values):
        if null[i]:
            continue
        if not isinstance(value, list | tuple | np.ndarray):
            null[i] = True
            continue
        if name == "cardinality":
            out[i] = len(value)
            continue
        items = [np.nan if v is None else float(v) for v in value]
        if any(np.isnan(x) for x in items) or (name == "list_min" and not items):
            null[i] = True
        else:
            out[i] = math.fsum(items) if name == "list_sum" else min(items)
    return Vec(out, null if null.any() else None)


def _logic(op: str, a: Vec, b: Vec) -> Vec:
    av, bv = a.values.astype(bool, copy=False), b.values.astype(bool, copy=False)
    an, bn = a.nulls(), b.nulls()
    a_true, b_true = av & ~an, bv & ~bn
    a_false, b_false = ~av & ~an, ~bv & ~bn
    if op == "and":
        true = a_true & b_true
        false = a_false | b_false
    else:
        true = a_true | b_true
        false = a_false & b_false
    null = ~(true | false)
    return Vec(true, null if null.any() else None)


def _arithmetic(op: str, left: Vec, right: Vec, null: np.ndarray | None) -> Vec:
    lv, rv = left.values, right.values
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if op == "+":
            return Vec(lv + rv, null)
        if op == "-":
            return Vec(lv - rv, null)
        if op == "*":
            return Vec(lv * rv, null)
        zero = rv == 0
        null = _or_null(null, zero if zero.any() else None)  # x / 0 is null, as try_divide
        safe = np.where(zero, 1, rv)
        if op == "/":
            return Vec(lv / safe.astype(np.float64), null)
        if op == "%":
            return Vec(np.fmod(lv, safe), null)  # sign of the dividend, as SQL
    raise ValueError(op)


def truth(expr: ast.Expr, resolve: Resolver, n: int) -> np.ndarray:
    """Where a condition is TRUE."""
    return evaluate(expr, resolve, n).truth()
