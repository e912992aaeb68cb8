"""The CBS-Tree (Circular Binary Search Tree) of cbs-tree-episode-prediction.md §3.

A complete binary tree over the last L event instances: leaf ((t − 1) mod L) + 1 holds
the instance of time t, nodes are numbered bottom-up and left to right, and each internal
node keeps the event set R_E and the timestamp set R_T of its leaves (here: the symbols
with their counts, and R_T's smallest and largest value, which is all the cases read).
An arrival updates one leaf-to-root path; `find` is FindLatestEventOccurrence
(Algorithm 2) with its four cases.

Times here are *positions*: the events of one partition numbered 0, 1, 2, ... in
processing order (the paper's experiments also use record numbers as time). They are
consecutive, as the paper's timestamps are, so the tree's arithmetic holds; the engine
maps a window in time to a range of positions.
"""

from __future__ import annotations

from collections.abc import Container

NOT_FOUND = -1  # no instance in the interval
REJECTED = -2  # the latest instance is a rejected instance: the retrieval stops

_EMPTY: frozenset[int] = frozenset()


class CBSTree:
    """The last `capacity` event instances, indexed for latest-instance queries.

    Figure 4 of the paper (7 leaves, the stream (A,1) (B,2) (A,3) (C,4) (D,5) (C,6)
    (B,7) (D,8) ...; the paper's time t is position t − 1 here), then Figure 5/9 after
    (D,8) arrives (the text's "(C,8)" is a typo: the stream says D):

    >>> A, B, C, D = range(4)
    >>> tree = CBSTree(7)
    >>> for t, e in enumerate([A, B, A, C, D, C, B], start=1):
    ...     tree.insert(t - 1, e)
    >>> def sets(node):  # R_E as letters, R_T as the paper's times
    ...     events, times = tree.paper_sets(node)
    ...     return "".join("ABCD"[e] for e in events), times
    >>> sets(8), sets(12), sets(13)
    (('AB', [1, 2]), ('ABC', [1, 2, 3, 4]), ('BCD', [5, 6, 7]))
    >>> tree.insert(7, D)
    >>> sets(8), sets(12), sets(14)
    (('BD', [2, 8]), ('ABCD', [2, 3, 4, 8]), ('ABCD', [2, 3, 4, 5, 6, 7, 8]))

    Example 1: the latest B within [2, 8] is (B, 7) — the text's "(D, 7)" is a typo —
    found on the paths 14 → 12 → 8 (no B at time 8) and 14 → 13 → 11 → 7:

    >>> tree.find(B, 2 - 1, 8 - 1) + 1
    7
    >>> tree.find(C, 2 - 1, 8 - 1) + 1  # the Case_4 walk-through: 6, not 4
    6

    A rejected instance stops the search (`REJECTED`), it does not look further left:

    >>> tree.find(B, 2 - 1, 8 - 1, rejected={7 - 1}) == REJECTED
    True
    """

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError("a CBS-Tree has at least one leaf")
        self.capacity = L = capacity
        sizes = [L]
        while sizes[-1] > 1:
            sizes.append((sizes[-1] + 1) // 2)
        total = sum(sizes)
        self.root = total
        # Node ids 1..total: leaves 1..L, then each level bottom-up, left to right.
        self.lch = [0] * (total + 1)
        self.rch = [0] * (total + 1)  # 0: no right child (the last node of an odd level)
        self.parent = [0] * (total + 1)
        self.first = list(range(total + 1))  # leftmost leaf under the node
        self.last = list(range(total + 1))  # rightmost leaf under the node
        offset = 0
        for level in range(1, len(sizes)):
            below, here = offset, offset + sizes[level - 1]
            for j in range(sizes[level]):
                node = here + j + 1
                left = below + 2 * j + 1
                right = left + 1 if 2 * j + 1 < sizes[level - 1] else 0
                self.lch[node], self.rch[node] = left, right
                self.parent[left] = node
                if right:
                    self.parent[right] = node
                self.first[node] = self.first[left]
                self.last[node] = self.last[right or left]
            offset = here
        # Leaves start with the positions just before 0 (no event): the tree is always a
        # full circle of consecutive positions, of which the newest is `lat[root]`.
        self.pos = [0] + [i - L for i in range(L)] + [0] * (total - L)
        self.sym = [-1] * (L + 1)
        self.lat = list(self.pos)
        self.smt = list(self.pos)
        self.events: list[dict[int, int]] = [{} for _ in range(total + 1)]
        for node in range(L + 1, total + 1):
            right = self.rch[node] or self.lch[node]
            self.lat[node] = max(self.lat[self.lch[node]], self.lat[right])
            self.smt[node] = min(self.smt[self.lch[node]], self.smt[right])

    # ---- maintenance
    def insert(self, position: int, symbol: int) -> None:
        """The instance at `position` (the newest) replaces the one L positions older."""
        leaf = position % self.capacity + 1
        old = self.sym[leaf]
        self.sym[leaf] = symbol
        self.pos[leaf] = self.lat[leaf] = self.smt[leaf] = position
        lat, smt, lch, rch, events = self.lat, self.smt, self.lch, self.rch, self.events
        node = self.parent[leaf]
        while node:
            sets = events[node]
            if old >= 0:
                left = sets[old] - 1
                if left:
                    sets[old] = left
                else:
                    del sets[old]
            if symbol >= 0:
                sets[symbol] = sets.get(symbol, 0) + 1
            right = rch[node] or lch[node]
            lat[node] = position
            a, b = smt[lch[node]], smt[right]
            smt[node] = a if a < b else b
            node = self.parent[node]

    # ---- FindLatestEventOccurrence (Algorithm 2)
    def find(
        self, e: int, lt: int, rt: int, rejected: Container[int] = _EMPTY, *, stop: bool = True
    ) -> int:
        """The position of the latest instance of `e` in [lt, rt], NOT_FOUND, or
        REJECTED when that instance is in `rejected`. With `stop=False` a rejected
        instance counts as not found and the search goes on, as Algorithm 2 is written
        (docs/episodes.md: that can report a non-minimal occurrence)."""
        root = self.root
        lt = max(lt, self.lat[root] - self.capacity + 1)
        if lt > rt:
            return NOT_FOUND
        if root <= self.capacity:  # one leaf
            return self._leaf(root, e, lt, rt, rejected, stop)
        if e not in self.events[root]:
            return NOT_FOUND
        self._rejected, self._stop = rejected, stop
        return self._find(e, lt, rt, root)

    def _leaf(self, leaf, e, lt, rt, rejected, stop) -> int:
        if self.sym[leaf] != e or not lt <= self.pos[leaf] <= rt:
            return NOT_FOUND
        if self.pos[leaf] in rejected:
            return REJECTED if stop else NOT_FOUND
        return self.pos[leaf]

    def _find(self, e: int, lt: int, rt: int, n: int) -> int:
        if n <= self.capacity:  # lines 1-2: a leaf
            p = self.pos[n]
            if p in self._rejected:
                return REJECTED if self._stop else NOT_FOUND
            return p
        lc, rc = self.lch[n], self.rch[n]
        if not rc:  # the last node of an odd level: one child (node 11 of Figure 4)
            return self._find(e, lt, rt, lc) if self._has(e, lc) else NOT_FOUND
        if self.smt[rc] > self.lat[lc]:  # lines 3-6: the leaves are in time order
            pos = self.pos
            lt = max(lt, pos[self.first[n]])
            rt = min(rt, pos[self.last[n]])
            if lt > rt:
                return NOT_FOUND
            if rt == pos[self.last[rc]]:
                return self._case_1(e, lt, rt, lc, rc)
            if lt == pos[self.first[lc]]:
                return self._case_2(e, lt, rt, lc, rc)
            return self._case_3(e, lt, rt, lc, rc)
        return self._case_4(e, lt, rt, n, lc, rc)  # line 7

    def _has(self, e: int, node: int) -> bool:
        if node <= self.capacity:
            return self.sym[node] == e
        return e in self.events[node]

    def _case_1(self, e, lt, rt, lc, rc) -> int:
        """rt is the right child's rightmost time: one child holds the answer."""
        pos = self.pos
        if self._has(e, rc):  # sub-cases (a) and (b)
            return self._find(e, max(lt, pos[self.first[rc]]), rt, rc)
        if self._has(e, lc) and lt <= pos[self.last[lc]]:  # sub-case (b)
            return self._find(e, lt, pos[self.last[lc]], lc)
        return NOT_FOUND

    def _case_2(self, e, lt, rt, lc, rc) -> int:
        """lt is the left child's leftmost time, rt inside: right part first, then left."""
        pos = self.pos
        t = NOT_FOUND
        if rt >= pos[self.first[rc]] and self._has(e, rc):  # step (i) of sub-case (a)
            t = self._find(e, pos[self.first[rc]], rt, rc)
        if t == NOT_FOUND and self._has(e, lc):  # step (ii) of (a), and sub-case (b)
            t = self._find(e, lt, min(rt, pos[self.last[lc]]), lc)
        return t

    def _case_3(self, e, lt, rt, lc, rc) -> int:
        """Both ends inside: the right child's part, then the left child's."""
        pos = self.pos
        t = NOT_FOUND
        if self._has(e, rc) and rt >= pos[self.first[rc]]:
            t = self._find(e, max(lt, pos[self.first[rc]]), rt, rc)
        if t == NOT_FOUND and self._has(e, lc) and lt <= pos[self.last[lc]]:
            t = self._find(e, lt, min(rt, pos[self.last[lc]]), lc)
        return t

    def _case_4(self, e, lt, rt, n, lc, rc) -> int:
        """The newest leaf is under n but not its rightmost: n's leaves are λ1 (up to
        the newest, times [n.lmt, n.lat]) and λ2 (after it, older: [n.smt, n.rmt]).
        Search λ1 ∩ [lt, rt], then λ2 ∩ [lt, rt], newest part first, each child with
        its interval cut to the run of times it searches (docs/episodes.md explains
        this reading of the paper's Case_4)."""
        pos, smt, lat = self.pos, self.smt, self.lat
        type_3 = pos[self.first[rc]] != smt[rc]  # the newest leaf is under the right child
        t = NOT_FOUND
        if rt >= pos[self.first[lc]]:  # sub-case (a): [lt, rt] reaches into λ1
            if type_3:
                lo = max(lt, pos[self.first[rc]])
                if lo <= rt and self._has(e, rc):
                    t = self._find(e, lo, rt, rc)
                lo, hi = max(lt, pos[self.first[lc]]), min(rt, pos[self.last[lc]])
                if t == NOT_FOUND and lo <= hi and self._has(e, lc):
                    t = self._find(e, lo, hi, lc)
            else:
                lo, hi = max(lt, pos[self.first[lc]]), min(rt, lat[lc])
                if lo <= hi and self._has(e, lc):
                    t = self._find(e, lo, hi, lc)
            if t != NOT_FOUND:
                return t
        # λ2, newest part first (sub-case (b), and (a) when λ1 had no answer)
        if type_3:
            lo, hi = max(lt, smt[rc]), min(rt, pos[self.last[rc]])
            if lo <= hi and self._has(e, rc):
                t = self._find(e, lo, hi, rc)
            return t
        lo, hi = max(lt, pos[self.first[rc]]), min(rt, pos[self.last[rc]])
        if lo <= hi and self._has(e, rc):
            t = self._find(e, lo, hi, rc)
        if t == NOT_FOUND and pos[self.last[lc]] != lat[lc]:  # the left child's λ2 part
            lo, hi = max(lt, smt[lc]), min(rt, pos[self.last[lc]])
            if lo <= hi and self._has(e, lc):
                t = self._find(e, lo, hi, lc)
        return t

    # ---- inspection (tests, docs)
    def paper_sets(self, node: int) -> tuple[list[int], list[int]]:
        """(R_E, R_T) of a node in the paper's numbering, sorted, times as position + 1."""
        leaves = range(self.first[node], self.last[node] + 1)
        events = sorted({self.sym[x] for x in leaves if self.sym[x] >= 0})
        times = sorted(self.pos[x] + 1 for x in leaves if self.sym[x] >= 0)
        return events, times
