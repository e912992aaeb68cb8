"""The runners: `local` (pandas), `spark` (batch), `streaming`, `jobs` (fit, mining, warmup),
each imported when first named (`sparkcep.runners.spark.run(...)` after `import sparkcep`)."""

import importlib

RUNNERS = ("local", "spark", "streaming", "jobs")


def __getattr__(name: str):
    if name in RUNNERS:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
