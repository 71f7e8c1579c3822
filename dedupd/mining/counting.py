"""Vectorised support counting: pairs in a triangular matrix or as triples, and k-itemsets by extension.

Course material ``seeds/000`` ("Counting Pairs in Memory"): pair counts live either in a triangular
matrix (4 bytes per possible pair i < j, ``2 n^2`` bytes for n items) or as triples ``[i, j, c]``
(12 bytes per pair that occurs); triples win when fewer than 1/3 of the possible pairs occur.

No Python loop runs per basket or per pair. An *occurrence* of a frequent (k-1)-itemset P is the
position, in the CSR item array, of P's last item inside one basket; the k-subsets of that basket
that extend P are the items after that position. :func:`extend` expands many occurrences at once
with ``np.repeat``/``np.arange`` arithmetic, a lookup turns (P, item) into a candidate id, and
``np.bincount`` counts. Each k-subset of a basket is generated at most once (from its own prefix).

Worked example (the seed's five baskets, items numbered Bread=0 Coke=1 Milk=2 Beer=3 Diaper=4):
basket ``[0, 1, 2]`` yields the pairs (0,1) (0,2) (1,2); the triangular matrix over 5 items has
``5*4/2 = 10`` cells and pair (i, j) lives at ``i*(2n-i-1)/2 + j-i-1``, so (1,2) is cell 4.

    >>> tri_index(np.array([1]), np.array([2]), 5).tolist()
    [4]
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]
F64 = npt.NDArray[np.float64]

CHUNK = 1 << 21  # generated positions per vectorised step (bounded temporaries: ~2M x 8 bytes)


def expand(starts: I64, lens: I64) -> I64:
    """Concatenate ``arange(starts[i], starts[i] + lens[i])`` for all i, without a Python loop."""
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.zeros(lens.shape[0], dtype=np.int64)
    np.cumsum(lens[:-1], out=offsets[1:])
    return np.repeat(starts - offsets, lens) + np.arange(total, dtype=np.int64)


def segment_pairs(indptr: I64) -> tuple[I64, I64]:
    """All position pairs ``a < b`` inside each segment ``indptr[s]:indptr[s+1]``.

    >>> [x.tolist() for x in segment_pairs(np.array([0, 3, 4], dtype=np.int64))]
    [[0, 0, 1], [1, 2, 2]]
    """
    lens = np.diff(indptr)
    pos = np.arange(int(indptr[-1]), dtype=np.int64)
    rowend = np.repeat(indptr[1:], lens)
    after = rowend - pos - 1
    left = np.repeat(pos, after)
    right = expand(pos + 1, after)
    return left, right


def tri_index(i: npt.NDArray[np.integer], j: npt.NDArray[np.integer], n: int) -> I64:
    """Cell of pair (i, j), ``i < j < n``, in the triangular matrix of ``n (n-1) / 2`` counts."""
    i64 = i.astype(np.int64)
    return i64 * (2 * n - i64 - 1) // 2 + (j.astype(np.int64) - i64 - 1)


def row_end(indptr: I64) -> I64:
    """For every position of the item array, the end of its basket's run (int32 when it fits)."""
    ends = indptr[1:].astype(np.int32) if indptr[-1] < 2**31 else indptr[1:]
    return np.repeat(ends, np.diff(indptr))


def chunks_by_weight(weights: I64, limit: int = CHUNK) -> Iterator[slice]:
    """Consecutive slices whose weights sum to about ``limit`` (at least one element each)."""
    n = weights.shape[0]
    if n == 0:
        return
    cum = np.cumsum(weights)
    start = 0
    while start < n:
        base = cum[start - 1] if start else 0
        stop = int(np.searchsorted(cum, base + limit, side="right"))
        stop = max(stop, start + 1)
        yield slice(start, stop)
        start = stop


def extend(items: I32, rowend: I64, pos: I64, sid: I32, limit: int = CHUNK) -> Iterator[tuple[I64, I32, I32]]:
    """Expand occurrences ``(pos, sid)`` into ``(extension position, sid, extension item)`` in chunks.

    Args:
        items: the CSR item array (sorted within each basket).
        rowend: :func:`row_end` of the same CSR.
        pos: position of each occurrence's last item.
        sid: the itemset id of each occurrence.
        limit: about how many extensions each yielded chunk holds.
    """
    lens = rowend[pos] - pos - 1
    for sl in chunks_by_weight(lens, limit):
        ln = lens[sl]
        ext = expand(pos[sl] + 1, ln)
        yield ext, np.repeat(sid[sl], ln), items[ext]


