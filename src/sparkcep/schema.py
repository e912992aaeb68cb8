"""The kinds of values a column can hold, as the query analysis sees them."""

from __future__ import annotations

from typing import Literal

Kind = Literal["int", "float", "string", "bool", "timestamp", "unknown"]

NUMERIC = ("int", "float")


def kind_of_pandas(dtype) -> Kind:
    """Map a pandas/numpy dtype to a kind."""
    import pandas as pd

    if pd.api.types.is_bool_dtype(dtype):
        return "bool"
    if pd.api.types.is_integer_dtype(dtype):
        return "int"
    if pd.api.types.is_float_dtype(dtype):
        return "float"
    if pd.api.types.is_datetime64_any_dtype(dtype):
        return "timestamp"
    if pd.api.types.is_string_dtype(dtype) or pd.api.types.is_object_dtype(dtype):
        return "string"
    return "unknown"


def kind_of_value(value) -> Kind:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    return "unknown"


def comparable(a: Kind, b: Kind) -> bool:
    if "unknown" in (a, b):
        return True
    if a in NUMERIC and b in NUMERIC:
        return True
    return a == b


def spark_type_name(kind: Kind) -> str:
    return {
        "int": "bigint",
        "float": "double",
        "string": "string",
        "bool": "boolean",
        "timestamp": "timestamp",
        "unknown": "string",
    }[kind]
