"""The benchmark streams of the foundation issue (G1, G2), so figures compare across engines."""

from __future__ import annotations

import random

import numpy as np
import pandas as pd


def g1(n: int = 100_000) -> pd.DataFrame:
    """G1: type uniform over A..J, v uniform 0..99, ts = i seconds."""
    rng = random.Random(42)
    types, values = [], []
    for _ in range(n):
        types.append("ABCDEFGHIJ"[rng.randrange(10)])
        values.append(rng.randrange(100))
    return pd.DataFrame({"type": types, "v": values, "ts": np.arange(n, dtype=np.int64)})


G2_QUERY = "PATTERN SEQ(A a, B b, C c) WHERE [k] STRATEGY SKIP_TILL_NEXT_MATCH WITHIN 5 s"


def g2_files(folder) -> tuple[pd.DataFrame, object, object, object]:
    """G2 written to `folder` as g2.csv and g2.parquet, with its query in g2.cep:
    (the frame, the CSV path, the Parquet path, the query path)."""
    from pathlib import Path

    folder = Path(folder)
    frame = g2()
    csv, parquet, query = folder / "g2.csv", folder / "g2.parquet", folder / "g2.cep"
    frame.to_csv(csv, index=False)
    frame.to_parquet(parquet, index=False)
    query.write_text(G2_QUERY)
    return frame, csv, parquet, query


def g2(n: int = 1_000_000) -> pd.DataFrame:
    """G2: gaps 1..20 ms, type A..J, key k 0..99, v uniform 0..100 (3 decimals)."""
    rng = np.random.default_rng(42)
    gaps = rng.integers(1, 21, n)
    types = np.array(list("ABCDEFGHIJ"))[rng.integers(0, 10, n)]
    k = rng.integers(0, 100, n)
    v = np.round(rng.uniform(0, 100, n), 3)
    ts = 1_700_000_000_000 + np.cumsum(gaps)
    return pd.DataFrame({"type": types, "k": k, "v": v, "ts": ts})
