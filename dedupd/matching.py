"""Verification of LSH candidates: the similarity of each (document, candidate) pair and the verified matches.

Used alike by the daemon's batches (alerts, and verdicts of ``op = query``) and by :meth:`dedupd.Client.query`,
so that a query finds exactly the matches an upsert of the same text would alert.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from dedupd.bounds import VERIFIED_PER_CLUSTER, Found, pick_candidates, ranked_many
from dedupd.fingerprint import Fingerprint
from dedupd.planner import matches_of
from dedupd.verify import agreement_pairs, jaccard_pairs

if TYPE_CHECKING:
    from dedupd.gateway import Gateway, Packed

__all__ = ["Found", "Verification", "similarities", "verify_candidates", "verify_reads"]


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
    any left out), the candidates verified and the distinct ids read (ranked); the fingerprint of every
    document a pair named, by key; the cluster roots looked up, by integer id."""

    matches: dict[int, list[Found]] = field(default_factory=dict)
    fingerprints: dict[int, Fingerprint] = field(default_factory=dict)
    candidates: dict[int, set[int]] = field(default_factory=dict)
    read: dict[int, list[int]] = field(default_factory=dict)
    roots: dict[int, int] = field(default_factory=dict)

    def add(self, other: Verification) -> None:
        """Take in the verification of more candidates of the same (or other) keys."""
        for k, found in other.matches.items():
            merged = {m[2]: m for m in [*self.matches.get(k, ()), *found]}  # a candidate verified twice once
            self.matches[k] = matches_of(list(merged.values()), 0.0)  # all verified: best first
        self.fingerprints.update(other.fingerprints)
        for k, picked in other.candidates.items():
            self.candidates[k] = self.candidates.get(k, set()) | picked
        for k, ids in other.read.items():
            self.read[k] = list(dict.fromkeys([*self.read.get(k, ()), *ids]))
        self.roots.update(other.roots)


def verify_reads(
    gw: Gateway, own: Mapping[int, tuple[str, Fingerprint]], reads: Mapping[int, tuple[Packed, int]]
) -> Verification:
    """The verified matches of each key's bucket reads (and its own integer id, left out; 0 = none).

    At most ``VERIFIED_PER_CLUSTER`` candidates of each distinct cluster are verified, the best-ranked
    (bounds.pick_candidates), and at most ``max_candidates`` in all; then, for a cluster none of whose
    verified candidates matched, its next ones (a second exchange, only for those). A flood's copies read
    the same cluster in every bucket: they verify a few of it, not all.
    """
    got = Verification()
    if not reads:
        return got
    got.read, got.roots, got.candidates = choose_candidates(gw, reads)
    got.matches, got.fingerprints = verify_candidates(gw, own, got.candidates)
    more = further_candidates(got, gw.bounds.max_candidates)
    if more:
        found, fps = verify_candidates(gw, own, more)
        got.add(Verification(found, fps, more))
    return got


def choose_candidates(
    gw: Gateway, reads: Mapping[int, tuple[Packed, int]]
) -> tuple[dict[int, list[int]], dict[int, int], dict[int, set[int]]]:
    """The distinct ids read by each key (ranked: bounds.ranked_many), the cluster roots of all of them when
    a key read more than ``VERIFIED_PER_CLUSTER`` (one lookup; the alerts' unions need most of them after),
    and the candidates to verify by key (bounds.pick_candidates)."""
    limit = gw.bounds.max_candidates
    ranks = ranked_many(reads)
    few = min(limit, VERIFIED_PER_CLUSTER)
    crowded = any(len(ids) > few for ids in ranks.values())  # then every id read (one lookup serves all)
    distinct = list(dict.fromkeys(n for ids in ranks.values() for n in ids)) if crowded else []
    root_of = dict(zip(distinct, gw.roots(distinct), strict=True))
    out: dict[int, set[int]] = {}
    for k, ids in ranks.items():
        if ids:
            roots = [root_of[n] for n in ids] if len(ids) > few else None
            out[k] = set(pick_candidates(ids, roots, limit, VERIFIED_PER_CLUSTER))
    return ranks, root_of, out


def further_candidates(got: Verification, limit: int) -> dict[int, set[int]]:
    """By key, the candidates not yet verified of the clusters none of whose verified candidates matched
    (best-ranked first, at most ``limit`` verified in all per key)."""
    out: dict[int, set[int]] = {}
    for k, ids in got.read.items():
        picked = got.candidates.get(k, set())
        if len(picked) == len(ids) or len(picked) >= limit:
            continue
        matched = {got.roots.get(m[2], m[2]) for m in got.matches.get(k, ())}
        rest = [n for n in ids if n not in picked and got.roots.get(n, n) not in matched]
        if rest:
            out[k] = set(rest[: limit - len(picked)])
    return out


def verify_candidates(
    gw: Gateway, own: Mapping[int, tuple[str, Fingerprint]], candidates: Mapping[int, set[int]]
) -> tuple[dict[int, list[Found]], dict[int, Fingerprint]]:
    """Verify candidates in one exchange and one compiled call.

    Args:
        gw: the gateway of the generation the candidates come from.
        own: the documents being checked, by key (their integer id; a query uses a negative key), with
            their id and fingerprint; a candidate among them is compared with this fingerprint.
        candidates: by key, the integer ids found in its buckets.

    Returns:
        By key, the verified matches at or above the index's threshold, best first (keys without any left
        out); and the fingerprint of every document a pair named, by key.
    """
    named = {c for found in candidates.values() for c in found}
    wanted = named - own.keys()
    others = gw.load_records(wanted) if wanted else {}
    # only the documents some pair names: the checked ones with candidates, and their candidates
    fps = {k: own[k] for k in (named | candidates.keys()) & own.keys()}
    fps.update((n, (rec.doc_id, rec.fingerprint)) for n, rec in others.items() if rec is not None)
    rows = {n: i for i, n in enumerate(fps)}
    left: list[int] = []
    right: list[int] = []
    for k, found in candidates.items():
        at = rows.get(k)
        if at is None:
            continue
        for c in found:
            if c != k and (other := rows.get(c)) is not None:
                left.append(at)
                right.append(other)
    table = list(fps.values())
    sims = similarities(
        [fp for _, fp in table],
        np.array(left, dtype=np.int64),
        np.array(right, dtype=np.int64),
        gw.spec.verify,
    )
    keys = list(fps)
    by_key: dict[int, list[Found]] = {}
    passed = np.flatnonzero(sims >= gw.spec.threshold)
    for at, sim in zip(passed.tolist(), sims[passed].tolist(), strict=True):
        c = right[at]
        by_key.setdefault(keys[left[at]], []).append((table[c][0], sim, keys[c]))
    out = {k: matches_of(found, gw.spec.threshold) for k, found in by_key.items()}
    return out, {k: fp for k, (_, fp) in fps.items()}
