"""The verification stage of a run: which earlier documents each of its documents is compared with.

A document is verified against what its buckets held (index/matching.py picks a few of each cluster, the
best-ranked), against the nearest earlier documents of its own batch that share a band hash with it and the
first of each bucket (as a bucket would have held them: bounds.predecessors), when that found nothing or found
two or more clusters (a hub), against the deeper ones of its batch (a hub deeper still), and last, for a
cluster it nearly matched, against the cluster's representatives (index/near_miss.py). A flood's copies match
at once in their buckets, one cluster, and never pay for the deeper looks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dedupd.daemon.batch import Run
from dedupd.daemon.planner import Action
from dedupd.index.matching import Verification, verify_reads
from dedupd.index.near_miss import near_misses
from dedupd.index.protocol import NO_IDS, Gateway, Packed
from dedupd.similarity.bounds import (
    BATCH_NEIGHBOURS,
    VERIFIED_PER_CLUSTER,
    SharedEntries,
    batch_roots,
    deep_rows,
    earlier_clusters,
    nearest_earlier,
    predecessors,
    shared_entries,
)
from dedupd.similarity.fingerprint import Fingerprint
from dedupd.similarity.lsh import pad_rows

_NO_IDS_SET: frozenset[int] = frozenset()
_NO_SHARED = SharedEntries.empty()
Reads = dict[int, tuple[Packed, int]]  # by key: the ids read, and the key's own integer id (left out)


@dataclass(frozen=True, slots=True)
class BatchEntries:
    """The steps of a run whose documents were written with band hashes, and the band hashes they share
    (bounds.shared_entries), sorted once for every look into the batch."""

    rows: list[int]
    shared: SharedEntries
    nums: npt.NDArray[np.uint32]  # each row's integer id
    deep: frozenset[int]  # the steps a bucket of which holds more earlier rows than the first look gives


@dataclass(frozen=True, slots=True)
class Checked:
    """The documents of a run to verify, by key (a step's integer id, or a query's negative key): their id and
    fingerprint, their bucket reads, and the step of each key; and the documents the run created."""

    own: dict[int, tuple[str, Fingerprint]]
    reads: Reads
    key_of: dict[int, int]  # step index -> key
    created: list[int]


def verify_run(gw: Gateway, run: Run) -> Verification:
    """The verified matches of each step that wrote or queried (matching.verify_reads), by step index (the
    fingerprints and roots by integer id)."""
    checked = checked_of(run)
    gw.created(checked.created)  # no root lookups for them
    batch = batch_entries(gw, run)
    near = batch_neighbours(gw, run, batch, BATCH_NEIGHBOURS)
    reads, later = with_batch_neighbours(run, near, checked.reads)
    got = verify_reads(gw, checked.own, reads)
    if later:
        got.add(verify_reads(gw, checked.own, batch_reads(run, later, got)))
    deeper = look_further(gw, run, batch, checked, got, near)
    if deeper:
        got.add(verify_reads(gw, checked.own, deeper))
    got.add(near_misses(gw, checked.own, got, {k: num for k, (_, num) in checked.reads.items()}))
    by_key = {key: i for i, key in checked.key_of.items()}
    return Verification(
        {by_key[k]: m for k, m in got.matches.items()},
        {by_key[k]: c for k, c in got.candidates.items()},
        {by_key[k]: r for k, r in got.read.items()},
        got.roots,
    )


def checked_of(run: Run) -> Checked:
    """The run's documents to verify: each step that wrote (or queried) a non-empty document."""
    own: dict[int, tuple[str, Fingerprint]] = {}
    reads: Reads = {}
    key_of: dict[int, int] = {}  # (a query has no integer id: a negative key)
    created: list[int] = []  # written, with no record before (a delete has no fingerprint): new ids
    for i, (s, fp, f) in enumerate(zip(run.steps, run.new, run.found, strict=True)):
        if fp is None or f is None or not (s.writes or s.action is Action.QUERY):
            continue
        key = s.num if s.writes else -(i + 1)
        own[key], key_of[i] = (s.entry.doc_id, fp), key
        if f.size:
            reads[key] = (f, s.num)  # a query with an indexed document's id is not compared with it
        if s.writes and s.old is None:
            created.append(s.num)
    return Checked(own, reads, key_of, created)


def with_batch_neighbours(run: Run, near: dict[int, Packed], reads: Reads) -> tuple[Reads, dict[int, Packed]]:
    """``reads`` with each document's nearest earlier neighbours in the batch (``near``, by step index:
    :func:`batch_neighbours` at ``BATCH_NEIGHBOURS``) added, and (by step index) the neighbours kept for
    later: those of a document with a crowd in its buckets, maybe a cluster it verifies enough of there."""
    out = dict(reads)
    later: dict[int, Packed] = {}
    for i, earlier in near.items():
        f, num = out.get(run.steps[i].num, (NO_IDS, run.steps[i].num))
        if f.size > VERIFIED_PER_CLUSTER and len(set(f.tolist())) > VERIFIED_PER_CLUSTER:
            later[i] = earlier
        else:
            out[num] = (np.concatenate([f, earlier]), num)
    return out, later


