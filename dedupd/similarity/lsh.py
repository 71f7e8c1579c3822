"""LSH banding: parameters, candidate probabilities and band hashes (pure, no Redis).

Course material: seeds/001 ("LSH: bands", the b=20, r=5 table), seeds/003 (AND-OR amplification),
seeds/004 (LSH probabilities, final verification of candidates).

Two documents with Jaccard similarity s become candidates with probability
``P(s) = 1 - (1 - s**r)**b``: all r rows of at least one of the b bands agree. For b=20, r=5:
P(.2)=.006, P(.3)=.047, P(.4)=.186, P(.5)=.470, P(.6)=.802, P(.7)=.975, P(.8)=.9996.

    >>> round(float(candidate_probability(0.5, 20, 5)), 3)
    0.47
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dedupd.errors import ConfigError
from dedupd.similarity.hashing import U64Array, combine

_GRID = np.linspace(0.0, 1.0, 2001)
# Default weights of the banding choice: recall first, because every candidate is verified before an alert
# (an extra candidate costs a check; a missed one is lost). At 0.8/128 they choose 25 x 5.
DEFAULT_FP_WEIGHT = 0.0001
DEFAULT_FN_WEIGHT = 0.9999
# A document of at most this many distinct shingles is also indexed by a prefix of its shingle hashes (one
# more "band" of buckets, numbered ``bands``): its MinHash, a few values copied into most of its 128 bins,
# can agree nowhere with a near-duplicate's (see prefix_length)
SHORT_SHINGLES = 32
# ... below this threshold only. From it on, a tiny set's near-duplicates are nearly the same set (at 0.8 a set
# of at most 4 has none but itself), whose MinHash is the same: LSH finds them, and the prefix would only add
# candidates (the Debian descriptions, median 5 shingles, lose no duplicate without it at 0.8, and it cost them
# about a third more daemon time: 4.96 candidates per document instead of 0.87)
SHORT_BELOW = 0.75


def short_limit(threshold: float) -> int:
    """The most distinct shingles of a document indexed by its shingle prefix at ``threshold`` (0: none).

    >>> short_limit(0.5), short_limit(0.8)
    (32, 0)
    """
    return SHORT_SHINGLES if threshold < SHORT_BELOW else 0


def prefix_length(n: int, threshold: float) -> int:
    """How many of a set's ``n`` elements, the smallest in one global order, index it so that every set with
    Jaccard similarity >= ``threshold`` to it shares one of them (prefix filtering: n - ceil(t * n) + 1).

    Two sets with Jaccard >= t share o >= t * max(|x|, |y|) elements; the smallest shared one has at most o - 1
    after it in either set, so it is among the first |x| - ceil(t |x|) + 1 of x and of y.

    >>> prefix_length(5, 0.8), prefix_length(5, 0.5), prefix_length(1, 0.8)
    (2, 3, 1)
    """
    return n - math.ceil(threshold * n - 1e-9) + 1


def column_bands(width: int, bands: int) -> npt.NDArray[np.int64]:
    """The band of each column of a row of band hashes: the LSH bands, then the short-document prefix, all of
    band ``bands``.

    >>> column_bands(5, 3).tolist()
    [0, 1, 2, 3, 3]
    """
    return np.minimum(np.arange(width, dtype=np.int64), bands)


def left_behind(old: U64Array, new: U64Array) -> U64Array:
    """The band hashes of ``old`` that ``new`` does not hold at the same column (0 elsewhere): the buckets a
    document leaves when it goes from one row to the other (rows may differ in length: a short document's
    shingle prefix).

    >>> left_behind(np.array([1, 2, 3], np.uint64), np.array([1, 5], np.uint64)).tolist()
    [0, 2, 3]
    """
    if not old.size:  # a new document leaves nothing
        return old
    same = min(old.size, new.size)
    out = old.copy()
    out[:same] = np.where(old[:same] != new[:same], old[:same], 0)
    return out


def pad_rows(rows: Sequence[U64Array], width: int = 0) -> U64Array:
    """Rows of band hashes of different lengths as one table, at least ``width`` wide (0 = no hash).

    >>> pad_rows([np.array([1, 2], np.uint64), np.array([3], np.uint64)]).tolist()
    [[1, 2], [3, 0]]
    """
    sizes = np.fromiter((r.size for r in rows), dtype=np.int64, count=len(rows))
    width = max(width, int(sizes.max(initial=0)))
    if not rows:
        return np.zeros((0, width), dtype=np.uint64)
    if sizes.min() == width:  # all full: one copy (np.stack costs a view per row)
        return np.concatenate(rows).reshape(len(rows), width)
    out = np.zeros((len(rows), width), dtype=np.uint64)
    if not sizes.any():  # all empty (the buckets new documents leave)
        return out
    starts = np.cumsum(sizes) - sizes
    at = np.arange(int(sizes.sum()))
    out[np.repeat(np.arange(len(rows)), sizes), at - np.repeat(starts, sizes)] = np.concatenate(rows)
    return out


def candidate_probability(
    s: float | npt.NDArray[np.float64], bands: int, rows: int
) -> npt.NDArray[np.float64]:
    """P(candidate) = 1 - (1 - s^rows)^bands, element-wise."""
    s_arr = np.asarray(s, dtype=np.float64)
    return 1.0 - (1.0 - s_arr**rows) ** bands


def error_rates(threshold: float, bands: int, rows: int) -> tuple[float, float]:
    """Areas of false positives (P below the threshold) and false negatives (1-P above it)."""
    p = candidate_probability(_GRID, bands, rows)
    below = _GRID <= threshold  # noqa: SIM300 (_GRID is the array being compared, not a constant)
    fp = float(np.trapezoid(p[below], _GRID[below]))
    fn = float(np.trapezoid(1.0 - p[~below], _GRID[~below]))
    return fp, fn


@dataclass(frozen=True, slots=True)
class LSHParams:
    """b bands of r rows; only the first ``bands*rows`` signature positions are banded."""

    bands: int
    rows: int

    def __post_init__(self) -> None:
        if self.bands < 1 or self.rows < 1:
            raise ConfigError(f"bands and rows must be positive (got bands={self.bands}, rows={self.rows})")

    def check(self, num_perm: int) -> None:
        """Raise when the banding needs more positions than the signature has."""
        if self.bands * self.rows > num_perm:
            raise ConfigError(
                f"bands*rows = {self.bands}*{self.rows} = {self.bands * self.rows} exceeds num_perm = "
                f"{num_perm}; lower bands or rows, or raise num_perm"
            )

    @classmethod
    def choose(
        cls,
        threshold: float,
        num_perm: int,
        fp_weight: float = DEFAULT_FP_WEIGHT,
        fn_weight: float = DEFAULT_FN_WEIGHT,
    ) -> LSHParams:
        """The banding with the least weighted false-positive + false-negative area.

        Args:
            threshold: Jaccard threshold in (0, 1).
            num_perm: signature length; ``bands*rows <= num_perm``.
            fp_weight, fn_weight: the weights; the defaults favour recall, because candidates are
                verified before any alert (an extra candidate costs a check, a missed one is lost).

        Raises:
            ConfigError: on a threshold outside (0, 1) or num_perm < 1.
        """
        if not 0.0 < threshold < 1.0:
            raise ConfigError(f"threshold must be strictly between 0 and 1 (got {threshold})")
        if num_perm < 1:
            raise ConfigError("num_perm must be at least 1")
        best: tuple[float, int, int] | None = None
        for rows in range(1, num_perm + 1):
            bands = num_perm // rows  # more bands never hurt recall; use every position we can
            fp, fn = error_rates(threshold, bands, rows)
            cost = fp_weight * fp + fn_weight * fn
            if best is None or cost < best[0] - 1e-15:
                best = (cost, bands, rows)
        assert best is not None
        return cls(best[1], best[2])

    def probability(self, s: float) -> float:
        return float(candidate_probability(s, self.bands, self.rows))

    def band_hashes(self, signatures: npt.NDArray[np.uint32]) -> U64Array:
        """Hash each band of each signature: shape (n_docs, bands) uint64.

        Raises:
            ConfigError: when the signatures are shorter than bands*rows.
        """
        self.check(signatures.shape[1])
        n = signatures.shape[0]
        used = signatures[:, : self.bands * self.rows].astype(np.uint64).reshape(n * self.bands, self.rows)
        salts = np.tile(np.arange(self.bands, dtype=np.uint64), n)
        hashed = combine(used) ^ (salts * np.uint64(0x9E3779B97F4A7C15))
        return hashed.reshape(n, self.bands)
