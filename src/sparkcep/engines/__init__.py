"""Engines: one package each, behind one interface (`base`): nfa (patterns), aseq and
twostep (AGG queries). `choose(plan)` picks one; `compile_jobs` builds the programs the
runners drive."""

from sparkcep.engines.base import (
    ENGINES,
    Engine,
    OutputColumn,
    Program,
    choose,
    compile_jobs,
    register,
)

__all__ = ["ENGINES", "Engine", "OutputColumn", "Program", "choose", "compile_jobs", "register"]