def row_hash(rows: I32) -> U64:
    """A 64-bit polynomial hash of each row (for exact row lookups after verification)."""
    h = np.full(rows.shape[0], 0x9E3779B97F4A7C15, dtype=np.uint64)
    mul = np.uint64(0x100000001B3)
    for c in range(rows.shape[1]):
        h = (h ^ rows[:, c].astype(np.uint64)) * mul
        h ^= h >> np.uint64(29)
    return h


class RowLookup:
    """Exact lookup of rows in a table of itemsets (hash, sort once; verify every hit)."""

    __slots__ = ("hashes", "order", "table")

    def __init__(self, table: I32) -> None:
        self.table = table
        th = row_hash(table)
        self.order = np.argsort(th, kind="stable")
        self.hashes = th[self.order]

    def find(self, queries: I32) -> I64:
        """Index of each query row in the table, or -1 when absent."""
        table, sh = self.table, self.hashes
        if table.shape[0] == 0 or queries.shape[0] == 0:
            return np.full(queries.shape[0], -1, dtype=np.int64)
        qh = row_hash(queries)
        at = np.minimum(np.searchsorted(sh, qh), sh.shape[0] - 1)
        idx: I64 = self.order[at].astype(np.int64)
        same_hash = sh[at] == qh
        ok = same_hash & (table[idx] == queries).all(axis=1)
        idx[~ok] = -1
        # a hash collision between two different table rows could hide a match: check those exactly
        suspect = (~ok) & same_hash
        if suspect.any():
            exact = {tuple(r): i for i, r in enumerate(table.tolist())}
            for q in np.flatnonzero(suspect).tolist():
                idx[q] = exact.get(tuple(queries[q].tolist()), -1)
        return idx


def find_rows(table: I32, queries: I32) -> I64:
    """Index of each query row in ``table`` (rows of equal width), or -1 when absent."""
    return RowLookup(table).find(queries)


@dataclass(frozen=True, slots=True)
class CandidateIndex:
    """Maps (prefix itemset id, extension item) to a candidate id, or -1.

    A table over the prefixes and items that occur in candidates: prefix set ``p`` starts at
    ``offset[p]`` (-1: no candidate extends it) and item ``i`` is column ``col[i]`` (``width``: a
    column of -1 for items that extend nothing). Dense when the table has at most ``DENSE_CELLS``
    cells, else a sorted array of the used cells searched with ``np.searchsorted``.
    """

    n: int
    offset: I64  # prefix set id -> first cell of its row, -1 = no candidate extends it
    col: I32  # item -> column; ``width`` for items that extend no prefix
    width: int
    table: I32 | None
    keys: I64 | None  # sparse form: row 0 the sorted cells, row 1 their candidate ids

    DENSE_CELLS = 1 << 24

    @classmethod
    def build(
        cls, prefix: npt.NDArray[np.integer], item: I32, n_prefix_sets: int, n_items: int
    ) -> CandidateIndex:
        """Index candidates ``k`` = (``prefix[k]``, ``item[k]``), ids ``0..len-1``."""
        n = int(prefix.shape[0])
        pmask = np.zeros(n_prefix_sets, dtype=bool)
        pmask[prefix] = True
        imask = np.zeros(n_items, dtype=bool)
        imask[item] = True
        width = int(imask.sum())
        col = np.full(n_items, width, dtype=np.int32)
        col[imask] = np.arange(width, dtype=np.int32)
        rows = int(pmask.sum())
        offset = np.full(n_prefix_sets, -1, dtype=np.int64)
        offset[pmask] = np.arange(rows, dtype=np.int64) * (width + 1)
        cells = offset[prefix] + col[item]
        if rows * (width + 1) <= cls.DENSE_CELLS:
            table = np.full(rows * (width + 1), -1, dtype=np.int32)
            table[cells] = np.arange(n, dtype=np.int32)
            return cls(n, offset, col, width, table, None)
        order = np.argsort(cells)
        return cls(n, offset, col, width, None, np.stack([cells[order], order.astype(np.int64)]))

    def find_cells(self, cells: I64) -> I64:
        """Candidate id of each table cell (-1 where none)."""
        if self.table is not None:
            return self.table[cells].astype(np.int64)
        assert self.keys is not None
        keys, ids = self.keys[0], self.keys[1]
        at = np.minimum(np.searchsorted(keys, cells), keys.shape[0] - 1)
        return np.where(keys[at] == cells, ids[at], -1)

    def find(self, sid: I32, item: I32) -> I64:
        """Candidate id of each (prefix set id, item), -1 where there is none."""
        base = self.offset[sid]
        out = np.full(sid.shape[0], -1, dtype=np.int64)
        ok = base >= 0
        out[ok] = self.find_cells(base[ok] + self.col[item[ok]])
        return out

    def nbytes(self) -> int:
        """Bytes of the lookup structure plus one 4-byte count per candidate."""
        own = (
            self.table.nbytes
            if self.table is not None
            else (self.keys.nbytes if self.keys is not None else 0)
        )
        return int(own + self.offset.nbytes + self.col.nbytes + 4 * self.n)


