"""A program's state as data: bytes that hold numbers, text, arrays and tables, never code.

Streaming keeps each partition's state in Spark's state store, in the checkpoint folder.
Reading it back must not run anything a writer of that folder put there (as unpickling
would), so state is encoded here: a JSON tree for the structure, numpy arrays as raw
bytes with their dtype and shape, tables as Arrow IPC, integers of any size as text, and
only the state classes that engines registered with `state_class` can be rebuilt.

>>> import numpy as np
>>> value = {"n": 2**70, "xs": np.arange(3), "pair": (1.5, None)}
>>> back = decode_state(encode_state(value))
>>> back["n"] == 2**70, back["xs"].tolist(), back["pair"]
(True, [0, 1, 2], (1.5, None))
"""

from __future__ import annotations

import dataclasses
import io
import json
import math

import numpy as np
import pandas as pd
import pyarrow as pa

from sparkcep.errors import SparkcepError

MAGIC = b"sparkcep-state-1\n"
STATE_CLASSES: dict[str, type] = {}


def state_class(cls: type) -> type:
    """Allow a dataclass to be stored as state (decorator)."""
    STATE_CLASSES[cls.__name__] = cls
    return cls


class StateError(SparkcepError):
    """Stored state that cannot be read back."""


def encode_state(value) -> bytes:
    blobs: list[bytes] = []
    tree = _tree(value, blobs)
    header = json.dumps(tree, separators=(",", ":")).encode()
    parts = [MAGIC, len(header).to_bytes(8, "little"), header]
    for blob in blobs:
        parts += [len(blob).to_bytes(8, "little"), blob]
    return b"".join(parts)


def _header(data: bytes, magic: bytes):
    """The JSON header after `magic`, and where the bytes after it start."""
    if not data.startswith(magic):
        raise StateError("this is not a sparkcep state (written by another version?)")
    try:
        pos = len(magic)
        size = int.from_bytes(data[pos : pos + 8], "little")
        return json.loads(data[pos + 8 : pos + 8 + size]), pos + 8 + size
    except Exception as error:  # damaged bytes: say so in one line
        raise StateError(f"the stored state is damaged ({type(error).__name__}: {error})") from None


def decode_state(data: bytes):
    tree, pos = _header(data, MAGIC)
    try:
        blobs = []
        while pos < len(data):
            n = int.from_bytes(data[pos : pos + 8], "little")
            blobs.append(data[pos + 8 : pos + 8 + n])
            pos += 8 + n
        return _value(tree, blobs)
    except StateError:
        raise
    except Exception as error:  # damaged bytes: say so in one line
        raise StateError(f"the stored state is damaged ({type(error).__name__}: {error})") from None


def _tree(v, blobs: list[bytes]):
    if v is None or isinstance(v, bool | str):
        return v
    if isinstance(v, int | np.integer):
        return {"i": str(int(v))}
    if isinstance(v, float | np.floating):
        return {"f": float(v).hex()}
    if isinstance(v, tuple):
        return {"t": [_tree(x, blobs) for x in v]}
    if isinstance(v, list):
        return {"l": [_tree(x, blobs) for x in v]}
    if isinstance(v, dict):
        return {"d": [[_tree(k, blobs), _tree(x, blobs)] for k, x in v.items()]}
    if isinstance(v, np.ndarray):
        if v.dtype == object:
            return {"o": [_tree(x, blobs) for x in v.ravel().tolist()], "shape": list(v.shape)}
        blobs.append(np.ascontiguousarray(v).tobytes())
        return {"a": len(blobs) - 1, "dtype": v.dtype.str, "shape": list(v.shape)}
    if isinstance(v, pd.DataFrame):
        return _frame_tree(v, blobs)
    if dataclasses.is_dataclass(v) and type(v).__name__ in STATE_CLASSES:
        fields = {f.name: _tree(getattr(v, f.name), blobs) for f in dataclasses.fields(v)}
        return {"c": type(v).__name__, "fields": fields}
    raise TypeError(f"cannot store a {type(v).__name__} as state")


