"""DirectMatch compiled with numba: a baseline on equal footing with the compiled CBS-Tree.

Benchmark-only (the product's DirectMatch is Python: `window.DirectMatch`, `cbr.CBR`).
DirectMatch (the paper's reference [4], §3.2) retrieves a rule's min-latest occurrence
from the raw events of the window: CBR (Algorithm 1) where "the latest instance of e in
[lt, rt]" is a scan of the held events from rt back to lt, newest first, with no index.

It is `kernel.run` itself with its `tree` argument False: the same ring, rule arrays,
trigger table, per-window lower bound, Definition 3 and shared answers per instant (up
to MEMO per symbol), no tree kept, and each answer found by `kernel._scan` instead of
the tree's search. `DirectCompiled` is `matcher._Compiled` making that call (the Python
around it, the ring's growth and the making of `Found` rows are the CBS-Tree's code),
and `direct_program(rules)` gives a compiled program whose matcher uses it, so that
`episodes.match_only` times it exactly as it times the CBS-Tree.
"""

from __future__ import annotations

import numpy as np

from sparkcep.engines.episodes import kernel
from sparkcep.engines.episodes.matcher import _Compiled, _Held
from sparkcep.engines.episodes.window import Segment

NO_TREE = np.zeros((1, 2), np.uint64)  # the kernel's tree argument, unused


class DirectCompiled(_Compiled):
    """`matcher._Compiled` calling `kernel.run_direct` (no tree is kept)."""

    def held(self, seg: Segment) -> _Held:
        held = getattr(seg, "_kernel", None)
        if held is None or held.rejected_of is not seg.rejected:
            held = _Held(self, seg)
            seg._kernel = held
        return held

    def _run(self, seg, held, state, syms, ticks, new_instant, owned, i):
        """`_Compiled.feed`'s kernel call, DirectMatch's."""
        return kernel.run_direct(
            syms, ticks, new_instant, owned, i, seg.sym, seg.tick, seg.first, state,
            NO_TREE, *self._rule_arrays(held),
        )  # fmt: skip


def direct_program(plans, names, options):
    """The `directmatch` program with its matcher running the compiled DirectMatch."""
    from sparkcep.engines.registry import engines

    program = engines()["directmatch"].compile(plans, names, options)
    program.matcher.compiled = DirectCompiled(program.rules)
    return program
