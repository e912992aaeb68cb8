"""`sparkcep fit`: a probabilistic query's model (miss rates, delay laws) learned from a
history of events, as a Spark job (or with pandas, `fit_model_local`).

    history ─▶ precise matches of the measuring queries, all in one run (any engine)
            ─▶ gaps between consecutive positives ─groupBy(variable).applyInPandas▶ laws
            ─▶ counts of reduced and extended matches ─▶ miss rates
            ─▶ MODEL.json, read by `USING MODEL 'MODEL.json'`

The measuring queries and the estimators are in `engines/ayac/fitting.py`
(docs/ayac.md, "Learning the model"); this module only runs them.
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import reduce

import numpy as np
import pandas as pd

from sparkcep.engines.base import FitsModels
from sparkcep.engines.registry import first_with
from sparkcep.errors import SparkcepError
from sparkcep.plan import Options


def fitting_kernel():
    """The model-fitting kernel of the registered engines: its FitPlan (the measuring
    queries), fit_law, miss_rate, model_json, time_column, law_from_json, LAW_CHOICES."""
    engine = first_with(FitsModels)
    if engine is None:
        raise SparkcepError("no registered engine fits models")
    return engine.model_fitting()  # type: ignore[attr-defined]


__all__ = ["fit_file", "fit_model", "fit_model_local", "fitting_kernel"]


def _measuring(options: Options) -> Options:
    """The measuring queries are precise pattern queries: the best engine, no cap."""
    return replace(options, algorithm=None, max_matches=None)


def _unit(time_kind: str, options: Options) -> str | None:
    return "us" if time_kind == "timestamp" else options.time_unit


def fit_file(spark, source, query: str, options: Options, *, law: str = "auto") -> dict:
    """Fit on a history of files (a `files.InputSource`): the measuring queries run
    together as any file's run does (`spark_file.run_file`: its checks, its column types)."""
    from sparkcep.runners.spark.run_file import run_file

    runs = []

    def run(queries, measuring: Options):
        runs.append(run_file(spark, source, queries, measuring))
        return runs[-1]

    try:
        return fit_model(None, query, options, law=law, run=run)
    finally:
        for done in runs:  # the rows Spark kept for a run (the one read)
            done.checked.release()


def fit_model(df, query: str, options: Options, *, law: str = "auto", run=None) -> dict:
    """Fit on a Spark DataFrame of history; returns the model (a JSON-able dict).
    `run(queries, measuring)` runs the measuring queries (default: over `df`)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from sparkcep.runners.spark.batch import execute

    if run is None:

        def run(queries, measuring: Options):
            return execute(df, queries, measuring)

    k = fitting_kernel()
    fp = k.FitPlan(query, time_col=options.time_col)
    text, several = fp.together()
    done = run(text, measuring=_measuring(options))  # every measuring query, one pass
    kind = done.checked.time_kind
    measured_rows = done.unordered.cache()  # each query's rows are taken from it

    def measured(name: str):
        rows = measured_rows
        return rows.filter(F.col("query") == name).drop("query") if several else rows

    def ticks(name):
        col = F.col(f"`{name}`")
        return (F.unix_micros(col) if kind == "timestamp" else col).cast("double")

    matches = measured("complete")
    n_complete = matches.count()
    parts = [
        matches.select(
            F.lit(var).alias("var"),
            (ticks(k.time_column(b)) - ticks(k.time_column(a))).alias("gap"),
        )
        for var, a, b in fp.gap_pairs()
    ]
    for var in fp.negated:
        a, b = fp.negated_pair(var)
        parts.append(
            measured(f"negated_{var}").select(
                F.lit(var).alias("var"),
                (ticks(k.time_column(b)) - ticks(k.time_column(a))).alias("gap"),
            )
        )
    laws = {}
    if parts:
        gaps = parts[0]
        for other in parts[1:]:
            gaps = gaps.unionByName(other)
        fitted = gaps.groupBy("var").applyInPandas(
            _group_fitter(law), schema="var string, model string"
        )
        for row in fitted.collect():
            entry = json.loads(row["model"])
            laws[row["var"]] = (k.law_from_json(entry["delay"]), entry["fit"])
    # The history's first and last times (None only without events, then without matches)
    history = (done.checked.min_tick or 0, done.checked.max_tick or 0)
    window = done.plan.window  # the complete query's (the first)
    rates = {}
    for var in fp.reduced:
        reduced = measured(f"reduced_{var}")
        others = fp.others(var)
        ways = matches.groupBy(*[F.col(f"`{o}`") for o in others]).agg(F.count("*").alias("__ways"))
        rows = reduced.join(ways, others, "left")
        shared = [F.count(F.lit(1)).over(Window.partitionBy(F.col(f"`{o}`"))) > 1 for o in others]
        shared.append(F.coalesce(F.col("__ways") > 1, F.lit(False)))
        cols = [
            F.col("__ways").isNotNull().alias(k.EXTENDED),
            reduce(lambda a, b: a | b, shared).alias(k.SHARED),
        ]
        slot = fp.slot(var)
        if slot is not None:
            first, last = ticks(k.time_column(others[0])), ticks(k.time_column(others[-1]))
            room = F.lit(float("inf")) if window is None else F.lit(float(window)) - (last - first)
            edge = (
                first - F.lit(float(history[0]))
                if slot[1] == "first"
                else (F.lit(float(history[1])) - last)
            )
            cols += [room.alias(k.WINDOW_ROOM), edge.alias(k.HISTORY_ROOM)]
        neighbour = laws[slot[0]][0] if slot and slot[0] in laws else None
        parts = (
            rows.select(*cols).mapInPandas(_terms_of(neighbour), schema="terms string").collect()
        )
        terms = k.add_terms([json.loads(p["terms"]) for p in parts])
        rates[var] = k.miss_rate(terms, var)
    measured_rows.unpersist()
    return k.model_json(
        fp, unit=_unit(kind, options), laws=laws, rates=rates, complete_matches=n_complete
    )


def _terms_of(neighbour):
    """The estimator's sums over each batch of reduced matches (one JSON row each)."""
    k = fitting_kernel()

    def terms(batches):
        for frame in batches:
            yield pd.DataFrame({"terms": [json.dumps(k.reduced_terms(frame, neighbour))]})

    return terms


