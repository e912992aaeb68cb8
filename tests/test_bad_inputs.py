"""Bad input, run the way a user runs it (issue 10 §3, §5): each case gives either one
clear line (exit 2, no traceback, naming the file, row or option) or rejected rows with
their reasons, with input rows = good + rejected, in local, Spark and streaming alike.

The command runs in this process (`sparkcep.cli.main`, which the console entry point runs) so that
Spark runs share the test session; a few cases run as real processes, to see the whole
of stderr (Spark's own logs included).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sparkcep import cli
from sparkcep.inputs import OUT_OF_RANGE
from sparkcep.runners.spark.driver_check import ENV

QUERY = "PATTERN SEQ(A a, B b) WITHIN 10"
MODES = ["local", "spark"]
# The checks, each way: local, Spark with a small input's rows checked in the driver (the
# default under 1 MiB of CSV), Spark's checking pass (SPARKCEP_DRIVER_CHECK_BYTES=0).
CHECK_MODES = ["local", "spark", "spark-full"]
DRIVER = "rows checked in the driver"


def sparkcep(capsys, *args) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of the command, run in this process."""
    code = 0
    try:
        cli.main([str(a) for a in args])
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def run_mode(capsys, mode, path, out, *more, query=QUERY):
    flags = ["--local"] if mode == "local" else []
    with checked_by(mode):
        return sparkcep(capsys, "run", query, "--input", path, "--output", out, *flags, *more)


@contextlib.contextmanager
def checked_by(mode: str):
    """Spark's checking pass for the mode spark-full, whatever the input's size."""
    before = os.environ.pop(ENV, None)
    if mode == "spark-full":
        os.environ[ENV] = "0"
    try:
        yield
    finally:
        os.environ.pop(ENV, None)
        if before is not None:
            os.environ[ENV] = before


def checked_where(mode: str, stdout: str, path) -> None:
    """The summary says where a Spark run checked the rows: in the driver for CSV in
    the spark mode, in Spark otherwise."""
    if mode != "local":
        driver = mode == "spark" and str(path).endswith(".csv")
        assert (DRIVER in " ".join(stdout.split())) == driver, stdout


