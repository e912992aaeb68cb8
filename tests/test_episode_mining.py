"""Rules from data: mining by minimal occurrences recovers the rules a stream was
generated from; the minimal occurrences agree with the oracle's; evaluate-rules counts
held predictions and recalled events by hand; the CLI and the Spark job."""

from __future__ import annotations

import random

import pandas as pd
import pytest
from episode_oracle import OracleRule, events_in_order, minimal, occurrences
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from sparkcep import run_local
from sparkcep.cli import app
from sparkcep.plan import Options
from sparkcep.runners.jobs.mining import (
    MiningSettings,
    evaluate_rules,
    mine_rules,
    overall,
    rule_kernel,
)

# Planted rules: A -> B predicts C; D predicts E; F -> G -> H predicts I (within 6 ticks,
# the consequent within 10 of the start), in noise of other symbols.
NOISE = "JKLMNOPQRSTUVWXYZ"
PLANTED = {(("A", "B"), "C"), (("D",), "E"), (("F", "G", "H"), "I")}


def planted_stream(n: int = 1500, seed: int = 1, keys: int = 1) -> pd.DataFrame:
    rng = random.Random(seed)
    rows, ts = [], 0
    while len(rows) < n:
        ts += 1
        roll = rng.random()
        if roll < 0.04:
            chain, then = ["A", "B"], "C"
        elif roll < 0.07:
            chain, then = ["D"], "E"
        elif roll < 0.10:
            chain, then = ["F", "G", "H"], "I"
        else:
            rows.append((ts, rng.choice(NOISE), rng.randrange(keys)))
            continue
        key = rng.randrange(keys)
        for symbol in chain:
            rows.append((ts, symbol, key))
            ts += rng.randint(1, 2)
        if rng.random() < 0.9:
            rows.append((ts + rng.randint(0, 2), then, key))
    frame = pd.DataFrame(rows, columns=["ts", "type", "road"])
    return frame.sort_values("ts", kind="stable").reset_index(drop=True)


def test_mining_recovers_the_planted_rules():
    events = planted_stream()
    mined, _ = mine_rules(
        events,
        MiningSettings(window="6", rule_window="10", min_support=20, min_confidence=0.7),
        Options(),
    )
    found = {(r.predicate, r.consequent): r for r in mined}
    for rule in PLANTED:
        assert rule in found, rule
        assert found[rule].confidence >= 0.8
    noise = [r for r in mined if r.consequent in NOISE]
    assert not noise, noise[:3]  # noise follows nothing


def test_mined_confidence_is_the_engines_precision_on_the_history(tmp_path):
    events = planted_stream(n=600, seed=3)
    settings = MiningSettings(window="6", rule_window="10", min_support=10, min_confidence=0.5)
    mined, settings = mine_rules(events, settings, Options())
    from sparkcep.runners.jobs.mining import rules_file

    text = rules_file(mined, settings)
    report = evaluate_rules(text, events, Options())
    by_rule = report.set_index("rule")
    for i, rule in enumerate(
        sorted(mined, key=lambda r: (-r.confidence, -r.support, r.predicate, r.consequent)),
        start=1,
    ):
        row = by_rule.loc[f"m{i}"]
        assert (row["predictions"], row["held"]) == (rule.support, rule.hits)


@settings(max_examples=30, deadline=None)
@given(
    kinds=st.lists(st.sampled_from("ABC"), min_size=1, max_size=12),
    gaps=st.lists(st.integers(0, 2), min_size=12, max_size=12),
    chain=st.permutations("ABC"),
    length=st.integers(1, 3),
    window=st.integers(1, 6),
)
def test_minimal_occurrences_of_serial_episodes_equal_the_oracle(
    kinds, gaps, chain, length, window
):
    kernel = rule_kernel()
    ts, rows = 0, []
    for i, kind in enumerate(kinds):
        ts += gaps[i]
        rows.append({"id": i, "type": kind, "ts": ts})
    predicate = tuple(chain[:length])
    part = kernel.partition(pd.DataFrame(rows), "type", "ts")
    mo = kernel.minimal_occurrences(part, predicate, window)
    got = sorted(zip(mo.start_tick.tolist(), mo.end_tick.tolist()))
    edges = tuple((j, j + 1) for j in range(length - 1))
    rule = OracleRule("r", predicate, edges, window, window)
    events = events_in_order(rows, lambda r: r["type"])
    expected = sorted(
        {(min(e.ts for e in o), max(e.ts for e in o)) for o in minimal(occurrences(rule, events))}
    )
    assert got == expected


def test_evaluate_counts_held_predictions_and_recalled_events():
    # A at 0 and 20 predict C within (0, 5) and (20, 25); C comes at 3 and 40.
    events = pd.DataFrame({"type": ["A", "C", "A", "C"], "ts": [0, 3, 20, 40]})
    rules = "RULE ac: EPISODE (A a) WITHIN 1 PREDICT C WITHIN 5;"
    report = evaluate_rules(rules, events, Options())
    row = report.iloc[0]
    assert (row["predictions"], row["held"], row["recalled"], row["consequents"]) == (2, 1, 1, 2)
    assert row["precision"] == 0.5 and row["recall"] == 0.5
    # chance: a 5-tick interval started uniformly in [0, 35] (the events' span [0, 40])
    # holds C at 3 when it starts before 3, C at 40 never: 3/35 for each prediction
    assert row["chance"] == pytest.approx(3 / 35)
    assert row["lift"] == pytest.approx(0.5 / (3 / 35))


