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
        self.events: list[dict[int, int]] = [{} for _ in range(total + 1)]  # leaves too
        self._how: list = [_EMPTY, True]
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
        self.events[leaf] = {symbol: 1} if symbol >= 0 else {}
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
        if lt > rt or e not in self.events[root]:
            return NOT_FOUND
        if root <= self.capacity:  # a single leaf
            p = self.pos[root]
            if not lt <= p <= rt:
                return NOT_FOUND
            return (REJECTED if stop else NOT_FOUND) if p in rejected else p
        self._how[0], self._how[1] = rejected, stop
        return self._find(e, lt, rt, root)

    def _search(self, visits: list[int] | None = None):
        """FindLatestEventOccurrence(e, lt, rt, n) over this tree's arrays: closures, so
        that the recursion runs on local names. `visits[0]` counts the nodes visited."""
        find: list = [None]
        cases = (_cases_1_to_3(self, find), _case_4(self, find))
        find[0] = _node_search(self, visits, cases)
        return find[0]

    @property
    def _find(self):
        search = self.__dict__.get("_search_fn")
        if search is None:
            search = self.__dict__["_search_fn"] = self._search()
        return search

    def count_visits(self, visits: list[int]) -> None:
        """From now on, count the nodes each search visits in `visits[0]`."""
        self.__dict__["_search_fn"] = self._search(visits)

    # ---- inspection (tests, docs)
    def paper_sets(self, node: int) -> tuple[list[int], list[int]]:
        """(R_E, R_T) of a node in the paper's numbering, sorted, times as position + 1."""
        leaves = range(self.first[node], self.last[node] + 1)
        events = sorted({self.sym[x] for x in leaves if self.sym[x] >= 0})
        times = sorted(self.pos[x] + 1 for x in leaves if self.sym[x] >= 0)
        return events, times


# ---- FindLatestEventOccurrence, as closures over a tree's arrays (`e` is in the event
# set of the node each is called with; `find[0]` is the node search, for the recursion)


def _node_search(tree: CBSTree, visits, cases):
    L, lch, rch, pos, smt, lat = tree.capacity, tree.lch, tree.rch, tree.pos, tree.smt, tree.lat
    how = tree._how  # [rejected instances, whether a rejected instance stops]
    ordered, wrapped = cases

    def find(e, lt, rt, n):
        if visits is not None:
            visits[0] += 1
        if n <= L:  # lines 1-2: a leaf; a rejected instance stops the retrieval
            p = pos[n]
            if p in how[0]:
                return REJECTED if how[1] else NOT_FOUND
            return p
        lc, rc = lch[n], rch[n]
        if not rc:  # the last node of an odd level has one child (node 11, Figure 4)
            return find(e, lt, rt, lc)
        if smt[rc] > lat[lc]:  # lines 3-6: the leaves under n are in time order
            return ordered(e, lt, rt, n, lc, rc)
        return wrapped(e, lt, rt, lc, rc)  # line 7

    return find


def _cases_1_to_3(tree: CBSTree, search: list):
    pos, first, last, events = tree.pos, tree.first, tree.last, tree.events

    def ordered(e, lt, rt, n, lc, rc):
        find = search[0]
        lmt, rmt = pos[first[n]], pos[last[n]]
        lt, rt = (lt if lt > lmt else lmt), (rt if rt < rmt else rmt)
        if lt > rt:
            return NOT_FOUND
        r_lmt, l_rmt = pos[first[rc]], pos[last[lc]]
        if rt == rmt:  # Case 1: rt is rch.rmt, one child holds the answer
            if e in events[rc]:
                return find(e, lt if lt > r_lmt else r_lmt, rt, rc)
            if lt <= l_rmt and e in events[lc]:
                return find(e, lt, l_rmt, lc)
            return NOT_FOUND
        # Case 2 (lt is lch.lmt) and Case 3 (both ends inside n): the right child's part
        # [max(lt, rch.lmt), rt], then the left child's [lt, min(rt, lch.rmt)]
        t = NOT_FOUND
        if rt >= r_lmt and e in events[rc]:
            t = find(e, lt if lt > r_lmt else r_lmt, rt, rc)
        if t == NOT_FOUND and lt <= l_rmt and e in events[lc]:
            t = find(e, lt, rt if rt < l_rmt else l_rmt, lc)
        return t

    return ordered


def _case_4(tree: CBSTree, search: list):
    """Case 4: the newest leaf is under n but not its rightmost. n's leaves are λ1, up to
    the newest (times [n.lmt, n.lat]), and λ2, after it (older: [n.smt, n.rmt]). Search
    λ1 ∩ [lt, rt], then λ2 ∩ [lt, rt], the newest part first, each child with its
    interval cut to the run of times it searches (docs/episodes.md explains this reading
    of the paper's Case_4)."""
    pos, first, last, smt, lat, events = (
        tree.pos, tree.first, tree.last, tree.smt, tree.lat, tree.events
    )  # fmt: skip

    def part(e, lo, hi, lt, rt, node):
        """The search of `node` within [lo, hi] ∩ [lt, rt]."""
        lo, hi = (lt if lt > lo else lo), (rt if rt < hi else hi)
        if lo <= hi and e in events[node]:
            return search[0](e, lo, hi, node)
        return NOT_FOUND

    def wrapped(e, lt, rt, lc, rc):
        r_lmt, l_lmt, l_rmt, r_rmt = pos[first[rc]], pos[first[lc]], pos[last[lc]], pos[last[rc]]
        type_3 = r_lmt != smt[rc]  # the newest leaf is under the right child
        if rt >= l_lmt:  # sub-case (a): [lt, rt] reaches into λ1
            if type_3:
                t = part(e, r_lmt, lat[rc], lt, rt, rc)
                if t == NOT_FOUND:
                    t = part(e, l_lmt, l_rmt, lt, rt, lc)
            else:
                t = part(e, l_lmt, lat[lc], lt, rt, lc)
            if t != NOT_FOUND:
                return t
        # sub-case (b), and (a) when λ1 had no answer: λ2, newest part first
        if type_3:
            return part(e, smt[rc], r_rmt, lt, rt, rc)
        t = part(e, r_lmt, r_rmt, lt, rt, rc)
        if t == NOT_FOUND and l_rmt != lat[lc]:  # the left child has a λ2 part
            t = part(e, smt[lc], l_rmt, lt, rt, lc)
        return t

    return wrapped
