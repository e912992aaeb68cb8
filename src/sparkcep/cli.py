"""The `sparkcep` command: run queries over event files, explain them, stream them.

A command's option flags are made from the fields of `Options` (`option_flags`: flag, help,
default; docs/api.md maps each flag to its Python keyword) and arrive as one `Options`
value, which it hands to a runner; nothing here knows which engine answers.
"""

from __future__ import annotations

import inspect
import os
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from sparkcep.errors import DataError, QueryError, SparkcepError, raised_in_worker
from sparkcep.language.forms import is_match_recognize
from sparkcep.language.parser import parse_file
from sparkcep.plan import Options
from sparkcep.plan.model import takes_options

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Complex event processing on Spark: pattern queries over event files.",
)
err = Console(stderr=True, soft_wrap=True)  # an error is one line, however long
out = Console()


def _print_version(value: bool) -> None:
    if value:
        from sparkcep import __version__

        print(f"sparkcep {__version__}")
        raise typer.Exit()


@app.callback()
def _top(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """The options of `sparkcep` itself, before the command."""


QueryArg = Annotated[
    str, typer.Argument(help="A query file, or the query text itself (PATTERN ...).")
]
NameOpt = Annotated[
    str | None, typer.Option("--query", help="Which named query of the file to run.")
]
SepOpt = Annotated[str, typer.Option("--sep", help="CSV field separator.")]
NullOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--null-value",
        help="A cell that means no value, besides an empty one (repeat for more: "
        "--null-value NA --null-value n/a).",
    ),
]
ColumnsOpt = Annotated[
    str | None,
    typer.Option(
        "--columns",
        help="CSV files without a header line: their column names, comma-separated.",
    ),
]
MasterOpt = Annotated[
    str | None,
    typer.Option(
        "--master",
        "--remote",
        help="Spark master URL (default local[*]), or a Spark Connect server's (sc://host:port).",
    ),
]


def option_flags(*names: str, required: tuple[str, ...] = (), help: dict | None = None):
    """A command's flags for the options `names`, made from their definitions in
    `Options` (flag, help, default); the command gets them as one `options`. `help`
    words a flag for this command."""
    words = help or {}

    def flag(name, option, kind):
        meta = option.metadata
        if "parse" in meta:  # the option reads its own text (a size: 2GB)
            kind = str if name in required else str | None
        info = typer.Option(meta["flag"], help=words.get(name, meta["help"]), min=meta.get("min"))
        return Annotated[kind, info]

    def decorate(command):
        wrapped = takes_options(*names, required=required, annotate=flag)(command)
        own = inspect.signature(command, eval_str=True).parameters  # typer reads the types
        shown = inspect.signature(wrapped).parameters.values()
        flags = [
            own[p.name].replace(kind=p.kind) if p.name in own else p
            for p in shown
            if p.name != "options"
        ]
        wrapped.__signature__ = inspect.Signature(flags)
        return wrapped

    return decorate


# Which options each command takes as flags (all defined in `Options`).
READ_FLAGS = ("time_col", "type_col", "id_col", "time_unit", "tiebreak")  # how events are read
INTERVAL_FLAGS = ("time_end_col", "pmf_col", "max_width")
EXPLAIN_FLAGS = (*READ_FLAGS, "algorithm", "sharing", "prune", *INTERVAL_FLAGS)
RUN_FLAGS = (*EXPLAIN_FLAGS, "max_matches", "memory_budget", "ayac_rows")
STREAM_FLAGS = (*READ_FLAGS, *INTERVAL_FLAGS, "memory_budget", "ayac_rows")

QUERY_SUFFIXES = (".cep", ".sase", ".txt", ".sql", ".query")


def _query_text(query: str) -> str:
    """The query: the text of a .cep file, of another file whose text parses as queries,
    or the argument itself. A file that is not a query is never echoed (its first line
    would show in the error)."""
    path = Path(query)
    if path.suffix in QUERY_SUFFIXES and not path.is_file():
        raise SparkcepError(f"the query file '{query}' does not exist")
    if len(query) < 4096 and "\n" not in query and path.is_file():
        if path.suffix == ".cep":
            return path.read_text()
        return _parsed_or_refused(path)
    starts = ("PATTERN", "QUERY", "RULE", "EPISODE", "FUNNEL")
    if query.lstrip().upper().startswith(starts) or is_match_recognize(query):
        return query
    raise SparkcepError(f"'{query}' is neither a query file nor a query (PATTERN ...)")


def _parsed_or_refused(path: Path) -> str:
    """A file not named .cep is a query only if its text parses."""
    try:
        text = path.read_bytes()[: 1 << 20].decode("utf-8")
        if not is_match_recognize(text):  # SELECT ... MATCH_RECOGNIZE (a .sql file)
            parse_file(text)
        return text
    except Exception:  # never shown: the file may hold anything (a password file)
        raise SparkcepError(
            f"'{path}' is a file, not a query file: name query files .cep "
            "(its content is not shown)"
        ) from None


def _pick(text: str, name: str | None) -> str:
    """The queries to run: the whole file, or the one named query."""
    if is_match_recognize(text):  # SELECT ... MATCH_RECOGNIZE: one query, no names
        if name is not None:
            raise SparkcepError("--query picks a named query; a MATCH_RECOGNIZE file holds one")
        return text
    queries = parse_file(text)
    if name is None:
        return queries[0].text if len(queries) == 1 and queries[0].name else text
    for q in queries:
        if q.name == name:
            return q.text
    raise SparkcepError(
        f"no query named '{name}' (the file has {', '.join(str(q.name) for q in queries)})"
    )


