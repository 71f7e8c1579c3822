"""Which members a run's buckets keep (pure): the rows of index/lua's EVICT for one run.

Per bucket and cluster that a document of the run joined where it was there already (``Run.hits``), the
cluster's newest and oldest documents of the run in it (bounds.eviction_rows), and per cluster the members
known to be in it: the run's documents and the ids they read whose cluster they joined. A bucket keeps
``KEPT_PER_CLUSTER`` members of a cluster (its anchor, the oldest, and the newest); a cluster with that many
known members or fewer has nothing to evict anywhere. A document a bucket refused that alerted nothing is a cluster of its own (EVICT
puts it in).
"""

from __future__ import annotations

import numpy as np

from dedupd.daemon.batch import Run
from dedupd.daemon.clusters import Clusters
from dedupd.index.buckets import NO_PLACEMENTS, Evictions, Placements, placements
from dedupd.similarity.bounds import ANCHORS_KEPT, KEPT_PER_CLUSTER, NEWEST_KEPT, eviction_rows

_NONE = np.zeros(0, dtype=np.int64)
NO_EVICTIONS = Evictions([], _NONE, np.zeros(0, np.uint32), _NONE, _NONE, [])


def evictions(run: Run, clusters: Clusters) -> Evictions:
    """The EVICT rows of a run whose alerting documents join ``clusters``."""
    final = clusters.final
    cluster_of, nums = _clusters_by_step(run, clusters, final)
    hits = run.hits
    sel = np.flatnonzero(cluster_of[hits.write] >= 0)
    if not sel.size:
        return NO_EVICTIONS
    at = hits.write[sel]
    bucket = (hits.key[sel] << 32) | hits.field[sel].astype(np.int64)
    sel = sel[eviction_rows(bucket, nums[at], cluster_of[at], NEWEST_KEPT, ANCHORS_KEPT)]
    at = hits.write[sel]
    roots, cluster = np.unique(cluster_of[at], return_inverse=True)
    known = _known_members(run, clusters, final, cluster_of, roots.tolist())
    # a cluster of KEPT_PER_CLUSTER known members or fewer has nothing to evict anywhere, nor to put in
    # unless a bucket refused one of them
    refused = np.zeros(roots.size, dtype=bool)
    refused[cluster[hits.refused[sel]]] = True
    crowded = refused | np.array([len(set(known[int(r)])) > KEPT_PER_CLUSTER for r in roots.tolist()])
    if not crowded.any():
        return NO_EVICTIONS
    keep = np.flatnonzero(crowded[cluster])
    used, cluster = np.unique(cluster[keep], return_inverse=True)
    sel, at = sel[keep], at[keep]
    members = [np.array(known[int(roots[u])], dtype="<u4").tobytes() for u in used.tolist()]
    return Evictions(hits.names, hits.key[sel], hits.field[sel], cluster, nums[at], members)


def placements_of(run: Run, done: list[int]) -> Placements:
    """The places in full buckets that the run's documents kept out of most of their buckets take
    (bounds.thin, lua.DISPLACE): only documents the run wrote and kept (``done``)."""
    if not run.hits.full.any():  # (most runs: no bucket was full)
        return NO_PLACEMENTS
    nums = np.full(len(run.steps), -1, dtype=np.int64)
    for i in done:
        if run.steps[i].writes and run.new[i] is not None:
            nums[i] = run.steps[i].num
    buckets = np.array([np.count_nonzero(b) for b in run.bands], dtype=np.int64)
    return placements(run.hits, nums, buckets)


def _clusters_by_step(
    run: Run, clusters: Clusters, final: dict[int, int]
) -> tuple[np.ndarray[tuple[int], np.dtype[np.int64]], np.ndarray[tuple[int], np.dtype[np.int64]]]:
    """By step index: the cluster after the run of each alerting step that wrote and of each step a bucket
    refused (-1: none), and its integer id."""
    cluster_of = np.full(len(run.steps), -1, dtype=np.int64)
    nums = np.zeros(len(run.steps), dtype=np.int64)
    for i, step in clusters.alerting:
        if step.writes:
            cluster_of[i], nums[i] = final[step.num], step.num
    hits = run.hits
    for i in np.unique(hits.write[hits.refused]).tolist():
        if cluster_of[i] < 0:  # refused, alerted nothing: its own cluster, or one a later union made
            num = nums[i] = run.steps[i].num
            cluster_of[i] = final.get(num, num)
    return cluster_of, nums


def _known_members(
    run: Run,
    clusters: Clusters,
    final: dict[int, int],
    cluster_of: np.ndarray[tuple[int], np.dtype[np.int64]],
    roots: list[int],
) -> dict[int, list[int]]:
    """Per cluster root (of ``roots``), the members known to be in it: the ids the alerting documents read
    whose cluster they joined, and the run's documents."""
    known: dict[int, list[int]] = {int(r): [] for r in roots}
    root_of = clusters.roots
    for n in clusters.read:
        if (r := final.get(root_of.get(n, n))) is not None and r in known:
            known[r].append(n)
    for i, s in enumerate(run.steps):
        if s.writes:
            r = int(cluster_of[i]) if cluster_of[i] >= 0 else final.get(root_of.get(s.num, s.num))
            if r is not None and r in known:
                known[r].append(s.num)
    return known
