"""Queries to plans: `analyze(query, schema, options) -> Plan` (see `analyzer`)."""

from sparkcep.plan.analyzer import analyze, plan_queries, uses_types
from sparkcep.plan.model import (
    AGG_FUNCTIONS,
    AGGREGATES,
    STRATEGIES,
    AggItem,
    AggregateSpec,
    Condition,
    NegationCheck,
    Options,
    Plan,
    PlanComponent,
    ReturnColumn,
)

__all__ = [
    "AGGREGATES",
    "AGG_FUNCTIONS",
    "STRATEGIES",
    "AggItem",
    "AggregateSpec",
    "Condition",
    "NegationCheck",
    "Options",
    "Plan",
    "PlanComponent",
    "ReturnColumn",
    "analyze",
    "plan_queries",
    "uses_types",
]
