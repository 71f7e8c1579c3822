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

CHUNK = 1 << 22  # generated positions per vectorised step (bounded temporaries: ~4M x 8 bytes)


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


def tri_pairs(n: int) -> tuple[I32, I32]:
    """(i, j) of every cell of the triangular matrix, in cell order."""
    left, right = segment_pairs(np.array([0, n], dtype=np.int64))
    return left.astype(np.int32), right.astype(np.int32)


def row_end(indptr: I64) -> I64:
    """For every position of the item array, the end of its basket's run."""
    return np.repeat(indptr[1:], np.diff(indptr))


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


def find_rows(table: I32, queries: I32) -> I64:
    """Index of each query row in ``table`` (rows of equal width), or -1 when absent."""
    if table.shape[0] == 0 or queries.shape[0] == 0:
        return np.full(queries.shape[0], -1, dtype=np.int64)
    th = row_hash(table)
    order = np.argsort(th, kind="stable")
    sh = th[order]
    qh = row_hash(queries)
    at = np.minimum(np.searchsorted(sh, qh), sh.shape[0] - 1)
    idx = order[at].astype(np.int64)
    ok = (sh[at] == qh) & (table[idx] == queries).all(axis=1)
    idx[~ok] = -1
    # a hash collision between two different table rows could hide a match: check those exactly
    suspect = (~ok) & (sh[at] == qh)
    if suspect.any():
        exact = {tuple(r): i for i, r in enumerate(table.tolist())}
        for q in np.flatnonzero(suspect).tolist():
            idx[q] = exact.get(tuple(queries[q].tolist()), -1)
    return idx


@dataclass(frozen=True, slots=True)
class CandidateIndex:
    """Maps (prefix itemset id, extension item) to a candidate id, or -1.

    Dense (a small table over the prefixes and items that occur in candidates) when that table
    has at most ``DENSE_CELLS`` cells, else a sorted key array searched with ``np.searchsorted``.
    """

    n: int
    prefix_map: I32  # prefix set id -> row in the table, -1 = no candidate extends it
    item_map: I32  # item -> column, -1 = extends no prefix
    width: int
    table: I32 | None
    keys: I64 | None

    DENSE_CELLS = 1 << 24

    @classmethod
    def build(cls, prefix: npt.NDArray[np.integer], item: I32, n_prefix_sets: int, n_items: int) -> CandidateIndex:
        """Index candidates ``k`` = (``prefix[k]``, ``item[k]``), ids ``0..len-1``."""
        n = int(prefix.shape[0])
        pmask = np.zeros(n_prefix_sets, dtype=bool)
        pmask[prefix] = True
        prefix_map = np.full(n_prefix_sets, -1, dtype=np.int32)
        prefix_map[pmask] = np.arange(int(pmask.sum()), dtype=np.int32)
        imask = np.zeros(n_items, dtype=bool)
        imask[item] = True
        item_map = np.full(n_items, -1, dtype=np.int32)
        width = int(imask.sum())
        item_map[imask] = np.arange(width, dtype=np.int32)
        cells = prefix_map[prefix].astype(np.int64) * width + item_map[item]
        rows = int(pmask.sum())
        if rows * width <= cls.DENSE_CELLS:
            table = np.full(rows * width, -1, dtype=np.int32)
            table[cells] = np.arange(n, dtype=np.int32)
            return cls(n, prefix_map, item_map, width, table, None)
        order = np.argsort(cells)
        keys = cells[order]
        return cls(n, prefix_map, item_map, width, None, np.stack([keys, order.astype(np.int64)]))

    def has_extension(self, sid: I32) -> npt.NDArray[np.bool_]:
        """Which occurrences' sets are the prefix of some candidate."""
        return self.prefix_map[sid] >= 0

    def find(self, sid: I32, item: I32) -> I64:
        """Candidate id of each (sid, item), -1 where there is none."""
        col = self.item_map[item]
        out = np.full(sid.shape[0], -1, dtype=np.int64)
        ok = col >= 0
        cells = self.prefix_map[sid[ok]].astype(np.int64) * self.width + col[ok]
        if self.table is not None:
            out[ok] = self.table[cells]
        else:
            assert self.keys is not None
            keys, ids = self.keys[0], self.keys[1]
            at = np.minimum(np.searchsorted(keys, cells), keys.shape[0] - 1)
            out[ok] = np.where(keys[at] == cells, ids[at], -1)
        return out

    def nbytes(self) -> int:
        """Bytes of the lookup structure plus one 4-byte count per candidate."""
        own = self.table.nbytes if self.table is not None else (self.keys.nbytes if self.keys is not None else 0)
        return int(own + self.prefix_map.nbytes + self.item_map.nbytes + 4 * self.n)


@dataclass(slots=True)
class Occurrences:
    """Where each itemset of one level occurs: ``pos`` (its last item's position) and ``sid``."""

    pos: I64
    sid: I32

    @property
    def size(self) -> int:
        return int(self.pos.shape[0])


