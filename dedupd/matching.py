"""Verification of LSH candidates: the similarity of each (document, candidate) pair and the verified matches.

Used alike by the daemon's batches (alerts, and verdicts of ``op = query``) and by :meth:`dedupd.Client.query`,
so that a query finds exactly the matches an upsert of the same text would alert.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from dedupd.bounds import Found, pick_candidates, ranked_many
from dedupd.fingerprint import Fingerprint
from dedupd.planner import matches_of
from dedupd.verify import agreement_pairs, jaccard_pairs

if TYPE_CHECKING:
    from dedupd.gateway import Gateway, Packed

__all__ = ["Found", "choose_candidates", "find_matches", "similarities", "verify_candidates"]


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


def choose_candidates(
    gw: Gateway, reads: Mapping[int, tuple[Packed, int]]
) -> tuple[dict[int, set[int]], dict[int, int]]:
    """The candidates to verify, by key, from each key's bucket reads and its own integer id (left out; 0 =
    none): all of them when they are at most ``max_candidates``, else that many, ranked by shared bands with
    every distinct cluster represented (bounds.pick_candidates); and the cluster roots that choice read
    (one lookup for the distinct candidates of the keys over the limit)."""
    limit = gw.bounds.max_candidates
    ranks = ranked_many(reads)
    distinct = list(dict.fromkeys(n for ids in ranks.values() if len(ids) > limit for n in ids))
    root_of = dict(zip(distinct, gw.roots(distinct), strict=True))
    out: dict[int, set[int]] = {}
    for k, ids in ranks.items():
        if ids:
            roots = [root_of[n] for n in ids] if len(ids) > limit else None
            out[k] = set(pick_candidates(ids, roots, limit))
    return out, root_of


def find_matches(
    gw: Gateway, own: Mapping[int, tuple[str, Fingerprint]], candidates: Mapping[int, set[int]]
) -> dict[int, list[Found]]:
    """Verify candidates in one exchange and one compiled call (see :func:`verify_candidates`)."""
    return verify_candidates(gw, own, candidates)[0]


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
