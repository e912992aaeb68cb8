"""The `sparkcep` command: run a pattern query over event files, explain a query."""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from sparkcep.errors import QueryError, SparkcepError
from sparkcep.language.parser import parse_file

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Complex event processing on Spark: pattern queries over event files.",
)
err = Console(stderr=True)
out = Console()

QueryArg = Annotated[
    str, typer.Argument(help="A query file, or the query text itself (PATTERN ...).")
]
TimeOpt = Annotated[str, typer.Option("--time", help="Time column (integers or timestamps).")]
TypeOpt = Annotated[str, typer.Option("--type", help="Event type column.")]
IdOpt = Annotated[
    str | None, typer.Option("--id", help="Event id column (default: 0-based row number).")
]
UnitOpt = Annotated[
    str | None,
    typer.Option("--time-unit", help="Unit of an integer time column: ms, s, us or ns."),
]
TieOpt = Annotated[
    str | None, typer.Option("--tiebreak", help="Order equal-time events by this column.")
]
NameOpt = Annotated[
    str | None, typer.Option("--query", help="Which named query of the file to run.")
]
SepOpt = Annotated[str, typer.Option("--sep", help="CSV field separator.")]
MasterOpt = Annotated[
    str | None, typer.Option("--master", help="Spark master URL (default local[*]).")
]


def _query_text(query: str) -> str:
    path = Path(query)
    if path.suffix in (".cep", ".sase", ".txt", ".sql", ".query") or (
        len(query) < 4096 and "\n" not in query and path.is_file()
    ):
        if not path.is_file():
            raise SparkcepError(f"the query file '{query}' does not exist")
        return path.read_text()
    if query.lstrip().upper().startswith(("PATTERN", "QUERY")):
        return query
    raise SparkcepError(f"'{query}' is neither a query file nor a query (PATTERN ...)")


def _pick(text: str, name: str | None, allow_aggregates: bool = False) -> str:
    """The query to run; a file of AGG queries runs whole when `allow_aggregates`."""
    queries = parse_file(text)
    if name is None:
        if len(queries) > 1:
            if allow_aggregates and all(q.aggregates for q in queries):
                return text
            names = ", ".join(q.name for q in queries)
            raise SparkcepError(
                f"the file holds several queries ({names}): choose one with --query "
                "(several AGG queries run together)"
            )
        return queries[0].text if queries[0].name else text
    for q in queries:
        if q.name == name:
            return q.text
    raise SparkcepError(
        f"no query named '{name}' (the file has {', '.join(str(q.name) for q in queries)})"
    )


@app.command()
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
    time_col: TimeOpt = "ts",
    type_col: TypeOpt = "type",
    id_col: IdOpt = None,
    time_unit: UnitOpt = None,
    tiebreak: TieOpt = None,
    rejected: Annotated[
        str | None,
        typer.Option("--rejected", help="Where rejected rows go (default: next to the output)."),
    ] = None,
    max_matches: Annotated[
        int | None, typer.Option("--max-matches", help="Stop after this many matches.")
    ] = None,
    name: NameOpt = None,
    sep: SepOpt = ",",
    partitions: Annotated[
        int | None, typer.Option("--partitions", help="Spark partitions for the matching stage.")
    ] = None,
    algorithm: Annotated[
        str, typer.Option("--algorithm", help="AGG queries: aseq (prefix counters) or twostep.")
    ] = "aseq",
    sharing: Annotated[
        str,
        typer.Option(
            "--sharing",
            help="Several AGG queries: prefix (shared prefix trees), chop (also chop-connect) or none.",
        ),
    ] = "prefix",
):
    """Run a pattern query (or AGG queries) over event files and write the results."""
    from sparkcep.files import default_rejected_path, output_format

    started = time.time()
    text = _pick(_query_text(query), name, allow_aggregates=True)
    output_format(output)
    rejected_path = rejected or default_rejected_path(output)
    options = dict(
        time_col=time_col, type_col=type_col, id_col=id_col, time_unit=time_unit,
        tiebreak=tiebreak, max_matches=max_matches,
    )  # fmt: skip
    if any(q.aggregates for q in parse_file(text)):
        if max_matches is not None:
            raise SparkcepError("--max-matches is for pattern queries, not AGG queries")
        del options["max_matches"]
        options.update(algorithm=algorithm, aggregate=True, sharing=sharing)
    with err.status("starting") as status:
        if local:
            summary = _run_local(text, input, output, rejected_path, options, sep, status)
        else:
            summary = _run_spark(
                text, input, output, rejected_path, options, sep, master, partitions, status
            )
    seconds = time.time() - started
    summary["seconds"] = seconds
    _print_summary(summary, output, rejected_path, explicit_rejected=rejected is not None)


