"""Checking a CSV input on its way to the matcher: one read of the files, nothing kept.

    files ──read──▶ checks (a reason per row, the types guessed) ──▶ valid rows ──▶ shuffle by key ──▶ program
                        │ counts observed while the job runs                └─ after the job: the counts
                        └▶ rejected rows (lazy: written by a job of their own, only when there are some)

The one read (`one_read.check_rows_once`) checks every row in a job of its own and keeps
the checked rows in Spark's cache for the matching; here there is no such job. The
projection that checks the rows (`one_read.projected`: the types guessed from the first
rows) feeds the shuffle that lays the events out by key, and the counts the summary
needs, and those that confirm the guessed types, are observed in the same job
(`pyspark.sql.Observation`). Row numbers need the rows of each split of the files before
the matching: for one CSV file Python counts them (`split_rows`) while the plans are
built, and the job checks the counts; otherwise a count of the lines (the cells are not
read) gives them first.

A guess never decides a result: after the job, the counts must confirm the types (and
the number of rows the first count gave). Where they do not, `settle` raises
`GuessWrong` before the output is moved into place, and the caller runs the query
again with the checks in a job of their own (`one_read`, or two reads).

The runs it takes: a `sparkcep run` over CSV files whose queries run as one program
partitioned by a key (no time ranges to lay out, no interval widths to measure first).
SPARKCEP_ONE_PASS=0 turns it off (docs/input.md).
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F

from sparkcep.errors import DataError
from sparkcep.input_types import mostly_numbers
from sparkcep.runners.spark.one_read import (
    ID_BITS,
    Projection,
    counted_kinds,
    projected,
    valid_and_rejected,
)
from sparkcep.runners.spark.rows import MID, RAW, Checked, _sortable
from sparkcep.runners.spark.session import setting

ENV = "SPARKCEP_ONE_PASS"


class GuessWrong(Exception):
    """The counts of a one-pass run did not confirm what the first rows suggested (the
    message says what): the run must check its rows first."""


def enabled() -> bool:
    """Whether a run may check its rows on the way to the matcher (default on)."""
    return os.environ.get(ENV, "").strip() != "0"


def takes(programs, needs_width: bool) -> bool:
    """Whether the programs can run in one pass: one program, laid out by key (time
    ranges need the time span first), and no interval width to measure first."""
    return len(programs) == 1 and bool(programs[0].partition_cols) and not needs_width


def check_on_the_way(  # noqa: PLR0913 (the roles, the splits, what the plans read)
    df: DataFrame,
    *,
    time_col: str,
    type_col: str | None,
    id_col: str | None,
    split_cols: list[Column],
    read: set[str] | None,
    source,
    keep: set[str] | None = None,
    later_cols: set[str] | None = None,
) -> Checked:
    """`check_rows(df, ..., infer_types=True)` with the rows checked lazily, on their
    way to the matcher: the counts are those of the guessed types and are filled in by
    `Checked.settle()` after the job that reads the rows (`Pending`). `source`: the files'
    `spark_files.SparkInput`, whose first cells the types are guessed from; for one CSV
    file it counts the rows of each split in Python (`SparkInput.split_rows`) instead of
    a job of Spark's, and the job checks them (`Pending.settle`). `later_cols`: the
    columns the programs planned against the first rows read, when they check no rows
    themselves (`one_read.projected`)."""
    keep_observed(df.sparkSession)
    split_rows = source.split_rows if id_col is None else None
    if split_rows is not None:
        split_rows.start()  # counting while the plans are built
    p = projected(
        df, time_col=time_col, type_col=type_col, id_col=id_col, split_cols=split_cols,
        read=read, head=source.head, keep=keep, split_rows=split_rows, later_cols=later_cols,
    )  # fmt: skip
    splits = []
    if p.by_split is not None:
        first = p.split_names[0]
        splits = [{first: i, "n": n, "base": i << ID_BITS} for i, n in enumerate(p.by_split)]
    elif id_col is None:
        splits = lines_by_split(df, split_cols, p.split_names)
    # Each typed column keeps its cells as read where one is not of its type: a query
    # that reads the column rejects those rows (`reject_bad_cells`).
    coerced = {n: f"{RAW}{i}" for i, (n, g) in enumerate(p.guesses.items()) if g != "string"}
    roles = (time_col, type_col, id_col)
    valid, rejected, row_ids = valid_and_rejected(
        p.rows, splits, p.split_names, coerced, [], p.columns, roles
    )  # fmt: skip
    counted = sum(r["n"] for r in splits) if id_col is None else None
    return Checked(
        valid,
        rejected,
        row_ids,
        counted or 0,
        0,
        None,
        None,
        "timestamp" if p.time_kind == "timestamp" else "int",
        coerced,
        None,
        id_col is not None,
        pending=Pending(p, counted),
    )


EMPTY_RELATION = "org.apache.spark.sql.execution.adaptive.AQEPropagateEmptyRelation"


def keep_observed(spark) -> None:
    """Adaptive execution must not drop the observed counts: when a run's matching stage
    gives no row, it replaces what follows with an empty relation, the stage that
    observed the counts with it, and the counts are lost (Spark then fails to give
    them). The rule that does so is left out for the session (the CLI's own)."""
    key = "spark.sql.adaptive.optimizer.excludedRules"
    excluded = [r for r in (spark.conf.get(key, "") or "").split(",") if r.strip()]
    if EMPTY_RELATION not in excluded:
        spark.conf.set(key, ",".join([*excluded, EMPTY_RELATION]))


def lines_by_split(df: DataFrame, split_cols: list[Column], split_names: list[str]) -> list:
    """The rows of each split of the files and the id Spark gives the first one, in
    input order: the cells are not read (a count of 4M lines: 0.35-0.5 s, against 1.2 s
    reading every cell). Spark counts a malformed line as a row either way."""
    counted = df.select(
        *[c.alias(n) for n, c in zip(split_names, split_cols)],
        F.monotonically_increasing_id().alias(MID),
    ).groupBy(*split_names).agg(F.count(F.lit(1)).alias("n"), F.min(MID).alias("base"))  # fmt: skip
    with setting(df.sparkSession, "spark.sql.csv.parser.columnPruning.enabled", "true"):
        splits = counted.collect()
    return sorted(splits, key=lambda r: tuple(_sortable(r[n]) for n in split_names))


@dataclass
class Pending:
    """The counts of a one-pass run, read after its job (`settle`)."""

    projection: Projection
    counted: int | None  # the rows `lines_by_split` counted (None: not counted)
    valid_seen: Observation | None = None  # the rows that reach the matcher
    settled: bool = False

    def watch(self, checked: Checked, programs) -> Checked:
        """`checked` with its valid rows counted as the job reads them (after every
        check: the later rejected rows are the rest), unless the checking pass counts
        the rows `programs` reject later itself (`Projection.later_cols`: the same
        columns read, no row checked by a program). An observation of its own costs
        every row a step out of Spark's generated code (G2 16M: about 1.5 s)."""
        later_cols = self.projection.later_cols
        if later_cols is not None and not any(p.row_checks() for p in programs):
            coerced = set(checked.coerced)
            read = {c for p in programs for c in p.columns()}
            if read & coerced == later_cols & coerced:
                return checked
        self.valid_seen = Observation(f"sparkcep valid rows {uuid.uuid4().hex}")
        valid = checked.valid.observe(self.valid_seen, F.count(F.lit(1)).alias("n"))
        checked.valid = valid
        return checked

    def settle(self, checked: Checked) -> None:
        """Fill `checked`'s counts from the job that read the rows; GuessWrong when they
        do not confirm the guesses, DataError when the input holds no events."""
        if self.settled:
            return
        p = self.projection
        try:
            stats = p.observation.get
            valid = self.valid_seen.get["n"] if self.valid_seen is not None else None
        except Exception as e:  # no counts (keep_observed failed to keep them): check first
            raise GuessWrong("Spark gave no counts of the rows it read") from e
        n = stats["n"] or 0
        if not n:
            raise DataError("the input holds no events")
        if self.counted is not None and n != self.counted:
            raise GuessWrong(f"the files held {n:,} rows, not the {self.counted:,} first counted")
        if stats["beyond"] if p.by_split is not None else 0:
            raise GuessWrong("the rows of the file's splits were not those first counted")
        chosen = p.confirmed()
        if chosen is None:
            raise GuessWrong(_wrong(stats, p))
        kind = p.time_kind
        checked.events_read = n
        checked.first_rejected = stats[f"bad_{kind}"]
        checked.min_tick, checked.max_tick = stats[f"tmin_{kind}"], stats[f"tmax_{kind}"]
        if checked.types is None and p.reasons.type_col is not None:
            checked.types = set(stats["types"])
        checked.mostly_text = {
            name: numbers
            for name, (chosen_kind, counts) in chosen.items()
            if chosen_kind == "string" and (numbers := mostly_numbers(counts))
        }
        if valid is not None:
            checked.later_count = n - checked.first_rejected - valid
        elif p.later_cols is not None:  # counted by the checking pass (`watch`)
            checked.later_count = stats["later"]
        self.settled = True


def _wrong(stats, p: Projection) -> str:
    """What the counts said against the guesses, in words."""
    from sparkcep.input_types import choose_kind

    one_reading = len(p.reasons.candidates) == 1 and p.time_kind == "int"
    if one_reading and stats["bad_int"] != stats["other"]:
        return f"some times in {p.reasons.time_col} are not integers"
    for i, (name, guess) in enumerate(p.guesses.items()):
        counts = {k: stats[f"c{i}_{k}"] for k in ("any", *counted_kinds(guess))}
        if choose_kind(counts) != guess:
            return f"column {name} is not {guess} in every row"
    return f"the times in {p.reasons.time_col} do not read as the first rows did"
