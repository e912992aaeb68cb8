"""The registry: the engines there are, in the order `choose` tries them, and where each
is defined. Nothing is imported until an engine is needed: a run whose queries the first
engine answers imports no other engine package.

A new engine is a package under `engines/`, one line in `TABLE`, and its grammar and
analysis (docs/architecture.md shows it on a real engine). `register` adds an engine
defined elsewhere (a test, a plug-in) without touching this table.

>>> names()[:3]
['nfa', 'aseq', 'twostep']
>>> get("nfa").summary != ""
True
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import import_module

from sparkcep.engines.base import Engine, Program
from sparkcep.errors import SparkcepError
from sparkcep.plan import Options, Plan

# name -> where its engine is: "module:Class" (built with no arguments), or "module:value"
# for an engine built with arguments (one class, several algorithms). The order is the
# order `choose` tries them in: the first that answers a query runs it.
TABLE: dict[str, str] = {
    "nfa": "sparkcep.engines.nfa:NfaEngine",
    "aseq": "sparkcep.engines.aseq:AseqEngine",
    "twostep": "sparkcep.engines.aseq:TwoStepEngine",
    "imprecise": "sparkcep.engines.imprecise:QUERY_ORDER",
    "ayac": "sparkcep.engines.ayac.engine:AyacEngine",
    "ses": "sparkcep.engines.ses:SesEngine",
    "jointree": "sparkcep.engines.ses:JoinTreeEngine",
    "nfa-windows": "sparkcep.engines.ses:NfaWindowsEngine",
    "episodes": "sparkcep.engines.episodes:EpisodesEngine",
    "tofel": "sparkcep.engines.episodes:ToFelEngine",
    "directmatch": "sparkcep.engines.episodes:DirectMatchEngine",
    "match_recognize": "sparkcep.engines.match_recognize:MatchRecognizeEngine",
    "funnel": "sparkcep.engines.funnel:FunnelEngine",
    "imprecise-sorted": "sparkcep.engines.imprecise:SORTED_QUERY_ORDER",
    "imprecise-anystate": "sparkcep.engines.imprecise:ANY_STATE",
    "imprecise-selectivity": "sparkcep.engines.imprecise:SELECTIVITY_ORDER",
    "imprecise-points": "sparkcep.engines.imprecise:POINT_BASED",
}

_BUILT: dict[str, Engine] = {}  # engines imported so far (and those `register` added)


def names() -> list[str]:
    """Every engine's name, in the order `choose` tries them (nothing imported)."""
    return list(TABLE)


def get(name: str) -> Engine:
    """The engine called `name`, its package imported now if it was not yet."""
    if name not in _BUILT:
        if name not in TABLE:
            raise SparkcepError(f"unknown algorithm '{name}' (known: {', '.join(TABLE)})")
        module, _, attr = TABLE[name].partition(":")
        found = getattr(import_module(module), attr)
        _BUILT[name] = found() if isinstance(found, type) else found
    return _BUILT[name]


def engines() -> dict[str, Engine]:
    """Every engine by name, in order (imports them all)."""
    return {name: get(name) for name in TABLE}


def register(engine: Engine) -> Engine:
    """Add an engine defined outside this table (tried after the others)."""
    if engine.name in TABLE:
        raise SparkcepError(f"an engine called '{engine.name}' is already registered")
    TABLE[engine.name] = f"{type(engine).__module__}:{type(engine).__qualname__}"
    _BUILT[engine.name] = engine
    return engine


def unregister(name: str) -> None:
    """Remove an engine that `register` added."""
    TABLE.pop(name, None)
    _BUILT.pop(name, None)


def first_with(capability: type) -> Engine | None:
    """The first engine that offers `capability` (one of the optional interfaces of
    `engines.base`, e.g. `FitsModels`), or None."""
    return next((e for e in engines().values() if isinstance(e, capability)), None)


def choose(plan: Plan) -> Engine:
    """The engine for a plan: the one `--algorithm` names, else the first in the table
    that answers it (the engines after it are not imported)."""
    wanted = plan.options.algorithm
    if wanted is not None:
        engine = get(wanted)
        why = engine.reason(plan)
        if why is not None:
            raise SparkcepError(f"--algorithm {wanted} cannot answer this query: {why}")
        return engine
    reasons = []
    for name in TABLE:
        engine = get(name)
        why = engine.reason(plan)
        if why is None:
            return engine
        reasons.append(f"{name}: {why}")
    raise SparkcepError("no engine answers this query (" + "; ".join(reasons) + ")")


def declined(plan: Plan, chosen: Engine) -> list[tuple[str, str]]:
    """The engines tried before `chosen` and why they declined (for `explain`)."""
    out = []
    for engine in engines().values():
        if engine is chosen:
            break
        why = engine.reason(plan)
        if why is not None and engine.applies_to(plan):
            out.append((engine.name, why))
    return out


def compile_jobs(
    plans: Sequence[Plan], names: Sequence[str | None], options: Options
) -> list[Program]:
    """Programs for a set of queries: one per engine and way of partitioning the stream."""
    groups: dict[tuple, list[int]] = {}
    chosen: dict[tuple, Engine] = {}
    for i, plan in enumerate(plans):
        engine = choose(plan)
        key = (engine.name, engine.job_key(plan))
        groups.setdefault(key, []).append(i)
        chosen[key] = engine
    several = len(plans) > 1 or any(n is not None for n in names)
    labels = [n or f"q{i + 1}" for i, n in enumerate(names)] if several else list(names)
    programs = [
        chosen[key].compile([plans[i] for i in idx], [labels[i] for i in idx], options)
        for key, idx in groups.items()
    ]
    _check_outputs_agree(programs)
    return programs


def _check_outputs_agree(programs: list[Program]) -> None:
    """Queries run together in different programs (other keys, other engines) may not give
    one column a list in one and a value in the other: their rows are one table (Spark
    cannot union them; pandas would mix lists and numbers in one column). Each program
    checks its own queries (`engines.output.merged_output`); this checks across them."""
    seen: dict[str, tuple[bool, str]] = {}  # column -> (is a list, the query that made it)
    for program in programs:
        for col in program.output:
            plan, name = _maker(program, col.name)
            if col.name not in seen:
                seen[col.name] = (col.is_list, name)
            elif seen[col.name][0] != col.is_list:
                message = (
                    f"queries run together give the column '{col.name}' different types "
                    f"(in {name} and {seen[col.name][1]}): name it differently in one of them"
                )
                if hasattr(plan, "error") and hasattr(plan, "span_of"):
                    raise plan.error(message, plan.span_of(col.name))
                raise SparkcepError(message)


def _maker(program: Program, column: str) -> tuple[Plan, str]:
    """The first of a program's queries that names `column` (its RETURN item or its
    variable), and its name."""
    names = program.names or (None,) * len(program.plans)
    for plan, name in zip(program.plans, names):
        span_of = getattr(plan, "span_of", None)
        query = getattr(plan, "query", None)
        if span_of is not None and query is not None and span_of(column) != query.span:
            return plan, name or "the query"
    return program.plans[0], names[0] or "the query"
