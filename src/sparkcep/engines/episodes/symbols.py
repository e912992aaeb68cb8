"""SYMBOL: an event's symbol computed from its own columns (docs/episodes.md).

The paper maps each reading to one event ("a unique value of flow and a unique unit
percentage for occupancy are mapped into a specific event"); `SYMBOL expr` does that
here. Values become text: integers without a fractional part (3.0 -> '3', so integer
and float columns agree), booleans as true/false, strings as they are. A null anywhere
in the expression gives no symbol: the event takes part in no rule.

>>> import pandas as pd
>>> from sparkcep.language.parser import parse
>>> expr = parse("EPISODE (A a) SYMBOL concat(sensor, ':', floor(flow / 10)) WITHIN 1"
...              " PREDICT B WITHIN 1").symbol
>>> frame = pd.DataFrame({"sensor": ["a", "b", None], "flow": [23.0, 7, 5]})
>>> symbol_values(expr, frame).tolist()
['a:2', 'b:0', None]
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from sparkcep.language import ast


def symbol_values(expr: ast.Expr, frame: pd.DataFrame) -> np.ndarray:
    """The symbol of each row (object array; None where there is none)."""
    values = _eval(expr, frame)
    if not isinstance(values, pd.Series):
        values = pd.Series([values] * len(frame), index=frame.index, dtype=object)
    return np.array([_text(v) for v in values.to_numpy(dtype=object)], dtype=object)


def _eval(expr: ast.Expr, frame: pd.DataFrame):
    if isinstance(expr, ast.Literal):
        return expr.value
    if isinstance(expr, ast.VarRef):
        return frame[expr.var].astype(object).where(frame[expr.var].notna(), None)
    if isinstance(expr, ast.Negate):
        return _map(lambda x: -x, _eval(expr.operand, frame))
    if isinstance(expr, ast.BinOp):
        return _binop(expr.op, _eval(expr.left, frame), _eval(expr.right, frame), len(frame))
    if isinstance(expr, ast.Call):
        args = [_eval(a, frame) for a in expr.args]
        if expr.name == "concat":
            return _combine(lambda *xs: "".join(_text(x) for x in xs), args, len(frame))
        return _map(_FUNCTIONS[expr.name], args[0])
    raise TypeError(f"not a SYMBOL expression: {expr!r}")


def _number(x):
    return x if isinstance(x, int | float | np.integer | np.floating) else float(x)


_FUNCTIONS = {
    "string": lambda x: _text(x),
    "lower": lambda x: _text(x).lower(),
    "upper": lambda x: _text(x).upper(),
    "floor": lambda x: math.floor(_number(x)),
    "ceil": lambda x: math.ceil(_number(x)),
    "round": lambda x: math.floor(_number(x) + 0.5),
    "abs": lambda x: abs(_number(x)),
}


def _null(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def _safe(fn, *xs):
    """fn(*xs), or None for a null argument or a value fn cannot take ('abc' + 1)."""
    if any(_null(x) for x in xs):
        return None
    try:
        return fn(*xs)
    except (TypeError, ValueError, OverflowError):
        return None


def _map(fn, values):
    if isinstance(values, pd.Series):
        return values.map(lambda x: _safe(fn, x))
    return _safe(fn, values)


def _combine(fn, args, n: int):
    series = [a if isinstance(a, pd.Series) else None for a in args]
    if not any(s is not None for s in series):
        return _safe(fn, *args)
    columns = [a.to_numpy(dtype=object) if s is not None else [a] * n for a, s in zip(args, series)]
    out = [_safe(fn, *row) for row in zip(*columns)]
    index = next(s for s in series if s is not None).index
    return pd.Series(out, index=index, dtype=object)


def _binop(op: str, left, right, n: int):
    def apply(a, b):
        a, b = _number(a), _number(b)
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if b == 0:
            return None  # as in WHERE: dividing by zero gives null
        return a / b if op == "/" else math.fmod(a, b)

    return _combine(apply, [left, right], n)


def _text(x) -> str | None:
    if _null(x):
        return None
    if isinstance(x, bool | np.bool_):
        return "true" if x else "false"
    if isinstance(x, float | np.floating):
        return str(int(x)) if float(x).is_integer() else repr(float(x))
    if isinstance(x, int | np.integer):
        return str(int(x))
    return str(x)
