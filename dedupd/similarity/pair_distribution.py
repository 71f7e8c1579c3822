"""How a sample's near pairs are distributed by Jaccard similarity, and what each threshold would catch and
cost on it (pure, no Redis): the report of ``dedupd tune --sample``.

Course material: seeds/001 and seeds/004 (the S-curve ``P(s) = 1 - (1 - s**r)**b`` of b bands of r rows).

The pairs (:mod:`dedupd.similarity.near_pairs`) are counted in bins of similarity (``[0.3, 0.4)`` ...
``[0.9, 1.0]``), each with the pairs at or above its lower end and one example pair. For each candidate
threshold t: the pairs at or above it, the documents in such a pair, the alerts the daemon would write
(one per document with an earlier duplicate in sample order), the banding the daemon would choose for t,
the S-curve's false-negative rate at ``t + 0.05`` (pairs never compared) and false-positive rate at
``t - 0.1`` (candidates verified away), and the bucket bytes a document costs in Redis.

    >>> from dedupd.similarity.near_pairs import near_pairs
    >>> texts = ["a b c d e f g h", "a b c d e f g x", "a b c d x y z w", "q r s t"]
    >>> report = distribution(near_pairs(texts, "word:1"), [0.5, 0.8], num_perm=64)
    >>> [(b.low, b.pairs, b.at_or_above) for b in report.bins if b.pairs]
    [(0.7, 1, 1), (0.4, 1, 2), (0.3, 1, 3)]
    >>> [(t.threshold, t.pairs, t.documents, t.alerts) for t in report.thresholds]
    [(0.5, 1, 2, 1), (0.8, 0, 0, 0)]
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from dedupd.errors import ConfigError
from dedupd.similarity.lsh import (
    DEFAULT_FN_WEIGHT,
    DEFAULT_FP_WEIGHT,
    LSHParams,
    candidate_probability,
    prefix_length,
    short_limit,
)
from dedupd.similarity.near_pairs import NearPairs, miss_probability

LOWEST = 0.3  # the lowest similarity counted (unless the threshold is lower)
BIN_WIDTH = 0.1
# Redis memory of one bucket entry (a document in one band's bucket: the hash field, its packed id and the
# listpack's overhead): 444 bytes for the 25 bands of a Debian package description (README, "Redis memory per
# indexed document")
BUCKET_ENTRY_BYTES = 18


@dataclass(frozen=True, slots=True)
class Example:
    """One pair of documents (their positions in the sample) and its similarity."""

    left: int
    right: int
    jaccard: float


@dataclass(frozen=True, slots=True)
class Bin:
    """The pairs with similarity in ``[low, high)`` (the last bin: ``[low, 1.0]``)."""

    low: float
    high: float
    pairs: int
    at_or_above: int  # pairs with similarity >= low
    example: Example | None  # the bin's median pair


@dataclass(frozen=True, slots=True)
class Threshold:
    """What one threshold would catch in the sample, and what it costs."""

    threshold: float
    pairs: int  # pairs at or above it
    documents: int  # documents in such a pair
    alerts: int  # documents with such a pair with an earlier document (in sample order)
    bands: int  # the banding the daemon would choose for it
    rows: int
    fn_rate: float  # 1 - P(t + 0.05): pairs that far above t never compared
    fp_rate: float  # P(t - 0.1): pairs that far below t compared (and verified away)
    bucket_bytes: float  # bucket memory per document in Redis (its bands, and a short document's prefix)
    configured: bool  # the settings' threshold


@dataclass(frozen=True, slots=True)
class SampleReport:
    """The distribution of a sample's near pairs and the candidate thresholds."""

    documents: int
    without_shingles: int  # documents that can match nothing (an empty text)
    distinct: int  # distinct shingle sets
    identical_pairs: int  # pairs of documents with the same shingle set
    lowest: float  # pairs below it are not counted
    method: str  # how the pairs were found: "all pairs" or "LSH"
    compared: int  # pairs of distinct sets whose similarity was computed
    miss_probability: float  # that the LSH search misses a pair at ``lowest`` (0 for all pairs)
    num_perm: int
    bins: tuple[Bin, ...]
    thresholds: tuple[Threshold, ...]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``dedupd tune --sample FILE --json``)."""
        return asdict(self)


def bin_edges(lowest: float, width: float = BIN_WIDTH) -> list[float]:
    """The bins' lower ends from ``lowest`` on, and 1.0.

    >>> bin_edges(0.3)
    [0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
    """
    if not 0.0 < lowest < 1.0 or width <= 0:
        raise ConfigError(f"the lowest similarity must be in (0, 1) (got {lowest})")
    n = int(np.ceil((1.0 - lowest) / width - 1e-9))
    return [round(lowest + k * width, 6) for k in range(n)] + [1.0]


def distribution(
    pairs: NearPairs,
    thresholds: Sequence[float],
    num_perm: int,
    fp_weight: float = DEFAULT_FP_WEIGHT,
    fn_weight: float = DEFAULT_FN_WEIGHT,
    configured: float | None = None,
) -> SampleReport:
    """The report of a sample's near pairs (see the module docstring).

    Args:
        pairs: the sample's near pairs.
        thresholds: the candidate thresholds, each at least ``pairs.lowest``.
        num_perm: the MinHash length the bandings are chosen for.
        fp_weight, fn_weight: the banding chooser's weights (settings).
        configured: the settings' threshold, marked among ``thresholds``.

    Raises:
        ConfigError: on a threshold below ``pairs.lowest`` (its pairs are not all counted) or not in (0, 1).
    """
    edges = bin_edges(pairs.lowest)
    weights = pairs.weights
    sims = pairs.jaccard
    bins = []
    for low, high in itertools.pairwise(edges):
        last = high == 1.0
        inside = np.flatnonzero((sims >= low) & ((sims <= high) if last else (sims < high)))
        bins.append(
            Bin(
                low, high, int(weights[inside].sum()), int(weights[sims >= low].sum()), _median(pairs, inside)
            )
        )
    rows = [_threshold(pairs, t, num_perm, fp_weight, fn_weight, t == configured) for t in sorted(thresholds)]
    within = pairs.left == pairs.right
    return SampleReport(
        pairs.documents,
        int((pairs.group_of < 0).sum()),
        int(pairs.firsts.size),
        int(weights[within].sum()),
        pairs.lowest,
        pairs.method,
        pairs.compared,
        miss_probability(pairs.lowest) if pairs.method == "LSH" else 0.0,
        num_perm,
        tuple(reversed(bins)),
        tuple(rows),
    )


def _median(pairs: NearPairs, inside: np.ndarray[Any, np.dtype[np.int64]]) -> Example | None:
    """The median pair (by similarity, then by position) of ``inside``, as two documents."""
    if not inside.size:
        return None
    chosen = int(inside[np.lexsort((inside, pairs.jaccard[inside]))[inside.size // 2]])
    left, right = pairs.documents_of(int(pairs.left[chosen]), int(pairs.right[chosen]))
    return Example(left, right, float(pairs.jaccard[chosen]))


def _threshold(
    pairs: NearPairs, t: float, num_perm: int, fp_weight: float, fn_weight: float, configured: bool
) -> Threshold:
    """What threshold ``t`` catches in the sample and costs."""
    if not 0.0 < t < 1.0:
        raise ConfigError(f"a threshold must be between 0 and 1, exclusive (got {t})")
    if t < pairs.lowest - 1e-12:
        raise ConfigError(f"threshold {t:g} is below {pairs.lowest:g}, the lowest similarity counted")
    caught = np.flatnonzero(pairs.jaccard >= t)
    left, right = pairs.left[caught], pairs.right[caught]
    groups = np.unique(np.concatenate([left, right]))
    # per group: the first document of the earliest group it is paired with (itself, for its own copies)
    earliest = np.full(pairs.firsts.size, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(earliest, left, pairs.firsts[right])
    np.minimum.at(earliest, right, pairs.firsts[left])
    docs = np.flatnonzero(pairs.group_of >= 0)
    alerts = int((earliest[pairs.group_of[docs]] < docs).sum())
    lsh = LSHParams.choose(t, num_perm, fp_weight, fn_weight)
    return Threshold(
        t,
        int(pairs.weights[caught].sum()),
        int(pairs.sizes[groups].sum()),
        alerts,
        lsh.bands,
        lsh.rows,
        1.0 - float(candidate_probability(min(t + 0.05, 1.0), lsh.bands, lsh.rows)),
        float(candidate_probability(max(t - 0.1, 0.0), lsh.bands, lsh.rows)),
        bucket_entries(pairs, t, lsh.bands) * BUCKET_ENTRY_BYTES,
        configured,
    )


def bucket_entries(pairs: NearPairs, t: float, bands: int) -> float:
    """The bucket entries an indexed document of the sample has on average at threshold ``t``: one per band,
    and below threshold 0.75 a short document's shingle prefix too (fingerprint.band_hashes); a document
    without shingles has none.

    >>> from dedupd.similarity.near_pairs import near_pairs
    >>> sample = near_pairs(["a b c", "d e f g h i"], "word:1")  # 3 and 6 shingles: prefixes of 2 and 4 at 0.5
    >>> bucket_entries(sample, 0.8, 25), bucket_entries(sample, 0.5, 25)
    (25.0, 28.0)
    """
    n = pairs.n_shingles[pairs.n_shingles > 0]
    if not n.size:
        return 0.0
    short = n[n <= short_limit(t)]
    prefixes = sum(prefix_length(int(k), t) for k in short.tolist())
    return bands + prefixes / n.size
