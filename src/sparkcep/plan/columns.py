"""Which input columns queries can read, from their text alone (before any plan): only
these get their type inferred from text, in every runner."""

from __future__ import annotations

import re
from dataclasses import fields

from sparkcep.plan.model import Options

WORD = re.compile(r"`([^`]+)`|(\w+)")


def named_columns(queries, columns: list[str], options: Options) -> set[str] | None:
    """The input columns the queries can read: those whose name occurs as a word (or a
    `quoted` name) in their text, and those the options name; None (all) when a query
    is not given as text or has a `*` (which may stand for every column). Only these get
    their type inferred from text: a query cannot otherwise read a column without naming
    it."""
    texts = [queries] if isinstance(queries, str) else list(queries)
    if not all(isinstance(t, str) and "*" not in t for t in texts):
        return None  # plans, or a text that may read every column (SELECT *, A.*)
    words = {a or b for t in texts for a, b in WORD.findall(t)}
    for option in fields(options):  # id_col, tiebreak, time_end_col, prob_col, ...
        value = getattr(options, option.name)
        if isinstance(value, str) and (option.name.endswith("_col") or option.name == "tiebreak"):
            words.add(value)
    folded = {w.casefold() for w in words}
    return {c for c in columns if c in words or c.casefold() in folded}
