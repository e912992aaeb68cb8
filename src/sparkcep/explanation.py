"""`sparkcep explain`: the plan in words. The engine is the one `choose` picks; what only
that engine can say comes from its program (`Program.describe`)."""

from __future__ import annotations

from sparkcep.engines.registry import choose as choose_engine
from sparkcep.engines.registry import compile_jobs, declined
from sparkcep.language import ast
from sparkcep.plan import Options, Plan, plan_queries
from sparkcep.plan.intervals import frame_width, needs_data_width, with_data_widths
from sparkcep.timeunits import describe_window


def _component(c) -> str:
    kind = "ANY" if c.event_type is None else c.event_type
    if c.negated:
        return f"!{kind} {c.var}"
    return f"{kind}+ {c.var}[]" if c.kleene else f"{kind} {c.var}"


def explain_queries(queries, schema=None, options: Options | None = None, events=None) -> str:
    """Every query of a text (or file), one block each. With `events` (the valid rows of
    the input, pandas), what hinges on the data is said too: ties, types that never occur."""
    options = options or Options()
    plans, names = plan_queries(queries, schema, options)
    if events is not None and needs_data_width(plans):  # U_max as a batch run reads it
        plans = with_data_widths(plans, lambda spec: frame_width(spec, events, options.time_col))
    blocks = []
    for plan, name in zip(plans, names):
        text = explain_plan(plan, events)
        blocks.append(f"query      {name}\n{text}" if name else text)
    if len(plans) > 1:
        blocks += _shared(plans, names, options)
    return "\n\n".join(blocks)


def _shared(plans: list[Plan], names, options: Options) -> list[str]:
    """What queries run together share (A-Seq's prefix trees, chop-connect's pieces)."""
    blocks = []
    for program in compile_jobs(plans, names, options):
        sharing = [line for line in program.describe() if line[0] == "sharing"]
        if sharing and program.names:
            together = ("together", ", ".join(str(n) for n in program.names))
            blocks.append(_layout([together, *sharing]))
    return blocks


def explain_plan(plan: Plan, events=None) -> str:
    """Describe a plan.

    >>> from sparkcep.plan import analyze
    >>> print(explain_plan(analyze("PATTERN SEQ(A a, !X x, B b) WHERE [k] AND a.v > 3 WITHIN 10")))
    pattern    SEQ(A a, !X x, B b)
    engine     nfa: SASE automaton, all runs at once over numpy columns
    strategy   skip-till-any-match (every combination)
    window     10 ticks (last.ts - first.ts < the window)
    key        k: the stream is partitioned by k (from a.k = x.k, a.k = b.k)
    filter     an event reaches the engine only if it can match a component:
                 a: type = 'A' AND (a.v > 3)
                 x: type = 'X'
                 b: type = 'B'
    negation   !X x between a and b: no matching event strictly between them
    output     start, end, k, a, b
    """
    engine = choose_engine(plan)
    (program,) = compile_jobs([plan], [None], plan.options)
    own = program.explain_lines()
    if own is not None:  # a plan that is not a SEQ pattern (MATCH_RECOGNIZE)
        lines = [("engine", f"{engine.name}: {engine.summary}"), *own]
        lines.append(("output", ", ".join(c.name for c in program.output)))
        return _layout(lines + [("warning", w) for w in plan.warnings])
    described = program.describe()
    # A program that answers something other than a SEQ pattern (episode rules) says what
    # in its own `pattern` lines.
    lines = [line for line in described if line[0] == "pattern"]
    described = [line for line in described if line[0] != "pattern"]
    if not lines:
        comps = ", ".join(_component(c) for c in plan.components)
        lines.append(("pattern", f"SEQ({comps})"))
    lines.append(("engine", f"{engine.name}: {engine.summary}"))
    for name, why in declined(plan, engine):
        lines.append(("not", f"{name}: {why}"))
    lines += [line for line in described if line[0] == "strategy"]
    lines.append(_window(plan))
    if plan.tiebreak:
        lines.append(("order", f"time, then {plan.tiebreak} for equal times"))
    lines.append(_key(plan))
    lines.append(("filter", _filter(plan)))
    lines += _conditions(plan)
    lines += _negations(plan)
    if plan.aggregate is not None:
        lines.append(_aggregate(plan))
    lines += [line for line in described if line[0] != "strategy"]
    lines.append(("output", ", ".join(c.name for c in program.output)))
    lines += [("warning", w) for w in plan.warnings]
    lines += [("warning", w) for w in _data_warnings(plan, program, events)]
    return _layout(lines)


