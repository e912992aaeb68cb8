"""`ayac`: probabilistic detection over lossy streams (ayac-probabilistic-cep.md).

Readers miss events. AYAC reports a pattern's matches even when some of their events
were missed, with the probability that the complex event really happened: a positive
component may be *inferred missing* (it happened, unobserved), and a negated one may have
happened unobserved. The model (§3): component i follows the previous positive after a
delay with law f_i, and each event is missed with probability ε. The scoring functions
(`scoring`) give each run of missing components a probability; a path through the skip
automaton (`automaton`) scores their product; arrival queues with upper bounds
(`queues`) and backward generation with early pruning (`generate`) find every path whose
score reaches the threshold. docs/ayac.md has the details and the choices made.

The engine itself is in `engine` (the registry imports it when a query needs it).

The shoplifting example (§2.2): an item read at the shelf (A) and at the exit (C)
without a read at the checkout (B) in between. Tag 1 was read at the checkout; tag 2
was not — stolen, or its checkout read was missed:

>>> import pandas as pd
>>> from sparkcep import match_local
>>> reads = pd.DataFrame({
...     "reader": ["A", "A", "B", "C", "C"], "tag": [1, 2, 1, 1, 2],
...     "ts":     [0, 10, 30, 60, 70], "type": "read"})
>>> query = '''PATTERN SEQ(read x, !read y, read z)
...            WHERE x.reader = 'A' AND y.reader = 'B' AND z.reader = 'C' AND [tag]
...            WITHIN 100 MISSING RATE 0.1 DELAY y UNIFORM(0, 120) THRESHOLD 0.5'''
>>> match_local(reads, query)[["tag", "x", "z", "missing", "probability"]]
   tag  x  z missing  probability
0    2  1  4      []     0.909091

Tag 2's checkout read would have come within the 60 ticks between A and C with
probability F_y(60) = 0.5 and been missed with probability ε = 0.1, so the item was
stolen with probability S^N(60) = 0.5 / (0.1 · 0.5 + 0.5) = 10/11. (The path that also
infers x missing scores about 0.09, below the threshold.)
"""

from __future__ import annotations

__all__: list[str] = []
