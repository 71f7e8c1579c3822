"""The near miss: a document that nearly matched a cluster is verified against more of the cluster's members.

A bucket keeps a few members of each cluster (bounds.py), so a document can read only members of a cluster
that are not its duplicates while its duplicate, an older member, has left every bucket it shares (a star's
base, pushed out by its variants; a victim pushed out by a crowd of its near-copies). Each cluster keeps its
most matched members as its representatives (unionfind.py, ``Keys.uf_reps``).

A *near miss*: a document verified members of a cluster, none at or above the threshold ``t``, the best at
or above ``2t - 1``. Jaccard distance ``1 - J`` is a metric, so if the document D is at ``>= t`` to a member
X and a member Y is at ``>= t`` to X, then ``1 - J(D, Y) <= (1 - t) + (1 - t)``: D is at ``>= 2t - 1`` to Y.
Every member read of a cluster one of whose members D duplicates, and that is itself within ``t`` of that
member, is therefore a near miss. D is then verified, for its ``near_miss_clusters`` nearest near-missed
clusters (by their best similarity) that have two members or more (a document of D's own batch is a cluster
of its own until the batch's unions: it takes no place), against their representatives, their root (the
oldest member) and the first ``near_miss_members`` nodes of their ring after the root, the most recently
joined first (every member of a cluster of up to ``near_miss_members + 1``; a deleted document's node that
holds its cluster together counts, with no record to verify); those it did not verify already. At most
``near_miss_clusters x (representatives + 1 + near_miss_members)`` more verifications per document (the
records mostly read once per batch), in at most four more exchanges per batch for all its documents (the
roots not known yet, the representatives with the first ``INLINE_WALK`` nodes of each ring, the walks of the
chosen clusters larger than that, the records), none for a batch without a near miss. A member so found is a
match like any: alerted, unioned, counted. (Before the walk a document near only a middle member of a large
family, which no bucket keeps and which is rarely the best match of anything, was lost: the Debian long
descriptions at 0.5 lost -dev/-doc/-prof triples this way.)

    >>> nearest({7: 0.7, 8: 0.65, 9: 0.75, 4: 0.9}, {7: 1, 8: 2, 9: 1, 4: 3}, {3}, 4)
    [1, 2]
"""

from __future__ import annotations

from collections.abc import Mapping

from dedupd.index.matching import Verification, verify_candidates
from dedupd.index.protocol import ClusterReps, Gateway
from dedupd.similarity.fingerprint import Fingerprint

__all__ = ["INLINE_WALK", "first_clusters", "near_misses", "nearest"]

# the ring nodes listed with every near-missed cluster's representatives: a cluster of up to INLINE_WALK + 1
# members (most of them) is walked whole in the first call, with no second one for the clusters chosen
INLINE_WALK = 8


def nearest(sims: Mapping[int, float], root_of: Mapping[int, int], matched: set[int], most: int) -> list[int]:
    """The roots of the ``most`` clusters nearest by their best near-miss similarity in ``sims`` (candidate
    -> similarity; each candidate's root in ``root_of``, itself when absent), those in ``matched`` left out;
    ties: the older (smaller) root first."""
    best: dict[int, float] = {}
    for n, sim in sims.items():
        r = root_of.get(n, n)
        if r not in matched and sim > best.get(r, -1.0):
            best[r] = sim
    return sorted(best, key=lambda r: (-best[r], r))[:most]


def first_clusters(roots: list[int], reps: Mapping[int, ClusterReps], most: int) -> list[ClusterReps]:
    """The first ``most`` of the clusters of ``roots`` (nearest first) that have two members or more (some
    representatives, or a ring).

    >>> reps = {1: ClusterReps(1, [], False, []), 2: ClusterReps(2, [], True, []), 3: ClusterReps(3, [5], False, [])}
    >>> [c.root for c in first_clusters([1, 2, 3], reps, 1)], [c.root for c in first_clusters([1, 3, 2], reps, 4)]
    ([2], [3, 2])
    """
    out: list[ClusterReps] = []
    for r in roots:
        if (c := reps[r]).members or c.ring:
            out.append(c)
            if len(out) == most:
                break
    return out


def near_misses(
    gw: Gateway,
    own: Mapping[int, tuple[str, Fingerprint]],
    got: Verification,
    selves: Mapping[int, int],
) -> Verification:
    """The matches among the representatives, the root and the walked members of each key's nearest
    near-missed clusters (see the module docstring), not verified before.

    Args:
        gw: the gateway of the serving generation.
        own: the documents being checked, by key, with their id and fingerprint (matching.verify_candidates).
        got: what verifying their reads found (its ``near``: the near misses, by key).
        selves: by key, its own integer id (a query with an indexed document's id): never its candidate.

    Returns:
        The verified matches, the members verified by key, and the roots of the matched ones.
    """
    most, kept = gw.bounds.near_miss_clusters, gw.bounds.representatives
    if most < 1 or (kept < 1 and gw.bounds.near_miss_members < 1) or not got.near:
        return Verification()
    roots = got.roots
    matched_of = {k: [m.num for m in found] for k, found in got.matches.items() if k in got.near}
    wanted = {n for k, sims in got.near.items() for n in [*sims, *matched_of.get(k, ())]} - roots.keys()
    if wanted:
        ordered = sorted(wanted)
        roots = {**roots, **dict(zip(ordered, gw.roots(ordered), strict=True))}
    ranked = {  # (every near-missed cluster: at most as many as the candidates verified)
        k: near_roots
        for k, sims in got.near.items()
        if (near_roots := nearest(sims, roots, {roots.get(m, m) for m in matched_of.get(k, ())}, len(sims)))
    }
    if not ranked:
        return Verification()
    asked = sorted({r for rs in ranked.values() for r in rs})
    ring = gw.bounds.near_miss_members
    reps = dict(zip(asked, gw.representatives(asked, min(ring, INLINE_WALK)), strict=True))
    chosen = {k: first_clusters(rs, reps, most) for k, rs in ranked.items()}
    walked = {c.root: c.walked for cs in chosen.values() for c in cs}
    if ring > INLINE_WALK:  # only the clusters chosen and not walked whole: most x ring nodes per document
        walk = sorted({c.root for cs in chosen.values() for c in cs if c.ring and not c.whole})
        if walk:
            walked.update((r, c.walked) for r, c in zip(walk, gw.representatives(walk, ring), strict=True))
    candidates: dict[int, set[int]] = {}
    root_now: dict[int, int] = {}
    for k, cs in chosen.items():
        seen, skip = got.candidates.get(k, set()), {k, selves.get(k, k)}
        for c in cs:
            for m in [*c.members[:kept], c.root, *walked.get(c.root, ())]:
                if m not in seen and m not in skip:
                    candidates.setdefault(k, set()).add(m)
                    root_now[m] = c.root
    if not candidates:
        return Verification()
    found, _, _ = verify_candidates(gw, own, candidates)
    matched = {m.num for ms in found.values() for m in ms}
    return Verification(found, candidates, roots={m: root_now[m] for m in matched})
