"""What `explain` says about a probabilistic query: the model in use (each component's
miss rate and delay law, and where they come from), the threshold and the automaton's
skip edges."""

from __future__ import annotations

from sparkcep.engines.ayac.automaton import SkipAutomaton
from sparkcep.plan import Plan


def _duration(ticks: float, unit: str | None) -> str:
    text = f"{ticks:.6g}"
    return f"{text} {unit}" if unit else f"{text} ticks"


def describe_plan(plan: Plan, nfa: SkipAutomaton) -> list[tuple[str, str]]:
    spec = nfa.spec
    lines: list[tuple[str, str]] = [
        (
            "probability",
            "each combination of observed events, the others inferred missing, scores the "
            "product of AYAC's scoring functions along its path; reported when >= the "
            "threshold, ending with an observed last positive",
        )
    ]
    if plan.options.ayac_rows == "events":
        lines.append(
            (
                "rows",
                "one per complex event (the paths ending at the same observed event): its "
                "most probable path, the event's probability (the largest of its paths') "
                "and `paths`, how many reach the threshold (ayac_rows=events)",
            )
        )
    source = (
        "query" if plan.query.threshold is not None else "default: the largest miss rate squared"
    )
    lines.append(("threshold", f"{spec.threshold:g} ({source})"))
    if spec.model_path is not None:
        lines.append(
            ("model", f"USING MODEL '{spec.model_path}' (clauses in the query override it)")
        )
    fmt = lambda ticks: _duration(ticks, spec.tick_unit)  # noqa: E731
    first = plan.positives[0].var
    for comp in plan.components:
        rate = spec.rate(comp.var)
        text = f"{comp.var}: miss rate {rate:g} ({spec.sources.get(f'rate {comp.var}', 'default')})"
        if comp.var == first:
            text += "; first positive, no delay"
        else:
            law = spec.laws[comp.var]
            anchor = (
                "to the first positive"
                if comp.negated and comp.gap == 0
                else "from the previous positive"
            )
            source = spec.sources.get(f"law {comp.var}", "default")
            shown = law.text(fmt)
            if spec.tick_unit is None and plan.time_kind == "unknown":  # no input: no ticks
                window = plan.query.within
                given = [d for d in plan.query.delays if d.var == comp.var]
                if source == "default" and window is not None and window.unit:
                    shown = "UNIFORM(0, the window)"  # W has no ticks yet
                elif given and any(a.unit for a in given[0].args):
                    shown = law.text(lambda ticks: _duration(ticks, "s"))  # read in seconds
            text += f"; delay {anchor} {shown} ({source})"
        if comp.var in spec.fits:
            text += f"; fit {spec.fits[comp.var]}"
        lines.append(("component", text))
    for line in nfa.describe():
        lines.append(("edge", line))
    lines.append(
        (
            "missing",
            "a variable inferred missing has null attributes and a null id; a condition "
            "that is null while it mentions one holds; a negated event rules a path out "
            "when it lies between the observed events around its place (after the "
            "window's start when none is before it)",
        )
    )
    return lines