@dataclass(slots=True)
class Occurrences:
    """Where each itemset of one level occurs: ``pos`` (its last item's position) and ``sid``.

    Positions are ``int32`` while the item array has fewer than 2^31 entries (8 bytes an occurrence).
    """

    pos: I64
    sid: I32

    @property
    def size(self) -> int:
        return int(self.pos.shape[0])


def positions(n: int) -> I64:
    """``arange(n)`` as positions: int32 when they fit."""
    return np.arange(n, dtype=np.int32 if n < 2**31 else np.int64)


KEEP_CAP = 1 << 24  # occurrences kept in memory between levels before recomputing instead


def matches(items: I32, rowend: I64, occ: Occurrences, index: CandidateIndex) -> Iterator[tuple[I64, I32]]:
    """Every (position of the last item, candidate id) where a candidate occurs, in chunks."""
    pos_dtype = np.int32 if items.shape[0] < 2**31 else np.int64
    base = index.offset[occ.sid]
    live = base >= 0
    pos, base = occ.pos[live], base[live]
    col = index.col[items]
    lens = rowend[pos] - pos - 1
    for sl in chunks_by_weight(lens, CHUNK):
        ln = lens[sl]
        ext = expand(pos[sl] + 1, ln)
        cid = index.find_cells(np.repeat(base[sl], ln) + col[ext])
        hit = cid >= 0
        yield ext[hit].astype(pos_dtype), cid[hit].astype(np.int32)


def count_candidates(
    items: I32,
    rowend: I64,
    occ: Occurrences,
    index: CandidateIndex,
    keep: bool = True,
    wpos: F64 | None = None,
) -> tuple[I64, Occurrences | None]:
    """Count candidates over all baskets by extending the previous level's occurrences.

    Args:
        wpos: the weight of each position's basket (see :func:`merge_identical`), None for 1.

    Returns:
        ``(counts int64[index.n], occurrences of every candidate or None)``: the occurrences
        (with the candidate ids as set ids) are dropped (None) when ``keep`` is False or they
        would exceed ``KEEP_CAP``.
    """
    counts = np.zeros(index.n, dtype=np.int64)
    kept_pos: list[I64] = []
    kept_cid: list[I32] = []
    total = 0
    for ext, cid in matches(items, rowend, occ, index):
        counts += bincount(cid, index.n, None if wpos is None else wpos[ext])
        if keep:
            total += int(cid.shape[0])
            if total > KEEP_CAP:
                keep = False
                kept_pos, kept_cid = [], []
            else:
                kept_pos.append(ext)
                kept_cid.append(cid)
    if not keep:
        return counts, None
    return counts, _join(kept_pos, kept_cid)


def _join(pos: list[I64], cid: list[I32]) -> Occurrences:
    if not pos:
        return Occurrences(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32))
    if len(pos) == 1:
        return Occurrences(pos[0], cid[0])
    return Occurrences(np.concatenate(pos), np.concatenate(cid))


def occurrences_of(items: I32, rowend: I64, prev: Occurrences, index: CandidateIndex) -> Occurrences:
    """The occurrences of the candidates of ``index``, by extending ``prev`` (no counting)."""
    pos: list[I64] = []
    cid: list[I32] = []
    for p, c in matches(items, rowend, prev, index):
        pos.append(p)
        cid.append(c)
    return _join(pos, cid)