def _group_fitter(choice: str):
    k = fitting_kernel()

    def fit_group(frame: pd.DataFrame) -> pd.DataFrame:
        var = str(frame["var"].iloc[0])
        fitted, fit = k.fit_law(frame["gap"].to_numpy(dtype=np.float64), choice)
        model = json.dumps({"delay": fitted.to_json(), "fit": fit})
        return pd.DataFrame({"var": [var], "model": [model]})

    return fit_group


def fit_model_local(frame: pd.DataFrame, query: str, options: Options, *, law="auto") -> dict:
    """The same fit with pandas, in this process (no JVM)."""
    from sparkcep.prep.table import time_ticks
    from sparkcep.runners.local import check_events, execute_local

    k = fitting_kernel()
    fp = k.FitPlan(query, time_col=options.time_col)
    text, several = fp.together()
    measuring = _measuring(options)
    done = execute_local(frame, text, measuring)  # every measuring query, as on Spark
    kind = done.plan.time_kind

    def measured(name: str) -> pd.DataFrame:
        rows = done.matches
        if not several:
            return rows
        return rows[rows["query"] == name].drop(columns="query").reset_index(drop=True)

    matches = measured("complete")

    def ticks(rows: pd.DataFrame, name: str) -> np.ndarray:
        col = rows[name]
        if kind == "timestamp":
            return col.to_numpy(dtype="datetime64[us]").astype(np.int64).astype(np.float64)
        return col.to_numpy(dtype=np.float64)

    samples = {var: ticks(matches, k.time_column(b)) - ticks(matches, k.time_column(a))
               for var, a, b in fp.gap_pairs()}  # fmt: skip
    for var in fp.negated:
        a, b = fp.negated_pair(var)
        rows = measured(f"negated_{var}")
        samples[var] = ticks(rows, k.time_column(b)) - ticks(rows, k.time_column(a))
    laws = {var: k.fit_law(gaps, law) for var, gaps in samples.items() if len(gaps)}
    history = time_ticks(check_events(frame, text, measuring).valid[options.time_col])
    window = done.plan.window  # the complete query's (the first)
    rates = {}
    for var in fp.reduced:
        reduced = measured(f"reduced_{var}")
        others = fp.others(var)
        ways = matches.groupby(others).size().rename("__ways").reset_index()
        rows = reduced.merge(ways, on=others, how="left")
        shared = [rows[o].duplicated(keep=False) for o in others] + [rows["__ways"] > 1]
        terms = {k.EXTENDED: rows["__ways"].notna().to_numpy(), k.SHARED: np.any(shared, axis=0)}
        slot = fp.slot(var)
        if slot is not None:
            first = ticks(rows, k.time_column(others[0]))
            last = ticks(rows, k.time_column(others[-1]))
            terms[k.WINDOW_ROOM] = np.inf if window is None else window - (last - first)
            terms[k.HISTORY_ROOM] = (
                first - history.min() if slot[1] == "first" else history.max() - last
            )
        neighbour = laws.get(slot[0])[0] if slot and slot[0] in laws else None
        rates[var] = k.miss_rate(k.reduced_terms(pd.DataFrame(terms), neighbour), var)
    return k.model_json(
        fp, unit=_unit(kind, options), laws=laws, rates=rates, complete_matches=len(matches)
    )
