"""Vertical counting: one bit per basket for every itemset, support = popcount of an AND.

Course material ``seeds/000`` ("Apriori Algorithm", pass k: "Counting: make one pass; count
supports of C_k"). The pass over the baskets can read them basket by basket (horizontal layout,
:mod:`dedupd.mining.counting`) or item by item: with the baskets held as one bit column per item
(bit b of item i set when basket b holds i), a candidate ``P + {c}`` occurs in exactly the baskets
of ``bits(P) AND bits(c)``, and its support is the population count. A-Priori then keeps the
columns of L_k for pass k+1. Which layout is cheaper is decided per pass by :func:`vertical_cost`.

Worked example: baskets 0..4 of the seed; Beer is in baskets 1, 2, 3 (bits ``01110``), Bread in
0, 1, 3 (``11010``) (of the items, only these two); AND = ``01010`` has two bits: support {Beer, Bread} = 2.

    >>> bm = item_bitmaps(np.array([1, 0, 1, 0, 0, 1], dtype=np.int32),  # Beer = 0, Bread = 1
    ...                   np.array([0, 1, 3, 4, 6, 6], dtype=np.int64), 2)
    >>> popcounts(bm[0:1] & bm[1:2]).tolist()
    [2]
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]

BLOCK_WORDS = 1 << 21  # words per vectorised AND step (16 MiB temporaries)
MAX_BITMAP_BYTES = 1 << 28  # never hold more than 256 MiB of bitmaps


def n_words(n_rows: int) -> int:
    return (n_rows + 63) // 64


def item_bitmaps(items: I32, indptr: I64, n_items: int) -> U64:
    """``uint64[n_items, words]``: bit b of row i is set when basket b holds item i."""
    n_rows = indptr.shape[0] - 1
    words = n_words(n_rows)
    bm = np.zeros(n_items * words, dtype=np.uint64)
    rows = np.repeat(np.arange(n_rows, dtype=np.int64), np.diff(indptr))
    cell = items.astype(np.int64) * words + (rows >> 6)
    np.bitwise_or.at(bm, cell, np.left_shift(np.uint64(1), (rows & 63).astype(np.uint64)))
    return bm.reshape(n_items, words)


def popcounts(bm: U64) -> I64:
    """Set bits per row."""
    counts: I64 = np.bitwise_count(bm).sum(axis=1, dtype=np.int64)
    return counts


def extend_bitmaps(prev: U64, items: U64, prefix: I64, item: I32, min_count: int) -> tuple[I64, U64]:
    """Counts of candidates ``prev[prefix[t]] & items[item[t]]`` and the bitmaps of the frequent ones.

    Returns:
        ``(counts int64[len(prefix)], bitmaps of the candidates with count >= min_count)``.
    """
    words = prev.shape[1]
    n = prefix.shape[0]
    counts = np.zeros(n, dtype=np.int64)
    kept: list[U64] = []
    step = max(1, BLOCK_WORDS // max(1, words))
    for a in range(0, n, step):
        b = min(n, a + step)
        block = prev[prefix[a:b]]
        block &= items[item[a:b]]
        c = popcounts(block)
        counts[a:b] = c
        kept.append(block[c >= min_count])
    if not kept:
        return counts, np.zeros((0, words), dtype=np.uint64)
    return counts, kept[0] if len(kept) == 1 else np.concatenate(kept)


def vertical_cost(n_candidates: int, n_rows: int) -> int:
    """Words touched by a vertical pass (for comparison with horizontal extensions)."""
    return n_candidates * n_words(n_rows)


def fits(n_sets: int, n_rows: int) -> bool:
    """Whether the bitmaps of ``n_sets`` itemsets stay under ``MAX_BITMAP_BYTES``."""
    return n_sets * n_words(n_rows) * 8 <= MAX_BITMAP_BYTES
