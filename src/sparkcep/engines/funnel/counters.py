"""The funnel's prefix counters: for one key, the steps of SEQ(s1, ..., sk) reached.

A chain reaches step j when events e1 ≺ ... ≺ ej of steps 1..j (types and conditions)
lie within the window: ts(ej) - ts(e1) < w. Instead of enumerating chains, one value per
prefix of the funnel is kept (A-Seq's prefix counters, with max instead of +): `start[j]`,
the latest first-event time of a chain that reached step j. An event of step j extends
the chains of step j - 1 when it is within the window of `start[j - 1]`; the latest start
is the one most likely to stay within the window later, so nothing else is needed.
Events of one instant (equal time, or equal time and tie-break) are not in sequence: an
instant reads the values the instants before it left.

>>> counters = FunnelCounters(steps=3, window=10)
>>> # times 0 (step 1), 4 (step 2), 12 (step 3: 12 - 0 >= 10, too late), 13 (step 1),
>>> # 15 (step 2), 20 (step 3: within 10 of 13)
>>> counters.feed([0, 4, 12, 13, 15, 20], [0, 1, 2, 3, 4, 5], [1, 2, 4, 1, 2, 4])
[(1, 0), (2, 1), (3, 5)]
>>> counters.furthest
3
"""

from __future__ import annotations


class FunnelCounters:
    """Latest chain start per step, and the furthest step reached, for one key."""

    def __init__(self, steps: int, window: int, starts=None, furthest: int = 0):
        self.k = steps
        self.window = window
        self.starts: list[int | None] = list(starts) if starts is not None else [None] * steps
        self.furthest = furthest

    def feed(self, ticks, instants, bits) -> list[tuple[int, int]]:
        """Events in processing order (their times, instant ranks and step bitmasks);
        returns (step reached, index of the event whose instant reached it)."""
        out: list[tuple[int, int]] = []
        n, i = len(ticks), 0
        while i < n:
            j = i
            while j < n and instants[j] == instants[i]:
                j += 1
            best: dict[int, int] = {}
            for e in range(i, j):
                t, b = ticks[e], bits[e]
                step = 0
                while b:
                    if b & 1:
                        start = t if step == 0 else self.starts[step - 1]
                        if (
                            start is not None
                            and t - start < self.window
                            and best.get(step, start) <= start
                        ):
                            best[step] = start
                    b >>= 1
                    step += 1
            for step, start in best.items():
                old = self.starts[step]
                self.starts[step] = start if old is None or start > old else old
            if best and max(best) + 1 > self.furthest:
                self.furthest = max(best) + 1
                out.append((self.furthest, i))
            i = j
        return out

    def expire(self, horizon: int) -> None:
        """No event before `horizon` will come: starts it cannot extend are forgotten."""
        self.starts = [None if s is None or horizon - s >= self.window else s for s in self.starts]
