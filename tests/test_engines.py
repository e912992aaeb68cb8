"""Every registered engine passes the shipped conformance suite (`sparkcep.checks`), on its
own example queries and on random streams and queries (hypothesis), as River's
test_estimators runs check_estimator over every estimator. The runners and the CLI name
no engine: a test reads their imports."""

from __future__ import annotations

import ast as pyast
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from ayac_strategies import ayac_queries
from episode_strategies import episode_queries
from helpers import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from imprecise_strategies import interval_queries
from mr_strategies import funnel_queries, mr_queries
from ses_strategies import all_queries, ses_queries, windowed_queries
from strategies import agg_queries, queries, streams
from strategies import events_frame as frame

from sparkcep import QueryError
from sparkcep.checks import check_engine, compile_one, yield_checks
from sparkcep.engines.registry import engines
from sparkcep.errors import DataError, SparkcepError
from sparkcep.plan import Options

ENGINES = engines()
SRC = Path(__file__).parent.parent / "src" / "sparkcep"
# Random queries for each engine (an engine that is not listed runs its examples only).
QUERY_STRATEGIES = {
    "nfa": queries,
    "aseq": agg_queries,
    "twostep": agg_queries,
    "ayac": ayac_queries,
    "ses": ses_queries,
    "jointree": all_queries,
    "nfa-windows": windowed_queries,
}
QUERY_STRATEGIES["episodes"] = episode_queries  # tofel, directmatch: tests/test_episodes.py
QUERY_STRATEGIES["imprecise"] = interval_queries
QUERY_STRATEGIES["match_recognize"] = lambda: mr_queries(allow_runtime_errors=False)
QUERY_STRATEGIES["funnel"] = funnel_queries


@pytest.mark.parametrize("name", list(ENGINES))
def test_engine_passes_the_suite_on_its_examples(name):
    engine = ENGINES[name]
    assert engine.examples, f"{name} lists no example queries for the suite"
    # One random stream per example query (HYPOTHESIS_SCALE=3: three, as check_engine's
    # default); the random-query test below feeds each engine many more streams.
    check_engine(engine, seeds=examples(1))


@pytest.mark.parametrize("name", [n for n in ENGINES if n in QUERY_STRATEGIES])
# 25 examples an engine (60 before: 194 s for 11 engines, now ~50 s in all; each example
# runs the 7 checks, ~30 calls of the program); HYPOTHESIS_SCALE searches wider.
@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_engine_passes_the_suite_on_random_queries(name, data):
    events = frame(data.draw(streams()))
    query = data.draw(QUERY_STRATEGIES[name]())
    try:
        program = compile_one(query, events, Options(id_col="id", algorithm=name))
    except QueryError:
        return
    for check in yield_checks(ENGINES[name]):
        check(program, events)


def test_every_engine_is_registered_once_by_name():
    named = {"nfa", "aseq", "twostep", "imprecise", "ayac", "ses", "jointree", "nfa-windows"}
    named |= {"episodes", "tofel", "directmatch", "match_recognize", "funnel"}
    assert set(ENGINES) >= named
    assert all(engine.name == name for name, engine in ENGINES.items())