def one_line(code: int, err: str) -> str:
    """The error line, checked to be the only thing printed, without a trace."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err
    assert len(lines) == 1, err
    assert "Traceback" not in err and "╭" not in err and "at org." not in err
    assert lines[0].startswith("error: ")
    return lines[0]


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def summary(out: str) -> dict[str, str]:
    rows = {}
    for line in out.splitlines():
        for label in ("events read", "rejected", "matches"):
            if line.startswith(label):
                rows[label] = line[len(label) :].split()[0].replace(",", "")
    return rows


# ---- rows that are rejected with a reason (the same in local and Spark) --------------------

PADDING = "".join(f"u,{1000 + i},C,{'x' * 20}\n" for i in range(900))  # past Spark's 8 KB
# Files of one folder, one input (rows numbered through the files in name order), each
# file a case of its own key k: (bytes after the header, rejected reasons, the rejected
# row's number in its file). In each, the one good A (its first row, ts 1) and the last
# B (ts 3, its last row) match; the rejected B never does.
REJECTED_FILES = {
    "extra_field.csv": (b"e,1,A,1\ne,2,B,2,9\ne,3,B,3\n", ["malformed row"], 1),
    "not_utf8.csv": (b"n,1,A,1\nn,2,B,caf\xe9\nn,3,B,3\n", ["not UTF-8 text"], 1),
    "not_utf8_after_8kb.csv": (
        b"p,1,A,1\n" + PADDING.encode() + b"p,2,B,caf\xe9\np,3,B,3\n", ["not UTF-8 text"], 901,
    ),
    "short_row.csv": (b"s,1,A,1\ns,2,B\ns,3,B,3\n", ["malformed row"], 1),
    "time_beyond_2_62.csv": (
        b"t,1,A,1\nt,-99999999999999999999,B,2\nt,3,B,3\n", [OUT_OF_RANGE.format(time_col="ts")], 1,
    ),
    # A time is an integer, or a number with a whole value (docs/input.md): 1.0 and 3e0
    # are the times 1 and 3; 2.5 is no time. Spark read such text as no time.
    "whole_number_times.csv": (
        b"w,1.0,A,1\nw,2.5,B,2\nw,3e0,B,3\n", ["ts is not an integer or a timestamp"], 1,
    ),
}  # fmt: skip


@pytest.mark.parametrize("mode", CHECK_MODES)
def test_bad_rows_are_rejected_with_their_reason(spark, capsys, tmp_path, mode):
    folder = tmp_path / "in"
    folder.mkdir()
    for name, (rows, _, _) in REJECTED_FILES.items():
        (folder / name).write_bytes(b"k,ts,type,v\n" + rows)
    out = tmp_path / "m.jsonl"
    query = "PATTERN SEQ(A a, B b) WHERE [k] WITHIN 10"
    code, stdout, err = run_mode(capsys, mode, folder, out, query=query)
    assert code == 0, err
    checked_where(mode, stdout, folder / "extra_field.csv")  # CSV: in the driver for spark
    assert "Traceback" not in err
    first, rejected, matches = 0, [], []  # each file's rows after those of the files before
    for name in sorted(REJECTED_FILES):
        rows, reasons, bad = REJECTED_FILES[name]
        n_rows = rows.count(b"\n")
        rejected += [(first + bad, reason) for reason in reasons]
        matches.append((first, first + n_rows - 1))
        first += n_rows
    written = jsonl(tmp_path / "m.rejected.jsonl")
    # Without --id, a rejected row names its 0-based row number, in every mode (Spark
    # writes the rejected rows in no set order).
    assert sorted((r["__row"], r["reason"]) for r in written) == rejected
    counted = summary(stdout)
    # Input rows = good + rejected: every row is read and counted, none dropped.
    assert int(counted["events read"]) == first
    assert int(counted["rejected"]) == len(rejected)
    assert sorted((r["a"], r["b"]) for r in jsonl(out)) == matches
    # written as UTF-8 text, the bad byte as U+FFFD
    assert [r["v"] for r in written if r["reason"] == "not UTF-8 text"] == ["caf\ufffd"] * 2


@pytest.mark.parametrize("mode", CHECK_MODES)
def test_bad_json_lines_are_rejected(spark, capsys, tmp_path, mode):
    path = tmp_path / "e.jsonl"
    path.write_bytes(b'{"ts":1,"type":"A"}\n{"ts":2,"type":\n{"ts":3,"type":"B"}\n')
    out = tmp_path / "m.jsonl"
    code, stdout, err = run_mode(capsys, mode, path, out)
    assert code == 0, err
    checked_where(mode, stdout, path)
    assert "Traceback" not in err
    rejected = jsonl(tmp_path / "m.rejected.jsonl")
    assert [(r["__row"], r["reason"]) for r in rejected] == [(1, "malformed row")]
    assert summary(stdout) == {"events read": "3", "rejected": "1", "matches": "1"}
    assert [(r["a"], r["b"]) for r in jsonl(out)] == [(0, 2)]


@pytest.mark.parametrize("mode", CHECK_MODES)
def test_missing_and_duplicate_ids(spark, capsys, tmp_path, mode):
    """A row without an id is rejected; an id two events share is counted in a warning."""
    events = tmp_path / "e.csv"
    events.write_text("id,ts,type\n7,1,A\n,2,B\n7,3,B\n8,4,B\n")
    out = tmp_path / "m.jsonl"
    code, stdout, err = run_mode(capsys, mode, events, out, "--id", "id")
    assert code == 0, err
    checked_where(mode, stdout, events)
    assert "Traceback" not in err
    rejected = jsonl(tmp_path / "m.rejected.jsonl")
    assert [r["reason"] for r in rejected] == ["id is missing"]
    assert all("__row" not in r for r in rejected)  # ids given: no row numbers
    assert summary(stdout) == {"events read": "4", "rejected": "1", "matches": "2"}
    assert "1 event has the id of another event (--id id)" in err
    assert sorted((r["a"], r["b"]) for r in jsonl(out)) == [(7, 7), (7, 8)]


AS_READ = (  # a CSV file of rows rejected for four reasons, and v a column of numbers
    'id,k,ts,type,v\n1,007,1,A,5\n,007,2,B,1.50\n3,007,3,C,x\n4,007,4,"C",2,9\n'
    + "".join(f"{i},007,{i},C,{i}\n" for i in range(5, 21))
)
AS_READ_QUERY = "PATTERN SEQ(A a, C c) WHERE [k] AND c.v > 1 WITHIN 10"
AS_READ_CELLS = ["id", "k", "ts", "type", "v", "__corrupt_record", "reason"]
AS_READ_ROWS = [  # in row order (the time's)
    [None, "007", "2", "B", "1.50", None, "id is missing"],
    ["3", "007", "3", "C", "x", None, "v: 'x' is not a number"],
    ["4", "007", "4", "C", "2", '4,007,4,"C",2,9', "malformed row"],  # its text as held
]


@pytest.mark.parametrize("mode", [*CHECK_MODES, "stream"])
def test_rejected_rows_are_written_as_the_file_holds_them(spark, capsys, tmp_path, mode):
    """Every runner writes a rejected CSV row's cells as text, as read ('1.50', '007',
    the word in a column of numbers), and a malformed row's first fields beside its
    text (local and streaming runs wrote typed values and left a malformed row's cells
    empty; a stream wrote the word as null)."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "e.csv").write_text(AS_READ)
    if mode == "stream":
        code, _, err = stream(capsys, folder, tmp_path, query=AS_READ_QUERY)
        written = [r for f in (tmp_path / "out" / "rejected").glob("*.jsonl") for r in jsonl(f)]
    else:
        out = tmp_path / "m.jsonl"
        code, _, err = run_mode(capsys, mode, folder, out, "--id", "id", query=AS_READ_QUERY)
        written = jsonl(tmp_path / "m.rejected.jsonl")
    assert code == 0, err
    assert all(list(r) == AS_READ_CELLS for r in written)
    rows = [[r[c] for c in AS_READ_CELLS] for r in written]
    # in row order locally and when checked in the driver; Spark's pass and a stream
    # set their own
    in_order = mode in ("local", "spark")
    assert (rows if in_order else sorted(rows, key=lambda r: r[2])) == AS_READ_ROWS


@pytest.mark.parametrize("mode", CHECK_MODES)
def test_rejected_json_lines_keep_the_file_s_key_order(spark, capsys, tmp_path, mode):
    """A JSON lines input's rejected rows name their columns in the order of the file's
    keys, the malformed row's text after them, in every runner (Spark's reader sorts
    keys by name: Spark wrote `id, k, ts, type` and the text first)."""
    path = tmp_path / "e.jsonl"
    path.write_text(
        '{"type":"A","ts":1,"k":"007","id":1}\n{"ts":2,"k":"007","id":2}\nnot json\n'
        '{"type":"C","ts":3,"k":"007","id":3}\n'
    )
    out = tmp_path / "m.jsonl"
    query = "PATTERN SEQ(A a, C c) WHERE [k] WITHIN 10"
    code, _, err = run_mode(capsys, mode, path, out, "--id", "id", query=query)
    assert code == 0, err
    lines = (tmp_path / "m.rejected.jsonl").read_text().splitlines()
    assert sorted(lines) == sorted(
        [
            '{"type":null,"ts":2,"k":"007","id":2,"__corrupt_record":null,"reason":"type is missing"}',
            '{"type":null,"ts":null,"k":null,"id":null,"__corrupt_record":"not json",'
            '"reason":"malformed row"}',
        ]
    )


