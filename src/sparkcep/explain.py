"""`sparkcep explain`: the plan in words."""

from __future__ import annotations

from sparkcep.language import ast
from sparkcep.plan import Plan

STRATEGY_WORDS = {
    "SKIP_TILL_ANY_MATCH": "skip-till-any-match (every combination)",
    "SKIP_TILL_NEXT_MATCH": "skip-till-next-match (each run takes the next relevant event)",
    "STRICT_CONTIGUITY": "strict contiguity (events of a match are adjacent in their partition)",
}


def _component(c) -> str:
    kind = "ANY" if c.event_type is None else c.event_type
    if c.negated:
        return f"!{kind} {c.var}"
    return f"{kind}+ {c.var}[]" if c.kleene else f"{kind} {c.var}"


def explain_plan(plan: Plan) -> str:
    """Describe a plan.

    >>> from sparkcep.plan import analyze
    >>> print(explain_plan(analyze("PATTERN SEQ(A a, !X x, B b) WHERE [k] AND a.v > 3 WITHIN 10")))
    pattern    SEQ(A a, !X x, B b)
    engine     nfa
    strategy   skip-till-any-match (every combination)
    window     10 (last.ts - first.ts < 10, in the time column's ticks)
    key        k: the stream is partitioned by k (from a.k = x.k, a.k = b.k)
    filter     an event reaches the engine only if it can match a component:
                 a: type = 'A' AND (a.v > 3)
                 x: type = 'X'
                 b: type = 'B'
    negation   !X x between a and b: no matching event strictly between them
    output     start, end, k, a, b
    """
    lines: list[tuple[str, str]] = []
    comps = ", ".join(_component(c) for c in plan.components)
    lines.append(("pattern", f"SEQ({comps})"))
    lines.append(("engine", plan.engine))
    lines.append(("strategy", STRATEGY_WORDS[plan.strategy]))
    if plan.window is None:
        lines.append(("window", "none (state is not bounded)"))
    else:
        lines.append(
            (
                "window",
                f"{plan.window} (last.ts - first.ts < {plan.window}, in the time column's ticks)",
            )
        )
    if plan.tiebreak:
        lines.append(("order", f"time, then {plan.tiebreak} for equal times"))
    if plan.key:
        texts = [ast.to_text(e).strip("()") for e in plan.key_conditions]
        source = ", ".join(dict.fromkeys(texts)) or "GROUP BY"  # each once, in order
        lines.append(
            (
                "key",
                f"{', '.join(plan.key)}: the stream is partitioned by {', '.join(plan.key)} (from {source})",
            )
        )
    elif plan.window is not None:
        lines.append(("key", "none: Spark splits time into ranges that overlap by the window"))
    else:
        lines.append(("key", "none and no window: one partition"))
    type_col = plan.options.type_col
    if plan.strategy == "STRICT_CONTIGUITY":
        head = "none: under strict contiguity every event of a partition is kept (any can break a run); each is tagged with the components it can match:"
    else:
        head = "an event reaches the engine only if it can match a component:"
    filt = [head]
    for c in plan.components:
        cond = "any type" if c.event_type is None else f"{type_col} = '{c.event_type}'"
        for e in c.local:
            cond += f" AND {ast.to_text(e)}"
        filt.append(f"  {c.var}: {cond}")
    lines.append(("filter", "\n".join(filt)))
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
    k = len(plan.positives)
    for neg in plan.negations:
        c = neg.component
        if neg.gap == 0:
            where = f"before {plan.positives[0].var}: none within the window before it"
        elif neg.gap == k:
            where = f"after {plan.positives[-1].var}: none until the window closes (reported then)"
        else:
            where = f"between {plan.positives[neg.gap - 1].var} and {plan.positives[neg.gap].var}: no matching event strictly between them"
        text = f"{_component(c)} {where}"
        if neg.conditions:
            text += " with " + " AND ".join(ast.to_text(e) for e in neg.conditions)
        lines.append(("negation", text))
    if plan.agg:
        items = ", ".join(
            (a.func.upper() if a.var is None else f"{a.func.upper()}({a.var}.{a.attr})")
            + (f" AS {a.name}" if a.name != a.func else "")
            for a in plan.agg
        )
        per = f" per {', '.join(plan.group_by)}" if plan.group_by else ""
        lines.append(
            (
                "aggregate",
                f"{items}{per}, at each event that can bind {plan.positives[-1].var}, over "
                "the matches ended by then within the window",
            )
        )
        lines.append(("path", plan.agg_reason))
        outputs = ["ts", *plan.group_by, *[a.name for a in plan.agg]]
    else:
        outputs = ["start", "end", *plan.key, *[c.var for c in plan.positives]]
        outputs += [r.name for r in plan.returns]
    lines.append(("output", ", ".join(outputs)))
    for w in plan.warnings:
        lines.append(("warning", w))
    width = max(len(name) for name, _ in lines) + 3
    out = []
    for name, text in lines:
        first, *rest = text.split("\n")
        out.append(f"{name:<{width}}{first}")
        out.extend(" " * width + r for r in rest)
    return "\n".join(out)
