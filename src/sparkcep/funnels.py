"""A FUNNEL query's rows (one per key and step reached, from the funnel engine) as the two
tables users read: the furthest step of each key, and the number of keys that reached
each step (pandas, or Spark)."""

from __future__ import annotations

import pandas as pd


def funnel_tables(rows: pd.DataFrame, program) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per key: key columns, step, reached; per step: step, reached, keys)."""
    key = list(program.plan.key)
    steps = program.steps
    if key:
        last = rows.sort_values([*key, "step"]).groupby(key, sort=True).tail(1)
    else:
        last = rows.sort_values("step").tail(1)
    per_key = last[[*key, "step", "reached"]].reset_index(drop=True)
    counts = rows.groupby("step").size() if len(rows) else pd.Series(dtype="int64")
    per_step = pd.DataFrame(
        {
            "step": pd.array(range(1, len(steps) + 1), dtype="Int64"),
            "reached": list(steps),
            "keys": [int(counts.get(i, 0)) for i in range(1, len(steps) + 1)],
        }
    )
    return per_key, per_step


def funnel_tables_spark(rows, program):
    """The same tables from the rows of a Spark run."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    key = [F.col(f"`{k}`") for k in program.plan.key]
    top = Window.partitionBy(*key) if key else Window.partitionBy(F.lit(0))
    per_key = (
        rows.withColumn("__top", F.max("step").over(top))
        .filter(F.col("step") == F.col("__top"))
        .select(*key, "step", "reached")
    )
    spark = rows.sparkSession
    steps = spark.createDataFrame(
        [(i + 1, s) for i, s in enumerate(program.steps)], "step long, reached string"
    )
    counts = rows.groupBy("step").agg(F.count(F.lit(1)).alias("keys"))
    per_step = (
        steps.join(counts, "step", "left")
        .select("step", "reached", F.coalesce("keys", F.lit(0)).alias("keys"))
        .orderBy("step")
    )
    return per_key, per_step
