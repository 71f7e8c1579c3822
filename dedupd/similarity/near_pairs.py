"""The near pairs of a sample of documents: every pair at or above a low Jaccard similarity, with its exact
similarity (pure, no Redis). What ``dedupd tune --sample`` counts.

Course material: seeds/001 (k-shingles, Jaccard similarity, LSH bands), seeds/004 (candidates, then the final
verification of each candidate).

The documents are fingerprinted as the daemon fingerprints them (:class:`~dedupd.similarity.fingerprint.
Fingerprinter`: the same normalisation and shingling) and a pair's similarity is the exact Jaccard of their
distinct shingle fingerprint sets, the measure of the daemon's exact verification. Documents with the same
set are one *group* (ten thousand copies of a text cost one document): two members of a group are a pair at
1.0, and a pair of groups stands for every pair of their members. The pairs of groups are found

- by comparing every pair, for a sample of at most :data:`ALL_PAIRS_MAX` distinct sets;
- else by LSH candidates at the low threshold: classic MinHash of :data:`CANDIDATE_PERM` permutations cut
  into bands of :data:`CANDIDATE_ROWS` rows, so that a pair at 0.3 shares no band with probability
  ``(1 - 0.3**2) ** 128``, 5.7e-6 (:func:`miss_probability`), and a pair any nearer even less; every
  candidate is then verified exactly, so a pair counted is never a false one.

    >>> texts = ["the cat sat on the mat", "the cat sat on the mat", "the cat sat on a mat", "dogs bark"]
    >>> pairs = near_pairs(texts, "word:2", lowest=0.3)
    >>> pairs.method, pairs.group_of.tolist(), pairs.sizes.tolist()
    ('all pairs', [0, 0, 1, 2], [2, 1, 1])
    >>> [(int(a), int(b), round(float(j), 3)) for a, b, j in zip(pairs.left, pairs.right, pairs.jaccard)]
    [(0, 0, 1.0), (0, 1, 0.429)]
    >>> pairs.weights.tolist()  # two copies of the first text: 1 pair of them, 2 pairs with the third text
    [1, 2]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dedupd.errors import DedupdError
from dedupd.similarity.fingerprint import Fingerprinter
from dedupd.similarity.lsh import candidate_probability
from dedupd.similarity.spec import IndexSpec
from dedupd.similarity.verify import jaccard_pairs

Progress = Callable[[str, int, int | None], None]  # (phase, done, total)
Ints = npt.NDArray[np.int64]

ALL_PAIRS_MAX = (
    1000  # distinct shingle sets compared pair by pair (half a million pairs, ~0.5 s) rather than by LSH
)
CANDIDATE_PERM = 256  # MinHash length of the candidate search
CANDIDATE_ROWS = 2  # rows per band of the candidate search (bands: CANDIDATE_PERM // CANDIDATE_ROWS)
MAX_CANDIDATES = 20_000_000  # distinct candidate pairs at most (160 MB of pair keys)
_FINGERPRINT_CHUNK = 2000  # documents fingerprinted per call
_VERIFY_CHUNK = 1_000_000  # pairs verified per call


class TooManyPairsError(DedupdError):
    """The sample holds more candidate pairs than :data:`MAX_CANDIDATES` (a flood of near copies)."""


def miss_probability(similarity: float) -> float:
    """The probability that the LSH candidate search misses a pair of this Jaccard similarity.

    >>> f"{miss_probability(0.3):.1e}", miss_probability(1.0)
    ('5.7e-06', 0.0)
    """
    bands = CANDIDATE_PERM // CANDIDATE_ROWS
    return float(1.0 - candidate_probability(similarity, bands, CANDIDATE_ROWS))


@dataclass(frozen=True, slots=True, eq=False)
class NearPairs:
    """The pairs of a sample at or above ``lowest``, between groups of documents with the same shingle set.

    Groups are numbered in the order of their first document; a document without any shingle (an empty
    text: never matched) is in none (-1). ``left[p] <= right[p]`` are groups; ``left[p] == right[p]`` stands
    for the pairs of one group's members (similarity 1.0)."""

    lowest: float
    group_of: Ints  # per document: its group, -1 for a document without shingles
    firsts: Ints  # per group: its first document
    sizes: Ints  # per group: how many documents it has
    n_shingles: Ints  # per document: its distinct shingles
    left: Ints
    right: Ints
    jaccard: npt.NDArray[np.float64]
    method: str  # "all pairs" or "LSH"
    compared: int  # group pairs whose similarity was computed

    @property
    def documents(self) -> int:
        return int(self.group_of.size)

    @property
    def weights(self) -> Ints:
        """How many document pairs each pair stands for: |A| x |B|, or |A| (|A| - 1) / 2 within a group."""
        a, b = self.sizes[self.left], self.sizes[self.right]
        within: Ints = a * (a - 1) // 2
        return np.where(self.left == self.right, within, a * b)

    def documents_of(self, left: int, right: int) -> tuple[int, int]:
        """A pair of documents that pair ``(left, right)`` stands for: the groups' first documents (two
        members when ``left == right``)."""
        if left != right:
            return int(self.firsts[left]), int(self.firsts[right])
        members = np.flatnonzero(self.group_of == left)
        return int(members[0]), int(members[1])