def _reading(sep: str, columns: str | None, null_values: list[str] | None = None) -> dict:
    """How to read the input files: the CSV separator, the names of headerless CSV, and
    the cells that mean no value besides an empty one."""
    names = [c.strip() for c in columns.split(",")] if columns else None
    sep = {"\\t": "\t", "tab": "\t"}.get(sep, sep)  # a tab as a shell passes it: --sep '\t'
    if len(sep) != 1:
        raise SparkcepError(
            f"--sep takes one character, e.g. --sep ';' or --sep '\\t' (got '{sep}')"
        )
    return {"sep": sep, "columns": names, "null_values": tuple(null_values or ())}


@dataclass
class Summary:
    """What a run prints at its end."""

    mode: str
    events: int
    rejected: int
    partitions: str
    rows: int
    label: str
    seconds: float = 0.0
    engine_seconds: float | None = None
    warnings: list[str] = field(default_factory=list)
    capped: bool = False
    reasons: dict[str, int] | None = None  # the rejected rows' reasons, when every row is
    why: str | None = None  # no match: how to learn why

    def all_rejected(self) -> str | None:
        """The error of a run that rejected every row it read (it matched nothing)."""
        if not self.events or self.rejected < self.events or not self.reasons:
            return None
        return all_rejected(self.events, self.reasons)


def all_rejected(events: int, reasons: dict[str, int]) -> str:
    """Every row read was rejected: say so, with the reason most rows have."""
    reason, n = min(reasons.items(), key=lambda kv: (-kv[1], kv[0]))
    rows = f"{n:,} row{'' if n == 1 else 's'}"
    return f"every one of the {events:,} rows read was rejected (most often: {reason}, {rows})"


@app.command()
@option_flags(*RUN_FLAGS)
def run(
    query: QueryArg,
    input: Annotated[
        str,
        typer.Option(
            "--input", "-i", help="Event file or folder (.csv, .jsonl, .parquet, optionally .gz)."
        ),
    ],
    output: Annotated[
        str,
        typer.Option("--output", "-o", help="Matches file: .jsonl (default), .csv or .parquet."),
    ] = "matches.jsonl",
    local: Annotated[
        bool, typer.Option("--local", help="Run in this process with pandas, without Spark.")
    ] = False,
    master: MasterOpt = None,
    options: Options | None = None,
    rejected: Annotated[
        str | None,
        typer.Option("--rejected", help="Where rejected rows go (default: next to the output)."),
    ] = None,
    count: Annotated[
        bool,
        typer.Option(
            "--count",
            help="Count the rows without writing them (no output file; rejected rows only "
            "with --rejected).",
        ),
    ] = False,
    name: NameOpt = None,
    sep: SepOpt = ",",
    columns: ColumnsOpt = None,
    null_value: NullOpt = None,
    partitions: Annotated[
        int | None,
        typer.Option("--partitions", help="Spark partitions for the matching stage.", min=1),
    ] = None,
):
    """Run queries (patterns, AGG, or a file of named ones) over event files and write
    the rows."""
    from sparkcep.files import check_output, default_rejected_path

    started = time.time()
    text = _pick(_query_text(query), name)
    if count:
        output = None  # nothing is written but what --rejected names
        rejected_path = rejected
        if rejected_path is not None:
            check_output(rejected_path, input, "rejected file")
    else:
        rejected_path = rejected or default_rejected_path(output)
        check_output(output, input)  # every option is checked before anything runs
        check_output(rejected_path, input, "rejected file")
        if os.path.realpath(rejected_path) == os.path.realpath(output):
            raise SparkcepError(f"--rejected and --output are the same file '{output}': name two")
    options = _query_options(text, options)
    with err.status("starting") as status:
        if local:
            reading = _reading(sep, columns, null_value)
            summary = _run_local(text, input, output, rejected_path, options, reading, status)
        else:
            spark = (master, partitions)
            reading = _reading(sep, columns, null_value)
            summary = _run_spark(
                text, input, output, rejected_path, options, reading, spark, status
            )
    summary.seconds = time.time() - started
    failure = summary.all_rejected()
    if failure:  # its line says why; warnings about the rows that matched are noise
        summary.warnings = []
    elif not summary.rows and summary.label == "matches" and not is_match_recognize(text):
        shown = query if os.path.exists(query) else "QUERY"
        summary.why = (
            f"`sparkcep why {shown} --input {input}` shows the partial matches that got "
            "furthest, and why each stopped"
        )
    _print_summary(summary, output, rejected_path, explicit_rejected=rejected is not None)
    if failure:
        raise DataError(failure)


def _query_options(text: str, options: Options) -> Options:
    """MATCH_RECOGNIZE: the time and tie-break come from ORDER BY (its modules are
    imported for such a query only)."""
    from sparkcep.runners.local import order_by_options

    return order_by_options(text, options)


def _run_local(text, input, output, rejected_path, options, reading, status) -> Summary:
    from sparkcep.files import read_pandas, write_pandas
    from sparkcep.runners.local import execute_local

    status.update("reading " + input)
    frame = read_pandas(input, **reading)
    status.update(f"matching {len(frame):,} events")
    engine_start = time.time()
    result = execute_local(frame, text, options, count_only=output is None)  # --count
    engine_seconds = time.time() - engine_start
    if output is not None:
        status.update("writing " + output)
        write_pandas(result.matches, output)
    rejected = _rejected_as_read(result, input, reading)
    _write_rejected_pandas(rejected, rejected_path)
    rows = result.row_count
    everything = len(result.rejected) >= result.events_read
    return Summary(
        reasons=result.rejected["reason"].value_counts().to_dict() if everything else None,
        mode="local (pandas, no Spark)",
        events=result.events_read,
        rejected=len(result.rejected),
        partitions=_partitions_local(result),
        rows=rows,
        label=result.label,
        engine_seconds=engine_seconds,
        warnings=result.warnings,
        capped=options.max_matches is not None and rows >= options.max_matches,
    )


