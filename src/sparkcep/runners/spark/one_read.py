"""Checking a CSV input with one read of the files instead of two.

Spark's checking pass (`spark_rows.check_rows`) reads the files twice: once to count
and to choose each column's type, once more to give the rows those types. Here the
types are guessed from the first rows of the first file (read in the driver), and one
Spark job reads every row, checks it with the guessed types, counts what the choice
needs (observed while the job runs) and keeps the checked rows (a Spark cache, spilled
to disk when memory runs short). The matching and the rejected rows then read the cache.

A guess never decides a result: the counts of every row must confirm that Spark's
checking pass would have chosen the same types (`confirmed`). Where they do not, the
cache is dropped and the run takes the two reads (`check_rows`), so the output is the
same either way. Guessing fewer types also computes less: a column guessed `long` is
not read as a boolean or a timestamp at all, since those counts cannot change the choice.

SPARKCEP_ONE_READ=0 turns it off (docs/input.md).

>>> guess_kind(["1", " 22", "", "-3"]), guess_kind(["1.5", "2"]), guess_kind(["true", "x"])
('long', 'double', 'string')
>>> guess_kind(["1", "2", "007"]), guess_kind(["1", "NA"])
('string', 'string')
>>> guess_kind([str(i) for i in range(9)] + ["x"]), guess_kind(["2024-01-02", "2024-01-03 10:00"])
('long', 'timestamp')
>>> guess_time(["1700000000000", "12", "3.0"]), guess_time(["2024-01-01 10:00:00"])
('int', 'timestamp')
"""

from __future__ import annotations

import os
import re
import uuid
from dataclasses import dataclass

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F

from sparkcep.errors import DataError
from sparkcep.files import CORRUPT
from sparkcep.input_types import (
    KINDS,
    NUMBER,
    cell_counts,
    choose_kind,
    mostly_numbers,
    present_cells,
)
from sparkcep.inputs import REASON, ROW
from sparkcep.prep.table import TICKS
from sparkcep.runners.spark.rows import (
    AS_READ,
    CAST,
    MID,
    POST,
    PRE,
    RAW,
    SPLIT,
    Checked,
    _casts,
    _null_tokens,
    _Reasons,
    _row_numbers,
    _sortable,
    _text_columns,
    _valid_text,
    check_columns,
    null_cell,
)
from sparkcep.runners.spark.session import setting

ENV = "SPARKCEP_ONE_READ"
WHOLE = re.compile(r"^\s*[+-]?[0-9]+\s*$")
_NUMBER = re.compile(NUMBER)


def one_read() -> bool:
    """Whether CSV inputs are checked with one read (SPARKCEP_ONE_READ, default on)."""
    return os.environ.get(ENV, "").strip() != "0"


def guess_kind(cells: list[str]) -> str:
    """The type the first rows' cells suggest, by the one rule (`choose_kind`) over
    their counts as Python reads them: 'long', 'double', 'boolean', 'timestamp' (dates
    written year first) or 'string'."""
    return choose_kind(cell_counts(cells)) or "string"


def guess_time(cells: list[str]) -> str:
    """How the first rows' times read: 'int' when every one is a whole number (any
    number of digits: a time beyond the limit is a row's fault, not the column's)."""
    present = present_cells(cells)
    return "int" if present and all(_whole(c) for c in present) else "timestamp"


def _whole(cell: str) -> bool:
    if WHOLE.match(cell):
        return True
    try:
        return bool(_NUMBER.match(cell)) and float(cell).is_integer()
    except OverflowError:
        return False


def counted_kinds(guess: str) -> tuple[str, ...]:
    """The types whose counts decide whether a column guessed `guess` gets it: the ones
    tried before it, and itself (all of them for text), after the leading zeros."""
    return ("zeros", *(KINDS if guess == "string" else KINDS[: KINDS.index(guess) + 1]))