def near_pairs(
    texts: Sequence[str],
    shingle: str,
    lowest: float = 0.3,
    *,
    seed: int = 1,
    method: str = "auto",
    progress: Progress | None = None,
) -> NearPairs:
    """Every pair of ``texts`` at or above Jaccard ``lowest`` under ``shingle``, with its exact similarity.

    Args:
        texts: the documents.
        shingle: ``word:K`` or ``char:K``.
        lowest: the least similarity kept, in (0, 1).
        seed: the MinHash seed of the LSH candidate search (the similarities do not depend on it).
        method: ``all pairs``, ``LSH``, or ``auto`` (all pairs for at most :data:`ALL_PAIRS_MAX` distinct
            shingle sets).
        progress: called with (phase, done, total) as the work goes on.

    Returns:
        The pairs, by group (see :class:`NearPairs`).

    Raises:
        ConfigError: on a bad ``shingle`` or ``lowest``.
        TooManyPairsError: when the candidates exceed :data:`MAX_CANDIDATES`.
    """
    bands = CANDIDATE_PERM // CANDIDATE_ROWS
    spec = IndexSpec(
        shingle, CANDIDATE_PERM, seed, bands, CANDIDATE_ROWS, minhash="classic", threshold=lowest
    )
    report = progress or _quiet
    sets, signatures = _fingerprints(Fingerprinter(spec), texts, report)
    n_shingles = np.fromiter((s.size for s in sets), dtype=np.int64, count=len(sets))
    group_of, firsts = _groups(sets)
    sizes = np.bincount(group_of[group_of >= 0], minlength=firsts.size).astype(np.int64)
    reps = [sets[i] for i in firsts.tolist()]
    if method == "auto":
        method = "all pairs" if firsts.size <= ALL_PAIRS_MAX else "LSH"
    if method == "all pairs":
        left, right = (a.astype(np.int64) for a in np.triu_indices(firsts.size, 1))
    elif method == "LSH":
        left, right = lsh_candidates(spec.lsh.band_hashes(signatures[firsts]), report)
    else:
        raise ValueError(f"unknown method {method!r}")
    sims = _verified(reps, left, right, report)
    keep = np.flatnonzero(sims >= lowest)
    same = np.flatnonzero(sizes > 1)
    return NearPairs(
        lowest,
        group_of,
        firsts,
        sizes,
        n_shingles,
        np.concatenate([same, left[keep]]),
        np.concatenate([same, right[keep]]),
        np.concatenate([np.ones(same.size), sims[keep]]),
        method,
        int(left.size),
    )


def _quiet(phase: str, done: int, total: int | None) -> None:
    """Progress that says nothing."""


def _fingerprints(
    fingerprinter: Fingerprinter, texts: Sequence[str], report: Progress
) -> tuple[list[npt.NDArray[np.uint32]], npt.NDArray[np.uint32]]:
    """Each text's distinct shingle fingerprints, and the signatures (one row per text)."""
    sets: list[npt.NDArray[np.uint32]] = []
    rows: list[npt.NDArray[np.uint32]] = []
    for at in range(0, len(texts), _FINGERPRINT_CHUNK):
        fps = fingerprinter.compute(list(texts[at : at + _FINGERPRINT_CHUNK]))
        sets += [fp.shingles for fp in fps]
        rows += [fp.signature for fp in fps]
        report("fingerprinting", len(sets), len(texts))
    width = fingerprinter.spec.num_perm
    return sets, np.stack(rows) if rows else np.zeros((0, width), dtype=np.uint32)


