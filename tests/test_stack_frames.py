"""`prep.table.stack_frames` is `pd.concat(frames, ignore_index=True)`, cell for cell and
dtype for dtype, whatever the frames' block layouts."""

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkcep.prep.table import stack_frames

KINDS = ("int", "float", "bool", "text", "none", "mixed")


def _column(kind: str, n: int, draw) -> np.ndarray | list:
    if kind == "int":
        return np.array(draw(st.lists(st.integers(-(2**62), 2**62), min_size=n, max_size=n)))
    if kind == "float":
        return np.array(draw(st.lists(st.floats(allow_nan=True), min_size=n, max_size=n)))
    if kind == "bool":
        return np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    if kind == "none":  # all null: pandas' slow join looks at each of these cells
        return np.full(n, None, dtype=object)
    cells = st.one_of(st.none(), st.text(max_size=3)) if kind == "mixed" else st.text(max_size=3)
    return np.array(draw(st.lists(cells, min_size=n, max_size=n)), dtype=object)


@st.composite
def frames(draw):
    kinds = draw(st.lists(st.sampled_from(KINDS), min_size=1, max_size=5))
    out = []
    for _ in range(draw(st.integers(1, 4))):
        n = draw(st.integers(0, 6))
        frame = pd.DataFrame({f"c{i}": _column(k, n, draw) for i, k in enumerate(kinds)})
        if draw(st.booleans()):  # another block layout: columns added one at a time
            frame = frame.copy()
            for name in list(frame.columns):
                frame[name] = frame.pop(name)
            frame = frame[[f"c{i}" for i in range(len(kinds))]]
        if draw(st.booleans()):
            frame.index = frame.index + 100  # an index of its own: ignored
        out.append(frame)
    if draw(st.booleans()) and len(out) > 1:  # one frame's column of another dtype
        out[-1] = out[-1].assign(c0=out[-1]["c0"].astype(object))
    return out


@settings(max_examples=300, deadline=None)
@given(frames())
def test_stacked_frames_are_pandas_concat(parts):
    expected = pd.concat(parts, ignore_index=True)
    got = stack_frames(parts)
    pd.testing.assert_frame_equal(got, expected, check_exact=True)
    assert list(got.dtypes) == list(expected.dtypes)


def test_an_all_null_object_column_keeps_its_nones():
    a = pd.DataFrame({"t": [1, 2], "raw": np.full(2, None, dtype=object)})
    b = pd.DataFrame({"raw": np.full(1, None, dtype=object)}).assign(t=[3])[["t", "raw"]]
    got = stack_frames([a, b])
    assert got["raw"].tolist() == [None, None, None]
    assert got["t"].tolist() == [1, 2, 3]
    assert isinstance(got.index, pd.RangeIndex)