def full_clusters(candidates: set[int] | frozenset[int], roots: dict[int, int]) -> set[int]:
    """The cluster roots of which ``candidates`` hold ``VERIFIED_PER_CLUSTER`` or more.

    >>> sorted(full_clusters({1, 2, 3, 4, 5, 6}, {2: 1, 3: 1, 4: 1, 5: 1}))
    [1]
    """
    of = list(map(roots.get, candidates, candidates))  # (each one's root: itself when absent)
    if of and of.count(of[0]) == len(of):  # one cluster (a flood's copy)
        return {of[0]} if len(of) >= VERIFIED_PER_CLUSTER else set()
    counts: dict[int, int] = {}
    for r in of:
        counts[r] = counts.get(r, 0) + 1
    return {r for r, n in counts.items() if n >= VERIFIED_PER_CLUSTER}


def batch_reads(run: Run, neighbours: dict[int, Packed], got: Verification) -> Reads:
    """By integer id, the ``neighbours`` (by step index: the nearest earlier documents of the run with a
    band hash in common, one per band, as a bucket would hold them) as bucket reads, less those verified
    already and those in a cluster of which the document verified ``VERIFIED_PER_CLUSTER`` candidates
    already (each matched one of the clusters it matched in its buckets, as a flood's copies do)."""
    roots, matches = got.roots, got.matches
    joined: dict[int, set[int]] = {}  # by document: the roots of its matches (computed once)

    def joins(w: int) -> set[int]:
        if (known := joined.get(w)) is None:
            known = joined[w] = {roots.get(m.num, m.num) for m in matches.get(w, ())}
        return known

    out: Reads = {}
    for i, earlier in neighbours.items():
        num = run.steps[i].num
        ids = earlier.tolist()
        seen = got.candidates.get(num, _NO_IDS_SET)
        distinct = set(ids)  # (a read repeats: one per band)
        rest = distinct.difference(seen)
        if rest and len(seen) >= VERIFIED_PER_CLUSTER and (full := full_clusters(seen, roots)):
            rest = {w for w in rest if full.isdisjoint(joins(w))}
        if not rest:
            continue
        if len(rest) < len(distinct):
            earlier = np.array([w for w in ids if w in rest], dtype=np.uint32)
        out[num] = (earlier, num)
    return out


def look_further(
    gw: Gateway, run: Run, batch: BatchEntries, checked: Checked, got: Verification, near: dict[int, Packed]
) -> Reads:
    """The reads of the documents of the run that wrote and matched nothing: the nearest ``bucket_members``
    earlier documents of their batch of each band they share (what a bucket holds) and the first, not yet
    verified; and of those that matched two or more clusters (:func:`hubs`) the nearest ``max_clusters``
    (at least as many) and the first. The nearest one of a band can be under the threshold and the duplicate
    behind it (copies of a story edited apart); a hub's other clusters are behind the ones it saw (the
    spokes of one stem, each its own cluster, share its bands); and the others that matched look
    ``bucket_members`` deep at the documents of other clusters than theirs (a module's package among a
    family's dozens in one batch; a flood's copies, one cluster, look at none). What is verified of them stays bounded by
    matching.verify_reads (bounds.pick_many). A document none of whose buckets holds more of the batch than
    the first look gave it (``near``: not in ``batch.deep``), and that verified all of those, has nothing
    more to find in its batch and does not look."""
    hub = hubs(gw, run, checked, got)  # (its root lookups serve the near misses and unions after)
    deep, seen_of = batch.deep, got.candidates
    writers = {
        i: key
        for i, key in checked.key_of.items()
        if run.steps[i].writes
        and (i in deep or not seen_of.get(key, _NO_IDS_SET).issuperset(near.get(i, NO_IDS).tolist()))
    }
    if not writers:
        return {}
    lone = {i for i, key in writers.items() if key not in got.matches}
    hub &= writers.keys()
    bounds = gw.bounds
    rest = {i for i, key in writers.items() if key in got.matches} - hub
    depth = dict.fromkeys(lone, bounds.bucket_members)
    depth.update(dict.fromkeys(hub, max(bounds.bucket_members, bounds.max_clusters)))
    root: dict[int, int] | None = None
    if rest:  # a document that matched looks at the batch's other clusters only
        root = _batch_roots(run, checked, got)
        if len({root.get(n, n) for n in batch.nums.tolist()}) > 1:  # (one cluster: a flood's copies)
            depth.update(dict.fromkeys(rest, bounds.bucket_members))
        else:
            rest = set()
    reads: Reads = {}
    if not depth:
        return reads
    deeper = batch_neighbours(gw, run, batch, depth, (rest, root) if rest and root is not None else None)
    for i, ids in deeper.items():
        num = run.steps[i].num
        seen = seen_of.get(num, _NO_IDS_SET)
        if fresh := [n for n in ids.tolist() if n not in seen]:
            reads[num] = (np.array(fresh, dtype=np.uint32), num)
    return reads