def item_occurrences(items: I32, item_to_sid: I32) -> Occurrences:
    """Level-1 occurrences: every position whose item is a level-1 set (``item_to_sid >= 0``)."""
    sid = item_to_sid[items]
    keep = np.flatnonzero(sid >= 0)
    return Occurrences(keep.astype(np.int64), sid[keep].astype(np.int32))


KEEP_CAP = 1 << 24  # occurrences kept in memory between levels before recomputing instead


def count_candidates(
    items: I32, rowend: I64, occ: Occurrences, index: CandidateIndex, keep: bool = True
) -> tuple[I64, Occurrences | None]:
    """Count candidates over all baskets by extending the previous level's occurrences.

    Returns:
        ``(counts int64[index.n], occurrences of every candidate or None)``: the occurrences
        are dropped (None) when ``keep`` is False or they would exceed ``KEEP_CAP``.
    """
    counts = np.zeros(index.n, dtype=np.int64)
    m = index.has_extension(occ.sid)
    pos, sid = occ.pos[m], occ.sid[m]
    kept_pos: list[I64] = []
    kept_cid: list[I32] = []
    total = 0
    for ext, s, it in extend(items, rowend, pos, sid):
        cid = index.find(s, it)
        hit = cid >= 0
        c = cid[hit]
        counts += np.bincount(c, minlength=index.n)
        if keep:
            total += int(c.shape[0])
            if total > KEEP_CAP:
                keep = False
                kept_pos, kept_cid = [], []
            else:
                kept_pos.append(ext[hit])
                kept_cid.append(c.astype(np.int32))
    if not keep:
        return counts, None
    if kept_pos:
        return counts, Occurrences(np.concatenate(kept_pos), np.concatenate(kept_cid))
    return counts, Occurrences(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32))


def select_occurrences(occ: Occurrences, remap: I32) -> Occurrences:
    """Keep occurrences whose set survives (``remap[sid] >= 0``), renumbered by ``remap``."""
    new = remap[occ.sid]
    keep = new >= 0
    return Occurrences(occ.pos[keep], new[keep].astype(np.int32))


def occurrences_of(items: I32, rowend: I64, prev: Occurrences, index: CandidateIndex) -> Occurrences:
    """The occurrences of the candidates of ``index``, by extending ``prev`` (no counting)."""
    m = index.has_extension(prev.sid)
    pos_parts: list[I64] = []
    cid_parts: list[I32] = []
    for ext, s, it in extend(items, rowend, prev.pos[m], prev.sid[m]):
        cid = index.find(s, it)
        hit = cid >= 0
        pos_parts.append(ext[hit])
        cid_parts.append(cid[hit].astype(np.int32))
    if not pos_parts:
        return Occurrences(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32))
    return Occurrences(np.concatenate(pos_parts), np.concatenate(cid_parts))


def pair_keys(items: I32, rowend: I64, n: int, limit: int = CHUNK) -> Iterator[I64]:
    """Pair keys ``i * n + j`` (i < j) of every pair in every basket, in chunks."""
    pos = np.arange(items.shape[0], dtype=np.int64)
    for _, first, second in extend(items, rowend, pos, items, limit):
        yield first.astype(np.int64) * n + second


def pairs_triangular(items: I32, rowend: I64, n: int) -> I64:
    """Pair counts in a triangular matrix of ``n (n-1) / 2`` cells (the seed's approach 1)."""
    counts = np.zeros(n * (n - 1) // 2, dtype=np.int64)
    for key in pair_keys(items, rowend, n):
        i, j = np.divmod(key, n)
        counts += np.bincount(tri_index(i, j, n), minlength=counts.shape[0])
    return counts


def pairs_triples(
    items: I32, rowend: I64, n: int, admit: Callable[[I64], npt.NDArray[np.bool_]] | None = None
) -> tuple[I64, I64]:
    """Counts of the pairs that occur, as triples: ``(keys i*n+j sorted, counts)`` (approach 2).

    Args:
        admit: optional filter on pair keys; PCY passes "both buckets frequent" here so that only
            candidate pairs get a triple.
    """
    acc_keys = np.zeros(0, dtype=np.int64)
    acc_counts = np.zeros(0, dtype=np.int64)
    for key in pair_keys(items, rowend, n):
        if admit is not None:
            key = key[admit(key)]
        k, c = np.unique(key, return_counts=True)
        acc_keys, acc_counts = merge_counts(acc_keys, acc_counts, k, c.astype(np.int64))
    return acc_keys, acc_counts


def merge_counts(k1: I64, c1: I64, k2: I64, c2: I64) -> tuple[I64, I64]:
    """Merge two sorted (key, count) tables, adding the counts of equal keys."""
    if k1.shape[0] == 0:
        return k2, c2
    keys = np.concatenate([k1, k2])
    counts = np.concatenate([c1, c2])
    order = np.argsort(keys, kind="stable")
    keys, counts = keys[order], counts[order]
    start = np.ones(keys.shape[0], dtype=bool)
    start[1:] = keys[1:] != keys[:-1]
    idx = np.flatnonzero(start)
    return keys[idx], np.add.reduceat(counts, idx).astype(np.int64)
