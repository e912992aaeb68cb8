"""MISSING RATE, DELAY, THRESHOLD and USING MODEL: probabilistic detection over lossy
streams (ayac-probabilistic-cep.md; docs/ayac.md).

The clauses add an `AyacSpec` to the plan: each component's miss rate ε and delay law f,
and the threshold. Only the `ayac` engine reads it (the others decline a plan with a
spec), so a query without these clauses keeps its engine.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from sparkcep.language import ast
from sparkcep.timeunits import convert

if TYPE_CHECKING:
    from sparkcep.plan.laws import Law

RESERVED_OUTPUT = ("missing", "probability")


@dataclass(frozen=True)
class AyacSpec:
    """What the probabilistic clauses add to a pattern (docs/ayac.md).

    `rates` maps every variable to its miss rate ε; `laws` every variable but the first
    positive to the law of its delay from the previous positive (for a negation before
    the first positive: its delay *to* that positive), in ticks. `sources` says where
    each came from ("query", "model" or "default"); `fits` carries a model's
    goodness-of-fit figures per variable, for `explain`.
    """

    rates: dict[str, float]
    laws: dict[str, Law]
    threshold: float
    sources: dict[str, str] = field(default_factory=dict)
    model_path: str | None = None
    fits: dict[str, str] = field(default_factory=dict)
    tick_unit: str | None = None

    def rate(self, var: str) -> float:
        return self.rates.get(var, 0.0)


class AyacClauses:
    """Analysis of the probabilistic clauses (mixed into the analyzer, which provides
    `query`, `options`, `schema`, `positive_vars`, `error`, `_time_kind` and
    `_interval_time`)."""

    def _ayac_spec(self, comps, window: int | None, strategy: str) -> AyacSpec | None:
        q = self.query
        spans = [
            s
            for s, present in (
                (q.missing_span, bool(q.missing_rates)),
                (q.delay_span, bool(q.delays)),
                (q.threshold_span, q.threshold is not None),
                (q.model_span, q.model_path is not None),
            )
            if present
        ]
        if not spans or (spans == [q.threshold_span] and self._interval_time()):
            return None  # THRESHOLD alone over interval times bounds their confidence
        self._check_ayac_pattern(comps, window, strategy, spans[0])
        tick_unit = self._ayac_tick_unit()
        rates = {c.var: 0.0 for c in comps}
        sources = {f"rate {c.var}": "default" for c in comps}
        laws: dict = {}
        fits: dict[str, str] = {}
        if q.model_path is not None:
            self._read_model(comps, tick_unit, (rates, laws, sources, fits))
        self._missing_rates(comps, rates, sources)
        self._delays(comps, laws, sources)
        self._default_laws(comps, window, laws, sources)
        threshold = self._threshold(rates, comps)
        return AyacSpec(rates, laws, threshold, sources, q.model_path, fits, tick_unit)

    # ---- the pattern
    def _check_ayac_pattern(self, comps, window, strategy, clause_span):
        q = self.query
        if q.aggregates:
            raise self.error(
                "MISSING RATE, DELAY, THRESHOLD and USING MODEL score matches; they do not "
                "combine with AGG",
                clause_span,
            )
        if window is None:
            raise self.error(
                "probabilistic detection needs a WITHIN window (scores and negations over "
                "missed events look back one window)",
                clause_span,
            )
        if strategy != "SKIP_TILL_ANY_MATCH":
            raise self.error(
                "probabilistic detection scores every combination of events: only "
                "SKIP_TILL_ANY_MATCH applies",
                q.strategy_span,
            )
        k = sum(1 for c in comps if not c.negated)
        for c in comps:
            if c.kleene:
                raise self.error(
                    "probabilistic detection has no Kleene closure (AYAC's components are "
                    "single events)",
                    c.span,
                )
            if c.negated and c.gap == k:
                raise self.error(
                    "probabilistic detection reports matches ending with an observed "
                    "positive event (AYAC §4.2): a negation cannot end the pattern",
                    c.span,
                )
            if c.event_type is None and not c.local:
                raise self.error(
                    f"'{c.var}' needs a condition on it alone (e.g. {c.var}.reader = 'A'): "
                    "AYAC's automaton states test such trivial predicates",
                    c.span,
                )
            if c.var in RESERVED_OUTPUT:
                raise self.error(
                    f"'{c.var}' names an output column of probabilistic detection: rename "
                    "the variable",
                    c.span,
                )
        for item in q.returns:
            if item.alias in RESERVED_OUTPUT:
                raise self.error(
                    f"the output already has a column '{item.alias}': name this one differently",
                    item.span,
                )

    def _ayac_tick_unit(self) -> str | None:
        kind = self._time_kind()
        if kind == "timestamp":
            return "us"
        return self.options.time_unit

    # ---- clauses
    def _missing_rates(self, comps, rates, sources):
        names = [c.var for c in comps]
        seen: set[str | None] = set()
        items = self.query.missing_rates
        for item in items:
            if not 0.0 <= item.rate <= 1.0:
                raise self.error(
                    f"a miss rate is a probability between 0 and 1, not {item.rate:g}", item.span
                )
        # One rate for every component first, then the components named.
        for item in sorted(items, key=lambda i: i.var is not None):
            if item.var is None:
                if None in seen:
                    raise self.error("the miss rate of every component is given twice", item.span)
                seen.add(None)
                for var in names:
                    rates[var] = float(item.rate)
                    sources[f"rate {var}"] = "query"
                continue
            if item.var not in names:
                raise self.error(
                    f"unknown variable '{item.var}' (the pattern has {', '.join(names)})",
                    item.span,
                )
            if item.var in seen:
                raise self.error(f"the miss rate of '{item.var}' is given twice", item.span)
            seen.add(item.var)
            rates[item.var] = float(item.rate)
            sources[f"rate {item.var}"] = "query"

    def _delays(self, comps, laws, sources):
        from sparkcep.plan.laws import LAWS, make_law

        by_var = {c.var: c for c in comps}
        first = self.positive_vars[0]
        seen: set[str] = set()
        for item in self.query.delays:
            if item.var not in by_var:
                raise self.error(
                    f"unknown variable '{item.var}' (the pattern has {', '.join(by_var)})",
                    item.span,
                )
            if item.var == first:
                raise self.error(
                    f"'{first}' is the first positive component: a delay runs from the "
                    "previous positive, and it has none",
                    item.span,
                )
            if item.var in seen:
                raise self.error(f"the delay of '{item.var}' is given twice", item.span)
            seen.add(item.var)
            if item.law.upper() not in LAWS:
                raise self.error(
                    f"unknown law '{item.law}' (known: {', '.join(LAWS)})", item.law_span
                )
            args = [self._duration_ticks(d) for d in item.args]
            try:
                laws[item.var] = make_law(item.law, args)
            except ValueError as error:
                raise self.error(str(error), item.span) from None
            sources[f"law {item.var}"] = "query"

    def _default_laws(self, comps, window, laws, sources):
        from sparkcep.plan.laws import Uniform

        first = self.positive_vars[0]
        for c in comps:
            if c.var != first and c.var not in laws:
                laws[c.var] = Uniform(0.0, float(window))
                sources[f"law {c.var}"] = "default"

    def _threshold(self, rates, comps) -> float:
        q = self.query
        if q.threshold is None:
            # The paper's advice: above ε² (paths missing two positives fall below it).
            worst = max((rates[c.var] for c in comps if not c.negated), default=0.0)
            return worst * worst
        if not 0.0 <= q.threshold <= 1.0:
            raise self.error(
                f"THRESHOLD is a probability between 0 and 1, not {q.threshold:g}",
                q.threshold_span,
            )
        if not q.missing_rates and q.model_path is None:
            raise self.error(
                "THRESHOLD needs MISSING RATE (or USING MODEL), or an interval time (TIME "
                "BETWEEN): without either, every match has probability 1",
                q.threshold_span,
            )
        return float(q.threshold)

    def _duration_ticks(self, d: ast.Duration) -> float:
        kind = self._time_kind()
        unit = self.options.time_unit
        if d.amount < 0:
            raise self.error("a delay cannot be negative", d.span)
        if kind == "timestamp":
            if d.unit is None:
                raise self.error(
                    f"the time column '{self.options.time_col}' holds timestamps: give the "
                    f"delay a unit, e.g. {d.amount:g} s",
                    d.span,
                )
            return convert(d.amount, d.unit, "us")
        if d.unit is None:
            return float(d.amount)
        if unit is None:
            if kind == "unknown":
                return convert(d.amount, d.unit, "s")
            raise self.error(
                f"the time column '{self.options.time_col}' holds plain integers: give their "
                "unit (--time-unit ms|s|us|ns, or time_unit=...) or write the delay as a bare "
                "number",
                d.span,
            )
        return convert(d.amount, d.unit, unit)

    # ---- USING MODEL
    def _read_model(self, comps, tick_unit, into):
        from sparkcep.plan.laws import law_from_json

        rates, laws, sources, fits = into
        span = self.query.model_span
        path = Path(self.query.model_path)
        try:
            data = json.loads(path.read_text())
        except OSError as error:
            raise self.error(f"cannot read the model '{path}': {error.strerror}", span) from None
        except json.JSONDecodeError as error:
            raise self.error(f"the model '{path}' is not JSON ({error.msg})", span) from None
        components = data.get("components") if isinstance(data, dict) else None
        if not isinstance(components, dict):
            raise self.error(f"the model '{path}' has no 'components' object", span)
        factor = 1.0
        unit = data.get("unit")
        if unit is not None and tick_unit is not None and unit != tick_unit:
            factor = convert(1.0, unit, tick_unit)
        by_var = {c.var: c for c in comps}
        first = self.positive_vars[0]
        for var, entry in components.items():
            if var not in by_var:
                raise self.error(
                    f"the model '{path}' describes '{var}', which is not a variable of the "
                    f"pattern ({', '.join(by_var)})",
                    span,
                )
            rate = entry.get("miss_rate")
            if rate is not None:
                if not 0.0 <= float(rate) <= 1.0:
                    raise self.error(
                        f"the model '{path}' gives '{var}' the miss rate {rate}, not a "
                        "probability between 0 and 1",
                        span,
                    )
                rates[var] = float(rate)
                sources[f"rate {var}"] = "model"
                # Where the estimate is shaky (edge rows, repeated reads), say so here too.
                self.warnings += [f"the model '{path}': {w}" for w in entry.get("warnings", ())]
            delay = entry.get("delay")
            if delay is not None and var != first:
                try:
                    laws[var] = law_from_json(delay).scaled(factor)
                except (KeyError, TypeError, ValueError) as error:
                    raise self.error(
                        f"the model '{path}' has a bad delay for '{var}': {error}", span
                    ) from None
                sources[f"law {var}"] = "model"
            if isinstance(entry.get("fit"), dict):
                from sparkcep.plan.laws import fit_summary

                fits[var] = fit_summary(entry["fit"])
            if entry.get("sample") is not None:  # the miss rate's sample size
                fits[var] = "; ".join(
                    [*filter(None, [fits.get(var)]), f"miss rate from {entry['sample']} matches"]
                )
