"""`mine-rules --shapes parallel|dag`: predicates that are partial orders, mined by
minimal occurrences (docs/episodes.md, "Parallel and DAG predicates").

- the mined predicates, their supports and rules equal a brute-force oracle that
  enumerates every episode of up to three symbols over ABC and counts its minimal
  occurrences over every interval of instants, straight from the definitions;
- a worked example by hand (a diamond, a parallel pair, ties);
- mined rules run through the engine: its predictions are the oracle's minimal
  occurrences, and as many hold as the miner counted;
- serial mining is unchanged and a subset of dag mining; the cap says when it cuts.
"""

from __future__ import annotations

import itertools

import pandas as pd
import pytest
from hypothesis import event, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from sparkcep import run_local
from sparkcep.cli import app
from sparkcep.plan import Options
from sparkcep.runners.jobs.mining import MiningSettings, mine_rules, rule_kernel, rules_file

ALPHABET = "ABC"
MARK = "\x1e"  # a non-serial key's edges element (dag_mining.ORDER)


# ---- the oracle: episodes and minimal occurrences from the definitions ------------------


def posets(symbols) -> list[frozenset]:
    """Every strict partial order on `symbols`: sets of pairs (a, b), a before b."""
    pairs = [(a, b) for a in symbols for b in symbols if a != b]
    out = []
    for n in range(len(pairs) + 1):
        for chosen in itertools.combinations(pairs, n):
            rel = set(chosen)
            if any((b, a) in rel for a, b in rel):
                continue
            if any((a, d) not in rel for a, b in rel for c, d in rel if b == c and a != d):
                continue
            out.append(frozenset(rel))
    return out


def all_episodes(alphabet=ALPHABET, most=3) -> list[tuple[frozenset, frozenset]]:
    return [
        (frozenset(group), order)
        for size in range(1, most + 1)
        for group in itertools.combinations(alphabet, size)
        for order in posets(group)
    ]


def decode(key) -> tuple[frozenset, frozenset]:
    """A mined predicate (a tuple: serial symbols, or symbols + MARK edges) as the
    oracle's (symbols, closed order)."""
    if key[-1].startswith(MARK):
        names = key[:-1]
        rel = set()
        for edge in filter(None, key[-1][1:].split(",")):
            u, v = edge.split("<")
            rel.add((names[int(u)], names[int(v)]))
    else:
        names, rel = key, set(itertools.pairwise(key))
    while True:
        more = {(a, d) for a, b in rel for c, d in rel if b == c} - rel
        if not more:
            return frozenset(names), frozenset(rel)
        rel |= more


def instants(events):
    """Events (symbol, tick), sorted by tick, with each one's instant (rank of its tick)."""
    ticks = sorted({t for _, t in events})
    return [(s, t, ticks.index(t)) for s, t in sorted(events, key=lambda e: e[1])], ticks


def occurs(episode, ranked, lo, hi) -> bool:
    """An occurrence within instants [lo, hi]: one event per symbol, each ordered pair at
    increasing instants (unordered ones anywhere, one instant too)."""
    symbols, order = episode
    names = sorted(symbols)
    choices = [[r for s, _, r in ranked if s == name and lo <= r <= hi] for name in names]
    for combo in itertools.product(*choices):
        at = dict(zip(names, combo))
        if all(at[a] < at[b] for a, b in order):
            return True
    return False


def minimal_occurrences(episode, events, window) -> list[tuple[int, int]]:
    """Every interval of instants [i, j] within the window that holds an occurrence when
    no proper sub-interval does (checking [i+1, j] and [i, j-1] is enough: a
    sub-interval of those holds none either): as (start tick, end tick)."""
    ranked, ticks = instants(events)
    out = []
    for i, j in itertools.combinations_with_replacement(range(len(ticks)), 2):
        if ticks[j] - ticks[i] >= window or not occurs(episode, ranked, i, j):
            continue
        if not occurs(episode, ranked, i + 1, j) and not occurs(episode, ranked, i, j - 1):
            out.append((ticks[i], ticks[j]))
    return out


def is_serial(episode) -> bool:
    n = len(episode[0])
    return len(episode[1]) == n * (n - 1) // 2


def has_shape(episode, shapes) -> bool:
    if shapes == "parallel":
        return not episode[1]
    return shapes == "dag" or is_serial(episode)


def without(episode, symbol):
    symbols, order = episode
    return symbols - {symbol}, frozenset(p for p in order if symbol not in p)


