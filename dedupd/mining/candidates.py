"""A-Priori candidate generation (join + prune) and the negative border, vectorised over itemsets.

Course material ``seeds/000`` ("Apriori Algorithm: Steps"): C_k is formed by joining two
(k-1)-itemsets of L_{k-1} that share exactly k-2 items, and any candidate with a (k-1)-subset
outside L_{k-1} is pruned (monotonicity). Itemsets are rows of an ``int32[n, k-1]`` array, sorted
within a row and lexicographically across rows, so the join partners are the rows of one run with
equal first k-2 columns; the candidates come out lexicographically sorted too.

The negative border (Toivonen, "Need to store negative border") is the set of itemsets that are not
frequent but all of whose immediate subsets are: items that are not frequent, plus the candidates
generated from each level that did not turn out frequent.

Worked example: L_2 = {AB, AC, AD, BC} (A<B<C<D) joins to ABC, ABD, ACD; pruning drops ABD (BD not
in L_2) and ACD (CD not in L_2), leaving C_3 = {ABC}.

    >>> c = apriori_gen(np.array([[0, 1], [0, 2], [0, 3], [1, 2]], dtype=np.int32))
    >>> c.sets.tolist(), c.prefix.tolist(), c.item.tolist()
    ([[0, 1, 2]], [0], [2])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dedupd.mining.counting import RowLookup, find_rows, segment_pairs

I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Candidates:
    """C_k: ``sets int32[c, k]``; candidate t extends row ``prefix[t]`` of L_{k-1} by ``item[t]``."""

    sets: I32
    prefix: I64
    item: I32

    @property
    def n(self) -> int:
        return int(self.sets.shape[0])


def apriori_gen(prev: I32) -> Candidates:
    """C_k from L_{k-1} (``prev``, lexicographically sorted rows): join, then prune.

    Args:
        prev: ``int32[n, k-1]`` frequent itemsets of size k-1.

    Returns:
        The pruned candidates, lexicographically sorted.
    """
    n, w = prev.shape
    k = w + 1
    if n < 2:
        return Candidates(
            np.zeros((0, k), dtype=np.int32), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32)
        )
    if w == 1:
        starts = np.array([0], dtype=np.int64)
    else:
        head = prev[:, : w - 1]
        new_group = np.ones(n, dtype=bool)
        new_group[1:] = (head[1:] != head[:-1]).any(axis=1)
        starts = np.flatnonzero(new_group).astype(np.int64)
    indptr = np.append(starts, np.int64(n))
    a, b = segment_pairs(indptr)
    sets = np.empty((a.shape[0], k), dtype=np.int32)
    sets[:, :w] = prev[a]
    sets[:, w] = prev[b, w - 1]
    keep = np.ones(a.shape[0], dtype=bool)
    # the subsets dropping position w-1 or w are prev[b] and prev[a]; check the other k-2
    lookup = RowLookup(prev) if w > 1 else None
    for d in range(w - 1):
        if not keep.any() or lookup is None:
            break
        live = np.flatnonzero(keep)
        sub = np.delete(sets[live], d, axis=1)
        keep[live[lookup.find(sub) < 0]] = False
    return Candidates(sets[keep], a[keep], sets[keep, w].copy())


def negative_border(levels: list[I32], n_items: int, max_size: int | None = None) -> list[I32]:
    """Negative border of a downward-closed family given level by level.

    Args:
        levels: ``levels[k-1]`` = the family's k-itemsets (lexicographically sorted rows).
        n_items: size of the item universe (ids ``0..n_items-1``).
        max_size: ignore border itemsets larger than this.

    Returns:
        ``border[k-1]`` = border itemsets of size k (possibly empty arrays).

    >>> [b.tolist() for b in negative_border([np.array([[0], [1]], dtype=np.int32)], 3)]
    [[[2]], [[0, 1]]]
    """
    inside = np.zeros(n_items, dtype=bool)
    if levels:
        inside[levels[0][:, 0]] = True
    border = [np.flatnonzero(~inside).astype(np.int32).reshape(-1, 1)]
    limit = max_size if max_size is not None else len(levels) + 1
    for k in range(2, limit + 1):
        if k - 2 >= len(levels) or levels[k - 2].shape[0] < 2:
            break
        cand = apriori_gen(levels[k - 2]).sets
        if k - 1 < len(levels) and levels[k - 1].shape[0]:
            cand = cand[find_rows(levels[k - 1], cand) < 0]
        border.append(cand)
    return border
