"""One table of issue 16's targets, each with the ratio measured and the peer or floor
it was measured against in the same run (`make bench` runs this last).

Each benchmark that measures a target writes `results/<name>.targets.json` (a list of
rows, see `target_row`); this gathers them into `results/targets.md`.

    python -m benchmarks.targets
"""

from __future__ import annotations

import json
import re
from pathlib import Path

RESULTS = Path(__file__).parent / "results"


def target_row(goal: str, target: str, measured: float | None, peer: str, note: str = "") -> dict:
    """A target's row: `target` is "≤ x", "< x", "≥ x" or "> x" (or free text), `measured`
    the figure it is judged on, `peer` what it was compared with (same run)."""
    return {"goal": goal, "target": target, "measured": measured, "peer": peer, "note": note}


def met(target: str, measured: float | None) -> str:
    m = re.fullmatch(r"\s*(≤|<|≥|>)\s*([-+0-9.]+)\s*", target)
    if m is None or measured is None:
        return "–"
    op, bound = m.group(1), float(m.group(2))
    ok = {"≤": measured <= bound, "<": measured < bound, "≥": measured >= bound}.get(
        op, measured > bound
    )
    return "met" if ok else "missed"


def _figure(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def write_targets(name: str, rows: list[dict], folder: Path | None = None) -> None:
    folder = folder or RESULTS
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.targets.json").write_text(json.dumps(rows, indent=1) + "\n")


def main() -> None:
    lines = [
        "# Issue 16: every target, measured",
        "",
        "Each row comes from one benchmark run (its file says when and under what load);",
        "ratios compare figures measured in the same run. Regenerate with `make bench`.",
        "",
        "| goal | target | measured | | peer or floor (same run) | from | note |",
        "|---|---|---:|---|---|---|---|",
    ]
    for path in sorted(RESULTS.glob("*.targets.json")):
        source = path.name.removesuffix(".targets.json")
        for row in json.loads(path.read_text()):
            value = _figure(row["measured"])
            lines.append(
                f"| {row['goal']} | {row['target']} | {value} | {met(row['target'], row['measured'])}"
                f" | {row['peer']} | [{source}]({source}.md) | {row.get('note', '')} |"
            )
    lines.append("")
    (RESULTS / "targets.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