def _batch_roots(run: Run, checked: Checked, got: Verification) -> dict[int, int]:
    """The cluster of each document of the run that matched and of its matches once the run's matches are
    united (bounds.batch_roots, over the roots read before the run); a document absent is its own root (it
    matched nothing and nothing of the run joined it: a document a later one joined is named)."""
    matches = got.matches
    groups = [
        (key, [m.num for m in matches[key]])
        for i, key in sorted(checked.key_of.items())
        if key in matches and run.steps[i].writes
    ]
    return batch_roots(groups, got.roots)


def hubs(gw: Gateway, run: Run, checked: Checked, got: Verification) -> set[int]:
    """The steps of the run that wrote and whose matches so far span two or more clusters once the
    batch's earlier documents joined theirs (bounds.earlier_clusters: a flood's copies, matching one another
    in the batch, are one cluster); the roots of their matches are looked up (once, into ``got.roots``)
    when some document matched two or more documents."""
    writers = sorted(
        (i, key) for i, key in checked.key_of.items() if run.steps[i].writes and key in got.matches
    )
    if not any(len(got.matches[key]) > 1 for _, key in writers):
        return set()
    groups = [(key, [m.num for m in got.matches[key]]) for _, key in writers]
    wanted = sorted({n for _, nums in groups for n in nums} - got.roots.keys())
    if wanted:
        got.roots.update(zip(wanted, gw.roots(wanted), strict=True))
    joined = earlier_clusters(groups, got.roots)
    return {i for (i, _), (_, best) in zip(writers, joined, strict=True) if len(best) > 1}


def batch_entries(gw: Gateway, run: Run) -> BatchEntries:
    """The steps of the run whose documents were written with band hashes, and the band hashes they share."""
    rows = [
        i
        for i, (s, f) in enumerate(zip(run.steps, run.found, strict=True))
        if s.writes and f is not None and run.bands[i].size and run.new[i] is not None
    ]
    nums = np.array([run.steps[i].num for i in rows], dtype=np.uint32)
    if len(rows) < 2:
        return BatchEntries(rows, _NO_SHARED, nums, frozenset())
    shared = shared_entries(pad_rows([run.bands[i] for i in rows]), gw.spec.bands)
    deep = deep_rows(shared, BATCH_NEIGHBOURS, gw.spec.bands, gw.bounds.bucket_members)
    return BatchEntries(rows, shared, nums, frozenset(rows[k] for k in np.flatnonzero(deep).tolist()))


def batch_neighbours(
    gw: Gateway,
    run: Run,
    batch: BatchEntries,
    depth: int | dict[int, int],
    apart: tuple[set[int], dict[int, int]] | None = None,
) -> dict[int, Packed]:
    """By step index, the integer ids of the ``depth`` nearest earlier documents of the run with a band
    hash in common, and of the ``bucket_members`` nearest with a shingle prefix in common
    (bounds.batch_predecessors): a JOIN reads what a bucket held before the run. With ``depth`` by step
    index, of those steps only, each as deep as given in every band, its shingle prefixes too
    (bounds.nearest_earlier, one pass). With ``apart`` (steps, each integer id's cluster: absent, its own),
    only those of another cluster than the step's document for those steps."""
    rows, shared, nums = batch.rows, batch.shared, batch.nums
    if len(rows) < 2:
        return {}
    if isinstance(depth, int):
        later, earlier = predecessors(shared, depth, gw.spec.bands, gw.bounds.bucket_members)
    else:
        at = [(k, depth[i]) for k, i in enumerate(rows) if i in depth]
        wanted = np.array([k for k, _ in at], dtype=np.int64)
        later, earlier = nearest_earlier(shared, wanted, np.array([d for _, d in at], dtype=np.int64))
    if not later.size:
        return {}
    if apart is not None:  # (a flood's copies, one cluster: every pair dropped at once)
        steps, cluster = apart
        label = np.array([cluster.get(n, n) for n in nums.tolist()], dtype=np.int64)
        only = np.array([i in steps for i in rows], dtype=bool)
        keep = ~only[later] | (label[later] != label[earlier])
        if not keep.all():
            later, earlier = later[keep], earlier[keep]
        if not later.size:
            return {}
    order = np.argsort(later, kind="stable")
    later, ids = later[order], nums[earlier[order]]
    starts = np.flatnonzero(np.diff(later, prepend=-1)).tolist()
    ends = [*starts[1:], later.size]
    return {rows[int(later[a])]: ids[a:b] for a, b in zip(starts, ends, strict=True)}