# covered through Spark by: test_driver_check::test_checks_give_the_same_both_ways[every_reason]
# (a time that is none and a word in a column of numbers in one file, both ways, by hand)
SPARK_SLOW = [pytest.param(m, marks=pytest.mark.slow) for m in CHECK_MODES[1:]]


@pytest.mark.parametrize("mode", ["local", *SPARK_SLOW])
def test_a_bad_time_and_a_bad_number_cell_in_one_file(spark, capsys, tmp_path, mode):
    """Rows rejected by the first check (a time that is none: its cells as text) and by
    a later one (a cell of a column of numbers that is not one) go to one rejected file;
    Spark cast 'soon' to a number there and failed the whole run. v has 9 numbers in 10
    values read: a column of numbers, in both runners (local judged only the 9 rows with
    a time, 8 of 9, and compared v as text)."""
    path = tmp_path / "e.csv"
    path.write_text(
        "ts,type,v\n1,A,1.5\n3,B,2.5\nsoon,B,3\n6,B,oops\n7,B,0.5\n8,B,1.0\n"
        "9,C,4\n10,C,5\n11,C,5\n12,C,5\n"
    )
    out = tmp_path / "m.jsonl"
    query = "PATTERN SEQ(A a, B b) WHERE b.v > a.v WITHIN 10"
    code, stdout, err = run_mode(capsys, mode, path, out, query=query)
    assert code == 0, err
    checked_where(mode, stdout, path)
    reasons = [r["reason"] for r in jsonl(tmp_path / "m.rejected.jsonl")]
    assert reasons == ["ts is not an integer or a timestamp", "v: 'oops' is not a number"]
    assert int(summary(stdout)["events read"]) == 10
    assert [(r["a"], r["b"]) for r in jsonl(out)] == [(0, 1)]  # only 2.5 > 1.5


HEADER_CASES = {
    # The same rule in local and Spark (docs/input.md, "Bad input").
    # a byte order mark before the first name, a dot in another (read, both)
    "bom_and_a_dot_in_a_name": (b"\xef\xbb\xbfts,type,a.b\n1,A,1\n2,B,2\n", None),
    "duplicate_names": (b"ts,type,v,v\n1,A,1,2\n2,B,2,3\n", "names the column 'v' twice"),
    "backtick_in_a_name": (b"ts,type,`v\n1,A,1\n2,B,2\n", "holds a backtick"),
    "empty_file": (b"", "is empty"),
    "header_only": (b"ts,type,v\n", "holds no events"),  # Spark: a TypeError trace
}


@pytest.mark.parametrize("mode", CHECK_MODES)
@pytest.mark.parametrize("case", list(HEADER_CASES))
def test_headers(spark, capsys, tmp_path, mode, case):
    data, message = HEADER_CASES[case]
    path = tmp_path / "h.csv"
    path.write_bytes(data)
    out = tmp_path / "m.jsonl"
    code, stdout, err = run_mode(capsys, mode, path, out)
    if message is None:
        assert code == 0, err
        checked_where(mode, stdout, path)
        assert [(r["a"], r["b"]) for r in jsonl(out)] == [(0, 1)]
    else:
        line = one_line(code, err)
        assert message in line and "h.csv" in line


@pytest.mark.parametrize("mode", MODES)
def test_files_of_one_folder_with_different_headers(spark, capsys, tmp_path, mode):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.csv").write_text("ts,type,v\n1,A,1\n")
    (folder / "b.csv").write_text("ts,type,w\n2,B,2\n")
    line = one_line(*run_mode(capsys, mode, folder, tmp_path / "m.jsonl")[::2])
    assert "b.csv" in line and "a.csv" in line and "share their header" in line


def _truncated_gz(header: bytes = b"ts,type,v\n") -> bytes:
    """A gzip file cut after its header: the columns are known, the rows cannot be read."""
    return gzip.compress(header + b"".join(b"%d,A,%d\n" % (i, i) for i in range(500)))[:60]