def oracle(events, *, window, rule_window, min_support, min_confidence, shapes, most=3):
    """(support of each mined predicate, rules {(predicate, consequent, support, hits)}).
    Mined: a frequent single symbol; a frequent serial episode whose prefix is mined
    and whose last symbol is frequent; any other frequent episode of the shapes when
    every sub-episode with one symbol less is mined (support by minimal occurrences can
    grow when a symbol is added to a parallel episode: B A B A B has four minimal
    occurrences of {A, B} and two of A)."""
    symbols = sorted({s for s, _ in events})
    mos = {e: minimal_occurrences(e, events, window) for e in all_episodes(symbols, most)}
    mined: set = set()
    for size in range(1, most + 1):
        for ep, occ in mos.items():
            if len(ep[0]) != size or len(occ) < min_support or not has_shape(ep, shapes):
                continue
            if size == 1:
                ok = True
            elif is_serial(ep):
                last = next(s for s in ep[0] if not any(a == s for a, _ in ep[1]))
                ok = without(ep, last) in mined and (frozenset([last]), frozenset()) in mined
            else:
                ok = all(without(ep, s) in mined for s in ep[0])
            if ok:
                mined.add(ep)
    rules = set()
    for ep in mined:
        occ = mos[ep]
        for y in symbols:
            hits = sum(
                any(te < t < ts + rule_window for s, t in events if s == y) for ts, te in occ
            )
            if hits and hits / len(occ) >= min_confidence:
                rules.add((ep, y, len(occ), hits))
    return {ep: len(mos[ep]) for ep in mined}, rules


# ---- the miner, over one partition --------------------------------------------------


def mine(events, *, window, rule_window, min_support, min_confidence, shapes, cap=10_000):
    kernel = rule_kernel()
    frame = pd.DataFrame(events, columns=["symbol", "tick"])
    part = kernel.partition(frame, "symbol", "tick")

    def count(candidates):
        candidates = candidates or [(x,) for x in part.index]
        return kernel.count_rules(
            part, candidates, window=window, rule_window=rule_window, consequents=None
        )

    return kernel.mine(
        count, min_support=min_support, min_confidence=min_confidence, max_length=3,
        max_candidates=cap, shapes=shapes,
    )  # fmt: skip


def streams(least=1, most=11):
    """(symbol, tick) lists; gaps of 0 put events at one instant."""
    gaps = st.sampled_from([0, 0, 1, 2, 3])
    return st.lists(st.tuples(st.sampled_from(ALPHABET), gaps), min_size=least, max_size=most).map(
        lambda xs: [(s, sum(g for _, g in xs[: i + 1])) for i, (s, _) in enumerate(xs)]
    )


@settings(max_examples=300, deadline=None)
@given(
    events=streams(),
    window=st.integers(1, 7),
    rule_window=st.integers(1, 9),
    min_support=st.integers(1, 3),
    min_confidence=st.sampled_from([0.3, 0.5, 1.0]),
    shapes=st.sampled_from(["serial", "parallel", "dag"]),
)
# C -> A with B anywhere has two minimal occurrences here, C -> A one: Apriori leaves
# it out (the break of that rule fails here).
@example(
    events=[("C", 1), ("B", 1), ("A", 1), ("C", 3), ("A", 6), ("B", 8), ("A", 11), ("B", 13)],
    window=7, rule_window=2, min_support=2, min_confidence=0.5, shapes="dag",
)  # fmt: skip
def test_mined_predicates_supports_and_rules_equal_the_oracle(
    events, window, rule_window, min_support, min_confidence, shapes
):
    thresholds = dict(window=window, rule_window=rule_window, min_support=min_support,
                      min_confidence=min_confidence, shapes=shapes)  # fmt: skip
    found = mine(events, **thresholds)
    support, rules = oracle(events, **thresholds)
    assert {decode(k): n for k, n in found.support.items()} == support
    got = {(decode(r.predicate), r.consequent, r.support, r.hits) for r in found.rules}
    assert got == rules
    assert not found.capped


# ---- by hand --------------------------------------------------------------------------

# W and X in either order, or at one time, then Y; Z follows. At 30, W and Y without X.
HAND = [("W", 0), ("X", 1), ("Y", 2), ("Z", 4), ("X", 10), ("W", 11), ("Y", 12), ("Z", 13),
        ("W", 20), ("X", 20), ("Y", 21), ("Z", 23), ("W", 30), ("Y", 31)]  # fmt: skip
DIAMOND = ("W", "X", "Y", MARK + "0<2,1<2")  # W -> Y, X -> Y


