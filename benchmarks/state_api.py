"""applyInPandasWithState vs transformWithStateInPandas, the same per-key work (issue 4).

Both run the work `sparkcep stream` asks of Spark's state store, without the engine: per
key (G2's `k`, 100 keys), the state is one pickled pandas DataFrame of the key's events
within the last 5 s of event time; each micro-batch appends the new events, drops those
older than 5 s and emits one row per key (its event count). G2's 1,000,000 events come
in 20 CSV files, one per micro-batch, trigger available-now, one Spark session.

    python -m benchmarks.state_api     # needs protobuf (pip install protobuf)

Writes benchmarks/results/state_api.md.
"""

from __future__ import annotations

import pickle
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming.stateful_processor import StatefulProcessor

from benchmarks.streaming import write_files

RESULTS = Path(__file__).parent / "results"
WINDOW_MS = 5_000
OUT = T.StructType([T.StructField("k", T.LongType()), T.StructField("n", T.LongType())])


def keep_recent(blob: bytes | None, new: pd.DataFrame) -> pd.DataFrame:
    old = pickle.loads(blob) if blob else None
    frame = new if old is None else pd.concat([old, new], ignore_index=True)
    return frame[frame["ts"] > frame["ts"].max() - WINDOW_MS]


def with_state(key, batches: Iterator[pd.DataFrame], state) -> Iterator[pd.DataFrame]:
    new = pd.concat(list(batches), ignore_index=True)[["id", "type", "ts", "v"]]
    frame = keep_recent(state.get[0] if state.exists else None, new)
    state.update((pickle.dumps(frame),))
    yield pd.DataFrame({"k": [int(key[0])], "n": [len(frame)]})


class Recent(StatefulProcessor):
    def init(self, handle) -> None:
        self.state = handle.getValueState("recent", "blob binary")

    def handleInputRows(self, key, rows, timerValues) -> Iterator[pd.DataFrame]:
        new = pd.concat(list(rows), ignore_index=True)[["id", "type", "ts", "v"]]
        frame = keep_recent(self.state.get()[0] if self.state.exists() else None, new)
        self.state.update((pickle.dumps(frame),))
        yield pd.DataFrame({"k": [int(key[0])], "n": [len(frame)]})

    def close(self) -> None:
        pass


def run(spark, folder: Path, tmp: Path, api: str) -> dict:
    schema = spark.read.option("header", True).option("inferSchema", True).csv(str(folder)).schema
    source = (
        spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).option("header", True)
    ).csv(str(folder))
    grouped = source.groupBy("k")
    if api == "applyInPandasWithState":
        state = T.StructType([T.StructField("blob", T.BinaryType())])
        rows = grouped.applyInPandasWithState(with_state, OUT, state, "append", "NoTimeout")
    else:
        rows = grouped.transformWithStateInPandas(Recent(), OUT, "Append", "None")
    total = {"rows": 0}

    def sink(df, _batch_id):
        total["rows"] += df.agg(F.count("*")).first()[0]

    started = time.perf_counter()
    query = (
        rows.writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp / f"ckpt-{api}"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    wall = time.perf_counter() - started
    progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
    durations = [p["durationMs"]["triggerExecution"] / 1000 for p in progress]
    events = sum(p["numInputRows"] for p in progress)
    return {
        "api": api,
        "micro_batches": len(progress),
        "output_rows": total["rows"],
        "seconds": wall,
        "events_per_s": events / sum(durations),
        "latency_median_s": statistics.median(durations),
        "latency_p95_s": float(np.percentile(durations, 95)),
    }


def main() -> None:
    from sparkcep.runners.spark.session import spark_session

    tmp = Path(tempfile.mkdtemp(prefix="sparkcep-state-bench-"))
    try:
        folder = tmp / "in"
        write_files(folder)
        spark = spark_session()
        default = spark.conf.get("spark.sql.streaming.stateStore.providerClass")
        rocksdb = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
        variants = [
            ("applyInPandasWithState", default, "default (HDFS-backed)"),
            ("applyInPandasWithState", rocksdb, "RocksDB"),
            ("transformWithStateInPandas", rocksdb, "RocksDB"),
        ]
        rows = []
        # Twice each, in turn, so none gets all the warm JVM.
        for api, provider, store in variants * 2:
            spark.conf.set("spark.sql.streaming.stateStore.providerClass", provider)
            rows.append({**run(spark, folder, tmp / f"{len(rows)}", api), "store": store})
            print(rows[-1], flush=True)
        spark.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    lines = [
        "# Spark's two Python state APIs, the same per-key work",
        "",
        "Per key of G2 (100 keys): a pickled DataFrame of the last 5 s of events as state;",
        "1,000,000 events in 20 files, one file per micro-batch; each variant run twice",
        "(in turn) in one session. transformWithStateInPandas needs the RocksDB store.",
        "",
        "| API | state store | micro-batches | seconds | events/s | latency median s | latency p95 s |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['api']} | {r['store']} | {r['micro_batches']} | {r['seconds']:.1f} | "
            f"{r['events_per_s']:,.0f} | {r['latency_median_s']:.2f} | {r['latency_p95_s']:.2f} |"
        )
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "state_api.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
