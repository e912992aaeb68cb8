"""The folder source reads a CSV file column by column (issue 16 §4: a third of a
micro-batch's read was a dict per row): the same cells as its row reader, which decides
the stream's types."""

from __future__ import annotations

import gzip

import pytest

from sparkcep.inputs import CORRUPT
from sparkcep.runners.streaming.folder_source import _csv_columns, text_rows

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
    another field count is None in every column and its text in CORRUPT, in its place
    among the others."""
    path = tmp_path / "e.csv"
    path.write_bytes(CSV_CASES["malformed"])
    assert _csv_columns(str(path), ",", None, ["id", "ts", "type"]) == {
        "id": ["0", None, None, "2", "3", None],
        "ts": ["1", None, None, " NA ", None, None],
        "type": ["A", None, None, "B", None, None],
        CORRUPT: [None, "1,2,B,9", "", None, None, "4,5"],
    }