def test_a_worked_example_by_hand():
    kernel = rule_kernel()
    part = kernel.partition(pd.DataFrame(HAND, columns=["symbol", "tick"]), "symbol", "tick")

    def ticks(key):
        if key[-1].startswith(MARK):
            occ = kernel.dag_minimal_occurrences(part, kernel.Episode.from_key(key), 5)
        else:
            occ = kernel.minimal_occurrences(part, key, 5)
        return list(zip(occ.start_tick.tolist(), occ.end_tick.tolist()))

    # The diamond ends at Y: at 2 (W 0, X 1), 12 (X 10, W 11), 21 (both at 20); at 31
    # the latest X is at 20, 11 ticks back: not within 5.
    assert ticks(DIAMOND) == [(0, 2), (10, 12), (20, 21)]
    # Serial ones see one order each; W and X at 20 are at one instant, in no order.
    assert ticks(("W", "X", "Y")) == [(0, 2)]
    assert ticks(("X", "W", "Y")) == [(10, 12)]
    # Parallel {W, X}: one minimal occurrence in a single instant (20).
    assert ticks(("W", "X", MARK)) == [(0, 1), (10, 11), (20, 20)]
    assert ticks(("W", "X")) == [(0, 1)] and ticks(("X", "W")) == [(10, 11)]

    found = mine(HAND, window=5, rule_window=6, min_support=3, min_confidence=1.0, shapes="dag")
    rules = {(r.predicate, r.consequent): (r.support, r.hits) for r in found.rules}
    # Z in (2, 6), (12, 16), (21, 26): all three predictions hold.
    assert rules[DIAMOND, "Z"] == (3, 3)
    assert rules[("W", "X", MARK), "Z"] == (3, 3)
    serial = mine(HAND, window=5, rule_window=6, min_support=3, min_confidence=1.0,
                  shapes="serial")  # fmt: skip
    assert not [r for r in serial.rules if len(r.predicate) > 1 and "W" in r.predicate
                and "X" in r.predicate]  # fmt: skip
    text = kernel.rules_text([r for r in found.rules if r.predicate == DIAMOND], window="5",
                             rule_window="6")  # fmt: skip
    assert "EPISODE ('W' v1, 'X' v2, 'Y' v3; v1 -> v3, v2 -> v3) WITHIN 5 PREDICT 'Z'" in text


def test_events_at_one_instant_are_unordered():
    """Equal times (and equal tie-break values) make one instant: a parallel episode
    occurs in it, a serial one does not; a tie-break column orders them."""
    kernel = rule_kernel()
    frame = pd.DataFrame({"symbol": ["A", "B"], "tick": [5, 5], "seq": [1, 2]})
    part = kernel.partition(frame, "symbol", "tick")
    both = kernel.dag_minimal_occurrences(part, kernel.Episode.of("AB", []), 1)
    assert (both.start_tick.tolist(), both.end_tick.tolist()) == ([5], [5])
    assert not len(kernel.minimal_occurrences(part, ("A", "B"), 1).end)
    ordered = kernel.partition(frame, "symbol", "tick", "seq")
    assert len(kernel.minimal_occurrences(ordered, ("A", "B"), 1).end) == 1
    both = kernel.dag_minimal_occurrences(ordered, kernel.Episode.of("AB", []), 1)
    assert (both.start.tolist(), both.end.tolist()) == ([0], [1])


def test_support_of_a_parallel_episode_can_exceed_its_parts():
    """Why the search cannot promise every frequent parallel episode: B A B A B has four
    minimal occurrences of {A, B}, and only two of A and three of B."""
    events = list(zip("BABAB", range(5)))
    assert len(minimal_occurrences(({"A", "B"}, frozenset()), events, 5)) == 4
    found = mine(events, window=5, rule_window=2, min_support=4, min_confidence=0.1,
                 shapes="dag")  # fmt: skip
    assert found.support == {}