def check_rows_once(
    df: DataFrame,
    *,
    time_col: str,
    type_col: str | None,
    id_col: str | None,
    split_cols: list[Column],
    read: set[str] | None,
    head: dict[str, list[str]],
    keep: set[str] | None = None,
) -> Checked | None:
    """`check_rows(df, ..., infer_types=True)` with one read of a text input, or None
    when the counts do not confirm the types guessed from `head` (each column's first
    cells): the caller then takes `check_rows`. The checked rows stay cached until
    `Checked.release()`. `keep` (`query_first.kept_columns`; None: all): the columns the
    valid rows keep; a row that may be rejected later keeps all its cells as read."""
    p = projected(
        df, time_col=time_col, type_col=type_col, id_col=id_col, split_cols=split_cols,
        read=read, head=head, keep=keep,
    )  # fmt: skip
    cached = _persisted(p.rows)
    counts = [F.count(F.lit(1)).alias("n")]
    if id_col is None:
        counts.append(F.min(MID).alias("base"))
    try:
        splits = cached.groupBy(*p.split_names).agg(*counts).collect()  # fills the cache
    except BaseException:  # a file Spark cannot read: reported by the caller, nothing kept
        cached.unpersist()
        raise
    splits = sorted(splits, key=lambda r: tuple(_sortable(r[n]) for n in p.split_names))
    if sum(r["n"] for r in splits) == 0:  # (the observed sums are then nulls)
        cached.unpersist()
        raise DataError("the input holds no events")
    confirmed_types = p.confirmed()
    if confirmed_types is None:
        cached.unpersist()
        return None
    roles = (time_col, type_col, id_col)
    return _checked(
        cached, p.observation.get, splits, p.split_names, p.time_kind, confirmed_types,
        p.columns, roles,
    )  # fmt: skip


def projected(  # noqa: PLR0913 (the roles, the splits, their counts, the first rows)
    df: DataFrame,
    *,
    time_col: str,
    type_col: str | None,
    id_col: str | None,
    split_cols: list[Column],
    read: set[str] | None,
    head: dict[str, list[str]],
    keep: set[str] | None = None,
    split_rows=None,
    later_cols: set[str] | None = None,
) -> Projection:
    """Every row checked with the types guessed from `head` (the projection the one
    read keeps, and the one pass feeds to the matcher), observed while a job reads it.
    `split_rows` (one file, no id column: `spark_files.SplitRows`): the rows of each of
    its splits as counted in Python, checked in the same observation (`beyond`: rows
    beyond their split's count). `later_cols` (the columns the programs read, when they
    check no rows themselves): the valid rows a cell of those columns not of its type
    rejects later (`rows.reject_bad_cells`) are counted too (`later`)."""
    check_columns(df.columns, time_col, type_col, id_col)
    columns = df.columns
    # Blank cells are nulls in the columns the valid rows keep; the others are read only
    # for a rejected row's cells as read (`_kept`): there, and only for such rows.
    nulled = None if keep is None else {*keep, *(read or ()), time_col, type_col, id_col}
    df = _null_tokens(df, only=nulled)
    reasons = _Reasons(df, time_col, type_col, text=True, id_col=id_col)
    time_kind = next(iter(reasons.candidates))
    if len(reasons.candidates) > 1:
        time_kind = guess_time(head.get(time_col, []))
        if time_kind == "int":  # confirmed when no row fails the integer reading alone
            reasons.candidates = {"int": reasons.candidates["int"]}
    inferred = [
        c for c in _text_columns(df, (time_col, type_col, CORRUPT)) if read is None or c in read
    ]
    guesses = {name: guess_kind(head.get(name, [])) for name in inferred}
    split_names = [f"{SPLIT}{i}" for i in range(len(split_cols))]
    facts = [*reasons.probe(), *[c.alias(n) for n, c in zip(split_names, split_cols)]]
    aggs = [*reasons.aggregates(), F.count(F.when(_other(), 1)).alias("other")]
    if id_col is None:
        facts.append(F.monotonically_increasing_id().alias(MID))
    for i, name in enumerate(inferred):
        casts = _casts(name)
        for kind in ("any", *counted_kinds(guesses[name])):
            if kind != "any":
                facts.append(casts[kind].alias(f"{CAST}{i}_{kind}"))
            cell = F.col(f"`{name}`") if kind == "any" else F.col(f"{CAST}{i}_{kind}")
            aggs.append(F.count(F.when(~reasons.corrupt, cell)).alias(f"c{i}_{kind}"))
    by_split = split_rows.result() if split_rows is not None and id_col is None else None
    if by_split is not None:
        beyond = _beyond_counted(by_split, F.col(MID), F.col(split_names[0]))
        aggs.append(F.count(F.when(beyond, 1)).alias("beyond"))
    if later_cols is not None:
        not_typed = F.lit(False)
        for i, name in enumerate(inferred):
            if guesses[name] != "string" and name in later_cols:
                cast = F.col(f"{CAST}{i}_{guesses[name]}")
                not_typed = not_typed | (F.col(f"`{name}`").isNotNull() & cast.isNull())
        aggs.append(F.count(F.when(F.col(REASON).isNull() & not_typed, 1)).alias("later"))
    # A name of its own: a cached plan equal to another run's (one not released) would
    # be reused, its rows not read again, and this observation never filled.
    observation = Observation(f"sparkcep checking pass {uuid.uuid4().hex}")
    staged = (
        df.select("*", *facts)
        .withColumn(REASON, reasons.reason(time_kind))
        .observe(observation, *aggs)
    )
    kept = _kept(columns, inferred, guesses, time_col, keep, nulled)
    rows = staged.select(
        *split_names,
        *([MID] if id_col is None else []),
        REASON,
        *[c.alias(n) for n, c in kept.items()],
        _time_value(time_kind).alias(time_col),
        F.col(f"__tick_{time_kind}").alias(TICKS),
    )
    return Projection(
        rows, observation, reasons, time_kind, guesses, split_names, columns, by_split,
        later_cols,
    )  # fmt: skip


