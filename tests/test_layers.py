"""The import graph of `src/sparkcep` (every import, at module level or inside a
function) has no circle, and no module imports one of a higher layer: the house stays
a stack a reader can take in from the bottom up."""

from __future__ import annotations

import ast as pyast
from functools import cache
from pathlib import Path

SRC = Path(__file__).parent.parent / "src"

# Low to high; a module belongs to the layer of its longest listed prefix.
LAYERS = [
    # shared basics, which know no query: errors and where they point, value kinds, time
    # units, memory and sizes, values with nulls and the functions over them, JSON lines
    ("basics", ["errors", "span", "schema", "timeunits", "budget", "sizes", "vec"]),
    ("basics", ["functions", "jsonlines"]),
    # what an input row is: reserved columns, reasons, kinds; the rule that types a text column
    ("input rows", ["input_types", "inputs"]),
    # the query as written, and evaluating its expressions over columns
    ("language", ["language", "expressions"]),
    ("plan", ["plan"]),  # what a query asks, checked against the options
    ("prep", ["prep"]),  # masks, tables and layouts a runner prepares for programs
    ("engines", ["engines"]),  # the contract, the registry and the engine packages
    ("files", ["files", "failures"]),  # reading files; failures (engines' too) as messages
    ("runners.local", ["runners", "runners.local"]),  # pandas
    ("runners.spark", ["runners.spark"]),  # Spark batch, its session, reads and checks
    ("runners.streaming", ["runners.streaming"]),  # built on Spark batch's pieces
    ("runners.jobs", ["runners.jobs"]),  # fit, mining, warmup: built on the runners
    # what users call: the API, the command, explain, the conformance suite
    ("api", ["__init__", "api", "cli", "explanation", "checks", "funnels", "_early"]),
]
_ORDER = list(dict.fromkeys(name for name, _ in LAYERS))
PREFIXES = {f"sparkcep.{p}": _ORDER.index(name) for name, ps in LAYERS for p in ps}
PREFIXES["sparkcep"] = PREFIXES.pop("sparkcep.__init__")


def modules() -> dict[str, Path]:
    found = {}
    for path in (SRC / "sparkcep").rglob("*.py"):
        name = ".".join(path.relative_to(SRC).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


@cache
def import_graph() -> dict[str, set[str]]:
    """Module -> the sparkcep modules it imports (`from p import m` of a module m is an
    import of p.m; of a name, of p)."""
    mods = modules()

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        for node in pyast.walk(pyast.parse(path.read_text())):
            if isinstance(node, pyast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, pyast.ImportFrom) and node.module and not node.level:
                targets = [
                    f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in mods else node.module
                    for a in node.names
                ]
            else:
                assert not isinstance(node, pyast.ImportFrom), f"{path}: a relative import"
                continue
            for target in targets:
                if target.split(".")[0] == "sparkcep" and (found := resolve(target)) != mod:
                    graph[mod].add(found)  # type: ignore[arg-type]
    return graph


def layer_of(mod: str) -> int:
    name = mod
    while name not in PREFIXES:
        assert "." in name, f"{mod} is in no layer: add it to LAYERS"
        name = name.rpartition(".")[0]
    return PREFIXES[name]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while (w := stack.pop()) != v:
                component.append(w)
            if component:
                found.append(sorted([v, *component]))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circle():
    assert cycles(import_graph()) == []


def test_no_import_from_a_higher_layer():
    upward = [
        f"{mod} ({_ORDER[layer_of(mod)]}) imports {dep} ({_ORDER[layer_of(dep)]})"
        for mod, deps in import_graph().items()
        for dep in sorted(deps)
        if layer_of(dep) > layer_of(mod)
    ]
    assert upward == []


def test_the_checks_catch_a_circle_and_an_upward_import():
    graph = {"sparkcep.plan.a": {"sparkcep.plan.b"}, "sparkcep.plan.b": {"sparkcep.plan.a"}}
    graph |= {"sparkcep.errors": {"sparkcep.language.ast"}, "sparkcep.language.ast": set()}
    assert cycles(graph) == [["sparkcep.plan.a", "sparkcep.plan.b"]]
    assert layer_of("sparkcep.language.ast") > layer_of("sparkcep.errors")
    assert layer_of("sparkcep.runners.jobs.fit") > layer_of("sparkcep.runners.spark.session")


def test_plan_imports_no_engine():
    graph = import_graph()
    named = {
        mod: sorted(d for d in deps if d.startswith("sparkcep.engines"))
        for mod, deps in graph.items()
        if mod.startswith("sparkcep.plan")
    }
    assert {mod: deps for mod, deps in named.items() if deps} == {}