def _run_local(text, input, output, rejected_path, options, sep, status):
    from sparkcep.files import read_pandas, write_pandas
    from sparkcep.runners.local import run_local

    status.update("reading " + input)
    frame = read_pandas(input, sep=sep)
    status.update(f"matching {len(frame):,} events")
    engine_start = time.time()
    if options.pop("aggregate", False):
        from sparkcep.runners.local import run_aggregate_local

        result = run_aggregate_local(frame, text, **options)
        options["max_matches"] = None
    else:
        result = run_local(frame, text, **options)
    engine_seconds = time.time() - engine_start
    status.update("writing " + output)
    write_pandas(result.matches, output)
    _write_rejected_pandas(result.rejected, rejected_path)
    return {
        "mode": "local (pandas, no Spark)",
        "events": result.events_read,
        "rejected": len(result.rejected),
        "partitions": _partitions_local(result),
        "matches": len(result.matches),
        "label": "rows" if "plans" in result.stats else "matches",
        "engine seconds": engine_seconds,
        "warnings": _warnings(result),
        "capped": options["max_matches"] is not None
        and len(result.matches) >= options["max_matches"],
    }


def _warnings(result) -> list[str]:
    plans = getattr(result, "plans", None) or getattr(result, "stats", {}).get("plans")
    plans = plans or [result.plan]
    return [w for p in plans for w in p.warnings]


def _partitions_local(result) -> int:
    if not result.plan.key or not len(result.matches):
        return 1
    return int(result.matches[list(result.plan.key)].drop_duplicates().shape[0])


def _write_rejected_pandas(frame, path):
    from sparkcep.files import write_pandas

    if len(frame):
        write_pandas(frame, path)
    elif os.path.exists(path):
        os.remove(path)


