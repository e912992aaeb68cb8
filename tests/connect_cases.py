"""Each engine's first example, run through the Python API on a Spark session of either
kind: the classic session of the test run, or a Spark Connect client of it
(tests/test_connect.py). `python connect_cases.py sc://host:port FOLDER` runs every case
as a Connect client (the stream's files in FOLDER) and prints one JSON line per case: its
rows, or its error."""

from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

IMPRECISE = [  # times are intervals [lo, hi] around ts (docs/imprecise.md)
    {"type": "A", "ts": 10, "lo": 8, "hi": 12, "v": 1},
    {"type": "B", "ts": 11, "lo": 9, "hi": 14, "v": 2},
    {"type": "B", "ts": 20, "lo": 19, "hi": 21, "v": 3},
    {"type": "C", "ts": 13, "lo": 12, "hi": 15, "v": 4},
]
AGGREGATES = [
    "PATTERN SEQ(CPU b, TaskFinish c) WHERE [nodeId] WITHIN 15 s AGG COUNT AS n",
    "PATTERN SEQ(TaskStart a, TaskFinish c) WHERE [taskId] WITHIN 1 min AGG COUNT AS n",
]


def _example(name: str) -> tuple[str, str, dict]:
    folder = EXAMPLES / name
    events = next(p for p in folder.iterdir() if p.name.startswith("events."))
    options_file = folder / "options.json"
    options = json.loads(options_file.read_text()) if options_file.exists() else {}
    return (folder / "query.cep").read_text(), str(events), options


# name: (API function, query, events: a file or rows, options)
CASES = {
    "nfa": ("match", *_example("cpu_overload")),
    "nfa negation": ("match", *_example("failed_logins")),
    "kleene": ("match", *_example("stock_rally")),
    "contiguity": ("match", *_example("sensor_streak")),
    "ayac": ("match", *_example("shoplifting")),
    "episodes": ("match", *_example("traffic_episodes")),
    "match_recognize": ("match_recognize", *_example("ticker_v_shapes")[:2], {}),
    "aseq": ("aggregate", AGGREGATES, str(EXAMPLES / "cpu_overload" / "events.csv"), {}),
    "imprecise": (
        "match",
        "PATTERN SEQ(A a, B b, C c) WITHIN 10 TIME BETWEEN lo AND hi",
        IMPRECISE,
        {},
    ),
    "why": (
        "why",
        "PATTERN SEQ(TaskStart a, CPU b, TaskFinish c, CPU d) WHERE [nodeId] AND "
        "b.value > 95 AND d.value <= 60 WITHIN 15 s",
        str(EXAMPLES / "cpu_overload" / "events.csv"),
        {},
    ),
    "funnel": (
        "funnel",
        "FUNNEL SEQ(TaskStart a, CPU b, TaskFinish c) WHERE [taskId] WITHIN 1 min",
        str(EXAMPLES / "cpu_overload" / "events.csv"),
        {},
    ),
}


def read(spark, events):
    if not isinstance(events, str):
        return spark.createDataFrame(events)
    if events.endswith(".csv"):
        return spark.read.csv(events, header=True, inferSchema=True)
    return spark.read.option("inferTimestamp", "true").json(events)


def _records(df) -> list[dict]:
    frame = df if isinstance(df, pd.DataFrame) else df.toPandas()
    rows = json.loads(frame.to_json(orient="records", date_format="iso"))
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True))


def rows_of(spark, name: str) -> dict:
    """The case's rows (a list of JSON records; two for a funnel) and its explain text."""
    import sparkcep

    function, query, events, options = CASES[name]
    df = read(spark, events)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (rejected rows: the same warning either way)
        result = getattr(sparkcep, function)(df, query, **options)
    tables = result if isinstance(result, tuple) else (result,)
    explained = sparkcep.explain(query, df, **options) if function not in ("funnel", "why") else ""
    return {"rows": [_records(t) for t in tables], "explain": explained}


STREAM_QUERY = "PATTERN SEQ(A a, B b, C c) WHERE [k] WITHIN 400 ms"
STREAM_FILES = {  # the second file's event moves the watermark past the first's match
    "1.csv": "id,type,ts,k\n1,A,1,x\n2,B,5,x\n3,A,7,y\n4,C,9,x\n5,B,20,y\n6,C,30,y\n",
    "2.csv": "id,type,ts,k\n7,A,5000,x\n",
}


def streamed(spark, folder: str) -> list[dict]:
    """`sparkcep.stream` over a folder of CSV files, its matches written by Spark's own
    file sink (one file a micro-batch), read back."""
    import sparkcep

    for i, (name, text) in enumerate(STREAM_FILES.items()):
        Path(folder, "in").mkdir(parents=True, exist_ok=True)
        Path(folder, "in", name).write_text(text)
        os.utime(Path(folder, "in", name), (1e9 + i, 1e9 + i))  # read in this order
    source = (
        spark.readStream.schema("id long, type string, ts long, k string")
        .option("header", True)
        .option("maxFilesPerTrigger", 1)
        .csv(f"{folder}/in")
    )
    matches = sparkcep.stream(source, STREAM_QUERY, id_col="id", time_unit="ms").matches
    query = (
        matches.writeStream.format("json")
        .option("path", f"{folder}/out")
        .option("checkpointLocation", f"{folder}/checkpoint")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return _records(spark.read.json(f"{folder}/out"))


def main(url: str, folder: str) -> None:
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.remote(url).getOrCreate()
    cases = {name: (lambda name=name: rows_of(spark, name)) for name in CASES}
    cases["stream"] = lambda: {"rows": [streamed(spark, folder)]}
    for name, case in cases.items():
        try:
            out = case()
        except Exception as error:  # the parent test shows it beside the case
            out = {"error": f"{type(error).__name__}: {error}"}
        print(json.dumps({"case": name, **out}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