def pairs_triangular(items: I32, rowend: I64, n: int, wpos: F64 | None = None) -> I64:
    """Pair counts in a triangular matrix of ``n (n-1) / 2`` cells (the seed's approach 1)."""
    counts = np.zeros(n * (n - 1) // 2, dtype=np.int64)
    pos = np.arange(items.shape[0], dtype=np.int64)
    for ext, first, second in extend(items, rowend, pos, items):
        counts += bincount(tri_index(first, second, n), counts.shape[0], None if wpos is None else wpos[ext])
    return counts


def bincount(ids: npt.NDArray[np.integer], n: int, weights: F64 | None) -> I64:
    """``np.bincount`` as int64, optionally weighted (weights are whole numbers, sums exact below 2^53)."""
    if weights is None:
        return np.bincount(ids, minlength=n).astype(np.int64, copy=False)
    return np.bincount(ids, weights=weights, minlength=n).astype(np.int64)


def pairs_triples(
    items: I32,
    rowend: I64,
    n: int,
    admit: Callable[[I64], npt.NDArray[np.bool_]] | None = None,
    wpos: F64 | None = None,
) -> tuple[I64, I64]:
    """Counts of the pairs that occur, as triples: ``(keys i*n+j sorted, counts)`` (approach 2).

    Args:
        admit: optional filter on pair keys; PCY passes "both buckets frequent" here so that only
            candidate pairs get a triple.
    """
    acc_keys = np.zeros(0, dtype=np.int64)
    acc_counts = np.zeros(0, dtype=np.int64)
    pos = np.arange(items.shape[0], dtype=np.int64)
    for ext, first, second in extend(items, rowend, pos, items):
        key = first.astype(np.int64) * n + second
        w = None if wpos is None else wpos[ext]
        if admit is not None:
            ok = admit(key)
            key = key[ok]
            w = None if w is None else w[ok]
        k, c = weighted_unique(key, w)
        acc_keys, acc_counts = merge_counts(acc_keys, acc_counts, k, c)
    return acc_keys, acc_counts


def weighted_unique(keys: I64, weights: F64 | None) -> tuple[I64, I64]:
    """Sorted distinct keys and their (weighted) number of occurrences."""
    if weights is None:
        k, c = np.unique(keys, return_counts=True)
        return k.astype(np.int64), c.astype(np.int64)
    return merge_counts(
        np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), keys, weights.astype(np.int64)
    )


def merge_counts(k1: I64, c1: I64, k2: I64, c2: I64) -> tuple[I64, I64]:
    """Merge two sorted (key, count) tables, adding the counts of equal keys."""
    keys = np.concatenate([k1, k2])
    counts = np.concatenate([c1, c2])
    order = np.argsort(keys, kind="stable")
    keys, counts = keys[order], counts[order]
    if keys.shape[0] == 0:
        return keys, counts
    start = np.ones(keys.shape[0], dtype=bool)
    start[1:] = keys[1:] != keys[:-1]
    idx = np.flatnonzero(start)
    return keys[idx], np.add.reduceat(counts, idx).astype(np.int64)


def splitmix64(x: U64) -> U64:
    """The splitmix64 finaliser: a well-mixed 64-bit value per input (wrapping arithmetic)."""
    z = x + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def merge_identical(items: I32, indptr: I64) -> tuple[I32, I64, I64]:
    """Merge identical baskets into one with a weight (counting a weighted basket once).

    Baskets are hashed as sets (sum of per-item random 64-bit values), grouped by hash, and every
    merge is verified item by item, so a hash collision never merges different baskets.

    Returns:
        ``(items, indptr, weights int64[baskets])`` of the distinct baskets, in first-seen order.
    """
    nb = indptr.shape[0] - 1
    lens = np.diff(indptr)
    if nb < 2 or (lens == 0).any():
        return items, indptr, np.ones(nb, dtype=np.int64)
    rnd = splitmix64(np.arange(int(items.max()) + 1, dtype=np.uint64))
    h = np.add.reduceat(rnd[items], indptr[:-1]) ^ (lens.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15))
    order = np.argsort(h, kind="stable")
    hs = h[order]
    first = np.ones(nb, dtype=bool)
    first[1:] = hs[1:] != hs[:-1]
    rep = np.empty(nb, dtype=np.int64)
    rep[order] = order[np.maximum.accumulate(np.where(first, np.arange(nb), 0))]
    # verify: same length and same items as the representative, else stay separate
    same = lens == lens[rep]
    cand = np.flatnonzero(same & (rep != np.arange(nb)))
    if cand.shape[0]:
        a = expand(indptr[cand], lens[cand])
        b = expand(indptr[rep[cand]], lens[cand])
        seg = np.zeros(cand.shape[0], dtype=np.int64)
        np.cumsum(lens[cand][:-1], out=seg[1:])
        eq = np.logical_and.reduceat(items[a] == items[b], seg)
        same[cand[~eq]] = False
    rep = np.where(same, rep, np.arange(nb))
    weights = np.bincount(rep, minlength=nb).astype(np.int64)
    keep = np.flatnonzero(weights > 0)
    new_lens = lens[keep]
    new_indptr = np.zeros(keep.shape[0] + 1, dtype=np.int64)
    np.cumsum(new_lens, out=new_indptr[1:])
    return items[expand(indptr[keep], new_lens)], new_indptr, weights[keep]