BROKEN_FILES = {
    "not_gzip_named_gz": ("e.csv.gz", b"ts,type\n1,A\n2,B\n", "gzip"),
    "truncated_gz": ("e.csv.gz", None, "truncated"),
    "corrupt_parquet": ("e.parquet", b"PAR1 not really parquet", "Parquet"),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", list(BROKEN_FILES))
def test_broken_files_give_one_line_naming_them(spark, capsys, tmp_path, mode, case):
    name, data, word = BROKEN_FILES[case]
    path = tmp_path / name
    path.write_bytes(data if data is not None else _truncated_gz())
    line = one_line(*run_mode(capsys, mode, path, tmp_path / "m.jsonl")[::2])
    assert name in line and word in line


def test_an_unterminated_quote_names_its_row_locally(capsys, tmp_path):
    """pandas reads a quote to the end of the file; the row where it opens is named."""
    path = tmp_path / "q.csv"
    path.write_text('ts,type,v\n1,A,1\n2,B,"2\n3,B,3\n')
    line = one_line(*run_mode(capsys, "local", path, tmp_path / "m.jsonl")[::2])
    assert "q.csv" in line and "row 2" in line and "quote" in line


# ---- options, checked before anything runs ------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", ["folder", "parent_is_a_file", "the_input", "rejected_txt"])
def test_bad_outputs_are_refused_before_running(spark, capsys, tmp_path, mode, case):
    events = tmp_path / "e.csv"
    events.write_text("ts,type\n1,A\n2,B\n")
    (tmp_path / "afile").write_text("")
    (tmp_path / "out.jsonl").mkdir()
    output, more, words = {
        "folder": (tmp_path / "out.jsonl", [], ["is a folder"]),
        "parent_is_a_file": (tmp_path / "afile" / "m.jsonl", [], ["afile", "is a file"]),
        "the_input": (events, [], ["is the input"]),
        "rejected_txt": (tmp_path / "m.jsonl", ["--rejected", tmp_path / "r.txt"], ["r.txt"]),
    }[case]
    before = sorted(p.name for p in tmp_path.iterdir())
    line = one_line(*run_mode(capsys, mode, events, output, *more)[::2])
    assert all(w in line for w in words)
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing was written
    assert events.read_text() == "ts,type\n1,A\n2,B\n"


@pytest.mark.parametrize("mode", MODES)
def test_negative_max_matches_is_a_usage_error(spark, capsys, tmp_path, mode):
    events = tmp_path / "e.csv"
    events.write_text("ts,type\n1,A\n2,B\n")
    code, _, err = run_mode(capsys, mode, events, tmp_path / "m.jsonl", "--max-matches", "-1")
    assert code == 2
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("usage error: ") and "--max-matches" in lines[0]
    assert not (tmp_path / "m.jsonl").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads and writes whatever the mode bits say")
@pytest.mark.parametrize("mode", MODES)
def test_unreadable_input_and_read_only_output_folder(spark, capsys, tmp_path, mode):
    events = tmp_path / "e.csv"
    events.write_text("ts,type\n1,A\n2,B\n")
    events.chmod(0)
    line = one_line(*run_mode(capsys, mode, events, tmp_path / "m.jsonl")[::2])
    assert "e.csv" in line and "permission" in line
    events.chmod(0o644)
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    line = one_line(*run_mode(capsys, mode, events, locked / "m.jsonl")[::2])
    assert "locked" in line and "not writable" in line


def test_permission_errors_name_the_file():
    from sparkcep.failures import read_message

    error = PermissionError(13, "Permission denied", "/data/e.csv")
    assert read_message(error, "/data/e.csv") == (
        "cannot read '/data/e.csv': permission denied (check the file's permissions)"
    )


# ---- §5: a file that is not a query is never echoed ---------------------------------------


@pytest.mark.parametrize("command", ["explain", "run"])
def test_a_file_that_is_not_a_query_is_not_echoed(capsys, tmp_path, command):
    secret = tmp_path / "credentials"
    secret.write_text("root:x:0:0:root:/root:/bin/bash\naws_secret=HUNTER2-XYZZY\n")
    args = [command, secret] + (["-i", secret, "-o", tmp_path / "m.jsonl"] * (command == "run"))
    code, out, err = sparkcep(capsys, *args)
    line = one_line(code, err)
    assert "is a file, not a query file" in line
    assert "HUNTER2" not in out + err and "root:x" not in out + err


def test_a_query_file_not_named_cep_is_read_when_it_parses(capsys, tmp_path):
    query = tmp_path / "q.txt"
    query.write_text(QUERY + "\n")
    code, out, err = sparkcep(capsys, "explain", query)
    assert code == 0, err
    assert "SEQ(A a, B b)" in out


# ---- Spark: an error raised inside a task, and Spark's own logs ---------------------------


def test_a_sparkcep_error_inside_a_spark_task_is_its_own_line(spark):
    """TooManyMatches raised in a Python worker reaches the driver wrapped in a Py4J /
    PythonException of hundreds of lines; the user sees its message."""
    from sparkcep.failures import user_message

    def explode(batches):
        from sparkcep.engines.nfa.matcher import TooManyMatches

        for _ in batches:
            raise TooManyMatches("more than 20,000,000 partial matches at once for 'b': add a key")
        yield from ()

    df = spark.range(4).mapInPandas(explode, "id long")
    with pytest.raises(Exception) as caught:
        df.collect()
    assert "Traceback" in str(caught.value)  # what the user used to get
    assert user_message(caught.value) == (
        "more than 20,000,000 partial matches at once for 'b': add a key"
    )


def test_sparkcep_debug_shows_the_exception_itself(spark, capsys, tmp_path, monkeypatch):
    """SPARKCEP_DEBUG=1: the Spark error is raised as it is (its traceback shown)."""
    path = tmp_path / "e.csv.gz"
    path.write_bytes(_truncated_gz())
    monkeypatch.setenv("SPARKCEP_DEBUG", "1")
    with pytest.raises(Exception, match="FAILED_READ_FILE"):
        cli.main(["run", QUERY, "-i", str(path), "-o", str(tmp_path / "m.jsonl")])


SPARKCEP = [sys.executable, "-m", "sparkcep.cli"]


@pytest.mark.spark
def test_spark_read_failures_are_one_line_on_the_whole_of_stderr(tmp_path):
    """As a real process: Spark's executor logs (a Java trace per failed task) are off,
    and so is the JVM's incubator-modules notice; the truncated file is named in one
    line."""
    path = tmp_path / "e.csv.gz"
    path.write_bytes(_truncated_gz())
    env = dict(os.environ, COLUMNS="80")
    done = subprocess.run(
        [*SPARKCEP, "run", QUERY, "-i", path, "-o", tmp_path / "m.jsonl", "--master", "local[1]"],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert done.returncode == 2
    lines = [x for x in done.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, done.stderr
    assert "e.csv.gz" in lines[0] and "truncated" in lines[0]


# ---- streaming --------------------------------------------------------------------------

STREAM_CASES = {
    # case: (file name, bytes, the words of the one line)
    "empty_file": ("e.csv", b"", "is empty"),
    "truncated_gz": ("e.csv.gz", None, "truncated"),
    "corrupt_parquet": ("e.parquet", b"PAR1 not really parquet", "Parquet"),
    "duplicate_names": ("e.csv", b"id,ts,type,type\n0,1,A,A\n", "names the column 'type' twice"),
    "not_gzip_named_gz": ("e.csv.gz", b"id,ts,type\n0,1,A\n", "gzip"),
}
# Files with rows a stream rejects, streamed together: one folder (one stream) per format,
# each file of its own ids (the rows of a case told apart by them).
# case: (rows after the header, reasons of the rejected rows, ids of the rejected rows)
STREAMED_CSV = b"id,ts,type,v\n"  # the header of each CSV case
STREAMED_REJECTED = {
    # (a malformed row shows its first fields, its id among them, as in a batch run)
    "extra_field.csv": (b"0,1,A,x\n1,2,B,x,9\n2,3,B,x\n", ["malformed row"], [1]),
    "short_row.csv": (b"10,1,A,x\n11,2\n12,3,B,x\n", ["malformed row"], [11]),
    "null_id.csv": (b"20,1,A,x\n,2,B,x\n22,3,B,x\n", ["id is missing"], [None]),
    "not_utf8.csv": (b"30,1,A,x\n31,2,B,caf\xe9\n32,3,B,y\n", ["not UTF-8 text"], [31]),
    "bom.csv": (b"40,1,A,x\n41,2,B,x\n", [], []),  # the header after a byte order mark
    # Python's csv reader (the stream's) stopped at a cell of 128 KiB
    "a_cell_over_128_kib.csv": (b"50,1,A,x\n51,2,B," + b"x" * 200_000 + b"\n", [], []),
    "bad_jsonl_line.jsonl": (
        b'{"id":0,"ts":1,"type":"A"}\n{"id":1,"ts":2,"type":\n{"id":2,"ts":3,"type":"B"}\n',
        ["malformed row"],
        [None],
    ),
    "float_times.jsonl": (  # whole values are times, 2.5 is not (it was read as 2)
        b'{"id":10,"ts":1.0,"type":"A"}\n{"id":11,"ts":2.5,"type":"B"}\n'
        b'{"id":12,"ts":3.0,"type":"B"}\n',
        ["ts is not an integer or a timestamp"],
        [11],
    ),
}


def stream(capsys, folder: Path, tmp_path: Path, checkpoint: Path | None = None, query=QUERY):
    return sparkcep(
        capsys, "stream", query, "-i", folder, "-o", tmp_path / "out",
        "--checkpoint", checkpoint or tmp_path / "ck", "--id", "id", "--lateness", "100",
    )  # fmt: skip


@pytest.mark.parametrize("case", list(STREAM_CASES))
def test_streamed_broken_files_give_one_line(spark, capsys, tmp_path, case):
    name, data, expected = STREAM_CASES[case]
    folder = tmp_path / "in"
    folder.mkdir()
    # (a stream needs an id column; without one, that is the error, before any row is read)
    (folder / name).write_bytes(data if data is not None else _truncated_gz(b"id,ts,type\n"))
    line = one_line(*stream(capsys, folder, tmp_path)[::2])
    assert expected in line and name in line


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_streamed_bad_inputs(spark, capsys, tmp_path, suffix):
    folder = tmp_path / "in"
    folder.mkdir()
    cases = {n: case for n, case in STREAMED_REJECTED.items() if n.endswith(suffix)}
    head = STREAMED_CSV if suffix == ".csv" else b""
    for name, (rows, _, _) in cases.items():
        bom = b"\xef\xbb\xbf" if name.startswith("bom") else b""
        (folder / name).write_bytes(bom + head + rows)
    code, stdout, err = stream(capsys, folder, tmp_path)
    assert code == 0, err
    assert "Traceback" not in err
    rejected = [
        r for f in sorted((tmp_path / "out" / "rejected").glob("*.jsonl")) for r in jsonl(f)
    ]
    # each case's rejected rows, told apart by their ids (a malformed row has none): by hand
    assert sorted((str(r.get("id")), r["reason"]) for r in rejected) == sorted(
        (str(i), reason) for _, reasons, ids in cases.values() for i, reason in zip(ids, reasons)
    )
    rows = sum(len(rows.splitlines()) for rows, _, _ in cases.values())
    assert int(summary(stdout)["events read"]) == rows  # good + rejected


def test_a_streamed_file_with_another_header_names_itself(streamed_checkpoint, capsys, tmp_path):
    """A file arriving after the stream has decided its columns (a copy of a checkpoint)."""
    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copy(streamed_checkpoint[0] / "a.csv", folder)
    (folder / "b.csv").write_text("id,ts,kind\n1,2,B\n")  # arrives later
    checkpoint = tmp_path / "ck"
    shutil.copytree(streamed_checkpoint[1], checkpoint)
    line = one_line(*stream(capsys, folder, tmp_path, checkpoint)[::2])
    assert "b.csv" in line and "(id, ts, kind)" in line and "move it out of the folder" in line


@pytest.fixture(scope="module")
def streamed_checkpoint(spark, tmp_path_factory):
    """(folder, checkpoint) of a stream that has run once, then been given a new file: each
    damaged-checkpoint case restarts a copy of it."""
    tmp = tmp_path_factory.mktemp("streamed")
    folder = tmp / "in"
    folder.mkdir()
    (folder / "a.csv").write_text("id,ts,type\n0,1,A\n1,2,B\n2,3,B\n")
    args = ["stream", QUERY, "-i", folder, "-o", tmp / "out", "--checkpoint", tmp / "ck"]
    try:
        cli.main([str(a) for a in [*args, "--id", "id", "--lateness", "100"]])
    except SystemExit as e:
        assert not e.code, e.code
    (folder / "b.csv").write_text("id,ts,type\n3,14,A\n4,15,B\n")
    return folder, tmp / "ck"


@pytest.mark.parametrize(
    "damaged", ["offsets/0", "commits/0", "metadata", "sparkcep-types.json", "state/0/0/1.delta"]
)
def test_a_damaged_checkpoint_names_itself(streamed_checkpoint, capsys, tmp_path, damaged):
    folder, first = streamed_checkpoint
    checkpoint = tmp_path / "ck"
    shutil.copytree(first, checkpoint)
    target = checkpoint / damaged
    if not target.exists():  # the state files' names depend on the partitioning
        target = sorted((checkpoint / "state").rglob("*.delta"))[0]
    target.write_bytes(b"\x00 damaged {")
    line = one_line(*stream(capsys, folder, tmp_path, checkpoint)[::2])
    assert f"the checkpoint '{checkpoint}' is damaged" in line
    assert "delete it to start the stream over" in line


# ---- text read as times, nulls, numbers or text: one rule in every mode --------------------
# The checks each way (CHECK_MODES), and Spark's checking pass reading the input twice.
TYPE_MODES = [*CHECK_MODES, "spark-two-reads"]


def run_typed(capsys, monkeypatch, mode, path, out, *more, query=QUERY):
    if mode == "spark-two-reads":
        from sparkcep.runners.spark import one_read as spark_once

        monkeypatch.setenv(spark_once.ENV, "0")
        mode = "spark-full"
    return run_mode(capsys, mode, path, out, *more, query=query)


# Rows 0-4: times written year first with '/' or '-', a time, a fraction, a zone; row 4
# day first. Rows 5-11: case ids 00000000, 0, 01, 1, NA, NA, 00000000.
TEXT_FILE = (
    "case_id,type,ts\nt,A,2014/10/22 11:15:41.000\nt,B,2014/10/22 11:15:45.500\n"
    "t,B,2014/10/22 11:16:41.000\nt,B,2014-10-22T12:15:49+01:00\nt,B,22/10/2014 11:15:42\n"
    + "".join(
        f"{case},{kind},2020-01-01 00:00:0{s}\n"
        for case, kind, s in [
            ("00000000", "A", 1), ("0", "B", 2), ("01", "A", 3), ("1", "B", 4), ("NA", "A", 5),
            ("NA", "B", 6), ("00000000", "B", 8),
        ]
    )
)  # fmt: skip


@pytest.mark.parametrize("mode", TYPE_MODES)
def test_text_is_read_by_one_rule(spark, capsys, monkeypatch, tmp_path, mode):
    """A date written year first with '/' or '-', a time, a fraction and a zone is a
    timestamp (docs/input.md); a date written day first is none, in every mode (Spark's
    checking pass read '2014/10/22 ...' as no time, and took the column for integers).
    'NA' is a case like any other unless --null-value names it; '00000000' and '0',
    '01' and '1' are four keys (a column with a leading zero stays text)."""
    path = tmp_path / "e.csv"
    path.write_text(TEXT_FILE)
    out = tmp_path / "m.jsonl"
    query = "PATTERN SEQ(A a, B b) WHERE [case_id] WITHIN 10 s"
    code, _, err = run_typed(capsys, monkeypatch, mode, path, out, query=query)
    assert code == 0, err
    # by hand: in case t, B 1 is 4.5 s after A, B 3 (11:15:49 UTC) 8 s; B 2 is 60 s after
    # it. Key 00000000 has A 5 and B 11, key NA A 9 and B 10; 0, 01 and 1 have one each.
    rows = {(r["case_id"], r["a"], r["b"]): r["start"] for r in jsonl(out)}
    assert sorted(rows) == [("00000000", 5, 11), ("NA", 9, 10), ("t", 0, 1), ("t", 0, 3)]
    assert rows["t", 0, 1] == "2014-10-22T11:15:41.000000Z"
    rejected = jsonl(tmp_path / "m.rejected.jsonl")
    assert [(r["__row"], r["reason"]) for r in rejected] == [
        (4, "ts is not an integer or a timestamp")
    ]
    code, _, err = run_typed(
        capsys, monkeypatch, mode, path, out, "--null-value", "NA", query=query
    )
    assert code == 0, err
    assert sorted((r["case_id"], r["a"], r["b"]) for r in jsonl(out)) == [
        ("00000000", 5, 11), ("t", 0, 1), ("t", 0, 3),
    ]  # fmt: skip


@pytest.mark.parametrize("mode", CHECK_MODES)
def test_a_run_that_rejects_every_row_is_an_error(spark, capsys, tmp_path, mode):
    """Every row rejected: exit 2 with one line saying why; the rejected rows are written."""
    path = tmp_path / "e.csv"
    path.write_text("ts,type\nsoon,A\nlater,B\n")
    out = tmp_path / "m.jsonl"
    code, stdout, err = run_mode(capsys, mode, path, out)
    line = one_line(code, err)
    assert line == (
        "error: every one of the 2 rows read was rejected (most often: ts is not an "
        "integer or a timestamp, 2 rows)"
    )
    assert summary(stdout)["rejected"] == "2"
    assert len(jsonl(tmp_path / "m.rejected.jsonl")) == 2


UNIT_WARNING = (
    "warning: the times of 'ts' read in s lie in the years 36390..36390, outside "
    "1970..2100: ms would fit them (2004..2004); check --time-unit"
)


@pytest.mark.parametrize("mode", CHECK_MODES)
def test_times_implausible_in_their_unit_are_warned_of(spark, capsys, tmp_path, mode):
    """Millisecond times read as seconds lie 34,000 years ahead: the summary says so and
    names the unit that fits; so does explain --input. The right unit gives no warning."""
    path = tmp_path / "e.csv"
    path.write_text("type,ts\nA,1086217263125\nB,1086217263126\n")
    out = tmp_path / "m.jsonl"
    code, _, err = run_mode(capsys, mode, path, out, "--time-unit", "s", query=QUERY + " s")
    assert code == 0, err
    assert UNIT_WARNING in " ".join(err.split())
    code, _, err = run_mode(capsys, mode, path, out, "--time-unit", "ms", query=QUERY + " s")
    assert code == 0 and "check --time-unit" not in err, err
    if mode == "local":
        code, stdout, _ = sparkcep(
            capsys, "explain", QUERY + " s", "--input", path, "--time-unit", "s"
        )
        assert code == 0 and UNIT_WARNING[len("warning: ") :] in " ".join(stdout.split())


def test_a_stream_reads_text_by_the_same_rules(spark, capsys, tmp_path):
    """Streaming: '2014/10/22 ...' is a timestamp, 'NA' a case, '00000000' and '0' two
    keys; a stream whose every row is rejected ends in one line, as a run does."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.csv").write_text(
        "id,case_id,type,ts\n0,00000000,A,2014/10/22 11:15:01\n1,0,B,2014/10/22 11:15:02\n"
        "2,01,A,2014/10/22 11:15:03\n3,1,B,2014/10/22 11:15:04\n4,NA,A,2014/10/22 11:15:05\n"
        "5,NA,B,2014/10/22 11:15:06\n6,00000000,B,2014/10/22 11:15:08\n"
        "7,x,C,2014/10/22 12:00:00\n"  # moves the watermark past the others
    )
    query = "PATTERN SEQ(A a, B b) WHERE [case_id] WITHIN 10 s"
    out = tmp_path / "out"
    code, _, err = sparkcep(
        capsys, "stream", query, "-i", folder, "-o", out, "--checkpoint", tmp_path / "ck",
        "--id", "id",
    )  # fmt: skip
    assert code == 0, err
    rows = [r for f in sorted(out.glob("batch-*.jsonl")) for r in jsonl(f)]
    assert sorted((r["case_id"], r["a"], r["b"]) for r in rows) == [
        ("00000000", 0, 6),
        ("NA", 4, 5),
    ]
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "a.csv").write_text("id,ts,type\n0,soon,A\n1,later,B\n")
    code, _, err = sparkcep(
        capsys, "stream", QUERY + " s", "-i", bad, "-o", tmp_path / "out2", "--checkpoint",
        tmp_path / "ck2", "--id", "id",
    )  # fmt: skip
    assert one_line(code, err) == (
        "error: every one of the 2 rows read was rejected (most often: ts is not an integer or a "
        "timestamp, 2 rows)"
    )


# ---- names and cells Spark once read otherwise --------------------------------------------

# A dotted name and a name with a space, read by the queries of each engine family (the
# header case above reads neither: the columns no query reads never reached Spark's
# pandas functions, which read `k.y` as the field y of a column k). Expected by hand:
# key 1 has A 0 (c d 5), B 1 (6), B 4 (9); key 2 has A 2 (1), B 3 (0); C 5 only moves a
# stream's time on.
NAMES_CSV = (
    "id,ts,type,k.y,c d\n0,1,A,1,5\n1,2,B,1,6\n2,3,A,2,1\n3,4,B,2,0\n4,5,B,1,9\n5,99,C,1,0\n"
)
NAMES_QUERIES = {
    "pair": "PATTERN SEQ(A a, B b) WHERE [`k.y`] AND b.`c d` > a.`c d` AND a.`c d` < 9 WITHIN 10",
    "rise": "PATTERN SEQ(A a, B+ bs[]) WHERE [`k.y`] AND bs.`c d` > a.`c d` WITHIN 10",
    "set": "PATTERN SEQ({A s, B t}) WHERE [`k.y`] AND t.`c d` > s.`c d` WITHIN 10 SELECT ALL",
    "n": "PATTERN SEQ(A a, B b) WHERE [`k.y`] AND b.`c d` > 0 GROUP BY `k.y` "
    "AGG COUNT AS n, MAX(b.`c d`) AS top WITHIN 10",
}
NAMES_ROWS = {
    "pair": [(0, 1), (0, 4)],
    "rise": [(0, [1]), (0, [1, 4]), (0, [4])],
    "set": [(0, 1), (0, 4)],
    "n": [(2, 1, 6), (5, 2, 9)],  # (ts, count, max) at each B of key 1 with a match
}
NAMES_MR = (
    "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY `k.y` ORDER BY ts "
    "MEASURES LAST(B.`c d`) AS cd ONE ROW PER MATCH PATTERN (A B) "
    "DEFINE A AS A.type = 'A', B AS B.type = 'B' AND B.`c d` > A.`c d`)"
)


def _names_rows(rows: list[dict]) -> dict[str, list[tuple]]:
    fields = {"rise": ("a", "bs"), "set": ("s", "t"), "n": ("ts", "n", "top")}
    assert all(r["k.y"] == 1 for r in rows)
    return {
        q: sorted(tuple(r[f] for f in fields[q]) for r in rows if r["query"] == q) for q in fields
    }


@pytest.mark.parametrize("mode", CHECK_MODES)
def test_names_with_a_dot_or_a_space_in_every_engine(spark, capsys, tmp_path, mode):
    path = tmp_path / "e.csv"
    path.write_text(NAMES_CSV)
    queries = tmp_path / "q.cep"
    # (one query per engine: pair, whose b is one event, and rise, whose bs is a list, in
    # one file share a program, and Spark then fails on the rows' missing lists)
    queries.write_text("".join(f"QUERY {n}: {NAMES_QUERIES[n]};\n" for n in ("rise", "set", "n")))
    out = tmp_path / "m.jsonl"
    code, stdout, err = run_mode(capsys, mode, path, out, "--id", "id", query=queries)
    assert code == 0, err
    checked_where(mode, stdout, path)
    assert _names_rows(jsonl(out)) == {n: NAMES_ROWS[n] for n in ("rise", "set", "n")}
    code, _, err = run_mode(capsys, mode, path, out, "--id", "id", query=NAMES_MR)
    assert code == 0, err
    assert jsonl(out) == [{"k.y": 1, "cd": 6}]


def test_a_streamed_name_with_a_dot_or_a_space(spark, capsys, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "e.csv").write_text(NAMES_CSV)
    # (in ms, the watermark C sets passes the other events: their matches come out)
    code, _, err = sparkcep(
        capsys, "stream", NAMES_QUERIES["pair"], "-i", folder, "-o", tmp_path / "out",
        "--checkpoint", tmp_path / "ck", "--id", "id", "--lateness", "0", "--time-unit", "ms",
    )  # fmt: skip
    assert code == 0, err
    rows = [r for f in sorted((tmp_path / "out").glob("*.jsonl")) for r in jsonl(f)]
    assert sorted((r["a"], r["b"]) for r in rows) == NAMES_ROWS["pair"]


@pytest.mark.parametrize("mode", MODES)  # (over 1 MiB, Spark checks it in its own pass)
def test_a_cell_of_megabytes_is_read(spark, capsys, tmp_path, mode):
    """A row longer than Arrow's block (1 MB) stopped the local reader ('straddling
    object straddles two block boundaries'); Spark read it."""
    path = tmp_path / "e.csv"
    path.write_text("ts,type,v\n1,A,short\n2,B," + "x" * 3_000_000 + "\n3,B,z\n")
    out = tmp_path / "m.jsonl"
    query = "PATTERN SEQ(A a, B b) WITHIN 10 RETURN length(b.v) AS n"
    code, stdout, err = run_mode(capsys, mode, path, out, query=query)
    assert code == 0, err
    assert int(summary(stdout)["events read"]) == 3
    assert [(r["a"], r["b"], r["n"]) for r in jsonl(out)] == [(0, 1, 3_000_000), (0, 2, 1)]


@pytest.mark.parametrize("mode", CHECK_MODES)
@pytest.mark.parametrize("components", ["Trade+ t[]", "Trade t", "Trade t, Trade u"])
def test_a_missing_shared_attribute_is_a_positioned_query_error(
    spark, capsys, tmp_path, mode, components
):
    """`[symbol0]` with no such column: one component gave a KeyError trace locally and
    Spark's own message through Spark; now every pattern gets the query error."""
    path = tmp_path / "e.csv"
    path.write_text("ts,type,symbol,price\n1,Trade,X,1\n2,Trade,X,2\n")
    query = f"PATTERN SEQ({components}) WHERE [symbol0] WITHIN 10"
    code, _, err = run_mode(capsys, mode, path, tmp_path / "m.jsonl", query=query)
    assert code == 2 and "Traceback" not in err, err
    column = query.index("[symbol0]") + 1
    assert err.splitlines()[0] == (
        f"query error: line 1, column {column}: 'symbol0' is not a column of the input "
        "(columns: ts, type, symbol, price)"
    )


@pytest.mark.parametrize("mode", CHECK_MODES)
@pytest.mark.parametrize("sep, written", [(";", ";"), ("\t", "\\t"), ("|", "|")])
def test_a_file_of_another_separator_is_named_with_the_option(
    spark, capsys, tmp_path, mode, sep, written
):
    """Read with ',' the header is one column whose name holds the separator: the line
    says which --sep to give, and that option, as written, reads the file."""
    path = tmp_path / "e.csv"
    path.write_text(f"ts{sep}type{sep}v\n1{sep}A{sep}1\n2{sep}B{sep}2\n")
    out = tmp_path / "m.jsonl"
    line = one_line(*run_mode(capsys, mode, path, out)[::2])
    columns = f"ts{written}type{written}v"
    assert line == (
        f"error: the time column 'ts' is not in the input (columns: {columns}): "
        f"is the file '{written}'-separated? give --sep '{written}'"
    )
    if mode == "local":
        code, _, err = run_mode(capsys, mode, path, out, "--sep", written)
        assert code == 0, err
        assert [(r["a"], r["b"]) for r in jsonl(out)] == [(0, 1)]