# Spark's monotonically_increasing_id: the partition in the upper bits, the row's place in
# it in the lower 33
ID_BITS = 33


def _beyond_counted(counted: list[int], row_id: Column, split: Column) -> Column:
    """A row beyond the rows counted for its split (one file's splits are Spark's
    partitions of it, in order). With the total equal to the rows read, no such row
    means every split's count holds."""
    place = row_id - F.shiftleft(split.cast("long"), ID_BITS)
    n = F.try_element_at(F.array(*[F.lit(c) for c in counted]), split + 1)
    return F.coalesce(place >= n, F.lit(True))


@dataclass
class Projection:
    """The checked rows of `projected` (lazy), and what their counts are read with."""

    rows: DataFrame
    observation: Observation  # filled by the first job that reads `rows`
    reasons: _Reasons
    time_kind: str
    guesses: dict[str, str]
    split_names: list[str]
    columns: list[str]
    by_split: list[int] | None = None  # the rows of each split, counted in Python
    later_cols: set[str] | None = None  # the columns whose bad cells `later` counts

    def confirmed(self) -> dict | None:
        """The types the counts confirm (`_confirmed`; the job has run)."""
        return _confirmed(self.observation.get, self.reasons, self.time_kind, self.guesses)


def _persisted(df: DataFrame) -> DataFrame:
    """`df` kept by Spark in memory (on disk past it), uncompressed: compressing the
    columns cost more CPU than the rows' second read saves (G2, 1M events: 10.8 against
    8.9 JVM CPU seconds). Spark reads the setting when the cache is declared."""
    with setting(df.sparkSession, "spark.sql.inMemoryColumnarStorage.compressed", "false"):
        return df.persist(StorageLevel.MEMORY_AND_DISK)


def _other() -> Column:
    """A row rejected for a reason other than its time's reading."""
    return F.col(PRE).isNotNull() | F.col(POST).isNotNull()


def _time_value(time_kind: str) -> Column:
    ticks = F.col(f"__tick_{time_kind}")
    return F.timestamp_micros(ticks) if time_kind == "timestamp" else ticks


