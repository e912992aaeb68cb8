"""`run --count` (issue 16 §5): the local runner counts the rows without building them
where a program can (`Program.count`), and the number is always `len(rows)` of the run
that builds them: several queries together, `max_matches`, AFTER MATCH SKIP, OUTPUT
TIMEOUTS, AGG rows, Kleene, keys. The conformance suite checks `count` for every engine
(sparkcep.checks); these tests check the runner's sum and cap over random streams."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
from helpers import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import agg_queries, queries, streams
from strategies import events_frame as frame

from sparkcep import QueryError
from sparkcep.plan import Options
from sparkcep.runners.local import execute_local

SETTINGS = settings(
    max_examples=examples(40),  # pure Python, ~75 ms an example: 60 took 5 s each
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# One of each case the engines have, each alone and some together.
CASES = [
    "PATTERN SEQ(A a, B b, C c) WITHIN 5",
    "PATTERN SEQ(A a, B+ b[], C c) WHERE [k] AND prev(b.v) <= b.v WITHIN 6",
    "PATTERN SEQ(A a, B b, !C x) WHERE [k] WITHIN 4",
    "PATTERN SEQ(A a, B b) STRATEGY SKIP_TILL_NEXT_MATCH WITHIN 4",
    "PATTERN SEQ(A a, B+ b[]) WHERE [k] WITHIN 5 AFTER MATCH SKIP PAST LAST EVENT",
    "PATTERN SEQ(A a, B b) WITHIN 5 AFTER MATCH SKIP TO NEXT EVENT",
    "PATTERN SEQ(A a, B b, C c) WHERE [k] WITHIN 4 OUTPUT TIMEOUTS",
    "PATTERN SEQ(A a, B b) GROUP BY k AGG COUNT, SUM(b.v) AS s WITHIN 5",
    "QUERY x: PATTERN SEQ(A a, B b) WITHIN 4; QUERY y: PATTERN SEQ(A a, C c, !D d) WITHIN 4;"
    " QUERY z: PATTERN SEQ(B b, C c) AGG COUNT WITHIN 3;",
    "QUERY p: PATTERN SEQ(A a, B b) WHERE [k] WITHIN 6; QUERY q: PATTERN SEQ(C c, D d) WITHIN 6;",
]


def counted_and_built(events: pd.DataFrame, query: str, cap: int | None) -> tuple[int, int]:
    """(the count of the counting run, the rows of the run that builds them)."""
    options = Options(id_col="id", max_matches=cap)
    counted = execute_local(events, query, options, count_only=True)
    built = execute_local(events, query, options)
    assert counted.matches is None and built.counted is None
    assert counted.warnings == built.warnings and len(counted.rejected) == len(built.rejected)
    return counted.row_count, len(built.matches)


@SETTINGS
@given(
    events=streams(max_events=14),
    query=st.sampled_from(CASES),
    cap=st.one_of(st.none(), st.integers(1, 6)),
)
def test_count_is_the_number_of_rows_in_every_case(events, query, cap):
    counted, built = counted_and_built(frame(events), query, cap)
    assert counted == built


@SETTINGS
@given(data=st.data(), cap=st.one_of(st.none(), st.integers(1, 6)))
def test_count_is_the_number_of_rows_of_random_queries(data, cap):
    events = frame(data.draw(streams()))
    texts = data.draw(st.lists(st.one_of(queries(), agg_queries()), min_size=1, max_size=3))
    query = (
        " ".join(f"QUERY q{i}: {t};" for i, t in enumerate(texts)) if len(texts) > 1 else texts[0]
    )
    try:
        counted, built = counted_and_built(events, query, cap)
    except QueryError:
        return
    assert counted == built


def test_count_of_a_hand_computed_stream():
    """A1 B2 C3 B4 C5, SEQ(A, B, C) WITHIN 10 (skip-till-any): (A1 B2 C3), (A1 B2 C5),
    (A1 B4 C5); capped at 2, two."""
    events = pd.DataFrame({"type": list("ABCBC"), "ts": [1, 2, 3, 4, 5], "id": range(5)})
    query = "PATTERN SEQ(A a, B b, C c) WITHIN 10"
    assert execute_local(events, query, Options(), count_only=True).row_count == 3
    capped = execute_local(events, query, Options(max_matches=2), count_only=True)
    assert capped.row_count == 2 and capped.matches is None


def test_a_run_the_first_engine_answers_imports_no_other_engine():
    """The engines are imported as `choose` needs them: nfa, first in the order, answers
    a plain pattern, and no other engine package is imported, nor the SQL form's
    language (issue 16 §5: imports)."""
    code = (
        "import sys, pandas as pd; from sparkcep import run_local; "
        "e = pd.DataFrame({'type': ['A', 'B'], 'ts': [1, 2]}); "
        "assert len(run_local(e, 'PATTERN SEQ(A a, B b) WITHIN 5').matches) == 1; "
        "print(sorted({m.split('.')[2] for m in sys.modules if m.startswith('sparkcep.engines.')"
        " and m.count('.') >= 2})); "
        "print([m for m in sys.modules if m.endswith('match_recognize')])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    engines, sql = done.stdout.splitlines()
    # nfa and the modules every engine shares (the contract, the registry's table, the
    # output helpers); no other engine's package
    assert engines == "['arrays', 'base', 'nfa', 'output', 'registry', 'state']"
    assert sql == "[]"


def test_count_holds_no_matches_so_it_counts_past_the_memory_budget():
    """A run that builds rows stops at the memory budget; the count holds only the
    partial matches on the way, so it gives the number (pairs A before B within 50)."""
    import pytest

    from sparkcep.engines.nfa import TooManyMatches

    n = 400
    events = pd.DataFrame({"type": ["A", "B"] * (n // 2), "ts": range(n), "id": range(n)})
    query = "PATTERN SEQ(A a, B b) WITHIN 50"
    types = events["type"].tolist()
    pairs = sum(
        1
        for i in range(n)
        for j in range(i + 1, min(n, i + 50))
        if types[i] == "A" and types[j] == "B"
    )
    options = Options(id_col="id", memory_budget=300_000)
    with pytest.raises(TooManyMatches):
        execute_local(events, query, options)
    assert execute_local(events, query, options, count_only=True).row_count == pairs
    assert len(execute_local(events, query, Options(id_col="id")).matches) == pairs