# ---- through the engine -----------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(events=streams(5, 9), window=st.integers(2, 6))
def test_mined_dag_rules_run_through_the_engine_as_the_oracle_says(events, window):
    """The engine reports one prediction per minimal occurrence of each mined rule (the
    oracle's intervals), and as many of them hold as the miner counted."""
    kernel = rule_kernel()
    found = mine(events, window=window, rule_window=window + 2, min_support=1,
                 min_confidence=0.3, shapes="dag")  # fmt: skip
    if not found.rules:
        return
    event(f"non-serial rules: {any(r.predicate[-1].startswith(MARK) for r in found.rules)}")
    text = kernel.rules_text(found.rules, window=str(window), rule_window=str(window + 2))
    frame = pd.DataFrame(events, columns=["type", "ts"])
    matches = run_local(frame, text).matches
    if "query" not in matches.columns:  # one rule: rows without its name
        matches = matches.assign(query="m1")
    ordered = sorted(found.rules, key=lambda r: (-r.confidence, -r.support, r.predicate,
                                                 r.consequent))  # fmt: skip
    for i, rule in enumerate(ordered, start=1):
        rows = matches[matches["query"] == f"m{i}"]
        got = sorted(zip(rows["t_s"].tolist(), rows["t_e"].tolist()))
        assert got == minimal_occurrences(decode(rule.predicate), events, window), rule
        held = sum(
            any(after < t < before for s, t in events if s == rule.consequent)
            for after, before in zip(rows["after"], rows["before"])
        )
        assert held == rule.hits and len(rows) == rule.support, rule


def test_the_command_mines_dag_rules_that_sparkcep_run_answers(tmp_path):
    """mine-rules --shapes dag writes the diamond; `sparkcep run` on the file predicts Z
    after each of its three minimal occurrences. Serial mining's rules are the same with
    --shapes serial as before, and each of them is among the dag rules."""
    pd.DataFrame(HAND, columns=["type", "ts"]).to_csv(tmp_path / "h.csv", index=False)
    runner = CliRunner()
    common = ["--input", str(tmp_path / "h.csv"), "--window", "5", "--rule-window", "6",
              "--min-support", "3", "--min-confidence", "1.0", "--local"]  # fmt: skip
    files = {}
    for shapes in ("serial", "dag"):
        files[shapes] = tmp_path / f"{shapes}.cep"
        result = runner.invoke(
            app, ["mine-rules", *common, "--output", str(files[shapes]), "--shapes", shapes]
        )
        assert result.exit_code == 0, result.output
    dag = files["dag"].read_text()
    line = next(x for x in dag.splitlines() if "v1 -> v3, v2 -> v3" in x and "'Z'" in x)
    name = line.split()[1].rstrip(":")
    out = tmp_path / "out.jsonl"
    result = runner.invoke(app, ["run", str(files["dag"]), "-i", str(tmp_path / "h.csv"),
                                 "-o", str(out), "--local", "--query", name])  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = pd.read_json(out, lines=True)
    assert sorted(zip(rows["t_s"], rows["t_e"])) == [(0, 2), (10, 12), (20, 21)]

    def bodies(text):  # rules without their names
        return {x.split(":", 1)[1] for x in text.splitlines() if x.startswith("RULE")}

    assert bodies(files["serial"].read_text()) <= bodies(dag)
    history = pd.read_csv(tmp_path / "h.csv")
    job = MiningSettings(window="5", rule_window="6", min_support=3, min_confidence=1.0)
    before, job = mine_rules(history, job, Options())  # the job's serial mining, as it was
    assert files["serial"].read_text() == rules_file(before, job)
    result = runner.invoke(app, ["mine-rules", *common, "--output", str(tmp_path / "x.cep"),
                                 "--shapes", "dag", "--max-candidates", "2"])  # fmt: skip
    assert result.exit_code == 0 and "--max-candidates" in result.output
    assert runner.invoke(app, ["mine-rules", *common, "--shapes", "tree"]).exit_code != 0


@pytest.mark.slow
@pytest.mark.spark
def test_spark_mines_the_same_dag_rules_as_pandas(spark, tmp_path):
    """Non-serial predicates travel through the Spark job's rows (symbols joined by the
    kernel's SEP, the edges element last) and come back the same."""
    frame = pd.DataFrame(HAND * 3, columns=["type", "ts"])
    frame["ts"] += [40 * (i // len(HAND)) for i in range(len(frame))]
    frame.to_csv(tmp_path / "h.csv", index=False)
    texts = []
    for where in (["--local"], []):  # pandas, then Spark (the session of `spark`)
        out = tmp_path / f"{len(texts)}.cep"
        result = CliRunner().invoke(
            app,
            ["mine-rules", "--input", str(tmp_path / "h.csv"), "--output", str(out),
             "--window", "5", "--rule-window", "6", "--min-support", "3", "--shapes", "dag",
             *where],
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        texts.append(out.read_text())
    assert texts[0] == texts[1] and "v1 -> v3, v2 -> v3" in texts[0]
