"""A query's error before the input is read (no Spark job the answer does not need; an
answer that is an error needs none).

The queries are planned against the valid rows' schema, which the checking pass
decides by reading every row: a text column gets the type most of its values have, a
time column in text is read as integers or as timestamps. Before that pass, the
schema is not known, but the schemas it can give are: every column Spark typed keeps
its type, and each text column the queries read is one of five kinds. When the queries
fail against every one of them, the run would end with a query error whatever the rows
hold, and it ends so now, before a Spark job has run (G2, 1M events: a misspelt
column was reported after 8.7 s, the time of the checking pass; now after the session
starts). The error given is that of the likeliest schema: the types guessed from the
first rows (`spark_once.guess_kind`) when there are any. When a schema passes, nothing
is decided here: the run goes on, and plans again with the schema the rows give.

>>> from pyspark.sql import types as T
>>> fields = [T.StructField(n, T.StringType()) for n in ("type", "k", "ts")]
>>> [s["k"] + "/" + s["ts"] for s in valid_schemas(T.StructType(fields), "ts", "type",
...  {"k"}, {"k": ["1", "2"], "ts": ["2024-01-01"]})][:3]
['int/timestamp', 'int/int', 'float/timestamp']
"""

from __future__ import annotations

import itertools
import warnings
from dataclasses import replace

from pyspark.sql import types as T

from sparkcep.engines.registry import compile_jobs
from sparkcep.errors import SparkcepError
from sparkcep.files import CORRUPT, InputSource
from sparkcep.inputs import ROW
from sparkcep.plan import Options, plan_queries
from sparkcep.plan.columns import named_columns
from sparkcep.runners.spark.one_read import guess_kind, guess_time
from sparkcep.runners.spark.rows import check_columns, kind_of_spark
from sparkcep.schema import Kind

MAX_SCHEMAS = 256  # planning takes milliseconds; beyond this many, nothing is decided early
TEXT_KINDS: tuple[Kind, ...] = ("int", "float", "bool", "timestamp", "string")
_GUESSED = {"long": "int", "double": "float", "boolean": "bool"}  # guess_kind's names


def valid_schemas(
    schema: T.StructType,
    time_col: str,
    type_col: str | None,
    inferred: set[str] | None,
    head: dict[str, list[str]] | None,
) -> list[dict[str, Kind]] | None:
    """Every schema the checking pass can give the valid rows of an input of `schema`,
    the guessed one first; None when there are more than MAX_SCHEMAS. `inferred`: the
    text columns whose type the pass infers (None: none, the input is typed)."""
    head = head or {}
    choices: dict[str, list[Kind]] = {}
    for f in schema.fields:
        if f.name == CORRUPT:
            continue
        text = isinstance(f.dataType, T.StringType)
        if f.name == time_col:
            kind = kind_of_spark(f.dataType)
            if text:  # the one read's guess first (spark_once.check_rows_once)
                first = guess_time(head.get(f.name, []))
                choices[f.name] = [first, "timestamp" if first == "int" else "int"]
            elif kind in ("int", "float", "timestamp"):
                choices[f.name] = ["timestamp" if kind == "timestamp" else "int"]
            else:
                return None  # a time of another type: the pass rejects every row
        elif text and inferred is not None and f.name in inferred and f.name != type_col:
            guess = guess_kind(head.get(f.name, []))
            first = _GUESSED.get(guess, guess)
            choices[f.name] = [first, *[k for k in TEXT_KINDS if k != first]]
        else:
            choices[f.name] = [kind_of_spark(f.dataType)]
    count = 1
    for kinds in choices.values():
        count *= len(kinds)
    if count > MAX_SCHEMAS:
        return None
    names = list(choices)
    return [dict(zip(names, kinds)) for kinds in itertools.product(*choices.values())]


def raise_sure_error(
    schema: T.StructType,
    queries,
    options: Options,
    roles: dict[str, str | None],
    inferred: set[str] | None,
    head: dict[str, list[str]] | None,
) -> list | None:
    """Raise the error planning the queries ends with for every schema the checking pass
    can give (the likeliest schema's error). Otherwise the programs planned against the
    guessed schema (the first), or None when that one does not plan or there are too
    many schemas to try."""
    check_columns(schema.names, roles["time_col"], roles["type_col"], roles["id_col"])
    schemas = valid_schemas(schema, roles["time_col"], roles["type_col"], inferred, head)
    if not schemas:
        return None
    first = None
    for candidate in schemas:
        try:
            programs = _programs(queries, candidate, options)
        except SparkcepError as error:
            first = first or error
            continue
        return programs if first is None else None
    raise first


def _programs(queries, schema: dict[str, Kind], options: Options) -> list:
    """The programs the run would compile for `schema` (its warnings are not given: the
    run plans again and warns then); a SparkcepError when the queries fail."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plans, names = plan_queries(queries, schema, options)
        return compile_jobs(plans, names, replace(options, id_col=options.id_col or ROW))


def kept_columns(
    guessed: list | None, roles: dict[str, str | None], read: set[str] | None
) -> set[str] | None:
    """The input columns the valid rows must keep when the checking pass gives the types
    guessed from the first rows (the one read keeps no others: spark_once), given the
    programs planned against them (`raise_sure_error`); None for every column: when the
    queries may read every column (`read` is None: a `*` in a query), do not plan
    against the guessed schema, or a program checks rows itself (a row it rejects shows
    all its cells). A guess the counts do not confirm is never used (the run then reads
    twice), so the programs the run compiles are these."""
    if read is None or guessed is None or any(p.row_checks() for p in guessed):
        return None
    return {c for p in guessed for c in p.columns()} | {c for c in roles.values() if c}


def raise_sure_csv_error(source: InputSource | str, queries, options: Options, **reading) -> None:
    """`raise_sure_error` for CSV files from their header and first rows, read in the
    driver: no JVM is needed, so a query's error is given while Spark starts. Anything
    else (another format, a file that cannot be read) is left to the run. `source`: the
    input, or its path (read with the keywords of `InputSource.of`)."""
    from sparkcep.runners.local import type_column

    try:
        source = InputSource.of(source, **reading)
        if source.fmt != "csv":
            return
        header = source.header
        roles = {
            "time_col": options.time_col,
            "type_col": type_column(header, queries, options),
            "id_col": options.id_col,
        }
        read = named_columns(queries, header, options)
    except Exception:  # the run reports it as it always has
        return
    schema = T.StructType([T.StructField(name, T.StringType()) for name in header])
    inferred = set(header) if read is None else read
    raise_sure_error(schema, queries, options, roles, inferred, source.head)
