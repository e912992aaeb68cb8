"""Probabilistic detection on real RFID reads with sightings dropped at known rates.

    python examples/lossy_rfid/evaluate.py [--data PATH] [--output DIR]

The reads (`../shared/data/rfid/reads.csv.gz`, walking experiments: a person carries a
reader past rows of tags, row 0 to 6) become *zone sightings*: the first read of any tag
of a row (a zone) after more than a second without one. The complex events:

- `walk`: three consecutive zones in order within 10 s (the query of query.cep);
- `skip`: a zone, then the zone two rows on, without the zone between (a negation).

Ground truth: the precise engine's matches on all the sightings. Then sightings are
dropped independently at rate p (fixed seeds) and both engines run on what is left:
the precise engine (which ignores losses) and `ayac` with MISSING RATE p and the delay
laws `sparkcep fit` learned from the complete sightings (the "history"). A complex
event is identified by its last sighting; recall = truth events detected / truth events,
precision = detected events that are true / detected events.

The original reads are themselves lossy (the readers missed whole zones now and then);
the ground truth does not count those walks, so a walk `ayac` infers from them counts
against its precision. The `complete passes` variant keeps only the sightings of true
walks before dropping, which isolates what the dropping did.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data" / "rfid" / "reads.csv.gz"
sys.path.insert(0, str(ROOT / "src"))

from sparkcep import run_local  # noqa: E402
from sparkcep.plan import Options  # noqa: E402
from sparkcep.runners.jobs.fit import fit_model_local  # noqa: E402

PATTERNS = {
    "walk": """PATTERN SEQ(zone a, zone b, zone c)
WHERE a.row <= 4 AND b.row BETWEEN 1 AND 5 AND c.row >= 2
  AND b.row = a.row + 1 AND c.row = b.row + 1 AND c.row = a.row + 2 AND [exp]
WITHIN 10 s""",
    "skip": """PATTERN SEQ(zone a, !zone b, zone c)
WHERE a.row <= 4 AND c.row >= 2 AND c.row = a.row + 2 AND b.row = a.row + 1 AND [exp]
WITHIN 10 s""",
}
DROP_RATES = (0.0, 0.05, 0.1, 0.2, 0.3)
THRESHOLDS = (0.02, 0.05, 0.5)
OPTIONS = {"id_col": "id", "time_unit": "ms"}


def zone_sightings(path: Path = DATA, gap_ms: int = 1000) -> pd.DataFrame:
    reads = pd.read_csv(path)
    reads = reads[reads["experiment"] == "walking"].copy()
    reads["row"] = reads["serial"] // 10
    reads = reads.sort_values(["experiment_nr", "row", "milliseconds"], kind="stable")
    gap = reads.groupby(["experiment_nr", "row"])["milliseconds"].diff()
    first = reads[gap.isna() | (gap > gap_ms)]
    out = pd.DataFrame(
        {
            "type": "zone",
            "exp": first["experiment_nr"].to_numpy(),
            "row": first["row"].to_numpy(),
            "ts": first["milliseconds"].to_numpy(),
        }
    )
    out = out.sort_values(["exp", "ts", "row"], kind="stable").reset_index(drop=True)
    return out.assign(id=np.arange(len(out)))


def drop(frame: pd.DataFrame, rate: float, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return frame[rng.random(len(frame)) >= rate].reset_index(drop=True)


def ends(rows: pd.DataFrame) -> set[int]:
    return set(rows["c"].dropna().astype(int))


def scores(found: set[int], truth: set[int]) -> tuple[float, float]:
    hit = len(found & truth)
    return hit / max(len(truth), 1), (hit / len(found) if found else 1.0)


def evaluate(
    sightings: pd.DataFrame,
    drop_rates=DROP_RATES,
    thresholds=THRESHOLDS,
    seed: int = 1,
    variants=("all sightings", "complete passes"),
) -> pd.DataFrame:
    results = []
    for name, pattern in PATTERNS.items():
        truth_rows = run_local(sightings, pattern, **OPTIONS).matches
        truth = ends(truth_rows)
        model = fit_model_local(sightings, pattern, Options(**OPTIONS))
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(model, f)
        for variant in variants:
            stream = sightings
            if variant == "complete passes":
                if name != "walk":
                    continue
                used = set(truth_rows[["a", "b", "c"]].to_numpy().ravel().tolist())
                stream = sightings[sightings["id"].isin(used)].reset_index(drop=True)
            for p in drop_rates:
                lossy = drop(stream, p, seed)
                precise = ends(run_local(lossy, pattern, **OPTIONS).matches)
                r, q = scores(precise, truth)
                results.append((name, variant, p, "precise", None, r, q, len(precise)))
                for theta in thresholds:
                    text = (
                        f"{pattern}\nUSING MODEL '{f.name}' MISSING RATE {max(p, 0.001)} "
                        f"THRESHOLD {theta}"
                    )
                    found = ends(run_local(lossy, text, **OPTIONS).matches)
                    r, q = scores(found, truth)
                    results.append((name, variant, p, "ayac", theta, r, q, len(found)))
        Path(f.name).unlink()
    return pd.DataFrame(
        results,
        columns=["pattern", "stream", "drop", "engine", "threshold", "recall", "precision",
                 "events"],
    )  # fmt: skip


def table(results: pd.DataFrame) -> str:
    lines = [
        "| pattern | stream | drop rate | engine | threshold | recall | precision | events |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results.itertuples(index=False):
        theta = "" if pd.isna(r.threshold) else f"{r.threshold:g}"
        lines.append(
            f"| {r.pattern} | {r.stream} | {r.drop:g} | {r.engine} | {theta} | "
            f"{r.recall:.3f} | {r.precision:.3f} | {r.events} |"
        )
    return "\n".join(lines)


def plot(results: pd.DataFrame, path: Path) -> None:
    """Recall and precision per drop rate; ayac at a threshold that lets one missing
    positive through (walk), and at one that needs a negation to be likely (skip)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        ("walk", "all sightings", 0.05),
        ("walk", "complete passes", 0.05),
        ("skip", "all sightings", 0.5),
    ]
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), sharey=True)
    for ax, (name, variant, theta) in zip(axes, panels):
        part = results[(results["pattern"] == name) & (results["stream"] == variant)]
        precise = part[part["engine"] == "precise"]
        for label, rows in (("precise", precise), (f"ayac θ={theta:g}", part[
            (part["engine"] == "ayac") & (part["threshold"] == theta)
        ])):  # fmt: skip
            ax.plot(rows["drop"], rows["recall"], marker="o", label=f"{label} recall")
            ax.plot(rows["drop"], rows["precision"], marker="s", ls="--",
                    label=f"{label} precision")  # fmt: skip
        ax.set_title(f"{name} ({variant})")
        ax.legend(fontsize=8)
        ax.set_xlabel("sightings dropped")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("recall / precision")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument("--output", default=str(Path(__file__).parent / "results"))
    args = parser.parse_args(argv)
    if not Path(args.data).exists():
        print(f"the RFID reads are not at {args.data}", file=sys.stderr)
        return 1
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    results = evaluate(zone_sightings(Path(args.data)))
    (out / "rfid.md").write_text(table(results) + "\n")
    plot(results, out / "rfid.png")
    print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