def brute_chance(consequents, length, lo, hi, step=0.25):
    """The share of starts s on a grid of [lo, hi − L] (cell midpoints) whose interval
    (s, s + L) holds a consequent time: exact when every time is a multiple of step."""
    starts = [lo + (i + 0.5) * step for i in range(round((hi - length - lo) / step))]
    return sum(any(s < t < s + length for t in consequents) for s in starts) / len(starts)


def test_chance_and_lift_equal_brute_force_per_rule_and_overall():
    """Two partitions, two rules: each prediction's chance is that of its own interval
    length and its partition's consequents, against a brute-force placement."""
    events = pd.DataFrame(
        {
            "type": list("AECAEDCAECAEEC"),
            "ts": [0, 2, 3, 9, 11, 12, 20, 30, 33, 37, 5, 6, 14, 40],  # road 1, then road 2
            "road": [1] * 10 + [2] * 4,
        }
    )
    rules = (
        "RULE ac: EPISODE (A a) WHERE [road] WITHIN 1 PREDICT C WITHIN 6;"
        "RULE ec: EPISODE (A a, E e; a -> e) WHERE [road] WITHIN 4 PREDICT C WITHIN 7;"
    )
    report = evaluate_rules(rules, events, Options()).set_index("rule")
    predicted = run_local(events, rules).matches
    lo, hi = 0, 40  # the events' span
    expected, held_all = 0.0, 0
    for rule, rows in predicted.groupby("query"):
        chances, held = [], 0
        for row in rows.itertuples():
            mine = events[(events["road"] == row.road) & (events["type"] == "C")]["ts"]
            chances.append(brute_chance(mine.tolist(), row.before - row.after, lo, hi))
            held += any(row.after < t < row.before for t in mine)
        assert report.loc[rule, "chance"] == pytest.approx(sum(chances) / len(chances)), rule
        assert report.loc[rule, "lift"] == pytest.approx(held / sum(chances)), rule
        expected, held_all = expected + sum(chances), held_all + held
    total = overall(report)
    assert total["chance"] == pytest.approx(expected / len(predicted))
    assert total["lift"] == pytest.approx(held_all / expected)
    # ac: each A (0, 9, 30; 5); ec: each A then E within 4 (0-2, 9-11, 30-33; 5-6)
    assert len(predicted) == 8 and 0 < held_all < 8  # a case with hits and misses


def test_mining_errors_point_at_the_settings():
    from sparkcep import QueryError

    events = planted_stream(n=50)
    with pytest.raises(QueryError, match="rule window"):
        mine_rules(events, MiningSettings(window="6", rule_window="3"), Options())
    with pytest.raises(QueryError, match="not a column"):
        mine_rules(events, MiningSettings(window="6", rule_window="6", key=("nope",)), Options())


def test_cli_mines_and_evaluates(tmp_path):
    events = planted_stream(n=1200, seed=5, keys=2)
    history, held_out = events.iloc[:800], events.iloc[800:]
    history.to_csv(tmp_path / "history.csv", index=False)
    held_out.to_csv(tmp_path / "held.csv", index=False)
    rules = tmp_path / "rules.cep"
    runner = CliRunner()
    result = runner.invoke(
        app,
        ["mine-rules", "--input", str(tmp_path / "history.csv"), "--output", str(rules),
         "--window", "6", "--rule-window", "10", "--min-support", "8", "--min-confidence",
         "0.7", "--key", "road", "--local"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    text = rules.read_text()
    assert "PREDICT 'C'" in text and "WHERE [road]" in text
    report = tmp_path / "report.csv"
    result = runner.invoke(
        app,
        ["evaluate-rules", str(rules), "--input", str(tmp_path / "held.csv"), "--local",
         "--output", str(report)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    table = pd.read_csv(report)
    ab = table[table["predict"] == "C"]
    assert len(ab) and (ab["precision"] > 0.6).all()


@pytest.mark.spark
def test_spark_mining_equals_local_mining(spark, tmp_path):
    from sparkcep.runners.spark.files import read_spark

    events = planted_stream(n=900, seed=7, keys=2)
    path = tmp_path / "history.csv"
    events.to_csv(path, index=False)
    source = read_spark(spark, str(path))
    for key in ((), ("road",)):
        settings = MiningSettings(
            window="6", rule_window="10", min_support=5, min_confidence=0.5, max_length=2, key=key
        )
        local, _ = mine_rules(events, settings, Options())
        remote, _ = mine_rules(None, settings, Options(), spark_source=source)
        assert sorted(map(repr, remote)) == sorted(map(repr, local)), key
    rules = "RULE ac: EPISODE (A a, B b; a -> b) WITHIN 6 PREDICT C WITHIN 10;"
    local = evaluate_rules(rules, events, Options())
    remote = evaluate_rules(rules, None, Options(), spark_source=source)
    assert remote.equals(local)
    # SYMBOL rules on an input without a type column, through Spark too
    untyped = events.rename(columns={"type": "kind"})
    untyped.to_csv(tmp_path / "untyped.csv", index=False)
    source = read_spark(spark, str(tmp_path / "untyped.csv"))
    rules = "RULE ac: EPISODE (A a, B b; a -> b) SYMBOL kind WITHIN 6 PREDICT C WITHIN 10;"
    remote = evaluate_rules(rules, None, Options(), spark_source=source)
    assert remote.equals(evaluate_rules(rules, untyped, Options()))
    assert remote.equals(local)  # the same report as by type