def _data_warnings(plan: Plan, program, events) -> list[str]:
    """What the input data makes worth saying: ties (without a tie-break), types no event has."""
    from dataclasses import replace

    from sparkcep.engines.output import tie_warning
    from sparkcep.inputs import ROW
    from sparkcep.runners.local import time_warnings, unknown_types

    if events is None:
        return []
    out = []
    if not plan.tiebreak:
        (counted,) = compile_jobs([plan], [None], replace(plan.options, id_col=ROW))
        tied = counted.tied_events(counted.in_order(events))
        out += [tie_warning(tied)] if tied else []
    if plan.options.type_col in events.columns:
        out += unknown_types([plan], set(events[plan.options.type_col].unique()))
    return out + time_warnings(plan.options, [events])


def _window(plan: Plan) -> tuple[str, str]:
    if plan.window is None:
        return ("window", "none (state is not bounded)")
    unit = "us" if plan.time_kind == "timestamp" else plan.options.time_unit
    within = plan.query.within
    written = None if within is None else (within.amount, within.unit)
    meaning = "last.ts - first.ts < the window"
    if plan.query.inclusive and unit is None and written is not None and written[1] is not None:
        meaning = "last.ts - first.ts <= the window, INCLUSIVE"  # said as written
    return ("window", describe_window(plan.window, unit, written, meaning))


def _key(plan: Plan) -> tuple[str, str]:
    if plan.key:
        texts = [ast.to_text(e).strip("()") for e in plan.key_conditions]
        source = ", ".join(dict.fromkeys(texts)) or "[attr] or GROUP BY"  # each once, in order
        keys = ", ".join(plan.key)
        return ("key", f"{keys}: the stream is partitioned by {keys} (from {source})")
    if plan.window is not None:
        return ("key", "none: Spark splits time into ranges that overlap by the window")
    return ("key", "none and no window: one partition")


def _filter(plan: Plan) -> str:
    type_col = plan.options.type_col
    if plan.strategy == "STRICT_CONTIGUITY":
        head = (
            "none: under strict contiguity every event of a partition is kept (any can break "
            "a run); each is tagged with the components it can match:"
        )
    else:
        head = "an event reaches the engine only if it can match a component:"
    filt = [head]
    for c in plan.components:
        cond = "any type" if c.event_type is None else f"{type_col} = '{c.event_type}'"
        for e in c.local:
            cond += f" AND {ast.to_text(e)}"
        filt.append(f"  {c.var}: {cond}")
    return "\n".join(filt)


def _conditions(plan: Plan) -> list[tuple[str, str]]:
    lines = []
    for cond in plan.conditions:
        where = plan.positives[cond.stage].var
        when = {
            "bind": f"checked when {where} binds",
            "element": f"checked on each element of {where}"
            + (" (prev: from its second)" if cond.has_prev else ""),
            "closure": f"checked when {where} is complete",
        }[cond.kind]
        if cond.forall:
            when += f", for every element of {', '.join(sorted(cond.forall))}"
        lines.append(("condition", f"{ast.to_text(cond.expr)}: {when}"))
    return lines


def _negations(plan: Plan) -> list[tuple[str, str]]:
    lines = []
    k = len(plan.positives)
    for neg in plan.negations:
        c = neg.component
        if neg.gap == 0:
            where = f"before {plan.positives[0].var}: none within the window before it"
        elif neg.gap == k:
            where = f"after {plan.positives[-1].var}: none until the window closes (reported then)"
        else:
            before, after = plan.positives[neg.gap - 1].var, plan.positives[neg.gap].var
            where = f"between {before} and {after}: no matching event strictly between them"
        text = f"{_component(c)} {where}"
        if neg.conditions:
            text += " with " + " AND ".join(ast.to_text(e) for e in neg.conditions)
        lines.append(("negation", text))
    return lines


def _aggregate(plan: Plan) -> tuple[str, str]:
    spec = plan.aggregate
    items = ", ".join(
        (a.func.upper() if a.var is None else f"{a.func.upper()}({a.var}.{a.attr})")
        + (f" AS {a.name}" if a.name != a.func else "")
        for a in spec.items
    )
    per = f" per {', '.join(spec.group_by)}" if spec.group_by else ""
    return (
        "aggregate",
        f"{items}{per}, at each event that can bind {plan.positives[-1].var}, over "
        "the matches ended by then within the window",
    )


def _layout(lines: list[tuple[str, str]]) -> str:
    width = max(len(name) for name, _ in lines) + 3
    out = []
    for name, text in lines:
        first, *rest = text.split("\n")
        out.append(f"{name:<{width}}{first}")
        out.extend(" " * width + r for r in rest)
    return "\n".join(out)
