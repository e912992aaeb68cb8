"""Valid intervals (imprecise-timestamps.md §4.1, C.1): the points at which each event of
a match may lie, given the order of the pattern and the window.

- valid lower bound, forward: vlb_1 = lower_1, vlb_j = max(vlb_{j-1} + 1, lower_j);
- revised upper bound, backward: rub_l = upper_l, rub_j = min(rub_{j+1} - 1, upper_j);
- valid upper bound, backward again with the window: T = rub_1 + W - 1 (the last point
  the last event may take), vub_l = min(rub_l, T), vub_j = min(vub_{j+1} - 1, rub_j).

The match fails when some vub_j < vlb_j. The window reading is `t_l - t_1 < W`, the
same as for point times (docs/semantics.md): hence T = rub_1 + W - 1.
"""

from __future__ import annotations

import numpy as np


class ValidBounds:
    """The three passes, vectorised over matches: `lo`, `hi` are (matches, l).

    Fig. 3(a)-(b): a1 = [1,5], b3 = [3,5], c2 = [3,5] (Fig. 1), W = 4, in query order
    (a1, b3, c2): vlb 1, 3, 4 and rub 3, 4, 5; the window does not bind (T = 6):

    >>> vlb, rub, vub, ok = ValidBounds.three_pass([[1, 3, 3]], [[5, 5, 5]], 4)
    >>> vlb.tolist(), rub.tolist(), vub.tolist(), ok.tolist()
    ([[1, 3, 4]], [[3, 4, 5]], [[3, 4, 5]], [True])

    Fig. 3(c): a1 = [1,5], b5 = [2,3], c6 = [6,7], W = 4: T = a1.rub + W - 1 = 5 <
    c6.vlb = 6, so the match is pruned:

    >>> vlb, rub, vub, ok = ValidBounds.three_pass([[1, 2, 6]], [[5, 3, 7]], 4)
    >>> vlb.tolist(), rub.tolist(), int(vub[0, 2]), ok.tolist()
    ([[1, 2, 6]], [[2, 3, 7]], 5, [False])
    """

    @staticmethod
    def three_pass(lo, hi, window: int):
        lo = np.asarray(lo, np.int64)
        hi = np.asarray(hi, np.int64)
        m, length = lo.shape
        vlb = lo.copy()
        for j in range(1, length):
            vlb[:, j] = np.maximum(vlb[:, j - 1] + 1, lo[:, j])
        rub = hi.copy()
        for j in range(length - 2, -1, -1):
            rub[:, j] = np.minimum(rub[:, j + 1] - 1, hi[:, j])
        vub = rub.copy()
        vub[:, -1] = np.minimum(rub[:, -1], rub[:, 0] + window - 1)
        for j in range(length - 2, -1, -1):
            vub[:, j] = np.minimum(vub[:, j + 1] - 1, rub[:, j])
        ok = (vlb <= vub).all(axis=1) if m else np.zeros(0, bool)
        return vlb, rub, vub, ok

    @staticmethod
    def one_pass(vlb_prev, vub_prefix, lo_e, hi_e, window: int):
        """C.1: extend partial matches (their vlb of the last event, their current vubs
        (matches, j)) by events (lo_e, hi_e): the event's vlb, the vubs updated from the
        event back to the first, and whether ext holds: vlb <= upper and
        vlb < vub_1 + W.

        Fig. 3(c), c6 = [6,7] after (a1, b5) with vubs (5, 3):

        >>> vlb, vubs, ok = ValidBounds.one_pass([2], [[5, 3]], [6], [7], 4)
        >>> int(vlb[0]), vubs.tolist(), ok.tolist()
        (6, [[2, 3, 7]], [False])
        """
        vlb_prev = np.asarray(vlb_prev, np.int64)
        lo_e, hi_e = np.asarray(lo_e, np.int64), np.asarray(hi_e, np.int64)
        prefix = np.asarray(vub_prefix, np.int64)
        vlb = np.maximum(vlb_prev + 1, lo_e)
        vubs = np.concatenate([prefix, hi_e[:, None]], axis=1)
        for j in range(vubs.shape[1] - 2, -1, -1):
            vubs[:, j] = np.minimum(vubs[:, j], vubs[:, j + 1] - 1)
        ok = (vlb <= hi_e) & (vlb < vubs[:, 0] + window)
        return vlb, vubs, ok
