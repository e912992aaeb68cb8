"""Scalar functions of the query language, evaluated on numpy columns with SQL's nulls.

Each function has its argument kinds, its result kind and a vectorised implementation;
`runners/spark/expr.py` has the Spark twin of each, so a local condition using them is
still evaluated in the JVM. A null argument gives a null result (coalesce excepted: it
gives its first non-null argument). `s LIKE p` is SQL's LIKE: `%` is any run of
characters, `_` one character, matched against the whole text.

>>> import numpy as np
>>> from sparkcep.vec import Vec
>>> s = Vec(np.array(["Admission NC", "Lab", ""], dtype=object), np.array([False, False, True]))
>>> FUNCTIONS["lower"].apply([s]).to_list()
['admission nc', 'lab', None]
>>> FUNCTIONS["like"].apply([s, Vec(np.array(["%NC"] * 3, dtype=object))]).to_list()
[True, False, None]
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from sparkcep.schema import NUMERIC, Kind, comparable
from sparkcep.vec import Vec


@dataclass(frozen=True)
class Function:
    name: str
    arity: tuple[int, int | None]  # least and most arguments (None: any number)
    args: str  # what the arguments must be: "number", "string" or "comparable"
    result: Callable[[list[Kind]], Kind]
    apply: Callable[[list[Vec]], Vec]
    usage: str


def _nulls(args: list[Vec]) -> np.ndarray | None:
    out = None
    for a in args:
        if a.null is not None:
            out = a.null if out is None else out | a.null
    return out


def _strings(fn, default) -> Callable[[list[Vec]], Vec]:
    """Element-wise over string arguments: null where any argument is null."""

    def apply(args: list[Vec]) -> Vec:
        null = _nulls(args)
        n = len(args[0])
        cols = [a.values for a in args]
        ok = np.ones(n, dtype=bool) if null is None else ~null
        out = [fn(*[str(c[i]) for c in cols]) if ok[i] else default for i in range(n)]
        dtype = object if isinstance(default, str) else type(default)
        return Vec(np.array(out, dtype=dtype), null)

    return apply


def _coalesce(args: list[Vec]) -> Vec:
    values = args[0].values.copy()
    if values.dtype != object and any(a.values.dtype != values.dtype for a in args[1:]):
        values = values.astype(
            object if any(a.values.dtype == object for a in args) else np.float64
        )
    null = args[0].nulls().copy()
    for a in args[1:]:
        take = null & ~a.nulls()
        values[take] = a.values[take]
        null &= ~take
    return Vec(values, null if null.any() else None)


@lru_cache(maxsize=256)
def like_regex(pattern: str) -> re.Pattern:
    """SQL LIKE as a regular expression: % any run, _ one character, the rest literal."""
    parts = ["." if c == "_" else ".*" if c == "%" else re.escape(c) for c in pattern]
    return re.compile("".join(parts), re.DOTALL)


def _string_kind(kinds: list[Kind]) -> Kind:
    return "string"


FUNCTIONS: dict[str, Function] = {
    f.name: f
    for f in (
        Function(
            "abs", (1, 1), "number", lambda k: k[0],
            lambda a: Vec(np.abs(a[0].values), a[0].null), "abs(b.price)",
        ),
        Function("lower", (1, 1), "string", _string_kind, _strings(str.lower, ""), "lower(a.name)"),
        Function("upper", (1, 1), "string", _string_kind, _strings(str.upper, ""), "upper(a.name)"),
        Function("length", (1, 1), "string", lambda k: "int", _strings(len, 0), "length(a.name)"),
        Function(
            "startswith", (2, 2), "string", lambda k: "bool",
            _strings(str.startswith, False), "startswith(a.name, 'x')",
        ),
        Function(
            "endswith", (2, 2), "string", lambda k: "bool",
            _strings(str.endswith, False), "endswith(a.name, 'x')",
        ),
        Function(
            "contains", (2, 2), "string", lambda k: "bool",
            _strings(lambda s, p: p in s, False), "contains(a.name, 'x')",
        ),
        Function(
            "like", (2, 2), "string", lambda k: "bool",
            _strings(lambda s, p: like_regex(p).fullmatch(s) is not None, False), "a.name LIKE 'x%'",
        ),
        Function(
            "coalesce", (1, None), "comparable",
            lambda k: next((x for x in k if x != "unknown"), "unknown"),
            _coalesce, "coalesce(x.tag, z.tag)",
        ),
    )
}  # fmt: skip


def check_kinds(fn: Function, kinds: list[Kind]) -> str | None:
    """Why these argument kinds do not suit `fn`, or None."""
    if fn.args == "number":
        bad = [k for k in kinds if k not in (*NUMERIC, "unknown")]
        return f"{fn.name}() needs numbers, not {bad[0]}" if bad else None
    if fn.args == "string":
        bad = [k for k in kinds if k not in ("string", "unknown")]
        return f"{fn.name}() needs text, not {bad[0]}" if bad else None
    known = [k for k in kinds if k != "unknown"]
    if any(not comparable(known[0], k) for k in known[1:]):
        return f"{fn.name}() needs values of one type, not {' and '.join(dict.fromkeys(known))}"
    return None