def _groups(sets: Sequence[npt.NDArray[np.uint32]]) -> tuple[Ints, Ints]:
    """Each set's group (equal sets share one; an empty set has none: -1) and each group's first set."""
    group_of = np.full(len(sets), -1, dtype=np.int64)
    first_of: dict[bytes, int] = {}
    firsts: list[int] = []
    for i, s in enumerate(sets):
        if not s.size:
            continue
        g = first_of.setdefault(s.tobytes(), len(firsts))
        if g == len(firsts):
            firsts.append(i)
        group_of[i] = g
    return group_of, np.array(firsts, dtype=np.int64)


def lsh_candidates(band_hashes: npt.NDArray[np.uint64], report: Progress = _quiet) -> tuple[Ints, Ints]:
    """The distinct pairs of rows ``(a, b)``, ``a < b``, that agree in at least one column (band).

    Every column is sorted once; a run of m equal hashes gives its m (m - 1) / 2 pairs, made a distance
    at a time (all the runs' neighbours at distance 1, then 2, ...), so the work is the number of pairs.

    >>> h = np.array([[1, 7], [1, 8], [2, 8], [1, 9]], dtype=np.uint64)
    >>> [a.tolist() for a in lsh_candidates(h)]
    [[0, 0, 1, 1], [1, 3, 2, 3]]

    Raises:
        TooManyPairsError: when there are more than :data:`MAX_CANDIDATES`.
    """
    n = band_hashes.shape[0]
    if n < 2:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order = np.argsort(band_hashes, axis=0)  # each band sorted: column-major, one band after the other
    docs = order.T.ravel().astype(np.int64)
    flat = np.take_along_axis(band_hashes, order, axis=0).T.ravel()
    new_run = np.ones(flat.size, dtype=bool)
    new_run[1:] = flat[1:] != flat[:-1]
    new_run[::n] = True  # a band's first row starts a run
    starts = np.flatnonzero(new_run)
    lengths = np.diff(np.append(starts, flat.size))
    end = np.repeat(starts + lengths, lengths)  # per position: where its run ends
    at = np.flatnonzero(end - np.arange(flat.size) > 1)  # positions with a later one in their run
    found: list[Ints] = []
    pending: list[Ints] = []
    held = distance = 0
    while at.size:
        distance += 1
        a, b = docs[at], docs[at + distance]
        pending.append(np.minimum(a, b) * n + np.maximum(a, b))
        held += a.size
        if held > MAX_CANDIDATES:  # (the same pair comes from many bands: keep them distinct)
            found = [np.unique(np.concatenate(found + pending))]
            pending, held = [], int(found[0].size)
            if held > MAX_CANDIDATES:
                raise TooManyPairsError(_too_many())
        at = at[end[at] > at + distance + 1]
        report("finding candidate pairs", distance, None)
    keys = np.unique(np.concatenate(found + pending)) if found or pending else np.zeros(0, np.int64)
    if keys.size > MAX_CANDIDATES:
        raise TooManyPairsError(_too_many())
    return keys // n, keys % n


def _too_many() -> str:
    return (
        f"the sample holds more than {MAX_CANDIDATES:,} pairs of documents that look alike (a flood of near "
        "copies?): sample fewer documents with --limit"
    )


def _verified(
    sets: Sequence[npt.NDArray[np.uint32]], left: Ints, right: Ints, report: Progress
) -> npt.NDArray[np.float64]:
    """The exact Jaccard similarity of each pair, in chunks (with progress)."""
    out = np.zeros(left.size, dtype=np.float64)
    for at in range(0, left.size, _VERIFY_CHUNK):
        stop = min(at + _VERIFY_CHUNK, left.size)
        out[at:stop] = jaccard_pairs(sets, left[at:stop], right[at:stop])
        report("comparing pairs", stop, int(left.size))
    return out
