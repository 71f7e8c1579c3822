"""Verification of LSH candidates: the similarity of each (document, candidate) pair and the verified matches.

Used alike by the daemon's batches (alerts, and verdicts of ``op = query``) and by :meth:`dedupd.Client.query`,
so that a query finds exactly the matches an upsert of the same text would alert.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from dedupd.index.protocol import RecordsRead
from dedupd.similarity.bounds import VERIFIED_PER_CLUSTER, pick_many, ranked_flat, split_by
from dedupd.similarity.fingerprint import Fingerprint
from dedupd.similarity.matches import Found, best_first, matches_of
from dedupd.similarity.verify import agreement_pairs, jaccard_pairs

if TYPE_CHECKING:
    from dedupd.index.protocol import Gateway, Packed

__all__ = ["Found", "Verification", "similarities", "verify_candidates", "verify_reads"]

_NO_IDS = np.zeros(0, dtype=np.int64)


def similarities(
    table: Sequence[Fingerprint], left: npt.NDArray[np.int64], right: npt.NDArray[np.int64], verify: str
) -> npt.NDArray[np.float64]:
    """Similarity of each pair of fingerprints ``table[left[i]]``, ``table[right[i]]``: exact Jaccard of the
    shingle sets when ``verify`` is exact and both documents have them, else the signature estimate (pure)."""
    out = np.zeros(left.size, dtype=np.float64)
    if not left.size:
        return out
    has = np.array([fp.shingles.size > 0 for fp in table], dtype=bool)
    use_sets = has[left] & has[right] if verify == "exact" else np.zeros(left.size, dtype=bool)
    if use_sets.any():
        out[use_sets] = jaccard_pairs([fp.shingles for fp in table], left[use_sets], right[use_sets])
    if not use_sets.all():
        sigs = np.stack([fp.signature for fp in table])
        out[~use_sets] = agreement_pairs(sigs, left[~use_sets], right[~use_sets])
    return out


@dataclass(slots=True)
class Verification:
    """What verifying some keys' bucket reads found: by key, the verified matches (best first; keys without
    any left out), the candidates verified and the distinct ids read (ranked); the cluster roots looked up,
    by integer id; and by key, the candidates verified below the threshold but at or above ``2t - 1`` with
    their similarity (near_miss.py)."""

    matches: dict[int, list[Found]] = field(default_factory=dict)
    candidates: dict[int, set[int]] = field(default_factory=dict)
    read: dict[int, list[int]] = field(default_factory=dict)
    roots: dict[int, int] = field(default_factory=dict)
    near: dict[int, dict[int, float]] = field(default_factory=dict)

    def add(self, other: Verification) -> None:
        """Take in the verification of more candidates of the same (or other) keys."""
        for k, found in other.matches.items():
            merged = {m.num: m for m in [*self.matches.get(k, ()), *found]}  # a candidate verified twice once
            self.matches[k] = matches_of(list(merged.values()), 0.0)  # all verified: best first
        for k, picked in other.candidates.items():
            self.candidates[k] = self.candidates.get(k, set()) | picked
        for k, ids in other.read.items():
            self.read[k] = list(dict.fromkeys([*self.read.get(k, ()), *ids]))
        self.roots.update(other.roots)
        for k, sims in other.near.items():
            self.near.setdefault(k, {}).update(sims)


def verify_reads(
    gw: Gateway, own: Mapping[int, tuple[str, Fingerprint]], reads: Mapping[int, tuple[Packed, int]]
) -> Verification:
    """The verified matches of each key's bucket reads (and its own integer id, left out; 0 = none).

    At most ``VERIFIED_PER_CLUSTER`` candidates of each distinct cluster are verified, the best-ranked
    (bounds.pick_many), and at most ``max_candidates`` in all; then, for a cluster none of whose
    verified candidates matched, its next ones (a second exchange, only for those). A flood's copies read
    the same cluster in every bucket: they verify a few of it, not all.
    """
    got = Verification()
    if not reads:
        return got
    got.read, got.roots, got.candidates, unpicked = choose_candidates(gw, reads)
    # the next candidates of a cluster none of whose picked ones matched (a flood's copy, now and then) are
    # among the ids read but not picked: read with the picked ones' records, they are verified without
    # another exchange
    ahead = [n for n in unpicked.tolist() if n not in own]
    got.matches, stored, got.near = verify_candidates(gw, own, got.candidates, ahead)
    more = further_candidates(got, gw.bounds.max_candidates)
    if more:
        found, _, near = verify_candidates(gw, own, more, (), stored)
        got.add(Verification(found, more, near=near))
    return got


def choose_candidates(
    gw: Gateway, reads: Mapping[int, tuple[Packed, int]]
) -> tuple[dict[int, list[int]], dict[int, int], dict[int, set[int]], npt.NDArray[np.int64]]:
    """The distinct ids read by each key (ranked: bounds.ranked_flat), the cluster roots of all of them when
    a key read more than ``VERIFIED_PER_CLUSTER`` (one lookup; the alerts' unions need most of them after),
    the candidates to verify by key (bounds.pick_many), and the ids read that no key picked (sorted) when
    they are at most four times as many as the ids picked (else none: not worth reading ahead)."""
    limit = gw.bounds.max_candidates
    keys, who, ids = ranked_flat(reads)
    listed = ids.tolist()
    ranks = dict(zip(keys, split_by(who, listed, len(keys)), strict=True))
    few = min(limit, VERIFIED_PER_CLUSTER)
    root_of: dict[int, int] = {}
    picked = listed
    unpicked = _NO_IDS
    if ids.size and int(np.bincount(who).max()) > few:  # then every id read (one lookup serves all)
        distinct = np.unique(ids)
        roots = np.array(gw.roots(distinct.tolist()), dtype=np.int64)
        root_of = dict(zip(distinct.tolist(), roots.tolist(), strict=True))
        at = pick_many(
            who,
            roots[np.searchsorted(distinct, ids)],
            limit,
            VERIFIED_PER_CLUSTER,
            gw.bounds.verified_clusters,
        )
        chosen = np.unique(ids[at])
        unpicked = np.setdiff1d(distinct, chosen, assume_unique=True)
        if unpicked.size > 4 * chosen.size:
            unpicked = _NO_IDS
        who, picked = who[at], ids[at].tolist()
    out = {keys[k]: set(c) for k, c in enumerate(split_by(who, picked, len(keys))) if c}
    return ranks, root_of, out, unpicked


def further_candidates(got: Verification, limit: int) -> dict[int, set[int]]:
    """By key, the candidates not yet verified of the clusters none of whose verified candidates matched,
    at most ``limit`` verified in all per key; and of the clusters a key nearly matched (near_miss.py), up to
    ``limit`` more members however many it verified (nearest cluster first, best-ranked first within): a member
    above the threshold in a large cluster of documents just below it is seldom among its cluster's
    best-ranked few. (A batch's own documents are their own clusters until united: a flood's copies have no
    further members to verify.)"""
    out: dict[int, set[int]] = {}
    root = got.roots.get
    for k, ids in got.read.items():
        picked = got.candidates.get(k, set())
        if len(picked) == len(ids):
            continue
        matched = {root(m.num, m.num) for m in got.matches.get(k, ())}
        if matched and matched.issuperset(map(root, ids, ids)):  # (a flood's copy: one cluster, matched)
            continue
        nearest: dict[int, float] = {}
        for n, sim in got.near.get(k, {}).items():
            if (r := got.roots.get(n, n)) not in matched:
                nearest[r] = max(nearest.get(r, 0.0), sim)
        cluster = {n: got.roots.get(n, n) for n in ids if n not in picked}
        rest = [n for n in ids if n in cluster and cluster[n] not in matched]  # (ranked)
        chosen = [n for n in rest if cluster[n] not in nearest][: max(0, limit - len(picked))]
        if nearest:  # the nearly matched clusters' next members: up to ``limit`` more, nearest cluster first
            near = [n for n in rest if cluster[n] in nearest]
            near.sort(key=lambda n: -nearest[cluster[n]])  # (stable: ranked within)
            chosen += near[:limit]
        if chosen:
            out[k] = set(chosen)
    return out


def _pairs(
    keys: list[int], candidates: Mapping[int, set[int]]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The (row, row) pairs to compare: each key with each of its candidates other than itself, both as rows
    of ``keys`` (a key or a candidate not in it is left out).

    >>> [a.tolist() for a in _pairs([4, 9, 2], {9: {4, 9, 5}, 7: {2}})]
    [[1], [0]]
    """
    ks = list(candidates)
    sizes = [len(candidates[k]) for k in ks]
    cand = np.fromiter(chain.from_iterable(candidates[k] for k in ks), dtype=np.int64, count=sum(sizes))
    key = np.repeat(np.array(ks, dtype=np.int64), sizes)
    table = np.array(keys, dtype=np.int64)
    order = np.argsort(table, kind="stable")
    left, right = _rows(table, order, key), _rows(table, order, cand)
    ok = np.flatnonzero((cand != key) & (left >= 0) & (right >= 0))
    return left[ok], right[ok]


def _rows(
    table: npt.NDArray[np.int64], order: npt.NDArray[np.int64], nums: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """The row of each of ``nums`` in ``table`` (``order`` sorts it), -1 for one not in it."""
    if not table.size:
        return np.full(nums.size, -1, dtype=np.int64)
    at = np.minimum(np.searchsorted(table, nums, sorter=order), table.size - 1)
    rows = order[at]
    return np.where(table[rows] == nums, rows, -1)


def verify_candidates(
    gw: Gateway,
    own: Mapping[int, tuple[str, Fingerprint]],
    candidates: Mapping[int, set[int]],
    ahead: Sequence[int] = (),
    held: Mapping[int, bytes | None] | None = None,
) -> tuple[dict[int, list[Found]], dict[int, bytes | None], dict[int, dict[int, float]]]:
    """Verify candidates in one exchange and one compiled call.

    Args:
        gw: the gateway of the generation the candidates come from.
        own: the documents being checked, by key (their integer id; a query uses a negative key), with
            their id and fingerprint; a candidate among them is compared with this fingerprint.
        candidates: by key, the integer ids found in its buckets.
        ahead: ids whose records are read in the same exchange, not decoded (Gateway.read_records).
        held: stored records read a moment ago, taken from here instead of read again.

    Returns:
        By key, the verified matches at or above the index's threshold, best first (keys without any left
        out); the stored bytes this exchange read (``ahead``'s included), to be ``held`` by a later call;
        and by key, the candidates below the threshold but at or above ``2t - 1`` (near misses: near_miss.py)
        with their similarity.
    """
    named: set[int] = set().union(*candidates.values())
    wanted = named - own.keys()
    read = gw.read_records(wanted, ahead, held) if wanted else RecordsRead({}, {})
    others = read.records
    # only the documents some pair names: the checked ones with candidates, and their candidates
    fps = {k: own[k] for k in (named | candidates.keys()) & own.keys()}
    fps.update((n, (rec.doc_id, rec.fingerprint)) for n, rec in others.items() if rec is not None)
    keys = list(fps)
    left, right = _pairs(keys, candidates)
    table = list(fps.values())
    sims = similarities([fp for _, fp in table], left, right, gw.spec.verify)
    by_key: dict[int, list[Found]] = {}
    passed = np.flatnonzero(sims >= gw.spec.threshold)
    for a, c, sim in zip(left[passed].tolist(), right[passed].tolist(), sims[passed].tolist(), strict=True):
        by_key.setdefault(keys[a], []).append(Found(table[c][0], sim, keys[c]))
    for found in by_key.values():  # (all at or above the threshold: matches.matches_of's order, in place)
        if len(found) > 1:
            found.sort(key=best_first)
    near: dict[int, dict[int, float]] = {}
    t = gw.spec.threshold
    close = np.flatnonzero((sims < t) & (sims >= 2 * t - 1))
    for a, c, sim in zip(left[close].tolist(), right[close].tolist(), sims[close].tolist(), strict=True):
        near.setdefault(keys[a], {})[keys[c]] = sim
    return by_key, read.stored, near