def _run_spark(text, input, output, rejected_path, options, sep, master, partitions, status):
    from sparkcep.files import read_spark, write_spark
    from sparkcep.runners.spark import run as spark_run
    from sparkcep.runners.spark import run_aggregate, spark_session

    status.update("starting Spark")
    spark = spark_session(master)
    status.update("reading " + input)
    source = read_spark(spark, input, sep=sep)
    aggregate = options.pop("aggregate", False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if aggregate:
            result = run_aggregate(
                source.df, text, partitions=partitions, **source.options(), **options
            )
            options["max_matches"] = None
        else:
            result = spark_run(
                source.df, text, partitions=partitions, **source.options(), **options
            )
    status.update(f"matching {result.checked.events_read:,} events ({result.layout})")
    if aggregate:
        n_matches = write_spark(result.rows, output, order=result.order)
    else:
        n_matches = write_spark(
            result.unordered, output, order=result.order, limit=result.max_matches
        )
    if result.checked.rejected_count:
        status.update("writing rejected rows to " + rejected_path)
        write_spark(result.rejected, rejected_path)
    elif os.path.exists(rejected_path):
        os.remove(rejected_path)
    return {
        "mode": f"Spark ({spark.sparkContext.master})",
        "events": result.checked.events_read,
        "rejected": result.checked.rejected_count,
        "partitions": result.partitions,
        "layout": result.layout,
        "matches": n_matches,
        "label": "rows" if aggregate else "matches",
        "warnings": _warnings(result) + [str(w.message) for w in caught],
        "capped": options["max_matches"] is not None and n_matches >= options["max_matches"],
    }


def _print_summary(s, output, rejected_path, explicit_rejected):
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    table.add_row("mode", s["mode"])
    table.add_row("events read", f"{s['events']:,}")
    table.add_row(
        "rejected", f"{s['rejected']:,}" + (f"  -> {rejected_path}" if s["rejected"] else "")
    )
    table.add_row(
        "partitions", f"{s['partitions']:,}" + (f"  ({s['layout']})" if s.get("layout") else "")
    )
    table.add_row(s.get("label", "matches"), f"{s['matches']:,}  -> {output}")
    table.add_row("seconds", f"{s['seconds']:.2f}")
    rate = s["events"] / max(s["seconds"], 1e-9)
    table.add_row("events/s", f"{rate:,.0f}" if rate >= 10 else f"{rate:.2f}")
    if "engine seconds" in s:
        table.add_row("engine seconds", f"{s['engine seconds']:.3f}")
    out.print(table)
    for w in dict.fromkeys(s["warnings"]):
        err.print("warning: " + w, style="yellow", markup=False, highlight=False)
    if s["capped"]:
        err.print("[yellow]warning:[/yellow] stopped at --max-matches; there may be more matches")
    if explicit_rejected and not s["rejected"]:
        Path(rejected_path).parent.mkdir(parents=True, exist_ok=True)
        Path(rejected_path).write_text("")


@app.command()
def explain(
    query: QueryArg,
    input: Annotated[
        str | None,
        typer.Option(
            "--input", "-i", help="Event data, to check names and types against its columns."
        ),
    ] = None,
    time_col: TimeOpt = "ts",
    type_col: TypeOpt = "type",
    id_col: IdOpt = None,
    time_unit: UnitOpt = None,
    tiebreak: TieOpt = None,
    name: NameOpt = None,
    sep: SepOpt = ",",
):
    """Print the plan of a query in words: engine, key, pushed-down filter, conditions."""
    from sparkcep.explain import explain_plan
    from sparkcep.plan import Options, analyze

    text = _pick(_query_text(query), name)
    schema = None
    if input is not None:
        from sparkcep.files import read_pandas
        from sparkcep.inputs import ROW, schema_of, split_valid

        frame = read_pandas(input, sep=sep)
        valid, _ = split_valid(frame, time_col=time_col, type_col=type_col, id_col=id_col)
        schema = schema_of(valid.drop(columns=[ROW]))
    plan = analyze(text, schema, Options(time_col, type_col, id_col, time_unit, tiebreak))
    out.print(explain_plan(plan), highlight=False, markup=False)


@app.command()
def stream(
    query: QueryArg,
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
    trigger: Annotated[
        str,
        typer.Option("--trigger", help="available-now, once, or an interval such as '5 seconds'."),
    ] = "available-now",
    lateness: Annotated[
        str, typer.Option("--lateness", help="Allowed lateness of event time (watermark delay).")
    ] = "0 s",
    late: Annotated[
        str | None, typer.Option("--late", help="Folder for late events (default: <output>/late).")
    ] = None,
    rejected: Annotated[
        str | None,
        typer.Option("--rejected", help="Folder for rejected rows (default: <output>/rejected)."),
    ] = None,
    max_files: Annotated[
        int | None, typer.Option("--max-files-per-trigger", help="Files per micro-batch.")
    ] = None,
    fmt: Annotated[
        str, typer.Option("--format", help="jsonl or parquet files per micro-batch, or console.")
    ] = "jsonl",
    timeout: Annotated[
        float | None,
        typer.Option("--timeout", help="Stop after this many seconds (interval triggers)."),
    ] = None,
    master: MasterOpt = None,
    time_col: TimeOpt = "ts",
    type_col: TypeOpt = "type",
    id_col: IdOpt = None,
    time_unit: UnitOpt = None,
    tiebreak: TieOpt = None,
    name: NameOpt = None,
    sep: SepOpt = ",",
):
    """Run a query continuously over a stream of event files, exactly once."""
    from sparkcep.runners.spark import spark_session
    from sparkcep.runners.streaming import read_stream, start
    from sparkcep.runners.streaming import stream as make_stream

    started = time.time()
    text = _pick(_query_text(query), name, allow_aggregates=True)
    late = late or os.path.join(output, "late")
    rejected = rejected or os.path.join(output, "rejected")
    with err.status("starting Spark") as status:
        spark = spark_session(master)
        source = read_stream(spark, input, sep=sep, max_files=max_files)
        rows = make_stream(
            source, text, time_col=time_col, type_col=type_col, id_col=id_col,
            time_unit=time_unit, tiebreak=tiebreak, lateness=lateness,
        )  # fmt: skip
        running, writer = start(
            rows,
            output=output,
            late=late,
            rejected=rejected,
            checkpoint=checkpoint,
            trigger=trigger,
            fmt=fmt,
        )
        status.update(f"streaming ({trigger}) into {output}")
        try:
            running.awaitTermination(timeout)
        except KeyboardInterrupt:
            pass
        finally:
            if running.isActive:
                running.stop()
        progress = running.recentProgress
    events = sum(p["numInputRows"] for p in progress)
    seconds = time.time() - started
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    table.add_row("micro-batches", f"{writer.totals['batches']:,}")
    table.add_row("events read", f"{events:,}")
    table.add_row(
        "rows", f"{writer.totals['match']:,}  -> {'console' if fmt == 'console' else output}"
    )
    table.add_row(
        "late events",
        f"{writer.totals['late']:,}" + (f"  -> {late}" if writer.totals["late"] else ""),
    )
    table.add_row(
        "rejected",
        f"{writer.totals['rejected']:,}"
        + (f"  -> {rejected}" if writer.totals["rejected"] else ""),
    )
    table.add_row("seconds", f"{seconds:.2f}")
    durations = [p["durationMs"].get("triggerExecution", 0) for p in progress]
    if durations:
        table.add_row(
            "batch latency", f"median {sorted(durations)[len(durations) // 2] / 1000:.2f} s"
        )
    out.print(table)


@app.command()
def warmup():
    """Record the JVM class archive that makes Spark start faster (run once after install)."""
    from sparkcep.runners.warmup import record

    with err.status("recording the JVM class archive (a short Spark job)"):
        path = record(verbose=False)
    out.print(f"class archive written to {path}", markup=False, highlight=False)


def main():
    try:
        app(standalone_mode=False)
    except QueryError as e:
        err.print("query error: " + str(e), highlight=False, markup=False, style="red")
        raise SystemExit(2) from None
    except SparkcepError as e:
        err.print("error: " + str(e), highlight=False, markup=False, style="red")
        raise SystemExit(2) from None
    except (typer.Abort, KeyboardInterrupt):
        err.print("aborted")
        raise SystemExit(130) from None
    except Exception as e:  # usage errors (click's exceptions, vendored by typer)
        if callable(getattr(e, "show", None)) and hasattr(e, "exit_code"):
            e.show()
            raise SystemExit(e.exit_code) from None
        raise


if __name__ == "__main__":
    main()
