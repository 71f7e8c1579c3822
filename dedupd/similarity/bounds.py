"""Bounded work per document, whatever the size of its cluster (pure).

A stream full of copies (a wire story syndicated a thousand times, a placeholder text) must cost about what
as many different documents cost. Four bounds keep it so:

- a bucket takes at most ``bucket_members`` members (lua.BUCKETS), and it keeps ``KEPT_PER_CLUSTER`` of
  each cluster: its ``ANCHORS_KEPT`` oldest there (the anchor) and its ``NEWEST_KEPT`` newest. A document
  that joins a bucket where members of its cluster are (its verified matches, and the others it read of the
  clusters it joins) evicts the ones between (:func:`eviction_rows`, lua.EVICT). They already collide in
  that band; the cluster stays findable through its newest (a chain's drifting versions) and its anchor (a
  star's base, a flood's original: the member every later variant is near, which the variants' own crowd
  cannot push out); deleting old documents (retention by age) takes nothing from the buckets. A full bucket is
  read, not joined, but a document it keeps out takes a place there (lua.DISPLACE): on a single Redis the place
  of the member missing the fewest of its own buckets, when it misses 2 or more fewer than the document (a
  crowd's places are shared out evenly); on a Redis Cluster only a document kept out of more than
  ``THIN_SHARE`` of its buckets (:func:`thin`) takes places. A crowd that came first cannot leave it findable
  nowhere;
- a document verifies the best-ranked candidate of each distinct cluster among its candidates, of at most
  ``candidate_clusters`` clusters (a hub near many clusters finds them all; at a low threshold a member of
  a large family reads hundreds), and at most ``max_candidates`` others, at most ``VERIFIED_PER_CLUSTER`` of
  each cluster at first (:func:`pick_many`; matching.verify_reads verifies more of a cluster none of these
  matched, index/near_miss.py more of a cluster it nearly matched);
- a document is unioned with one match per distinct cluster root (unionfind.UNION_ROOTS);
- an alert names at most ``max_matches`` matches, plus the best match of every distinct earlier cluster the
  document joins, of at most ``max_clusters`` clusters (:func:`alert_matches`).

    >>> keys, who, ids = ranked_flat({1: (np.array([7, 3, 7, 9, 3, 7], dtype=np.uint32), 9)})
    >>> ids.tolist()
    [7, 3]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dedupd.similarity.lsh import column_bands
from dedupd.similarity.matches import Found

NEWEST_KEPT = 2  # the newest members of one cluster a bucket keeps: one can be deleted, one stays
ANCHORS_KEPT = 1  # the oldest members of one cluster a bucket keeps (its anchor there: a star's base)
KEPT_PER_CLUSTER = NEWEST_KEPT + ANCHORS_KEPT  # members of one cluster a bucket keeps
FRESH_PER_CALL = 2  # new members a bucket takes in one BUCKETS call; the others once verified (lua.EVICT)
VERIFIED_PER_CLUSTER = 5  # candidates of one cluster verified at first (the best-ranked)
BATCH_NEIGHBOURS = 1  # per band, the nearest earlier documents of its batch with its hash a document sees
# a document kept out of more than this share of its buckets because they were full takes a place in each of
# them (lua.DISPLACE): a crowd that came first cannot leave it findable nowhere
THIN_SHARE = 0.5


@dataclass(frozen=True, slots=True)
class Bounds:
    """The per-document bounds (settings ``bucket_members``, ``max_candidates``, ``max_matches``,
    ``max_clusters``, ``representatives``, ``near_miss_clusters``, ``near_miss_members``,
    ``candidate_clusters``)."""

    bucket_members: int = 64
    max_candidates: int = 64
    max_matches: int = 10
    max_clusters: int = 128
    # a cluster's representatives and the near miss (index/near_miss.py): settings ``representatives``,
    # ``near_miss_clusters`` and ``near_miss_members``
    representatives: int = 8
    near_miss_clusters: int = 4
    near_miss_members: int = 1024
    # the distinct clusters whose best-ranked candidate a document verifies (at least ``max_clusters``)
    candidate_clusters: int = 1024

    @property
    def verified_clusters(self) -> int:
        """The distinct clusters whose best-ranked candidate a document verifies: ``candidate_clusters``, and
        at least as many as an alert can name (``max_clusters``)."""
        return max(self.candidate_clusters, self.max_clusters)


def ranked_flat(
    reads: Mapping[int, tuple[npt.NDArray[np.uint32], int]],
) -> tuple[list[int], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """For every key, from its bucket reads (one id per shared band) and its own id (left out): the distinct
    ids read, most shared bands first, then oldest (smallest id) first, as flat arrays: the keys, and per id
    read the index of its key in them (ascending) and the id; one sort for all keys.

    >>> keys, who, ids = ranked_flat({5: (np.array([7, 3, 7], np.uint32), 0), -1: (np.array([2, 9], np.uint32), 9)})
    >>> keys, who.tolist(), ids.tolist()
    ([5, -1], [0, 0, 1], [7, 3, 2])
    """
    keys = list(reads)
    sizes = np.array([reads[k][0].size for k in keys], dtype=np.int64)
    if not sizes.sum():
        return keys, np.zeros(0, np.int64), np.zeros(0, np.int64)
    ids = np.concatenate([reads[k][0] for k in keys]).astype(np.int64)
    owner = np.repeat(np.arange(len(keys)), sizes)
    own = np.array([reads[k][1] for k in keys], dtype=np.int64)
    keep = ids != own[owner]
    pair, counts = np.unique((owner[keep] << 32) | ids[keep], return_counts=True)
    who, ids_u = pair >> 32, pair & 0xFFFFFFFF
    order = np.lexsort((ids_u, -counts, who))  # per key: most shared bands first, then oldest
    return keys, who[order], ids_u[order]


def split_by(who: npt.NDArray[np.int64], values: list[int], n: int) -> list[list[int]]:
    """``values`` (parallel to ``who``, ascending key indexes) as one list per key index 0..n-1.

    >>> split_by(np.array([0, 0, 2]), [7, 3, 2], 4)
    [[7, 3], [], [2], []]
    """
    out: list[list[int]] = [[] for _ in range(n)]
    if who.size:
        starts = np.flatnonzero(np.diff(who, prepend=-1))
        ends = [*starts[1:].tolist(), who.size]
        for k, a, b in zip(who[starts].tolist(), starts.tolist(), ends, strict=True):
            out[k] = values[a:b]
    return out


def pick_many(
    who: npt.NDArray[np.int64],
    roots: npt.NDArray[np.int64],
    limit: int,
    per_cluster: int,
    clusters: int = 0,
) -> npt.NDArray[np.int64]:
    """Each key's ranked candidate ids to verify, as a set of positions: the best-ranked id of each of the
    ``clusters`` best-ranked distinct cluster roots, and at most ``limit`` more: the best-ranked id of each
    other cluster first, then the best-ranked others, at most ``per_cluster`` of a root in all; for all keys
    at once. ``who`` is each id's key index (ascending; each key's ids ranked) and ``roots`` each id's
    cluster root. (tests/reference.py ``pick_candidates`` is the rule for one key.)

    >>> pick_many(np.array([0, 0, 0, 0, 1]), np.array([1, 1, 1, 2, 4]), 2, 5).tolist()
    [0, 3, 4]
    >>> pick_many(np.array([0, 0, 0, 0, 0]), np.array([1, 2, 3, 3, 4]), 1, 5, clusters=2).tolist()
    [0, 1, 2]
    """
    n = who.size
    pos = np.arange(n, dtype=np.int64)
    order = np.lexsort((pos, roots, who))  # each key's clusters together, ranked within
    group, first = _runs(who[order], roots[order])
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n) - first[group]
    cand = np.flatnonzero(rank < per_cluster)
    cand = cand[np.lexsort((cand, rank[cand] > 0, who[cand]))]  # per key: each cluster's best, then the rest
    group, first = _runs(who[cand])
    at = np.arange(cand.size) - first[group]
    # the bests of a key's first ``clusters`` clusters come first: they are its first ``quota``
    quota = np.minimum(np.bincount(group, rank[cand] == 0).astype(np.int64), clusters)[group]
    return np.sort(cand[at < limit + quota])


def alert_matches(found: Sequence[Found], roots: Sequence[int], limit: int, clusters: int) -> list[Found]:
    """The matches an alert names, best first: the ``limit`` best, plus the best match of each distinct
    earlier cluster (``roots``: each match's cluster root before the document joined it) not among them,
    while fewer than ``clusters`` distinct clusters are named: at most ``limit + clusters`` matches.

    ``found`` is best first (matches.matches_of).

    >>> alert_matches([("a", 0.9, 1), ("b", 0.8, 2), ("c", 0.7, 3)], [1, 1, 3], 1, 64)
    [('a', 0.9, 1), ('c', 0.7, 3)]
    >>> alert_matches([("a", 0.9, 1), ("b", 0.8, 2), ("c", 0.7, 3)], [1, 2, 3], 1, 2)
    [('a', 0.9, 1), ('b', 0.8, 2)]
    """
    seen: set[int] = set()
    out: list[Found] = []
    for i, (m, root) in enumerate(zip(found, roots, strict=True)):
        if i < limit or (root not in seen and len(seen) < clusters):
            out.append(m)
        seen.add(root)
    return out


def batch_predecessors(
    bands: npt.NDArray[np.uint64], depth: int, n_bands: int | None = None, prefix_depth: int = 0
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(row, earlier row) pairs of a batch's band-hash rows (one row per document, in batch order), as two
    arrays: in each band, the ``depth`` nearest earlier rows with the same hash, and the first row with it
    (the batch's anchor of that bucket, as a bucket keeps its cluster's oldest member) when it is further
    back (a pair once per band it shares). A bucket holds what was there before the batch; this way the
    batch's documents see the newest ones of the batch before them and the first. Columns from ``n_bands``
    on are all one band (lsh.column_bands): the shingle prefixes of short documents, where the
    ``prefix_depth`` nearest earlier rows are seen (a shingle is shared by documents far under the
    threshold; the one that is over it may be further back); a 0 is no hash.

    >>> [a.tolist() for a in batch_predecessors(np.array([[1, 5], [1, 6], [1, 5]], np.uint64), 1)]
    [[1, 2, 2, 2], [0, 1, 0, 0]]
    >>> [a.tolist() for a in batch_predecessors(np.array([[1, 5], [2, 5], [3, 5]], np.uint64), 1, 1, 2)]
    [[1, 2, 2], [0, 1, 0]]
    >>> [a.tolist() for a in batch_predecessors(np.array([[7], [7], [7], [7]], np.uint64), 1)]
    [[1, 2, 3, 2, 3], [0, 1, 2, 0, 0]]
    """
    return predecessors(shared_entries(bands, n_bands), depth, n_bands, prefix_depth)


@dataclass(frozen=True, slots=True)
class SharedEntries:
    """The (band, hash, row) entries of a batch's band-hash rows that another row of the batch shares,
    those of one band and hash together and in row order (one sort for all bands; most hashes of a batch
    are its own)."""

    band: npt.NDArray[np.uint64]
    hashes: npt.NDArray[np.uint64]
    row: npt.NDArray[np.int64]
    rows: int  # rows of the table
    group: npt.NDArray[np.int64]  # each entry's bucket (a run of equal band and hash), computed once
    first: npt.NDArray[np.int64]  # each bucket's first entry

    @classmethod
    def empty(cls) -> SharedEntries:
        """No shared entries (a batch of one document)."""
        none = np.zeros(0, np.int64)
        return cls(np.zeros(0, np.uint64), np.zeros(0, np.uint64), none, 0, none, none)


def shared_entries(bands: npt.NDArray[np.uint64], n_bands: int | None = None) -> SharedEntries:
    """The shared entries of a table of band-hash rows (see :func:`batch_predecessors`), for one or more
    :func:`predecessors` calls."""
    band, hashes, row = _entries(bands, n_bands)
    order = _bucket_order(band, hashes)  # entries come row by row: each bucket's stay in batch order
    b, h, r = band[order], hashes[order], row[order]
    if b.size:
        group, first = _runs(b, h)
        shared = np.flatnonzero(np.diff(np.append(first, b.size))[group] > 1)
        b, h, r = b[shared], h[shared], r[shared]
    group, first = _runs(b, h)
    return SharedEntries(b, h, r, bands.shape[0], group, first)


def nearest_earlier(
    entries: SharedEntries, rows: npt.NDArray[np.int64], depth: int | npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(row, earlier row) pairs of ``rows`` alone: in each bucket that one of them shares, the ``depth``
    nearest earlier rows in it and the first (:func:`predecessors` with ``prefix_depth`` = ``depth``, for
    those rows only: a few documents of a batch look deep, not the whole batch). ``depth`` (1 or more) is
    one for all or each row's own (an array beside ``rows``): one pass for looks of several depths.

    >>> e = shared_entries(np.array([[1, 5], [1, 6], [1, 5], [2, 5]], np.uint64))
    >>> [a.tolist() for a in nearest_earlier(e, np.array([2]), 5)]
    [[2, 2, 2], [0, 1, 0]]
    >>> [a.tolist() for a in nearest_earlier(e, np.array([3]), 1)]
    [[3, 3], [2, 0]]
    >>> [a.tolist() for a in nearest_earlier(e, np.array([2, 3]), np.array([5, 1]))]
    [[2, 2, 2, 3, 3], [0, 1, 0, 2, 0]]
    """
    r = entries.row
    if not r.size or not rows.size:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    group, first = entries.group, entries.first
    reach = np.zeros(entries.rows, dtype=np.int64)  # each row's depth; 0: not looked for
    inside = (rows >= 0) & (rows < entries.rows)  # (a row outside the table shares nothing)
    reach[rows[inside]] = depth if isinstance(depth, int) else depth[inside]
    at = np.flatnonzero(reach[r])
    lo = np.maximum(first[group[at]], at - reach[r[at]])
    counts = at - lo
    starts = np.repeat(lo, counts)
    steps = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    far = at[lo > first[group[at]]]  # the bucket's first row is further back: its anchor too
    return (
        np.concatenate([np.repeat(r[at], counts), r[far]]),
        np.concatenate([r[starts + steps], r[first[group[far]]]]),
    )


def predecessors(
    entries: SharedEntries, depth: int, n_bands: int | None = None, prefix_depth: int = 0
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """:func:`batch_predecessors` of the shared entries of a table."""
    b, h, r, n = entries.band, entries.hashes, entries.row, entries.rows
    later, earlier = [], []
    for d in range(1, min(depth, n - 1) + 1):
        same = np.flatnonzero((b[d:] == b[:-d]) & (h[d:] == h[:-d]))
        if not same.size:  # no bucket of the batch has more than d members: none has d + 1
            break
        later.append(r[same + d])
        earlier.append(r[same])
    deep = n_bands is not None and prefix_depth > depth
    if deep:
        at = np.flatnonzero(b == n_bands)  # the prefix band, still by hash and row
        ph, pr = h[at], r[at]
        for d in range(depth + 1, min(prefix_depth, ph.size - 1) + 1):
            same = np.flatnonzero(ph[d:] == ph[:-d])
            if not same.size:
                break
            later.append(pr[same + d])
            earlier.append(pr[same])
    if b.size > depth + 1:  # each bucket's first row (its anchor), to the rows further from it than seen
        back, reach = _back_and_reach(entries, depth, n_bands, prefix_depth)
        far = np.flatnonzero(back > reach)
        later.append(r[far])
        earlier.append(r[entries.first[entries.group[far]]])
    if not later:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(later), np.concatenate(earlier)


def deep_rows(
    entries: SharedEntries, depth: int, n_bands: int | None = None, prefix_depth: int = 0
) -> npt.NDArray[np.bool_]:
    """Per row of the table: whether a bucket it shares has more earlier rows than :func:`predecessors`
    (``depth`` nearest; ``prefix_depth`` in the prefix band ``n_bands``) and the first give it. A row that
    is not deep was given every earlier row of each of its buckets: a deeper look finds nothing more.

    >>> e = shared_entries(np.array([[7, 1], [7, 2], [7, 1], [7, 0]], np.uint64))
    >>> deep_rows(e, 1).tolist(), deep_rows(e, 2).tolist()
    ([False, False, False, True], [False, False, False, False])
    """
    out = np.zeros(entries.rows, dtype=bool)
    if entries.row.size:
        back, reach = _back_and_reach(entries, depth, n_bands, prefix_depth)
        out[entries.row[back > reach + 1]] = True  # (more than the nearest ``reach`` and the first)
    return out


def _back_and_reach(
    entries: SharedEntries, depth: int, n_bands: int | None, prefix_depth: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64] | int]:
    """Per shared entry, how many earlier rows its bucket holds, and how many of the nearest of them
    :func:`predecessors` gives it (``prefix_depth`` in the prefix band ``n_bands`` when deeper, else
    ``depth``): the one rule of the first look, for it and :func:`deep_rows`."""
    back = np.arange(entries.row.size) - entries.first[entries.group]
    if n_bands is None or prefix_depth <= depth:
        return back, depth
    return back, np.where(entries.band == n_bands, prefix_depth, depth)


def thin(
    write: npt.NDArray[np.int64], full: npt.NDArray[np.bool_], buckets: npt.NDArray[np.int64]
) -> npt.NDArray[np.bool_]:
    """Per hit (its write's index ``write``; ``full``: the bucket was full and the write did not join it),
    whether it is a place to take: a full bucket of a write kept out of more than ``THIN_SHARE`` of its
    ``buckets`` (per write, how many band buckets its document has) by full ones.

    >>> write, full = np.array([0, 0, 0, 1, 1]), np.array([True, True, False, True, False])
    >>> thin(write, full, np.array([3, 4])).tolist()  # write 0: 2 of 3 full; write 1: 1 of 4
    [True, True, False, False, False]
    """
    kept_out = np.bincount(write[full], minlength=buckets.size)
    return full & (kept_out > THIN_SHARE * buckets)[write]


def eviction_rows(
    bucket: npt.NDArray[np.int64],
    num: npt.NDArray[np.int64],
    cluster: npt.NDArray[np.int64],
    newest: int,
    anchors: int,
) -> npt.NDArray[np.int64]:
    """Of a batch's hits (a document of the batch joined a bucket that was there: the bucket, the document's
    integer id, its cluster after the batch), the ones lua.EVICT needs: per bucket and cluster, the
    ``newest`` newest documents (largest integer id) and the ``anchors`` oldest, each bucket's and cluster's
    together. lua.EVICT leaves the ``newest`` newest and the ``anchors`` oldest of the cluster's known
    members in the bucket, these included (a full bucket refused them: they take the place of others).

    >>> eviction_rows(*(np.array(x) for x in ([4, 4, 4, 2], [7, 9, 8, 5], [1, 1, 1, 1])), 2, 0).tolist()
    [3, 1, 2]
    >>> eviction_rows(*(np.array(x) for x in ([4, 4, 4, 4], [7, 9, 8, 6], [1, 1, 1, 1])), 1, 1).tolist()
    [1, 3]
    """
    order = np.lexsort((-num, cluster, bucket))
    group, first = _runs(bucket[order], cluster[order])
    rank = np.arange(order.size) - first[group]
    size = np.diff(np.append(first, order.size))[group]
    return order[(rank < newest) | (rank >= size - anchors)]


def _bucket_order(band: npt.NDArray[np.uint64], hashes: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
    """An order of (band, hash) entries that puts each bucket's together, each in the given order: one sort
    by hash (cheaper than one by band and hash), by band too only when a hash is in two bands.

    >>> _bucket_order(np.array([0, 1, 0], np.uint64), np.array([5, 5, 5], np.uint64)).tolist()
    [0, 2, 1]
    """
    order = np.argsort(hashes, kind="stable")
    b, h = band[order], hashes[order]
    if ((h[1:] == h[:-1]) & (b[1:] != b[:-1])).any():
        order = np.lexsort((hashes, band))
    return order


def earlier_clusters(
    groups: Sequence[tuple[int, Sequence[int]]], root_of: dict[int, int]
) -> list[tuple[list[int], list[int]]]:
    """For each (document, its matches best first), in batch order: the cluster root each match had before
    the document joined it, and the best match of each distinct one (what the union needs: one per root).

    ``root_of`` holds the roots read before the batch (an id absent from it is its own root); the unions
    of the batch's earlier documents are applied as they come (a union by smaller id, as
    unionfind.UNION_ROOTS).

    >>> earlier_clusters([(10, [3, 4]), (11, [10, 5])], {3: 1, 4: 1, 5: 5})
    [([1, 1], [3]), ([1, 5], [10, 5])]
    """
    parent: dict[int, int] = {}
    out: list[tuple[list[int], list[int]]] = []
    for num, matches in groups:
        roots, last, found = [], -1, -1
        for m in matches:  # (a flood's matches: one root, found once)
            if (r := root_of.get(m, m)) != last:
                last, found = r, _find(parent, r)
            roots.append(found)
        best: dict[int, int] = {}
        for m, r in zip(matches, roots, strict=True):
            best.setdefault(r, m)
        own = _find(parent, num)
        top = min([own, *best])
        for r in [own, *best]:
            parent[r] = top
        out.append((roots, list(best.values())))
    return out


def batch_roots(groups: Sequence[tuple[int, Sequence[int]]], root_of: dict[int, int]) -> dict[int, int]:
    """For each (document, its matches) of a batch, the unions applied (as :func:`earlier_clusters` does): the
    root of every document and match named, once all are applied (one absent: its own root).

    >>> sorted(batch_roots([(10, [3, 4]), (11, [10, 5]), (12, [])], {3: 1, 4: 1, 5: 5}).items())
    [(1, 1), (3, 1), (4, 1), (5, 1), (10, 1), (11, 1), (12, 12)]
    """
    parent: dict[int, int] = {}
    for num, matches in groups:
        if not matches:  # (nothing to unite: its root is its own unless a later one joins it)
            continue
        ends = {_find(parent, num), *(_find(parent, root_of.get(m, m)) for m in matches)}
        top = min(ends)
        for r in ends:
            parent[r] = top
    out = {r: _find(parent, r) for r in list(parent)}
    for num, matches in groups:
        out[num] = _find(parent, num)
        for m in matches:
            out[m] = _find(parent, root_of.get(m, m))
    return out


def merged_roots(groups: Sequence[tuple[int, int, Sequence[int]]]) -> dict[int, int]:
    """The cluster root after a batch's unions (document, its root after its union, the roots it merged;
    in batch order) of each document and each root it merged.

    >>> merged_roots([(10, 3, [3, 7]), (11, 1, [1, 3])])
    {10: 1, 3: 1, 7: 1, 11: 1, 1: 1}
    """
    parent: dict[int, int] = {}
    for num, root, merged in groups:
        for r in (num, *merged):
            parent[r] = root
        parent.setdefault(root, root)
    return {x: _find(parent, x) for x in parent}


def _find(parent: dict[int, int], x: int) -> int:
    """The root of ``x`` in a union-find ``parent`` map (an id absent from it is its own root)."""
    while parent.get(x, x) != x:
        x = parent[x]
    return x


def _entries(
    bands: npt.NDArray[np.uint64], n_bands: int | None
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64], npt.NDArray[np.int64]]:
    """A table of band-hash rows as (band, hash, row) entries, one per hash; a 0 (no hash: a shorter row,
    padded) is left out. Columns from ``n_bands`` on are all one band (lsh.column_bands).

    >>> [a.tolist() for a in _entries(np.array([[5, 0, 7]], np.uint64), 1)]
    [[0, 1], [5, 7], [0, 0]]
    """
    n, width = bands.shape
    band = np.tile(column_bands(width, width if n_bands is None else n_bands).astype(np.uint64), n)
    hashes, row = bands.ravel(), np.repeat(np.arange(n, dtype=np.int64), width)
    some = np.flatnonzero(hashes)
    return band[some], hashes[some], row[some]


def _runs(*keys: npt.NDArray[np.generic]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """For parallel keys sorted together: each position's run (equal keys) and each run's first position."""
    start = np.zeros(keys[0].size, dtype=bool)
    start[:1] = True
    for k in keys:
        start[1:] |= k[1:] != k[:-1]
    return np.cumsum(start) - 1, np.flatnonzero(start)