def _rejected_as_read(result, input, reading):
    """A CSV input's rejected rows as the file holds them (text) and its malformed-row
    column, as a Spark run writes them (docs/input.md)."""
    from sparkcep.files import InputSource, read_pandas, rows_as_read
    from sparkcep.inputs import REASON, ROW

    rejected = result.rejected
    source = InputSource.of(input, **reading)
    if source.fmt != "csv" or not len(rejected):
        return rejected
    text = read_pandas(source, text=True)  # again: only when a row was rejected
    out = rows_as_read(text, result.rejected_at, source)
    out[REASON] = rejected[REASON].to_numpy()
    if ROW in rejected:
        out[ROW] = rejected[ROW].to_numpy()
    return out


def _partitions_local(result) -> str:
    """How the stream was partitioned, in words: the key, and how many keys have rows
    when the rows show the key (not when they were only counted)."""
    key = list(result.plan.key)
    if not key:
        return "1 (no key)"
    text = f"keyed by {', '.join(key)}"
    if (
        result.matches is not None
        and len(result.matches)
        and set(key) <= set(result.matches.columns)
    ):
        keys = int(result.matches[key].drop_duplicates().shape[0])
        text += f" ({keys:,} {'key has' if keys == 1 else 'keys have'} rows)"
    return text


def _write_rejected_pandas(frame, path):
    from sparkcep.files import write_pandas

    if path is None:  # --count without --rejected
        return
    if len(frame):
        write_pandas(frame, path)
    elif os.path.exists(path):
        os.remove(path)


def _run_spark(text, input, output, rejected_path, options, reading, spark_opts, status) -> Summary:
    from sparkcep.files import InputSource

    master, partitions = spark_opts
    status.update("starting Spark")
    source = InputSource.of(input, **reading)  # a missing input: said before the JVM starts

    def prepare():  # while the JVM starts: a query's sure error; a small input, checked
        from sparkcep.runners.spark.run_file import prepare_file

        return prepare_file(source, text, options)

    spark, early = _start_spark(master, source, prepare)
    from sparkcep.runners.spark.one_pass import GuessWrong
    from sparkcep.runners.spark.run_file import run_file

    def run(one_pass: bool):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = run_file(
                spark, source, text, options, partitions=partitions, prepared=early,
                one_pass=one_pass,
            )  # fmt: skip
        return result, caught

    with _progress(spark, status) as progress:
        if early.driver_checked is None:
            progress.step("reading " + input)
        result, caught = run(one_pass=True)
        try:
            try:
                outputs = _spark_outputs(result, output, rejected_path, progress)
            except GuessWrong as wrong:  # checked on the way, by types that did not hold
                result.checked.release()
                progress.step("reading " + input + " again")
                result, caught = run(one_pass=False)
                outputs = _spark_outputs(result, output, rejected_path, progress)
                outputs[2].append(
                    f"the types the first rows suggested did not hold ({wrong}): the rows "
                    "were read again and checked in a pass of their own"
                )
        finally:
            result.checked.release()
    n_rows, rejected, run_warnings = outputs
    reasons = None
    if rejected and rejected >= result.checked.events_read:  # every row (a job, then only)
        reasons = _spark_reasons(result)
    from sparkcep.runners.spark.session import master_of

    mode = f"Spark ({master_of(spark)})"
    if result.driver_checked:
        mode += f", rows checked in the driver (input under {result.driver_checked})"
    return Summary(
        mode=mode,
        events=result.checked.events_read,
        rejected=rejected,
        partitions=f"{result.partitions:,} Spark partitions ({result.layout})",
        rows=n_rows,
        label=result.label,
        warnings=early.warnings + run_warnings + [str(w.message) for w in caught],
        capped=options.max_matches is not None and n_rows >= options.max_matches,
        reasons=reasons,
    )


def _spark_reasons(result) -> dict[str, int]:
    """How many rejected rows have each reason."""
    if result.rejected_rows is not None:  # checked in the driver
        return result.rejected_rows["reason"].value_counts().to_dict()
    counts = result.rejected.groupBy("reason").count().collect()
    return {r["reason"]: r["count"] for r in counts}


def _start_spark(master, source, prepare=None):
    """The Spark session, started in a thread while this one imports the runner (pandas,
    the engines) and runs `prepare` (work that needs no JVM is done while
    the JVM starts); (the session, what `prepare` gave)."""
    import threading

    from sparkcep import _early
    from sparkcep.runners.spark.session import spark_session

    size = source.size

    started: dict = {}

    def session():  # started at the top of `import sparkcep` (sparkcep._early), or now
        try:
            started["session"] = _early.taken(master, size) or spark_session(
                master, input_bytes=size
            )
        except BaseException as e:  # raised in this thread, below
            started["error"] = e

    # A daemon thread: when `prepare` raises (a query's error), the process ends without
    # waiting for the JVM.
    starting = threading.Thread(target=session, name="sparkcep-start", daemon=True)
    starting.start()
    import sparkcep.runners.spark.run_file  # noqa: F401

    prepared = prepare() if prepare is not None else None
    starting.join()
    if "error" in started:
        raise started["error"]
    return started["session"], prepared


def _spark_outputs(result, output, rejected_path, progress) -> tuple[int, int, list[str]]:
    """Write the rows and the rejected rows; (rows, rejected rows, the run's warnings),
    all taken before the checked rows Spark keeps are dropped."""
    from sparkcep.runners.spark.files import write_spark

    events = result.checked.events_read  # not counted yet: checked on the way (--id)
    progress.step(f"matching {f'{events:,} ' if events else ''}events ({result.layout})")
    n_rows = _spark_rows(result, output)
    if rejected_path is None:
        pass
    elif result.rejected_rows is not None:  # checked in the driver
        _write_rejected_pandas(result.rejected_rows, rejected_path)
    elif result.checked.may_reject():
        progress.step("writing rejected rows to " + rejected_path)
        result.checked.rejected_written(write_spark(result.rejected, rejected_path))
        if not result.checked.rejected_count:
            os.remove(rejected_path)
    elif os.path.exists(rejected_path):
        os.remove(rejected_path)
    return n_rows, result.checked.rejected_count, result.warnings()


