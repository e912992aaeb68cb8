"""Spark structured streaming: `pipeline` (stream, start, read_stream, the per-key step) and
`folder` (a folder of files read as a stream).

`sparkcep.runners.streaming.start` (and the rest of `pipeline`) is imported when
first asked for.
"""

from importlib import import_module


def __getattr__(name: str):
    module = import_module("sparkcep.runners.streaming.pipeline")
    try:
        return getattr(module, name)
    except AttributeError:
        raise AttributeError(
            f"module 'sparkcep.runners.streaming' has no attribute '{name}'"
        ) from None