def _kept(columns, inferred, guesses, time_col, keep=None, nulled=None) -> dict[str, Column]:
    """The cached columns besides the row's reason and time: each column (of `keep`,
    when given), typed as guessed where the queries may read it; beside a typed one the
    cell as read where a cell of the row is not of its type (such a row may be rejected
    later: `reject_bad_cells` gives the rejected row its cells as read); and every cell
    as read where the row is rejected, or (with `keep`) may be rejected later."""
    # Every column by default, as in `check_rows`' valid rows: a row a query's own check
    # rejects later shows all its cells, those the queries do not read too. With `keep`
    # there is no such check, and a row with a cell not of its type keeps all its cells
    # in AS_READ (hospital.csv.gz, 10 columns, 3 read: 9.5 -> 9.0 s; G2: 10.2 -> 9.95 s).
    readable = [c for c in columns if c not in (CORRUPT, time_col) and (keep is None or c in keep)]
    typed = {i: n for i, n in enumerate(inferred) if guesses[n] != "string"}
    kept = {}
    for c in readable:
        i = next((i for i, n in typed.items() if n == c), None)
        kept[c] = F.col(f"`{c}`") if i is None else F.col(f"{CAST}{i}_{guesses[c]}")
    not_typed = [F.col(f"`{n}`").isNotNull() & F.col(f"{CAST}{i}_{guesses[n]}").isNull()
                 for i, n in typed.items()]  # fmt: skip
    if not_typed:
        some = not_typed[0]
        for more in not_typed[1:]:
            some = some | more
        for i, n in typed.items():
            kept[f"{RAW}{i}"] = F.when(some, F.col(f"`{n}`"))
    rejected = F.col(REASON).isNotNull()
    if keep is not None and not_typed:
        rejected = rejected | some
    cells = [
        F.col(f"`{c}`") if nulled is None or c in nulled or c == CORRUPT
        else null_cell(F.col(f"`{c}`")).alias(c)
        for c in columns
    ]  # fmt: skip
    kept[AS_READ] = F.when(rejected, F.struct(*cells))
    return kept


def _confirmed(stats, reasons: _Reasons, time_kind: str, guesses: dict) -> dict | None:
    """The column types the checking pass would choose, if the counts confirm the
    guesses (the time's reading too); None otherwise."""
    if len(reasons.candidates) == 1:
        if time_kind == "int" and stats["bad_int"] != stats["other"]:
            return None  # some row reads only as a timestamp, maybe
    elif reasons.time_kind([stats]) != time_kind:
        return None
    chosen = {}
    for i, (name, guess) in enumerate(guesses.items()):
        counts = {k: stats[f"c{i}_{k}"] for k in ("any", *counted_kinds(guess))}
        kind = choose_kind(counts)
        if kind != guess:
            return None
        chosen[name] = (kind, counts)
    return chosen


def _checked(cached, stats, splits, split_names, time_kind, chosen, columns, roles) -> Checked:
    """The checked rows, from the cache, as `check_rows` gives them."""
    _, type_col, id_col = roles
    coerced, mostly, unused = {}, {}, []
    for i, (name, (kind, counts)) in enumerate(chosen.items()):
        if kind == "string":
            if numbers := mostly_numbers(counts):
                mostly[name] = numbers
        elif counts[kind] < counts["any"]:
            coerced[name] = f"{RAW}{i}"
        else:
            unused.append(f"{RAW}{i}")
    valid, rejected, row_ids = valid_and_rejected(
        cached, splits, split_names, coerced, unused, columns, roles
    )  # fmt: skip
    return Checked(
        valid,
        rejected,
        row_ids,
        sum(r["n"] for r in splits),
        stats[f"bad_{time_kind}"],
        stats[f"tmin_{time_kind}"],
        stats[f"tmax_{time_kind}"],
        "timestamp" if time_kind == "timestamp" else "int",
        coerced,
        set(stats["types"]) if type_col is not None else None,
        id_col is not None,
        mostly_text=mostly,
        cached=cached,
    )


def valid_and_rejected(
    rows: DataFrame, splits, split_names, coerced: dict, unused: list, columns, roles
) -> tuple[DataFrame, DataFrame, str]:
    """The valid and the rejected rows of the checked `rows` (a `projected` frame), as
    `check_rows` gives them, and the column of their ids. `coerced`: the typed columns
    whose cells as read the rows keep (`Checked.coerced`); `unused`: those not kept."""
    _, _, id_col = roles
    id_given = id_col is not None
    checked = rows
    if id_col is None:
        checked, id_col = _row_numbers(rows, splits, split_names), ROW
    reason = F.col(REASON)
    # When only some columns were kept, a row that `reject_bad_cells` may reject takes
    # its other cells from AS_READ there; otherwise the valid rows need none of it.
    some_kept = any(c not in rows.columns for c in columns if c not in (CORRUPT, roles[0]))
    as_read_kept = [] if some_kept and coerced else [AS_READ]
    valid = checked.filter(reason.isNull()).drop(REASON, *as_read_kept, *split_names, *unused)
    as_read = [F.col(f"{AS_READ}.`{c}`").alias(c) for c in columns]
    tail = [REASON] if id_given else [REASON, ROW]
    rejected = _valid_text(checked.filter(reason.isNotNull()).select(*as_read, *tail))
    return valid, rejected, id_col