def _spark_rows(result, output) -> int:
    """Write the rows (or only count them: --count); their number."""
    from sparkcep.runners.spark.files import write_spark

    if output is None:
        rows = result.unordered
        n = (rows if result.max_matches is None else rows.limit(result.max_matches)).count()
        result.settle()
        return n
    return write_spark(
        result.unordered, output, order=result.order, limit=result.max_matches,
        before_move=result.settle,
    )  # fmt: skip


# Where stderr is no terminal (a notebook's `!sparkcep run`, a job's log) a long run
# writes its progress as plain lines: the first after this many seconds, then at most one
# this often, each only when it changed.
PLAIN_PROGRESS_AFTER = 10.0
PLAIN_PROGRESS_EVERY = 10.0


class _PlainLines:
    """Progress lines for a stderr that is no terminal: the step and Spark's stage."""

    def __init__(self):
        self.last: str | None = None

    def __call__(self, text: str) -> None:
        if text != self.last:
            self.last = text
            err.print(text, markup=False, highlight=False)


def _progress(spark, status):
    """Spark's progress (stage, tasks done): on the status line when stderr is a
    terminal and the run lasts more than 2 s; else as plain lines
    (PLAIN_PROGRESS_AFTER), which a notebook shows."""
    from sparkcep.runners.spark.session import SparkProgress

    if not err.is_terminal:
        lines = _PlainLines()
        return SparkProgress(
            spark, lines, after=PLAIN_PROGRESS_AFTER, every=PLAIN_PROGRESS_EVERY,
            show_steps=False, on_step=status.update,
        )  # fmt: skip
    return SparkProgress(spark, status.update)


def _print_summary(s: Summary, output, rejected_path, explicit_rejected):
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    table.add_row("mode", s.mode)
    table.add_row("events read", f"{s.events:,}")
    written = s.rejected and rejected_path is not None
    table.add_row("rejected", f"{s.rejected:,}" + (f"  -> {rejected_path}" if written else ""))
    table.add_row("partitions", s.partitions)
    table.add_row(
        s.label, f"{s.rows:,}  " + (f"-> {output}" if output else "(counted, not written)")
    )
    table.add_row("seconds", f"{s.seconds:.2f}")
    rate = s.events / max(s.seconds, 1e-9)
    table.add_row("events/s", f"{rate:,.0f}" if rate >= 10 else f"{rate:.2f}")
    if s.engine_seconds is not None:
        table.add_row("engine seconds", f"{s.engine_seconds:.3f}")
    if s.why:
        table.add_row("no match?", s.why)
    out.print(table)
    for w in dict.fromkeys(s.warnings):
        err.print("warning: " + w, style="yellow", markup=False, highlight=False)
    if s.capped:
        err.print(f"stopped after {s.rows:,} matches (--max-matches)", style="yellow")
    if explicit_rejected and not s.rejected:
        Path(rejected_path).parent.mkdir(parents=True, exist_ok=True)
        Path(rejected_path).write_text("")


@app.command()
@option_flags(*EXPLAIN_FLAGS)
def explain(
    query: QueryArg,
    input: Annotated[
        str | None,
        typer.Option(
            "--input", "-i", help="Event data, to check names and types against its columns."
        ),
    ] = None,
    options: Options | None = None,
    name: NameOpt = None,
    sep: SepOpt = ",",
    columns: ColumnsOpt = None,
    null_value: NullOpt = None,
):
    """Print the plan of a query in words: engine, key, pushed-down filter, conditions."""
    from sparkcep.explanation import explain_queries

    text = _pick(_query_text(query), name)
    schema = valid = None
    options = _query_options(text, options)
    if input is not None:
        from sparkcep.files import InputSource, read_pandas
        from sparkcep.inputs import ROW, schema_of, split_valid
        from sparkcep.runners.local import type_column

        source = InputSource.of(input, **_reading(sep, columns, null_value))
        frame = read_pandas(source)
        types = type_column(frame.columns, text, options)
        valid, _ = split_valid(
            frame, time_col=options.time_col, type_col=types, id_col=options.id_col
        )
        schema = schema_of(valid.drop(columns=[ROW]))
    out.print(explain_queries(text, schema, options, valid), highlight=False, markup=False)
    if input is not None:
        from sparkcep.runners.spark.driver_check import where_checked

        rows = "rows        checked " + where_checked(source, options)
        out.print(rows, highlight=False, markup=False)


