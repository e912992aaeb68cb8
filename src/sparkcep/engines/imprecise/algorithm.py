"""What every imprecise algorithm gives the program: the match signatures of one plan's
events, each with its range and confidence (`Found`).

Event-based algorithms (§4) find signatures — tuples of events, one per component, whose
valid intervals are not empty (`ValidBounds`) — and share the confidence computation
(`confidence.py`); the point-based one (§3) computes its own from its point matches.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from sparkcep.budget import CELL_BYTES, Budget
from sparkcep.engines.imprecise.bounds import ValidBounds
from sparkcep.engines.imprecise.candidates import nelt_holds
from sparkcep.engines.imprecise.confidence import AnyConfidence, NextConfidence, in_unit_range
from sparkcep.engines.imprecise.events import IntervalEvents, Pattern


@dataclass
class Found:
    """Signatures (rows of event positions, one column per component) with their time
    range and confidence; only those of positive confidence."""

    idx: np.ndarray  # (m, l) int64
    start: np.ndarray  # (m,) int64
    end: np.ndarray  # (m,) int64
    confidence: np.ndarray  # (m,) float64

    @staticmethod
    def none(length: int) -> Found:
        z = np.zeros(0, np.int64)
        return Found(np.zeros((0, length), np.int64), z, z, np.zeros(0))

    def __len__(self) -> int:
        return len(self.idx)


class Algorithm(ABC):
    """One evaluation method over one plan's events."""

    name: ClassVar[str]
    words: ClassVar[str]  # what `explain` says of it

    def __init__(self, events: IntervalEvents, pattern: Pattern, budget: Budget | None = None):
        self.events = events
        self.pattern = pattern
        self.meter = (budget or Budget()).meter()  # what the partial matches may hold

    def hold(self, cells: int) -> None:
        """Stops the run when the (partial) matches held, `cells` positions in all,
        exceed the budget."""
        self.meter.check(also=cells * CELL_BYTES)

    @abstractmethod
    def run(self) -> Found: ...


class EventBased(Algorithm):
    """Event-based framework: signatures from `signatures()`, then valid intervals,
    skip-till-next's NELT check (unless the method applied it while matching), and the
    confidence from the valid intervals (Algorithm 2 with the window; eq. (3))."""

    applies_nelt: ClassVar[bool] = False

    @abstractmethod
    def signatures(self) -> np.ndarray:
        """(m, l) event positions, each signature once (more is fine: signatures with
        empty valid intervals or zero confidence are dropped)."""

    def run(self) -> Found:
        idx = self.signatures()
        return settle(self.events, self.pattern, idx, nelt=not self.applies_nelt)


def settle(events: IntervalEvents, pattern: Pattern, idx, nelt: bool = True) -> Found:
    """Signatures -> Found: valid intervals, NELT, confidence; zero-confidence ones out."""
    if not len(idx):
        return Found.none(pattern.length)
    vlb, _, vub, ok = ValidBounds.three_pass(events.lo[idx], events.hi[idx], pattern.window)
    if pattern.next and nelt:
        ok &= nelt_holds(events, pattern, idx)
    idx, vlb, vub = idx[ok], vlb[ok], vub[ok]
    confidence = (
        NextConfidence(events, pattern) if pattern.next else AnyConfidence(events, pattern.window)
    )
    conf, start, end = confidence(idx, vlb, vub)
    conf = in_unit_range(events, pattern, idx, conf)
    keep = conf > 0
    return Found(idx[keep], start[keep], end[keep], conf[keep])
