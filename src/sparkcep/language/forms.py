"""Which language a query text is in, told without parsing it (so that a run of the
native language never imports the SQL grammar's modules)."""

from __future__ import annotations

import re

_COMMENTS = re.compile(r"--[^\n]*|//[^\n]*|/\*.*?\*/", re.DOTALL)
_SQL_FORM = re.compile(r"\s*SELECT\b.*\bMATCH_RECOGNIZE\b", re.IGNORECASE | re.DOTALL)


def is_match_recognize(text: str) -> bool:
    """Whether a query text is the SQL form (`SELECT ... MATCH_RECOGNIZE (...)`).

    >>> is_match_recognize("-- V shapes\\nselect * from t match_recognize (...)")
    True
    >>> is_match_recognize("PATTERN SEQ(A a, B b)")
    False
    """
    return isinstance(text, str) and bool(_SQL_FORM.match(_COMMENTS.sub(" ", text)))
