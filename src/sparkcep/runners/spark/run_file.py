"""One function that runs an input of files through Spark, for every caller (`sparkcep
run`, the class-archive warm-up): a query's sure error before any Spark job, a small CSV
input checked in the driver, else Spark's checking pass (one read or two).

`prepare_file` is the part that needs no JVM: the CLI runs it while the session starts
and hands what it gave to `run_file`.
"""

from __future__ import annotations

from dataclasses import dataclass

from sparkcep.files import InputSource
from sparkcep.plan import Options
from sparkcep.runners.spark.batch import SparkRun, execute
from sparkcep.runners.spark.driver_check import (
    DriverChecked,
    check_in_driver,
    execute_driver_checked,
)
from sparkcep.runners.spark.files import read_spark
from sparkcep.runners.spark.one_pass import enabled as one_pass_enabled
from sparkcep.runners.spark.query_first import raise_sure_csv_error


@dataclass
class Prepared:
    """What a run over files learns before Spark is needed."""

    # The rows checked in the driver; None: Spark's checking pass checks them.
    driver_checked: DriverChecked | None = None

    @property
    def warnings(self) -> list[str]:
        """The warnings raised while the rows were checked in the driver."""
        return self.driver_checked.caught if self.driver_checked is not None else []


def prepare_file(
    source: InputSource, queries, options: Options, *, driver_check: bool = True
) -> Prepared:
    """A query's error that no row can avoid, raised now; then a small CSV input checked
    in the driver (`driver_check.check_in_driver`; `driver_check` False: never)."""
    raise_sure_csv_error(source, queries, options)
    return Prepared(check_in_driver(source, queries, options) if driver_check else None)


def run_file(
    spark,
    source: InputSource,
    queries,
    options: Options,
    *,
    partitions: int | None = None,
    prepared: Prepared | None = None,
    driver_check: bool = True,
    one_pass: bool = False,
) -> SparkRun:
    """Run queries over an input of files; the rows and rejected rows (lazy). The run's
    `checked.release()` drops the rows Spark keeps for it (the one read). `one_pass`:
    the caller calls the run's `settle()` after the job that computes its rows
    (`batch.execute`)."""
    if prepared is None:
        prepared = prepare_file(source, queries, options, driver_check=driver_check)
    if prepared.driver_checked is not None:
        return execute_driver_checked(spark, prepared.driver_checked, options, partitions)
    read = read_spark(spark, source)
    return execute(
        read.df, queries, options, partitions=partitions, source=read,
        one_pass=one_pass and one_pass_enabled(), **read.options(),
    )  # fmt: skip