@app.command()
@option_flags(*READ_FLAGS)
def why(
    query: QueryArg,
    input: Annotated[str, typer.Option("--input", "-i", help="Event file or folder.")],
    key: Annotated[
        str | None,
        typer.Option("--key", help="One key's value (comma-separated for several key columns)."),
    ] = None,
    start: Annotated[
        str | None, typer.Option("--from", help="Only events at or after this time.")
    ] = None,
    end: Annotated[str | None, typer.Option("--to", help="Only events up to this time.")] = None,
    near: Annotated[int, typer.Option("--near", help="How many near misses to show.", min=1)] = 5,
    plot: Annotated[
        str | None,
        typer.Option("--plot", help="Draw the key's events and near misses to this file (.png)."),
    ] = None,
    match: Annotated[
        str | None,
        typer.Option(
            "--match", help="An event id: why the matches that start with it bound what they did."
        ),
    ] = None,
    options: Options | None = None,
    name: NameOpt = None,
    sep: SepOpt = ",",
    columns: ColumnsOpt = None,
    null_value: NullOpt = None,
):
    """Why a pattern query did not match: the partial matches that got furthest, the
    events each bound, and why the next component was not bound."""
    from sparkcep.files import InputSource, read_pandas
    from sparkcep.misses import COLUMNS as MISS_COLUMNS
    from sparkcep.why_not import near_misses

    text = _pick(_query_text(query), name)
    options = _query_options(text, options)
    frame = read_pandas(InputSource.of(input, **_reading(sep, columns, null_value)))
    keys = tuple(key.split(",")) if key is not None else None
    if match is not None:
        explained = near_misses(frame, text, options, key=keys, start=start, end=end,
                                match=match)  # fmt: skip
        out.print(explained.attrs["summary"], highlight=False, markup=False)
        for row in explained.to_dict("records"):
            if row["var"] == explained["var"].iloc[0]:
                out.print("", highlight=False, markup=False)  # (a match begins)
            head = f"{row['var']}={row['event']}: " if row["var"] else ""
            out.print(f"{head}{row['why']}", highlight=False, markup=False)
        return
    misses = near_misses(frame, text, options, key=keys, start=start, end=end, near=near, plot=plot)
    out.print(misses.attrs["summary"], highlight=False, markup=False)
    if not len(misses):
        out.print("no partial match stopped short", highlight=False, markup=False)
    key = [c for c in misses.columns if c not in MISS_COLUMNS]
    for row in misses.to_dict("records"):
        where = ", ".join(f"{c}={row[c]}" for c in key)
        depth = (
            f"{row['depth']} of {row['of']} bound"
            if "of" in row
            else (f"{row['depth']} rows matched")
        )
        out.print(
            f"\n{where + ': ' if where else ''}{depth}: "
            f"{row['bound']}\n  {row['stopped_at']} not bound: {row['reason']}",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )


@dataclass
class StreamSinks:
    output: str
    late: str
    rejected: str
    checkpoint: str
    trigger: str
    fmt: str


@app.command()
@option_flags(
    *STREAM_FLAGS,
    required=("id_col",),
    help={"id_col": "Event id column (a stream has no row numbers)."},
)
def stream(
    input: Annotated[
        str,
        typer.Option(
            "--input", "-i", help="Folder of event files (new files are picked up), or 'rate'."
        ),
    ],
    output: Annotated[
        str,
        typer.Option(
            "--output", "-o", help="Folder for the rows: one .jsonl file per micro-batch."
        ),
    ],
    checkpoint: Annotated[
        str,
        typer.Option(
            "--checkpoint", help="Checkpoint folder: restart on it to continue exactly once."
        ),
    ],
    query: Annotated[
        str | None,
        typer.Argument(help="A query file, or the query text itself (or --rules DIR)."),
    ] = None,
    trigger: Annotated[
        str,
        typer.Option("--trigger", help="available-now, once, or an interval such as '5 seconds'."),
    ] = "available-now",
    lateness: Annotated[
        str,
        typer.Option(
            "--lateness",
            help="Allowed lateness of event time (watermark delay): '2 s', or ticks (30).",
        ),
    ] = "0",
    late: Annotated[
        str | None, typer.Option("--late", help="Folder for late events (default: <output>/late).")
    ] = None,
    rejected: Annotated[
        str | None,
        typer.Option("--rejected", help="Folder for rejected rows (default: <output>/rejected)."),
    ] = None,
    max_files: Annotated[
        int | None, typer.Option("--max-files-per-trigger", help="Files per micro-batch.", min=1)
    ] = None,
    rules: Annotated[
        str | None,
        typer.Option(
            "--rules",
            help="A folder of query files (.cep), one stream each, read again while the "
            "stream runs: rules added, changed and removed take effect as it runs.",
        ),
    ] = None,
    fmt: Annotated[
        str, typer.Option("--format", help="jsonl or parquet files per micro-batch, or console.")
    ] = "jsonl",
    timeout: Annotated[
        float | None,
        typer.Option("--timeout", help="Stop after this many seconds (interval triggers)."),
    ] = None,
    master: MasterOpt = None,
    options: Options | None = None,
    name: NameOpt = None,
    sep: SepOpt = ",",
    columns: ColumnsOpt = None,
    null_value: NullOpt = None,
):
    """Run queries continuously over a stream of event files, exactly once."""
    started = time.time()
    if master is not None and master.startswith("sc://"):
        # Each micro-batch's rows are written, and counted for the summary, by a function
        # of this process: through Spark Connect that function would run on the server.
        raise SparkcepError(
            "sparkcep stream runs on a local or cluster master, not through Spark Connect: "
            "there, call sparkcep.stream(streaming_df, query) and start its DataFrames' "
            "writeStream yourself (docs/spark.md)"
        )
    if (query is None) == (rules is None):
        raise SparkcepError("give the stream a query, or a folder of them with --rules DIR")
    from sparkcep.failures import streaming

    if rules is not None:
        sinks = StreamSinks(output, "", "", checkpoint, trigger, fmt)
        run_opts = (master, max_files, _reading(sep, columns, null_value), timeout)
        with err.status("starting Spark") as status, streaming(checkpoint):
            streams, interrupted = _stream_rules(rules, input, options, lateness, sinks, run_opts)
        _print_rules_summary(streams, time.time() - started)
        if interrupted:
            err.print("stopped (Ctrl-C): restart on the checkpoint to go on", highlight=False)
            raise SystemExit(130)
        return
    text = _pick(_query_text(query), name)
    options = _query_options(text, options)
    sinks = StreamSinks(
        output,
        late or os.path.join(output, "late"),
        rejected or os.path.join(output, "rejected"),
        checkpoint,
        trigger,
        fmt,
    )

    with err.status("starting Spark") as status, streaming(checkpoint):
        run_opts = (master, max_files, _reading(sep, columns, null_value), timeout)
        writer, progress, interrupted = _stream(
            text, input, options, lateness, sinks, run_opts, status
        )
    _print_stream_summary(writer, progress, sinks, time.time() - started)
    if interrupted:  # Ctrl-C: stopped between micro-batches, the shell's code for it
        err.print("stopped (Ctrl-C): restart on the checkpoint to go on", highlight=False)
        raise SystemExit(130)
    events = sum(p["numInputRows"] for p in progress)
    if events and writer.totals["rejected"] >= events:
        raise DataError(all_rejected(events, dict(writer.reasons)))


