"""The folder source reads a CSV file column by column (issue 16 §4: a third of a
micro-batch's read was a dict per row): the same cells as its row reader, which decides
the stream's types."""

from __future__ import annotations

import gzip

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparkcep.inputs import CORRUPT
from sparkcep.runners.streaming.folder_source import SPACE, _csv_columns, _plain_csv, text_rows

CSV_CASES = {
    "plain": b"id,ts,type\n0,1,A\n1,2,B\n",
    "malformed": b"id,ts,type\n0,1,A\n1,2,B,9\n\n2, NA ,B\n3,,\n4,5\n",
    "quoted": b'id,ts,type\n0,1,"A, or B"\n1,2,"line\none"\n2,3, null \n',
    "bom_and_crlf": b"\xef\xbb\xbfid,ts,type\r\n0,1,A\r\n1,2,N/A\r\n",
    "not_utf8": b"id,ts,type\n0,1,caf\xe9\n",
    "header_only": b"id,ts,type\n",
}


@pytest.mark.parametrize("case", list(CSV_CASES))
@pytest.mark.parametrize("gz", [False, True])
def test_csv_columns_hold_the_rows_the_row_reader_reads(tmp_path, case, gz):
    path = tmp_path / ("e.csv.gz" if gz else "e.csv")
    data = CSV_CASES[case]
    path.write_bytes(gzip.compress(data) if gz else data)
    columns = ["id", "ts", "type"]
    rows = text_rows(str(path), "csv", ",", None, expected=columns)
    expected = {c: [r.get(c) for r in rows] for c in [*columns, CORRUPT]}
    assert _csv_columns(str(path), ",", None, columns) == expected


def test_csv_columns_by_hand(tmp_path):
    """Blank cells are None, a word such as ' NA ' is a value (docs/input.md); a row of
    another field count holds its first fields (as many as there are columns, the blank
    ones None) and its text in CORRUPT, in its place among the others."""
    path = tmp_path / "e.csv"
    path.write_bytes(CSV_CASES["malformed"])
    assert _csv_columns(str(path), ",", None, ["id", "ts", "type"]) == {
        "id": ["0", "1", None, "2", "3", "4"],
        "ts": ["1", "2", None, " NA ", None, "5"],
        "type": ["A", "B", None, "B", None, None],
        CORRUPT: [None, "1,2,B,9", "", None, None, "4,5"],
    }


def _row_reader(path, columns, sep=","):
    """The cells of each column as the row reader (the spec of every other) reads them."""
    rows = text_rows(str(path), "csv", sep, None, expected=columns)
    return {c: [r.get(c) for r in rows] for c in [*columns, CORRUPT]}


@pytest.mark.parametrize("case", list(CSV_CASES))
def test_a_plain_file_read_by_arrow_holds_the_rows_the_row_reader_reads(tmp_path, case):
    path = tmp_path / "e.csv"
    path.write_bytes(CSV_CASES[case])
    columns = ["id", "ts", "type"]
    table = _plain_csv(str(path), ",", None, columns)
    if case in ("plain", "header_only"):  # plain files take Arrow's reader
        assert table is not None
    if case in ("malformed", "quoted", "not_utf8"):  # the others the csv module's
        assert table is None
    if table is not None:
        assert table.to_pydict() == _row_reader(path, columns)


# Cells of digits, words and blanks of every kind; lines of any field count, empty
# lines, both line ends, and now and then a quote or a byte that is not UTF-8.
CELL = st.text(alphabet=st.sampled_from(["1", "0", "x", "é", " ", "\t", "\xa0", "\x1c",
                                         "\u3000", "-"]), max_size=4)  # fmt: skip
LINE = st.lists(CELL, min_size=0, max_size=4)
ODD = st.sampled_from([b"", b"", b"", b'"', b"\xe9", b"\r"])


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(lines=st.lists(LINE, max_size=6), ends=st.sampled_from(["\n", "\r\n"]), odd=ODD,
       sep=st.sampled_from([",", ";", "\t"]))  # fmt: skip
def test_arrow_reads_what_the_row_reader_reads_or_leaves_the_file(tmp_path, lines, ends, odd, sep):
    """Oracle: on any file Arrow's reader takes, every cell is the row reader's; the
    files it leaves go to `_csv_columns`, checked above against the same reader."""
    columns = ["id", "ts", "type"]
    text = ends.join([sep.join(columns), *[sep.join(cells) for cells in lines]]) + ends
    path = tmp_path / "e.csv"
    path.write_bytes(text.encode() + odd)
    table = _plain_csv(str(path), sep, None, columns)
    if table is not None:
        assert table.to_pydict() == _row_reader(path, columns, sep)
    even = all(len(cells) == 3 and sep not in "".join(cells) for cells in lines)
    if even and not odd and not any('"' in c for cells in lines for c in cells):
        assert table is not None  # a plain file is not left to the slow reader


def test_space_is_what_python_strips():
    assert "".join(c for c in map(chr, range(0x110000)) if c.isspace()) == SPACE


def test_a_file_read_in_parts_gives_each_row_once(tmp_path):
    """With fewer files than cores in a micro-batch, a file is read in parts: together
    they hold its rows, each once and in order; several files or JSON lines, one part."""
    import json

    import pyarrow as pa

    from sparkcep.runners.streaming.folder_source import FolderReader

    folder = tmp_path / "in"
    folder.mkdir()
    for name in ("a.csv", "b.csv"):
        (folder / name).write_text("id,ts,type\n" + "".join(f"{i},{i},A\n" for i in range(7)))
    options = {"path": str(folder), "format": "csv", "columns": json.dumps(["id", "ts", "type"])}
    reader = FolderReader({**options, "cores": "3"})
    parts = reader.partitions({}, {"files": ["a.csv"]})
    assert [p.value for p in parts] == [("a.csv", 0, 3), ("a.csv", 1, 3), ("a.csv", 2, 3)]
    ids = [
        i
        for p in parts
        for b in reader.read(p)
        for i in pa.Table.from_batches([b])["id"].to_pylist()
    ]
    assert ids == [str(i) for i in range(7)]
    assert len(reader.partitions({}, {"files": ["a.csv", "b.csv"]})) == 4  # 2 parts each
    assert len(FolderReader({**options, "cores": "1"}).partitions({}, {"files": ["a.csv"]})) == 1
    json_reader = FolderReader({**options, "format": "json", "cores": "4"})
    assert len(json_reader.partitions({}, {"files": ["a.csv"]})) == 1
    (folder / "c.csv").write_text("id,ts,type\n")  # a header alone: no rows in any part
    empty = reader.partitions({}, {"files": ["c.csv"]})
    assert len(empty) == 3 and not [b for p in empty for b in reader.read(p) if b.num_rows]


@pytest.mark.parametrize("case", ["plain", "malformed", "bom_and_crlf"])
def test_a_headerless_file_reads_alike_either_way(tmp_path, case):
    """Files without a header line (the stream's columns given): the lines after the
    first are the rows, read by Arrow's reader where the file is plain, alike."""
    path = tmp_path / "e.csv"
    path.write_bytes(CSV_CASES[case].split(b"\n", 1)[1])  # without its header line
    columns = ["id", "ts", "type"]
    rows = text_rows(str(path), "csv", ",", columns, expected=columns)
    expected = {c: [r.get(c) for r in rows] for c in [*columns, CORRUPT]}
    assert _csv_columns(str(path), ",", columns, columns) == expected
    table = _plain_csv(str(path), ",", columns, columns)
    assert (table is not None) == (case != "malformed")  # (CRLF line ends are plain)
    if table is not None:
        assert table.to_pydict() == expected
