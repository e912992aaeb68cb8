"""`episodes`: event prediction with episode rules (cbs-tree-episode-prediction.md).

A rule `RULE name: EPISODE (...) WITHIN ω_α PREDICT Z WITHIN ω_ρ` says: when the events
of the predicate episode (a DAG of distinct events) occur in its order within ω_α, Z
will occur after the occurrence's end t_e and before its start t_s + ω_ρ. Only the
*min-latest* occurrences are reported — minimal ones (enclosing no other occurrence),
one per interval — and by Lemma 1 no predicted interval is lost by that. Three
algorithms answer the same rules (docs/episodes.md):

- `episodes` (default): the CBS-Tree over the last L events, shared by every rule of a
  partition, CBR with rejected instances (Algorithms 1 and 2, Definition 3);
- `tofel`: the paper's baseline, partial matches of each rule kept forward;
- `directmatch`: CBR over a scan of the raw window.

The paper's traffic rule (Figure 2) over the stream of Figure 3: W (segment a smooth),
X (b smooth), then Y (c busy) within 10 minutes predict Z (d jammed) within 15.

>>> import pandas as pd
>>> from sparkcep import run_local
>>> stream = pd.DataFrame({
...     "type": ["X", "W", "X", "Y", "Y"],
...     "ts": pd.to_datetime(["2006-01-02 08:00", "2006-01-02 08:02", "2006-01-02 08:03",
...                           "2006-01-02 08:05", "2006-01-02 08:07"])})
>>> rules = '''RULE congestion:
...   EPISODE (W w, X x, Y y; w -> y, x -> y) WITHIN 10 min
...   PREDICT Z WITHIN 15 min;'''
>>> row = run_local(stream, rules).matches.iloc[0]
>>> row["ids"], str(row["t_s"].time()), str(row["t_e"].time()), row["predict"]
([1, 2, 3], '08:02:00', '08:05:00', 'Z')
>>> str(row["after"].time()), str(row["before"].time())  # Z in (8:05, 8:17)
('08:05:00', '08:17:00')
"""

from __future__ import annotations

from typing import ClassVar

from sparkcep.engines.base import Engine, MinesRules
from sparkcep.engines.episodes.program import EpisodeProgram, EpisodeState
from sparkcep.plan.episodes import EpisodeSpec

__all__ = ["DirectMatchEngine", "EpisodeProgram", "EpisodeState", "EpisodesEngine", "ToFelEngine"]


class _EpisodeEngine(Engine, MinesRules):
    crowded_example = "EPISODE (A a, B b; a -> b) WITHIN 1000 PREDICT C WITHIN 1000"
    examples: ClassVar[tuple[str, ...]] = (
        "EPISODE (A a, B b, C c; a -> c, b -> c) WITHIN 6 PREDICT D WITHIN 9",
        "RULE ab: EPISODE (A a, B b; a -> b) WHERE [k] WITHIN 4 PREDICT C WITHIN 6"
        " CONFIDENCE 0.5; RULE bcd: EPISODE (B b, C c, D d; b -> c -> d) WHERE [k]"
        " WITHIN 5 PREDICT A WITHIN 5",
        "EPISODE (A a, B b, C c) WITHIN 3 ORDER BY ts, seq PREDICT D WITHIN 4",
        "EPISODE ('A:0' a, 'B:1' b, 'A:1' c; a -> b, a -> c) SYMBOL concat(type, ':', k)"
        " WITHIN 5 PREDICT 'C:0' WITHIN 8",
    )

    def applies_to(self, plan) -> bool:
        return isinstance(plan.spec, EpisodeSpec)

    def reason(self, plan) -> str | None:
        if not isinstance(plan.spec, EpisodeSpec):
            return "it answers episode rules (EPISODE ... PREDICT ...), and this is not one"
        return None

    def job_key(self, plan) -> tuple:
        # Rules that partition the stream alike and map events to symbols alike share
        # one program, hence one index per partition.
        return (plan.key, plan.tiebreak, plan.spec.symbol_text)

    def compile(self, plans, names, options) -> EpisodeProgram:
        return EpisodeProgram(plans, names, options, self.name)

    @staticmethod
    def rule_mining():
        """The rule-mining kernel (`sparkcep.runners.jobs.mining` finds it here)."""
        from sparkcep.engines.episodes import mining

        return mining


class EpisodesEngine(_EpisodeEngine):
    """Min-latest occurrences by the CBS-Tree (the paper's method)."""

    name = "episodes"
    summary = "episode rules: min-latest occurrences on a CBS-Tree shared by all rules"


class ToFelEngine(_EpisodeEngine):
    """The paper's baseline (--algorithm tofel)."""

    name = "tofel"
    # One example for the shared suites (Spark, streaming); tests/test_episodes.py runs
    # every example and random rules against the oracle with each algorithm.
    examples = _EpisodeEngine.examples[1:2]
    summary = "episode rules by ToFel's forward partial matches (kept per rule)"


class DirectMatchEngine(_EpisodeEngine):
    """CBR over a scan of the raw window (--algorithm directmatch)."""

    name = "directmatch"
    examples = _EpisodeEngine.examples[1:2]
    summary = "episode rules by DirectMatch (scan the window's raw events)"
