"""The AGG and GROUP BY clauses: aggregates over a pattern's matches (docs/aggregation.md).

They add an `AggregateSpec` to the plan; the engines that read it (aseq, twostep) decide
whether they can answer the query.
"""

from __future__ import annotations

from sparkcep.language import ast
from sparkcep.plan.model import AGG_FUNCTIONS, AggItem, AggregateSpec
from sparkcep.schema import NUMERIC, Kind


class AggregateClauses:
    """AGG/GROUP BY analysis (mixed into the analyzer, which provides `query`, `comps`,
    `schema`, `error`, `_expand`, `_check_attr` and `_attr_kind`)."""

    def _check_aggregate_clauses(self):
        q = self.query
        if q.group_by and not q.aggregates:
            raise self.error(
                "GROUP BY needs an AGG clause (AGG COUNT, SUM(v.x), ...)", q.group_span
            )
        if q.emit is not None and not q.aggregates:
            raise self.error(
                "EMIT says when an AGG query gives a row: this query has no AGG clause",
                q.emit_span,
            )
        if q.aggregates and q.returns:
            raise self.error(
                "a query has either AGG (aggregates over matches) or RETURN (one row per "
                "match), not both",
                q.returns[0].span,
            )

    def _aggregate_spec(self) -> AggregateSpec | None:
        if not self.query.aggregates:
            return None
        q = self.query
        return AggregateSpec(self._agg_items(), q.group_by, q.emit or "match")

    def _group_equalities(self) -> list[ast.Expr]:
        """GROUP BY g partitions the stream by g: every event of a match shares it."""
        q = self.query
        out = []
        for attr in q.group_by:
            if self.schema is not None and attr not in self.schema:
                raise self.error(
                    f"GROUP BY '{attr}' is not a column of the input (columns: "
                    f"{', '.join(self.schema)})",
                    q.group_span,
                )
            out += self._expand(ast.Equivalence(attr, span=q.group_span))
        return out

    def _agg_items(self) -> tuple[AggItem, ...]:
        items: list[AggItem] = []
        for item in self.query.aggregates:
            expr = item.expr
            if isinstance(expr, ast.VarRef) and expr.var.lower() == "count":
                func, var, attr = "count", None, None
            elif isinstance(expr, ast.Call) and expr.name in AGG_FUNCTIONS and len(expr.args) == 1:
                func = expr.name
                arg = expr.args[0]
                if func == "count" and isinstance(arg, ast.VarRef | ast.AttrRef):
                    var, attr = None, None
                elif isinstance(arg, ast.AttrRef):
                    self._check_attr(arg)
                    var, attr = arg.var, arg.attr
                else:
                    raise self.error(
                        f"{func.upper()} takes an attribute, e.g. {func.upper()}(c.price)",
                        expr.span,
                    )
            else:
                raise self.error(
                    "AGG takes COUNT, SUM(v.attr), AVG(v.attr), MIN(v.attr) or MAX(v.attr)",
                    expr.span,
                )
            kind: Kind = "int"
            if var is not None:
                comp = self.comps[var]
                if comp.negated:
                    raise self.error(f"'{var}' is negated: no event is bound to it", expr.span)
                if comp.kleene:
                    raise self.error(
                        f"{func.upper()} over the Kleene variable '{var}' is not supported; "
                        "aggregate a singleton variable",
                        expr.span,
                    )
                attr_kind = self._attr_kind(attr)
                if func in ("sum", "avg") and attr_kind not in (*NUMERIC, "unknown"):
                    raise self.error(f"{func.upper()} needs numbers, not {attr_kind}", expr.span)
                kind = "float" if func == "avg" else attr_kind
            name = item.alias or func
            if any(i.name == name for i in items) or name in ("ts", *self.query.group_by):
                raise self.error(
                    f"the output already has a column '{name}': name this one with AS", item.span
                )
            items.append(AggItem(name, func, var, attr, kind))
        return tuple(items)