def _frame_tree(frame: pd.DataFrame, blobs: list[bytes]):
    try:
        table = pa.Table.from_pandas(frame.reset_index(drop=True), preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        columns = [[str(c), _tree(frame[c].to_numpy(dtype=object), blobs)] for c in frame]
        return {"cols": columns}
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    blobs.append(sink.getvalue())
    return {"df": len(blobs) - 1}


def _value(t, blobs: list[bytes]):
    if t is None or isinstance(t, bool | str):
        return t
    if not isinstance(t, dict):
        raise StateError("unexpected value")
    for tag, read in _READERS.items():
        if tag in t:
            return read(t, blobs)
    raise StateError("unexpected value")


def _array(t, blobs):
    dtype = np.dtype(t["dtype"])
    if dtype.hasobject:
        raise StateError("object arrays are stored item by item")
    count = math.prod(t["shape"])
    return np.frombuffer(blobs[t["a"]], dtype=dtype, count=count).reshape(t["shape"]).copy()


def _objects(t, blobs):
    out = np.empty(len(t["o"]), dtype=object)
    for i, x in enumerate(t["o"]):
        out[i] = _value(x, blobs)
    return out.reshape(t["shape"])


def _frame(t, blobs):
    with pa.ipc.open_stream(blobs[t["df"]]) as reader:
        return reader.read_all().to_pandas()


def _instance(t, blobs):
    cls = STATE_CLASSES.get(t["c"])
    if cls is None:
        raise StateError(f"unknown state class '{t['c']}'")
    return cls(**{name: _value(x, blobs) for name, x in t["fields"].items()})


_READERS = {
    "i": lambda t, blobs: int(t["i"]),
    "f": lambda t, blobs: float.fromhex(t["f"]),
    "t": lambda t, blobs: tuple(_value(x, blobs) for x in t["t"]),
    "l": lambda t, blobs: [_value(x, blobs) for x in t["l"]],
    "d": lambda t, blobs: {_hashable(_value(k, blobs)): _value(x, blobs) for k, x in t["d"]},
    "o": _objects,
    "a": _array,
    "df": _frame,
    "cols": lambda t, blobs: pd.DataFrame({n: _value(c, blobs) for n, c in t["cols"]}),
    "c": _instance,
}


def _hashable(v):
    return tuple(v) if isinstance(v, list) else v


# ---- a bucket of keys: one stored value, each key's state encoded apart --------------------

BUCKET_MAGIC = b"sparkcep-bucket-1\n"


def encode_bucket(entries: dict[str, tuple[int, bytes]]) -> bytes:
    """Several keys' states as one value: key -> (wake, encoded state). Each key's bytes
    are kept as they are, so a key that did not change is not encoded again.

    >>> data = encode_bucket({"[1]": (5, encode_state(1)), "[2]": (-3, encode_state("x"))})
    >>> {k: (wake, decode_state(blob)) for k, (wake, blob) in decode_bucket(data).items()}
    {'[1]': (5, 1), '[2]': (-3, 'x')}
    """
    keys = list(entries)
    header = {
        "keys": keys,
        "wakes": [str(entries[k][0]) for k in keys],
        "sizes": [len(entries[k][1]) for k in keys],
    }
    head = json.dumps(header, separators=(",", ":")).encode()
    return b"".join(
        [BUCKET_MAGIC, len(head).to_bytes(8, "little"), head, *(entries[k][1] for k in keys)]
    )


def decode_bucket(data: bytes) -> dict[str, tuple[int, bytes]]:
    """The keys of a bucket, each with its wake time and its state still encoded."""
    header, pos = _header(data, BUCKET_MAGIC)
    try:
        out: dict[str, tuple[int, bytes]] = {}
        for key, wake, n in zip(header["keys"], header["wakes"], header["sizes"], strict=True):
            out[key] = (int(wake), data[pos : pos + n])
            pos += n
        if pos != len(data):
            raise ValueError("the sizes do not add up")
        return out
    except Exception as error:  # damaged bytes: say so in one line
        raise StateError(f"the stored state is damaged ({type(error).__name__}: {error})") from None