def _stream_rules(rules, input, options, lateness, sinks, run_opts):
    """The streams of a rules folder (runners/streaming/rules.py), kept in step with it
    until they end, the timeout, or Ctrl-C; (RuleStreams, interrupted)."""
    import signal
    import threading

    from sparkcep.runners.spark.session import spark_session
    from sparkcep.runners.streaming.rules import rule_streams, run_rules

    master, max_files, reading, timeout = run_opts
    spark = spark_session(master)
    streams = rule_streams(
        spark, rules, input, sinks.output, sinks.checkpoint, options=options,
        lateness=lateness, trigger=sinks.trigger, fmt=sinks.fmt, max_files=max_files,
        reading=reading,
    )  # fmt: skip
    stop = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        run_rules(streams, timeout=timeout, stop=stop, report=_print_note)
    finally:
        signal.signal(signal.SIGINT, previous)
    return streams, stop.is_set()


def _print_rules_summary(streams, seconds: float):
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    for (name, digest), writer in sorted(streams.writers().items()):
        totals = writer.totals
        where = streams.output_of(name, digest)
        held = f", {writer.held:,} events held for the watermark" if writer.held else ""
        table.add_row(
            f"rule {name}",
            f"{totals['match']:,} rows, {totals['late']:,} late, {totals['rejected']:,} "
            f"rejected, {totals['batches']:,} micro-batches{held}  -> {where}",
        )
    for line in streams.history:
        table.add_row("rules", line)
    table.add_row("seconds", f"{seconds:.2f}")
    out.print(table)


def _stream(text, input, options, lateness, sinks, run_opts, status):
    from sparkcep.runners.spark.query_first import raise_sure_csv_error
    from sparkcep.runners.spark.session import spark_session
    from sparkcep.runners.streaming.pipeline import await_stream, read_stream, start
    from sparkcep.runners.streaming.pipeline import stream as make_stream

    master, max_files, reading, timeout = run_opts
    raise_sure_csv_error(input, text, options, **reading)  # a query's error needs no JVM
    spark = spark_session(master)
    source = read_stream(spark, input, max_files=max_files, checkpoint=sinks.checkpoint, **reading)
    result = make_stream(source, text, options=options, lateness=lateness)
    running, writer = start(
        result, output=sinks.output, late=sinks.late, rejected=sinks.rejected,
        checkpoint=sinks.checkpoint, trigger=sinks.trigger, fmt=sinks.fmt,
    )  # fmt: skip
    if sinks.trigger not in ("available-now", "once"):  # runs for hours: warn when known
        writer.on_warning = _print_warning
    status.update(f"streaming ({sinks.trigger}) into {sinks.output}")
    interrupted = await_stream(running, timeout)
    return writer, running.recentProgress, interrupted


