"""Rules from data, on Spark: the level-wise mining job, and the precision and recall of
rules on held-out events (`sparkcep mine-rules`, `sparkcep evaluate-rules`).

    history ──check rows──▶ valid events ──by key, or time ranges──▶ partitions
         level k: each partition counts the minimal occurrences of the candidates and
         the consequents in their predicted intervals (applyInPandas) ─▶ sums ─▶
         frequent predicates (support), rules (confidence) ─▶ candidates of level k + 1

The counting kernels are pure pandas and come from the engine registry (an engine that
offers `rule_mining`), as programs do: this module names no engine. The same kernels run
in this process with `local=True` (pandas only). Without a key the events are split into
time ranges that overlap by the windows; each range counts the occurrences that end in it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from sparkcep.engines.base import MinesRules
from sparkcep.engines.registry import first_with
from sparkcep.errors import SparkcepError
from sparkcep.inputs import ROW, schema_of, split_valid
from sparkcep.plan import Options, Plan, analyze
from sparkcep.prep.table import TICKS, time_ticks
from sparkcep.runners.local import type_column

RANGE = "__mine_range"


def rule_kernel():
    """The rule-mining kernel of the registered engines."""
    engine = first_with(MinesRules)
    if engine is None:
        raise SparkcepError("no registered engine mines rules")
    return engine.rule_mining()  # type: ignore[attr-defined]


@dataclass
class MiningSettings:
    """What `mine-rules` is asked: windows as written (`10 min`, or a bare number of
    ticks), thresholds, and how events become symbols and partitions."""

    window: str
    rule_window: str
    min_support: int = 5
    min_confidence: float = 0.5
    max_length: int = 3
    max_candidates: int = 20_000
    symbol: str | None = None  # a SYMBOL expression; None: the type column
    key: tuple[str, ...] = ()
    shapes: str = "serial"  # serial, parallel or dag predicates (docs/episodes.md)
    # filled from the template rule
    window_ticks: int = 0
    rule_window_ticks: int = 0
    plan: Plan | None = field(default=None, repr=False)
    # filled by the mining: the levels whose candidates max_candidates cut (level, counted)
    capped: tuple[tuple[int, int], ...] = ()

    def template(self) -> str:
        """A rule with these settings: the analyzer checks them (positioned errors)."""
        where = (" WHERE " + " AND ".join(f"[{k}]" for k in self.key)) if self.key else ""
        symbol = f" SYMBOL {self.symbol}" if self.symbol else ""
        return (
            f"EPISODE (a a){where}{symbol} WITHIN {self.window} PREDICT b WITHIN {self.rule_window}"
        )

    def checked(self, schema, options: Options) -> MiningSettings:
        plan = analyze(self.template(), schema, options)
        return replace(
            self, window_ticks=plan.window, rule_window_ticks=plan.spec.rule_window, plan=plan
        )


class LevelCounter:
    """Counts one level's candidates in one partition (the function applyInPandas runs;
    pickled to the workers)."""

    def __init__(self, settings: MiningSettings, options: Options, candidates, ranges=None):
        self.settings = settings
        self.options = options
        self.candidates = candidates  # None: every single symbol
        self.ranges = ranges  # time ranges: (t0, length) in ticks; None: keyed partitions

    def __call__(self, frame: pd.DataFrame) -> pd.DataFrame:
        kernel = rule_kernel()
        s, opts = self.settings, self.options
        frame = frame.assign(
            __symbol=kernel.event_symbols(frame, s.plan.spec.symbol, opts.type_col)
        )
        if TICKS not in frame.columns:
            frame[TICKS] = time_ticks(frame[opts.time_col])
        own = {}
        if self.ranges is not None and len(frame):
            t0, length = self.ranges
            lo = t0 + int(frame[RANGE].iloc[0]) * length
            own = {"own_from": lo, "own_to": lo + length}
        part = kernel.partition(frame, "__symbol", TICKS, opts.tiebreak, **own)
        predicates = self.candidates
        if predicates is None:
            predicates = [(x,) for x in part.index]
        counts = kernel.count_rules(
            part, predicates, window=s.window_ticks, rule_window=s.rule_window_ticks,
            consequents=None,
        )  # fmt: skip
        return pd.DataFrame(
            {
                "predicate": [kernel.SEP.join(p) for p in counts["predicate"]],
                "support": counts["support"].astype(np.int64),
                "consequent": counts["consequent"].astype(object),
                "hits": counts["hits"].astype(np.int64),
            }
        )


def mine_rules(
    events, settings: MiningSettings, options: Options, *, spark_source=None
) -> tuple[list, MiningSettings]:
    """The rules of `events` (a pandas frame, or None with `spark_source`, a
    `spark_files.SparkInput`): a list of the kernel's MinedRule, and the checked
    settings (their `capped`: the levels `max_candidates` cut)."""
    if settings.shapes not in ("serial", "parallel", "dag"):
        raise SparkcepError(f"shapes are serial, parallel or dag, not '{settings.shapes}'")
    if spark_source is not None:
        counter = _SparkLevels(spark_source, settings, options)
    else:
        counter = _LocalLevels(events, settings, options)
    settings = counter.settings
    found = rule_kernel().mine(
        counter.count, min_support=settings.min_support, min_confidence=settings.min_confidence,
        max_length=settings.max_length, max_candidates=settings.max_candidates,
        shapes=settings.shapes,
    )  # fmt: skip
    return found.rules, replace(settings, capped=tuple(found.capped))


class _LocalLevels:
    def __init__(self, events: pd.DataFrame, settings: MiningSettings, options: Options):
        type_col = type_column(events.columns, settings.template(), options)
        valid, _ = split_valid(
            events, time_col=options.time_col, type_col=type_col, id_col=options.id_col
        )
        valid = valid.drop(columns=[ROW])
        self.settings = settings.checked(schema_of(valid), options)
        self.options = options
        valid[TICKS] = time_ticks(valid[options.time_col])
        key = list(self.settings.key)
        self.parts = [g for _, g in valid.groupby(key, sort=True)] if key else [valid]

    def count(self, candidates) -> pd.DataFrame:
        counter = LevelCounter(self.settings, self.options, candidates)
        frames = [_parse_counts(counter(part)) for part in self.parts if len(part)]
        return pd.concat(frames, ignore_index=True) if frames else _parse_counts(None)


class _SparkLevels:
    def __init__(self, source, settings: MiningSettings, options: Options):
        from sparkcep.runners.spark.rows import check_rows
        from sparkcep.runners.spark.rows import schema_of as spark_schema

        checked = check_rows(
            source.df, time_col=options.time_col,
            type_col=type_column(source.df.columns, settings.template(), options),
            id_col=options.id_col, **source.options(),
        )  # fmt: skip
        schema = spark_schema(checked.valid, ignore=(TICKS, ROW))
        schema[options.time_col] = checked.time_kind
        self.settings = settings.checked(schema, options)
        self.options = options
        self.checked = checked

    def count(self, candidates) -> pd.DataFrame:
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        from sparkcep.runners.spark.batch import named, pandas_ready

        s = self.settings
        events, key = self.checked.valid, list(s.key)
        ranges = None
        if not key:
            events, length, t0 = self._ranges(events)
            ranges, key = (t0, length), [RANGE]
        events, names = pandas_ready(events)
        keys = [F.col(f"`{events.columns[names.index(k)]}`") for k in key]
        counter = LevelCounter(s, self.options, candidates, ranges)
        schema = T.StructType(
            [
                T.StructField("predicate", T.StringType()),
                T.StructField("support", T.LongType()),
                T.StructField("consequent", T.StringType()),
                T.StructField("hits", T.LongType()),
            ]
        )
        rows = events.groupBy(*keys).applyInPandas(lambda f: counter(named(f, names)), schema)
        rows = rows.toPandas()
        return _parse_counts(rows)

    def _ranges(self, events):
        """Time ranges [t0 + r·R, t0 + (r+1)·R): each gets the events from the predicate
        window before it to the rule window after it."""
        from pyspark.sql import functions as F

        s, checked = self.settings, self.checked
        before, after = s.window_ticks, s.rule_window_ticks
        span = (checked.max_tick or 0) - (checked.min_tick or 0) + 1
        from sparkcep.runners.spark.batch import matching_partitions

        parts = matching_partitions(events.sparkSession, checked.events_read)
        length = max(before, after, 1, -(-span // max(parts, 1)))
        t0 = checked.min_tick or 0
        t = F.col(TICKS)
        own = F.expr(f"(`{TICKS}` - {t0}) div {length}")
        events = events.withColumn(RANGE, F.explode(F.array(own - 1, own, own + 1)))
        lo = F.lit(t0) + F.col(RANGE) * F.lit(length)
        keep = (F.col(RANGE) >= 0) & (t > lo - F.lit(before)) & (t < lo + F.lit(length + after))
        return events.filter(keep), length, t0


def _parse_counts(rows: pd.DataFrame | None) -> pd.DataFrame:
    kernel = rule_kernel()
    if rows is None or not len(rows):
        return pd.DataFrame({"predicate": [], "support": [], "consequent": [], "hits": []})
    out = rows.copy()
    out["predicate"] = [tuple(p.split(kernel.SEP)) for p in out["predicate"]]
    out["consequent"] = out["consequent"].where(out["consequent"].notna(), None)
    return out


# ---- evaluation ------------------------------------------------------------------------


def evaluate_rules(rules_text: str, events, options: Options, *, spark_source=None):
    """Precision and recall of each rule's predicted intervals on held-out events, and
    the precision to beat: one row per rule (rule, predict, predictions, held, recalled,
    consequents, expected, precision, recall, chance, lift; `interval_hits`). Overall:
    `overall(report)`."""
    kernel = rule_kernel()
    if spark_source is None:
        from sparkcep.runners.local import execute_local

        result = execute_local(events, rules_text, options)
        predictions, plans = result.matches, result.plans
        type_col = type_column(events.columns, rules_text, options)
        valid, _ = split_valid(
            events, time_col=options.time_col, type_col=type_col, id_col=options.id_col
        )
        consequents = kernel.consequent_events(
            valid, plans, type_col=options.type_col, time_col=options.time_col
        )
        ticks = time_ticks(valid[options.time_col])
        span = (int(ticks.min()), int(ticks.max())) if len(ticks) else None
    else:
        from sparkcep.runners.spark.batch import execute

        result = execute(spark_source.df, rules_text, options, **spark_source.options())
        predictions, plans = result.rows.toPandas(), result.plans
        consequents = _spark_consequents(result, plans, options)
        checked = result.checked
        span = None if checked.min_tick is None else (checked.min_tick, checked.max_tick)
    keys = {p.key for p in plans}
    if len(keys) > 1:
        raise SparkcepError("evaluate-rules takes rules that partition the stream alike")
    if "query" not in predictions.columns:
        predictions = predictions.assign(query=plans[0].name or "rule")
    for col in ("after", "before"):
        predictions[col] = time_ticks(predictions[col])
    out = kernel.interval_hits(predictions, consequents, list(plans[0].key), span)
    names = [p.name or "rule" for p in plans]
    missing = [n for n in names if n not in set(out["rule"])]
    if missing:  # rules that never fired: no prediction, nothing recalled
        spec_of = {p.name or "rule": p.spec.predict for p in plans}
        extra = pd.DataFrame(
            {
                "rule": missing,
                "predict": [spec_of[n] for n in missing],
                "predictions": 0,
                "held": 0,
                "recalled": 0,
                "consequents": [
                    int((consequents["symbol"] == spec_of[n]).sum()) if len(consequents) else 0
                    for n in missing
                ],
            }
        )
        extra["expected"] = 0.0
        extra["precision"] = extra["chance"] = extra["lift"] = np.nan
        extra["recall"] = extra["recalled"] / extra["consequents"].where(extra["consequents"] > 0)
        out = pd.concat([out, extra], ignore_index=True)
    order = {n: i for i, n in enumerate(names)}
    return out.sort_values("rule", key=lambda c: c.map(order)).reset_index(drop=True)


def overall(report: pd.DataFrame) -> dict:
    """All rules together: predictions, held, precision, chance (the held predictions
    expected by chance over all predictions) and lift (precision / chance)."""
    made, held = int(report["predictions"].sum()), int(report["held"].sum())
    expected = float(report["expected"].sum())
    precision = held / made if made else float("nan")
    chance = expected / made if made else float("nan")
    lift = precision / chance if made and chance > 0 else float("nan")
    return {"predictions": made, "held": held, "precision": precision, "chance": chance,
            "lift": lift}  # fmt: skip


def _spark_consequents(result, plans: list[Plan], options: Options) -> pd.DataFrame:
    from pyspark.sql import types as T

    from sparkcep.runners.spark.batch import pandas_ready

    events = result.checked.valid
    key = list(plans[0].key)
    fields = [events.schema[k] for k in key]
    schema = T.StructType(
        [*fields, T.StructField("symbol", T.StringType()), T.StructField("tick", T.LongType())]
    )
    events, names = pandas_ready(events)
    finder = _ConsequentFinder(plans, options, names)
    return events.mapInPandas(finder, schema).toPandas()


class _ConsequentFinder:
    def __init__(self, plans, options: Options, names: list[str]):
        self.plans = plans
        self.options = options
        self.names = names  # the frames' column names (runners.spark.pandas_ready)

    def __call__(self, batches):
        from sparkcep.runners.spark.batch import named

        kernel = rule_kernel()
        for frame in batches:
            out = kernel.consequent_events(
                named(frame, self.names),
                self.plans,
                type_col=self.options.type_col,
                time_col=self.options.time_col,
            )
            if len(out):
                yield out


def rules_file(rules, settings: MiningSettings) -> str:
    """The mined rules as a rule file."""
    return rule_kernel().rules_text(
        rules, window=settings.window, rule_window=settings.rule_window,
        symbol=settings.symbol, key=settings.key,
    )  # fmt: skip