def test_the_registry_imports_an_engine_only_when_a_query_needs_it():
    """Names come from the table; a query the first engine answers imports no other
    engine package (a fresh interpreter: this one has imported them all)."""
    packages = sorted(p.name for p in (SRC / "engines").iterdir() if (p / "__init__.py").exists())
    code = (
        "import sys\n"
        "from sparkcep.engines.registry import choose, names\n"
        "from sparkcep.plan import analyze\n"
        f"packages = {packages!r}\n"
        "listed = names()\n"
        "loaded = lambda: sorted(p for p in packages if 'sparkcep.engines.' + p in sys.modules)\n"
        "before = loaded()\n"
        "choose(analyze('PATTERN SEQ(A a, B b) WITHIN 3'))\n"
        "print(len(listed), before, loaded())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split(maxsplit=1) == [str(len(ENGINES)), "[] ['nfa']\n"]


def test_an_unknown_algorithm_names_the_known_ones():
    from sparkcep.engines.registry import choose
    from sparkcep.plan import analyze

    plan = analyze("PATTERN SEQ(A a, B b) WITHIN 3", options=Options(algorithm="fastest"))
    with pytest.raises(SparkcepError, match=r"unknown algorithm 'fastest' \(known: nfa, aseq, "):
        choose(plan)


def test_trailing_negation_waits_for_the_window():
    # SEQ(A a, !X x) WITHIN 5: a at 1 is final once time reaches 6 without an X.
    events = frame(
        [
            {"id": 0, "type": "A", "ts": 1, "v": 0, "k": 0, "seq": 0},
            {"id": 1, "type": "A", "ts": 3, "v": 0, "k": 0, "seq": 0},
            {"id": 2, "type": "X", "ts": 7, "v": 0, "k": 0, "seq": 0},
            {"id": 3, "type": "B", "ts": 9, "v": 0, "k": 0, "seq": 0},
        ]
    )
    program = compile_one("PATTERN SEQ(A a, !X x) WITHIN 5", events)
    state = program.new_state()
    assert len(program.process(state, events.iloc[:2])) == 0  # time 3: nothing is final yet
    out = program.process(state, events.iloc[2:3])  # 7 passes 1 + 5; the X at 7 kills a at 3
    assert out["a"].tolist() == [0]
    assert len(program.process(state, events.iloc[3:])) == 0
    assert len(program.flush(state)) == 0
    # The same through advance: time 6 closes a's window, with nothing after a yet.
    state = program.new_state()
    program.process(state, events.iloc[:2])
    assert program.advance(state, 6)["a"].tolist() == [0]


@pytest.mark.parametrize("name", ["nfa", "aseq"])
def test_every_engine_rejects_out_of_order_batches_the_same_way(name):
    events = frame(
        [
            {"id": 0, "type": "A", "ts": 5, "v": 0, "k": 0, "seq": 0},
            {"id": 1, "type": "A", "ts": 3, "v": 0, "k": 0, "seq": 0},
        ]
    )
    query = "PATTERN SEQ(A a) WITHIN 3" + (" AGG COUNT" if name == "aseq" else "")
    program = compile_one(query, events)
    state = program.new_state()
    program.process(state, events.iloc[:1])
    with pytest.raises(DataError, match="time order"):
        program.process(state, events.iloc[1:])


def test_declared_output_matches_the_rows_of_both_engines():
    events = frame(
        [{"id": i, "type": "AB"[i % 2], "ts": i, "v": i, "k": 0, "seq": 0} for i in range(6)]
    )
    for query in (
        "PATTERN SEQ(A a, B b) WITHIN 3 RETURN a.v AS x",
        "PATTERN SEQ(A a, B b) AGG COUNT, SUM(a.v) AS s WITHIN 3",
    ):
        program = compile_one(query, events)
        out = program.run(events)
        assert list(out.columns) == [c.name for c in program.output]
        assert len(out) > 0


# ---- the runners know no engine ------------------------------------------------------------

ENGINE_PACKAGES = tuple(
    "sparkcep.engines." + p.name
    for p in (SRC / "engines").iterdir()
    if p.is_dir() and (p / "__init__.py").exists()
)


def _imports(path: Path) -> set[str]:
    tree = pyast.parse(path.read_text())
    names = set()
    for node in pyast.walk(tree):
        if isinstance(node, pyast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, pyast.Import):
            names.update(alias.name for alias in node.names)
    return names


@pytest.mark.parametrize(
    "path",
    [
        *sorted((SRC / "runners").rglob("*.py")),
        SRC / "cli.py",
        SRC / "explanation.py",
        SRC / "api.py",
    ],
    ids=lambda p: str(p.relative_to(SRC)),
)
def test_runners_cli_and_explain_import_no_engine(path):
    named = [m for m in _imports(path) if m.startswith(ENGINE_PACKAGES)]
    assert not named, f"{path.name} imports {named}: go through sparkcep.engines.registry"
    text = path.read_text()
    for engine in ENGINES:
        assert f'"{engine}"' not in text, f"{path.name} branches on the engine '{engine}'"


def test_kernels_never_import_pyspark():
    for path in [
        *(SRC / "engines").rglob("*.py"),
        *(SRC / "prep").rglob("*.py"),
        *(SRC / "plan").rglob("*.py"),
    ]:
        assert not any(m.startswith("pyspark") for m in _imports(path)), path


def test_empty_frame_has_the_declared_kinds():
    events = frame([{"id": 0, "type": "A", "ts": 1, "v": 1.0, "k": 0, "seq": 0}])
    program = compile_one("PATTERN SEQ(A a, B b) WITHIN 3 RETURN a.v AS x", events)
    empty = program.run(events.iloc[:0])
    assert list(empty.columns) == ["start", "end", "a", "b", "x"]
    assert isinstance(empty, pd.DataFrame) and empty["x"].dtype == "float64"


# ---- a program's row checks send rows to the rejected output, in every runner --------------


@pytest.fixture
def checked_engine():
    """An engine defined here, not in src/ (the nfa program with one row check: v must
    not be negative), registered for the test: every runner runs it by its name."""
    from sparkcep.engines.base import Engine, RowCheck
    from sparkcep.engines.nfa import NfaProgram
    from sparkcep.engines.registry import register, unregister
    from sparkcep.language import ast as qast

    class CheckedProgram(NfaProgram):
        def row_checks(self):
            holds = qast.BinOp(">=", qast.AttrRef("e", "v"), qast.Literal(0))
            return (RowCheck(holds, "v is negative"),)

    class CheckedEngine(Engine):
        name = "checked-nfa"

        def reason(self, plan):
            return None

        def compile(self, plans, names, options):
            return CheckedProgram(plans, names, options)

    register(CheckedEngine())
    yield "checked-nfa"
    unregister("checked-nfa")


ROWS = [
    {"id": 0, "type": "A", "ts": 1, "v": 1.0},
    {"id": 1, "type": "B", "ts": 2, "v": -5.0},
    {"id": 2, "type": "B", "ts": 3, "v": 2.0},
    {"id": 3, "type": "B", "ts": 4, "v": None},
]


def test_row_checks_reject_rows_locally(checked_engine):
    from sparkcep import run_local

    result = run_local(
        pd.DataFrame(ROWS), "PATTERN SEQ(A a, B b) WITHIN 9", algorithm=checked_engine
    )
    assert result.matches["b"].tolist() == [2]
    assert result.rejected["id"].tolist() == [1, 3]
    assert result.rejected["reason"].tolist() == ["v is negative"] * 2


@pytest.mark.spark
def test_row_checks_reject_rows_in_spark(spark, checked_engine):
    from sparkcep.runners.spark.batch import run

    result = run(
        spark.createDataFrame(pd.DataFrame(ROWS)),
        "PATTERN SEQ(A a, B b) WITHIN 9",
        algorithm=checked_engine,
    )
    assert result.rows.toPandas()["b"].tolist() == [2]
    rejected = result.rejected.toPandas().sort_values("id")
    assert rejected["id"].tolist() == [1, 3]
    assert set(rejected["reason"]) == {"v is negative"}
    assert result.checked.rejected_count == 2


@pytest.mark.spark
def test_row_checks_reject_rows_in_a_stream(spark, tmp_path, checked_engine):
    from sparkcep.runners.streaming import read_stream, start, stream

    folder = tmp_path / "in"
    folder.mkdir()
    pd.DataFrame(ROWS).to_csv(folder / "part-000.csv", index=False)
    # a later event moves the watermark past the window: the match is out before the end
    later = pd.DataFrame([{"id": 4, "type": "Z", "ts": 86_400_000, "v": 0.0}])
    later.to_csv(folder / "part-001.csv", index=False)
    os.utime(folder / "part-000.csv", (1, 1))  # read first (Spark goes by modification time)
    source = read_stream(spark, str(folder), max_files=1)
    query = "PATTERN SEQ(A a, B b) WITHIN 9"
    result = stream(source, query, id_col="id", algorithm=checked_engine)
    running, _ = start(
        result, output=str(tmp_path / "out"), late=str(tmp_path / "late"),
        rejected=str(tmp_path / "rej"), checkpoint=str(tmp_path / "ckpt"), trigger="available-now",
    )  # fmt: skip
    running.awaitTermination()
    matches = _json_rows(tmp_path / "out")
    rejected = sorted(_json_rows(tmp_path / "rej"), key=lambda r: r["id"])
    assert [m["b"] for m in matches] == [2]
    assert [r["id"] for r in rejected] == ["1", "3"]  # as the file holds them, as in a batch run
    assert {r["reason"] for r in rejected} == {"v is negative"}


def _json_rows(folder: Path) -> list[dict]:
    return [
        json.loads(line)
        for path in sorted(folder.glob("*.jsonl"))
        for line in path.read_text().splitlines()
        if line
    ]


def test_queries_run_together_may_not_give_one_column_two_types():
    from sparkcep.runners.local import run_local

    events = [{"type": "A", "ts": 1, "v": 2}, {"type": "B", "ts": 2, "v": 3}]
    text = (
        "QUERY q1: PATTERN SEQ(A a, B b) WITHIN 5 RETURN a.v AS x;\n"
        "QUERY q2: PATTERN SEQ(A a, B b)\n  WITHIN 5 RETURN a.type AS x;"
    )
    with pytest.raises(QueryError, match="the column 'x' different types") as raised:
        run_local(events, text)
    # It points at q2's RETURN item (line 2 of q2's text) and names both queries.
    assert (raised.value.line, raised.value.column) == (2, 19)
    assert "(in q2 and q1)" in raised.value.message
    assert str(raised.value).splitlines()[1:] == [
        "    WITHIN 5 RETURN a.type AS x",
        "                    ^^^^^^^^^^^",
    ]
    # A Kleene variable and a single one of one name: at the variable of the later query.
    text = "QUERY q1: PATTERN SEQ(A a, B+ x[]) WITHIN 5;\nQUERY q2: PATTERN SEQ(A a, B x) WITHIN 5;"
    with pytest.raises(QueryError, match="the column 'x' different types") as raised:
        run_local(events, text)
    assert (raised.value.line, raised.value.column) == (1, 18)


def test_queries_of_different_programs_may_not_give_one_column_a_list_and_a_value():
    """Queries with other keys run in other programs, whose rows still make one table: a
    Kleene variable in one and a single one of one name in the other is the query error
    (pandas would mix lists and numbers in one column; Spark could not union them)."""
    from sparkcep.runners.local import run_local

    events = [{"type": "A", "ts": 1, "k": 0}, {"type": "B", "ts": 2, "k": 0}]
    text = (
        "QUERY q1: PATTERN SEQ(A a, B+ b[]) WHERE [k] WITHIN 5;\n"
        "QUERY q2: PATTERN SEQ(A a, B b) WITHIN 5;"
    )
    with pytest.raises(QueryError, match="the column 'b' different types") as raised:
        run_local(events, text)
    assert "(in q2 and q1)" in raised.value.message
    assert (raised.value.line, raised.value.column) == (1, 18)  # q2's variable b


def test_queries_run_together_keep_each_column_type():
    """A query's columns are null in another query's rows, lists and exact integers alike
    (pandas alone would make the ids floats and the list NaN)."""
    from sparkcep.runners.local import run_local

    big = 2**53 + 1  # not a float64
    events = [
        {"type": "A", "ts": 1, "id": big},
        {"type": "B", "ts": 2, "id": big + 2},
        {"type": "C", "ts": 3, "id": big + 4},
    ]
    text = "QUERY q1: PATTERN SEQ(A a, B+ b[]) WITHIN 5;\nQUERY q2: PATTERN SEQ(A a, C c) WITHIN 5;"
    rows = run_local(events, text, id_col="id").matches
    assert rows["query"].tolist() == ["q1", "q2"]
    assert rows["b"].tolist() == [[big + 2], None]
    assert rows["c"].tolist() == [pd.NA, big + 4]
    assert rows["c"].dtype == "Int64"