def _print_stream_summary(writer, progress, sinks: StreamSinks, seconds: float):
    events = sum(p["numInputRows"] for p in progress)
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    table.add_row("micro-batches", f"{writer.totals['batches']:,}")
    table.add_row("events read", f"{events:,}")
    where = "console" if sinks.fmt == "console" else sinks.output
    table.add_row("rows", f"{writer.totals['match']:,}  -> {where}")
    for kind, folder in (("late", sinks.late), ("rejected", sinks.rejected)):
        n = writer.totals[kind]
        label = "late events" if kind == "late" else "rejected"
        table.add_row(label, f"{n:,}" + (f"  -> {folder}" if n else ""))
    if writer.held:
        table.add_row(
            "pending",
            f"{writer.held:,} events held until the watermark passes them (a later event "
            "releases them and their matches)",
        )
    table.add_row("seconds", f"{seconds:.2f}")
    durations = [p["durationMs"].get("triggerExecution", 0) for p in progress]
    if durations:
        median = sorted(durations)[len(durations) // 2] / 1000
        table.add_row("batch latency", f"median {median:.2f} s")
    out.print(table)
    for w in writer.warnings():
        _print_warning(w)


def _print_note(text: str) -> None:
    err.print(text, markup=False, highlight=False)


def _print_warning(text: str) -> None:
    err.print("warning: " + text, style="yellow", markup=False, highlight=False)


@app.command()
def warmup():
    """Record the JVM class archive and compile Spark's Python archive, which make Spark
    start faster (run once after install)."""
    from sparkcep.runners.jobs.warmup import record
    from sparkcep.runners.spark.cds import archive_folder
    from sparkcep.runners.spark.compiled_home import build

    try:
        with err.status("compiling Spark's Python archive"):
            home = build()
        with err.status("recording the JVM class archive (a short Spark job)"):
            path = record(verbose=False)
    except OSError as e:
        reason = e.strerror or str(e)
        raise SparkcepError(
            f"cannot write to '{archive_folder()}' ({reason}): set SPARKCEP_CDS_DIR to a "
            "folder you can write"
        ) from None
    if home is not None:
        out.print(f"compiled Spark home written to {home}", markup=False, highlight=False)
    out.print(f"class archive written to {path}", markup=False, highlight=False)


@app.command()
@option_flags(*READ_FLAGS)
def fit(
    query: QueryArg,
    input: Annotated[
        str, typer.Option("--input", "-i", help="History: event file or folder to learn from.")
    ],
    output: Annotated[
        str, typer.Option("--output", "-o", help="The model file (JSON) to write.")
    ] = "model.json",
    local: Annotated[
        bool, typer.Option("--local", help="Fit in this process with pandas, without Spark.")
    ] = False,
    law: Annotated[
        str,
        typer.Option(
            "--law",
            help="Delay laws: auto (the best fitted law by KS distance, else empirical), "
            "empirical, exponential, normal or uniform.",
        ),
    ] = "auto",
    master: MasterOpt = None,
    options: Options | None = None,
    name: NameOpt = None,
    sep: SepOpt = ",",
):
    """Learn a probabilistic query's model from history: each component's miss rate and
    delay law (read back with USING MODEL 'MODEL.json')."""
    import json

    from sparkcep.runners.jobs.fit import fit_file, fit_model_local, fitting_kernel

    choices = fitting_kernel().LAW_CHOICES
    if law not in choices:
        raise SparkcepError(f"unknown --law '{law}' (use {', '.join(choices)})")
    started = time.time()
    text = _pick(_query_text(query), name)
    with err.status("fitting") as status:
        if local:
            from sparkcep.files import read_pandas

            status.update("reading " + input)
            model = fit_model_local(read_pandas(input, sep=sep), text, options, law=law)
        else:
            from sparkcep.files import InputSource
            from sparkcep.runners.spark.session import spark_session

            source = InputSource.of(input, sep=sep)
            status.update("starting Spark")
            spark = spark_session(master)
            status.update("matching the history")
            model = fit_file(spark, source, text, options, law=law)
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    Path(output).write_text(json.dumps(model, indent=2) + "\n")
    _print_model(model, output, time.time() - started)


def _print_model(model: dict, output: str, seconds: float):
    table = Table(box=None, pad_edge=False)
    for head in ("variable", "miss rate", "miss n", "delay", "n", "KS D"):
        table.add_column(head, style="bold" if head == "variable" else None)
    unit = model.get("unit") or "ticks"
    for var, entry in model["components"].items():
        rate = entry.get("miss_rate")
        delay, fit = entry.get("delay"), entry.get("fit") or {}
        law = "-" if delay is None else delay["law"]
        if delay is not None and delay["law"] != "empirical":
            law += "(" + ", ".join(f"{v:.4g}" for k, v in delay.items() if k != "law") + f" {unit})"
        table.add_row(
            var, "-" if rate is None else f"{rate:.4f}", str(entry.get("sample", "-")), law,
            str(fit.get("n", "-")),
            f"{fit['ks']:.4f}" if "ks" in fit else "-",
        )  # fmt: skip
    out.print(table)
    out.print(f"complete matches {model['complete_matches']:,}; model -> {output}; "
              f"{seconds:.2f} s", markup=False, highlight=False)  # fmt: skip
    for w in model.get("warnings", ()):
        err.print("warning: " + w, style="yellow", markup=False, highlight=False)


# ---- episode rules from data (docs/episodes.md) ------------------------------------------


@app.command("mine-rules")
@option_flags("time_col", "type_col", "time_unit", "tiebreak")  # no ids: rules name no event
def mine_rules(
    input: Annotated[str, typer.Option("--input", "-i", help="History: event file or folder.")],
    output: Annotated[
        str, typer.Option("--output", "-o", help="The rule file to write.")
    ] = "rules.cep",
    window: Annotated[
        str, typer.Option("--window", help="Predicate window, e.g. '10 min' or 100 (ticks).")
    ] = "10",
    rule_window: Annotated[
        str | None,
        typer.Option("--rule-window", help="Rule window (default: the predicate window)."),
    ] = None,
    min_support: Annotated[
        int, typer.Option("--min-support", help="Fewest minimal occurrences of a predicate.")
    ] = 5,
    min_confidence: Annotated[
        float, typer.Option("--min-confidence", help="Least share of held predictions.")
    ] = 0.5,
    max_length: Annotated[
        int, typer.Option("--max-length", help="Most events in a predicate.", min=1)
    ] = 3,
    max_candidates: Annotated[
        int, typer.Option("--max-candidates", help="Most candidate predicates per level.")
    ] = 20_000,
    symbol: Annotated[
        str | None,
        typer.Option("--symbol", help="SYMBOL expression, e.g. \"concat(sensor, ':', level)\"."),
    ] = None,
    key: Annotated[
        list[str] | None, typer.Option("--key", help="Partition by this column (repeatable).")
    ] = None,
    shapes: Annotated[
        str,
        typer.Option(
            "--shapes",
            help="Predicates to mine: serial (a -> b -> c), parallel (a, b, c in any order) "
            "or dag (every partial order, serial and parallel ones too).",
        ),
    ] = "serial",
    local: Annotated[bool, typer.Option("--local", help="pandas only, without Spark.")] = False,
    master: MasterOpt = None,
    options: Options | None = None,
    sep: SepOpt = ",",
):
    """Mine episode rules from history (minimal occurrences, a Spark job) into a rule
    file that `run` and `evaluate-rules` read."""
    from sparkcep.runners.jobs.mining import MiningSettings, mine_rules, rules_file

    started = time.time()
    settings = MiningSettings(
        window=window, rule_window=rule_window or window, min_support=min_support,
        min_confidence=min_confidence, max_length=max_length, max_candidates=max_candidates,
        symbol=symbol, key=tuple(key or ()), shapes=shapes,
    )  # fmt: skip
    with err.status("mining rules") as status:
        events, source = _rule_input(input, local, master, sep, status)
        rules, settings = mine_rules(events, settings, options, spark_source=source)
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        Path(output).write_text(rules_file(rules, settings))
    for level, n in settings.capped:
        err.print(
            f"warning: level {level} has more candidate predicates than --max-candidates: "
            f"counted the first {n:,}, the rest were left out (rules may be missing)",
            style="yellow", markup=False, highlight=False,
        )  # fmt: skip
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    table.add_row("mode", "local (pandas, no Spark)" if local else "Spark")
    table.add_row("windows", f"predicate {settings.window}, rule {settings.rule_window}")
    table.add_row("shapes", shapes)
    table.add_row("rules", f"{len(rules):,}  -> {output}")
    table.add_row("seconds", f"{time.time() - started:.2f}")
    out.print(table)


@app.command("evaluate-rules")
@option_flags(*READ_FLAGS, "algorithm")
def evaluate_rules(
    rules: Annotated[str, typer.Argument(help="A rule file.")],
    input: Annotated[str, typer.Option("--input", "-i", help="Held-out events.")],
    output: Annotated[
        str | None, typer.Option("--output", "-o", help="Write the table (.csv or .jsonl).")
    ] = None,
    local: Annotated[bool, typer.Option("--local", help="pandas only, without Spark.")] = False,
    master: MasterOpt = None,
    options: Options | None = None,
    sep: SepOpt = ",",
):
    """Precision and recall of each rule's predicted intervals on held-out events (a
    prediction holds when its event occurs inside the interval)."""
    from sparkcep.files import write_pandas
    from sparkcep.runners.jobs.mining import evaluate_rules as evaluate
    from sparkcep.runners.jobs.mining import overall

    text = _query_text(rules)
    with err.status("evaluating rules") as status:
        events, source = _rule_input(input, local, master, sep, status)
        report = evaluate(text, events, options, spark_source=source)
    if output:
        write_pandas(report, output)
    table = Table()
    heads = ("rule", "predict", "predictions", "held", "precision", "chance", "lift",
             "recalled", "recall")  # fmt: skip
    for col in heads:
        table.add_column(col, justify="left" if col in ("rule", "predict") else "right")
    for row in report.head(40).itertuples(index=False):
        table.add_row(
            str(row.rule), str(row.predict), f"{row.predictions:,}", f"{row.held:,}",
            _share(row.precision), _share(row.chance), _lift(row.lift),
            f"{row.recalled:,}/{row.consequents:,}", _share(row.recall),
        )  # fmt: skip
    out.print(table)
    if len(report) > 40:
        out.print(f"... {len(report) - 40} more rules" + (f" in {output}" if output else ""))
    total = overall(report)
    out.print(
        f"all rules: {total['held']:,} of {total['predictions']:,} predictions held "
        f"({_share(total['precision'])}; by chance {_share(total['chance'])}, "
        f"lift {_lift(total['lift'])})"
    )
    out.print(
        "chance: each interval placed at random in the events' span (docs/episodes.md)",
        markup=False, highlight=False, soft_wrap=True,
    )  # fmt: skip


def _share(value) -> str:
    return "-" if value is None or value != value else f"{value:.1%}"


def _lift(value) -> str:
    return "-" if value is None or value != value else f"{value:.2f}x"


def _rule_input(path: str, local: bool, master, sep: str, status):
    """(pandas frame, None) with --local, else (None, the Spark input)."""
    status.update("reading " + path)
    if local:
        from sparkcep.files import read_pandas

        return read_pandas(path, sep=sep), None
    from sparkcep.runners.spark.files import read_spark
    from sparkcep.runners.spark.session import spark_session

    return None, read_spark(spark_session(master), path, sep=sep)


def _fail(prefix: str, message: str, code: int = 2):
    # One line however narrow the terminal (soft_wrap: rich does not break it).
    err.print(prefix + message, highlight=False, markup=False, style="red", soft_wrap=True)
    raise SystemExit(code) from None


def main(args: list[str] | None = None):
    """The command; an error that is the user's to fix is one line (`failures`), exit 2.
    SPARKCEP_DEBUG=1 shows the traceback instead."""
    from sparkcep.failures import user_message

    # pyspark's notes on its own fallbacks (Arrow off, a failed batch) are not the user's.
    warnings.filterwarnings("ignore", category=UserWarning, module="pyspark")
    try:
        app(args, standalone_mode=False)
    except QueryError as e:
        _fail("query error: ", str(e))
    except (typer.Abort, KeyboardInterrupt):
        err.print("aborted")
        raise SystemExit(130) from None
    except Exception as e:
        if callable(getattr(e, "show", None)) and hasattr(e, "exit_code"):
            # a usage error (click's, vendored by typer): one line too, with where to look
            command = getattr(getattr(e, "ctx", None), "command_path", "sparkcep")
            if hasattr(e, "format_message") and e.exit_code == 2:
                _fail("usage error: ", f"{e.format_message()} (see '{command} --help')")
            e.show()
            raise SystemExit(e.exit_code) from None
        if os.environ.get("SPARKCEP_DEBUG"):
            raise
        # a sparkcep error raised in a Spark task, else what failures.py makes of it
        message = raised_in_worker(e) or user_message(e)
        if message is None:
            raise
        _fail("error: ", message)


def command() -> None:
    """The console entry point (`sparkcep`, `python -m sparkcep.cli`): `main`, then, once
    it has succeeded and no other thread of ours runs, the process ends without Python's
    teardown of its modules (pyarrow's and pandas' take about 0.3 s, a twentieth of the
    demo): the output is written and flushed, the exit functions have run, and the JVM
    exits when its pipe from this process closes, as it does after a normal exit."""
    import atexit
    import sys
    import threading

    main()
    if any(not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        return  # a thread that may still have work to finish: leave the normal way
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    command()
