"""Exact counts of a given downward-closed family of itemsets in one pass (SON pass 2, Toivonen).

Course material ``seeds/000`` ("SON Algorithm - Pass 2": "Counts support of the candidate
itemsets from Pass 1"; "Toivonen's Algorithm": "Run a second pass over the whole dataset to count
supports of candidates"). The family is given level by level and must be downward closed (every
subset of a member is a member), which holds for a union of A-Priori results and for a frequent
family plus its negative border. Counting extends occurrences level by level
(:mod:`dedupd.mining.counting`), so each basket is read once per level of the family.

Worked example: the seed's baskets, family {Beer}, {Bread}, {Beer, Bread}: counts 3, 3 and 2.

    >>> from dedupd.mining.baskets import Baskets
    >>> b = Baskets.from_lists([["Bread", "Coke", "Milk"], ["Beer", "Bread"], ["Beer", "Coke", "Diaper", "Milk"],
    ...                         ["Beer", "Bread", "Diaper", "Milk"], ["Coke", "Diaper", "Milk"]])
    >>> beer, bread = b.vocab.index("Beer"), b.vocab.index("Bread")
    >>> fam = [np.array([[min(beer, bread)], [max(beer, bread)]], dtype=np.int32),
    ...        np.array([[min(beer, bread), max(beer, bread)]], dtype=np.int32)]
    >>> [c.tolist() for c in count_family(b, fam)]
    [[3, 3], [2]]
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from dedupd.mining.apriori import restrict
from dedupd.mining.baskets import Baskets
from dedupd.mining.counting import (
    CandidateIndex,
    Occurrences,
    count_candidates,
    find_rows,
    occurrences_of,
    positions,
)

I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]


def union_levels(parts: list[list[I32]]) -> list[I32]:
    """Level-wise union of several families (rows sorted and distinct in the result)."""
    depth = max((len(p) for p in parts), default=0)
    out: list[I32] = []
    for k in range(depth):
        rows = [p[k] for p in parts if len(p) > k and p[k].shape[0]]
        if not rows:
            out.append(np.zeros((0, k + 1), dtype=np.int32))
            continue
        out.append(np.unique(np.concatenate(rows), axis=0).astype(np.int32))
    while out and out[-1].shape[0] == 0:
        out.pop()
    return out


def count_family(baskets: Baskets, family: list[I32]) -> list[I64]:
    """Counts of every member of a downward-closed family.

    Args:
        baskets: the baskets.
        family: ``family[k-1]`` = ``int32[n_k, k]`` itemsets of size k (ids of ``baskets``, rows
            sorted within and across), downward closed.

    Returns:
        ``counts[k-1]`` = ``int64[n_k]``, aligned with ``family[k-1]``.
    """
    if not family:
        return []
    counts: list[I64] = [baskets.item_counts[family[0][:, 0]].astype(np.int64)]
    if len(family) < 2 or family[1].shape[0] == 0:
        return counts + [np.zeros(f.shape[0], dtype=np.int64) for f in family[1:]]
    keep = np.zeros(baskets.n_items, dtype=bool)
    keep[family[0][:, 0]] = True
    prep = restrict(baskets, keep)
    new_id = np.full(baskets.n_items, -1, dtype=np.int32)
    new_id[prep.freq] = np.arange(prep.m, dtype=np.int32)
    occ = Occurrences(positions(prep.items.shape[0]), prep.items)
    prev_local = np.arange(prep.m, dtype=np.int32).reshape(-1, 1)
    for k in range(2, len(family) + 1):
        sets = new_id[family[k - 1]]
        if sets.shape[0] == 0:
            counts.extend(np.zeros(f.shape[0], dtype=np.int64) for f in family[k - 1 :])
            break
        prefix = find_rows(prev_local, sets[:, :-1])
        if (prefix < 0).any():
            raise ValueError("count_family needs a downward-closed family (a prefix is missing)")
        index = CandidateIndex.build(prefix, sets[:, -1].copy(), prev_local.shape[0], prep.m)
        last = k == len(family)
        c, new_occ = count_candidates(prep.items, prep.rowend, occ, index, not last, prep.wpos)
        counts.append(c)
        if last:
            break
        occ = new_occ if new_occ is not None else occurrences_of(prep.items, prep.rowend, occ, index)
        prev_local = sets
    return counts
