"""Clauses beyond SASE in the native language (docs/language.md): AFTER MATCH SKIP.

They add fields to the plan; the engines that read them say so in `reason`.
"""

from __future__ import annotations


class NativeExtensions:
    """Checks and plan fields of the extension clauses (mixed into the analyzer, which
    provides `query` and `error`)."""

    def _extension_fields(self) -> dict:
        q = self.query
        if q.skip is not None and q.aggregates:
            raise self.error(
                "AFTER MATCH SKIP keeps some of the matches, and AGG aggregates over every "
                "match: use one or the other",
                q.skip_span,
            )
        return {"skip": q.skip}
