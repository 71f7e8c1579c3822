"""MinHash signatures from a seeded universal hash family, and one-permutation hashing (pure).

Course material: seeds/001 ("Min-Hashing", universal hashing h_{a,b}(x) = ((a*x + b) mod p) mod N,
the one-pass signature algorithm and its worked example), seeds/004 (MinHash proof).

Hash functions are ``h_i(x) = (a_i * x + b_i) mod p`` with ``p = 2**61 - 1`` (a Mersenne prime). The
product ``a*x`` has up to 122 bits, so it is computed on 32-bit halves and reduced with
``2**61 = 1 (mod p)``: no uint64 overflow (the bug two peers have). A signature keeps, for each i, the
top 32 bits of ``min_x h_i(x)`` over the document's shingles (taking the top bits keeps the order, so
this is the minimum of a 32-bit hash), stored as ``uint32[num_perm]``.

Signatures are computed by compiled loops (:mod:`dedupd.similarity.kernels`, numba, imported on first use). Classic
MinHash's numpy implementation (vectorized over a batch, ``MinHasher._numpy_signatures``) stays here: it
serves hash families over a small prime (the worked example below), and tests compare the kernel with
it; one-permutation hashing's numpy reference is in tests/reference.py.

Worked example (seeds/001): rows 0-4, h1 = x+1 mod 5, h2 = 3x+1 mod 5, S1={0,3}, S2={2}, S3={1,3,4},
S4={0,2,3} give the signature matrix h1: 1 3 0 1, h2: 0 2 0 0:

    >>> fam = HashFamily(np.array([1, 3], np.uint64), np.array([1, 1], np.uint64), 5)
    >>> x = np.array([0, 3, 2, 1, 3, 4, 0, 2, 3], np.uint64)
    >>> minhash_matrix(x, np.array([0, 2, 3, 6, 9]), fam).T.tolist()
    [[1, 3, 0, 1], [0, 2, 0, 0]]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dedupd.errors import ConfigError
from dedupd.similarity.hashing import U64, U64Array

MERSENNE61 = (1 << 61) - 1
_P = U64(MERSENNE61)
_M29 = U64((1 << 29) - 1)
_M32 = U64(0xFFFFFFFF)
SIG_DTYPE = np.dtype("<u4")
EMPTY = 0xFFFFFFFF  # signature value of a document with no shingles
_CHUNK_CELLS = 1 << 21  # shingles x num_perm per vectorized step (bounds temporary memory)


@dataclass(frozen=True, slots=True, eq=False)
class HashFamily:
    """``h_i(x) = (a[i] * x + b[i]) mod prime`` for i in range(len(a))."""

    a: U64Array
    b: U64Array
    prime: int

    def __post_init__(self) -> None:
        if self.a.shape != self.b.shape or self.a.ndim != 1:
            raise ConfigError("hash family: a and b must be 1-D arrays of the same length")
        if self.prime != MERSENNE61 and not 2 <= self.prime < 2**31:
            raise ConfigError("hash family: prime must be 2**61-1 or below 2**31")

    @classmethod
    def seeded(cls, num_perm: int, seed: int) -> HashFamily:
        """``num_perm`` functions with a, b drawn from a seeded generator (a in [1, p), b in [0, p))."""
        if num_perm < 1:
            raise ConfigError("num_perm must be at least 1")
        gen = np.random.Generator(np.random.PCG64(seed))
        a = gen.integers(1, MERSENNE61, size=num_perm, dtype=np.uint64)
        b = gen.integers(0, MERSENNE61, size=num_perm, dtype=np.uint64)
        return cls(a, b, MERSENNE61)

    @property
    def num_perm(self) -> int:
        return int(self.a.shape[0])

    def reduce(self, x: U64Array) -> U64Array:
        """Map arbitrary uint64 values into [0, prime)."""
        if self.prime == MERSENNE61:
            r = (x & _P) + (x >> U64(61))
            return np.where(r >= _P, r - _P, r)
        return x % U64(self.prime)

    def apply(self, x: U64Array) -> U64Array:
        """All hash values: shape (len(x), num_perm), each in [0, prime). ``x`` must be < prime."""
        if self.prime != MERSENNE61:
            return (x[:, None] * self.a[None, :] + self.b[None, :]) % U64(self.prime)
        xh, xl = (x >> U64(32))[:, None], (x & _M32)[:, None]
        ah, al = (self.a >> U64(32))[None, :], (self.a & _M32)[None, :]
        # a*x = ah*xh*2^64 + (ah*xl + al*xh)*2^32 + al*xl, and 2^61 = 1 (mod p) so 2^64 = 8.
        out = (xh * ah) << U64(3)  # < 2^61
        mid = xh * al
        mid += xl * ah  # < 2^62
        out += mid >> U64(29)  # mid*2^32 = (mid>>29)*2^61 + (mid&(2^29-1))*2^32
        mid &= _M29
        mid <<= U64(32)
        out += mid
        lo = xl * al  # < 2^64, exact
        out += (lo & _P) + (lo >> U64(61))
        out += self.b[None, :]  # total < 2^63
        out = (out & _P) + (out >> U64(61))
        out -= np.where(out >= _P, _P, U64(0))
        return out


def minhash_matrix(x: U64Array, offsets: npt.NDArray[np.int64], family: HashFamily) -> U64Array:
    """Minimum hash value per document and hash function (the one-pass algorithm, vectorized).

    Args:
        x: concatenated element values of all documents, each already in [0, prime).
        offsets: document i owns ``x[offsets[i]:offsets[i+1]]``.
        family: the hash functions.

    Returns:
        shape (n_docs, num_perm) uint64; a document with no element gets ``prime`` (infinity).
    """
    n_docs = len(offsets) - 1
    k = family.num_perm
    out = np.full((n_docs, k), U64(family.prime), dtype=np.uint64)
    step = max(1, _CHUNK_CELLS // k)
    doc = 0
    while doc < n_docs:
        # take whole documents until the chunk is full (at least one document)
        end = int(np.searchsorted(offsets, offsets[doc] + step, side="right")) - 1
        end = min(max(end, doc + 1), n_docs)
        lo, hi = int(offsets[doc]), int(offsets[end])
        if hi > lo:
            values = family.apply(x[lo:hi])
            seg = offsets[doc:end] - lo
            nonempty = seg < (hi - lo)
            nonempty &= np.diff(offsets[doc : end + 1]) > 0
            mins = np.minimum.reduceat(values, np.minimum(seg, hi - lo - 1), axis=0)
            out[doc:end][nonempty] = mins[nonempty]
        doc = end
    return out


class MinHasher:
    """Shingle hash sets to packed ``uint32`` signatures."""

    __slots__ = ("family",)

    def __init__(self, num_perm: int, seed: int) -> None:
        self.family = HashFamily.seeded(num_perm, seed)

    @property
    def num_perm(self) -> int:
        return self.family.num_perm

    def signatures(
        self, hashes: U64Array, offsets: npt.NDArray[np.int64], densify: bool = True
    ) -> npt.NDArray[np.uint32]:
        """Signatures of many documents: shape (n_docs, num_perm) uint32 (all ``EMPTY`` for no shingles)."""
        if self.family.prime != MERSENNE61:
            return self._numpy_signatures(hashes, offsets)
        from dedupd.similarity.kernels import classic_signatures

        sig: npt.NDArray[np.uint32] = classic_signatures(
            np.ascontiguousarray(hashes, dtype=np.uint64),
            np.ascontiguousarray(offsets, dtype=np.int64),
            np.ascontiguousarray(self.family.a),
            np.ascontiguousarray(self.family.b),
        )
        return sig

    def _numpy_signatures(self, hashes: U64Array, offsets: npt.NDArray[np.int64]) -> npt.NDArray[np.uint32]:
        """The numpy reference implementation of :meth:`signatures` (any prime)."""
        raw = minhash_matrix(self.family.reduce(hashes), offsets, self.family)
        sig: npt.NDArray[np.uint32] = (raw >> U64(29)).astype(SIG_DTYPE)
        return sig

    def densify(self, raw: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint32]:
        """Classic signatures have no empty position: the identity."""
        return raw

    def signature(self, hashes: U64Array) -> npt.NDArray[np.uint32]:
        """Signature of one document."""
        sigs = self.signatures(hashes, np.array([0, hashes.shape[0]], dtype=np.int64))
        sig: npt.NDArray[np.uint32] = sigs[0]
        return sig


def estimate(sig_a: npt.NDArray[np.uint32], sig_b: npt.NDArray[np.uint32]) -> float:
    """Jaccard estimate: the fraction of positions where two signatures agree.

    Raises:
        ConfigError: when the signatures have different lengths (made with different num_perm).
    """
    if sig_a.shape != sig_b.shape:
        raise ConfigError(
            f"signatures of different lengths ({sig_a.shape[-1]} vs {sig_b.shape[-1]}): "
            "they were made with different num_perm and cannot be compared"
        )
    return float(np.count_nonzero(sig_a == sig_b)) / int(sig_a.shape[-1])


class OnePermHasher:
    """One-permutation hashing with optimal densification (rensa's OptDensMinHash does the same).

    Each shingle is hashed once: the top 32 bits of a seeded 64-bit mix pick one of ``num_perm`` bins,
    the low 32 bits are its value, and each bin keeps its minimum (Li, Owen & Zhang 2012). Empty bins
    borrow the value of a non-empty bin chosen by a fixed probe sequence that depends only on the bin
    and the attempt (Shrivastava 2017), so two documents borrow alike and P[bin agrees] stays the
    Jaccard similarity. Cost: O(shingles + num_perm) per document instead of O(shingles * num_perm).
    """

    __slots__ = ("_keys", "_orders", "_salt", "_table", "num_perm")

    def __init__(self, num_perm: int, seed: int) -> None:
        if num_perm < 1:
            raise ConfigError("num_perm must be at least 1")
        self.num_perm = num_perm
        self._salt = U64(int(HashFamily.seeded(1, seed).a[0]))
        self._table: npt.NDArray[np.int32] | None = None  # densification ranks, made on first use
        self._orders: npt.NDArray[np.uint32] | None = None  # each bin's seeded order of the bins
        self._keys: npt.NDArray[np.uint32] | npt.NDArray[np.uint64] | None = None  # for the kernel

    def signatures(
        self, hashes: U64Array, offsets: npt.NDArray[np.int64], densify: bool = True
    ) -> npt.NDArray[np.uint32]:
        """Signatures of many documents: shape (n_docs, num_perm) uint32 (all ``EMPTY`` for no shingles).

        With ``densify=False`` empty bins stay ``EMPTY``: such raw signatures combine by element-wise
        minimum (an append), and :meth:`densify` then gives the signature of the union.
        """
        from dedupd.similarity.kernels import oph_signatures

        keys, orders, mask, limit = self._kernel_tables()
        sig: npt.NDArray[np.uint32] = oph_signatures(
            np.ascontiguousarray(hashes, dtype=np.uint64),
            np.ascontiguousarray(offsets, dtype=np.int64),
            self._salt,
            self.num_perm,
            keys,
            orders,
            mask,
            limit,
            densify,
        )
        return sig

    def densify(self, raw: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint32]:
        """Fill the empty bins of raw signatures (shape (n, num_perm) or (num_perm,)); returns a new array."""
        from dedupd.similarity.kernels import oph_densify

        sig = np.array(raw, dtype=SIG_DTYPE, ndmin=2, copy=True, order="C")
        keys, orders, mask, limit = self._kernel_tables()
        oph_densify(sig, keys, orders, mask, limit)
        return sig if raw.ndim == 2 else sig[0]

    def _kernel_tables(self) -> tuple[npt.NDArray[np.unsignedinteger], npt.NDArray[np.uint32], int, int]:
        """What the densifying kernel needs: ``keys[i, j] = (rank of bin i in bin j's order + 1) << shift
        | i`` (a bin ranks itself first), each bin's order, the mask of the low ``shift`` bits, and the
        largest number of non-empty bins for which a column minimum over them beats walking the orders."""
        k = self.num_perm
        shift = max(1, (k - 1).bit_length())
        if self._keys is None:
            by_bin = self._ranks()[:k].astype(np.int64)  # by_bin[i, j]: rank of bin i in bin j's order
            keys = ((by_bin + 1) << shift) | np.arange(k, dtype=np.int64)[:, None]
            self._keys = np.ascontiguousarray(
                keys.astype(np.uint32 if int(keys.max()) < 2**32 else np.uint64)
            )
        assert self._orders is not None
        return self._keys, self._orders, (1 << shift) - 1, _scan_limit(k)

    def _ranks(self) -> npt.NDArray[np.int32]:
        """by_bin[i, j]: the position of bin i in bin j's seeded random order of the bins, with every bin
        first in its own order (-1) and one padding row (index num_perm) ranked after every real bin."""
        if self._table is None:
            k = self.num_perm
            gen = np.random.Generator(np.random.PCG64(int(self._salt)))
            orders = np.argsort(gen.random((k, k)), axis=1)
            ranks = np.empty((k, k), dtype=np.int32)
            np.put_along_axis(ranks, orders, np.arange(k, dtype=np.int32)[None, :].repeat(k, 0), axis=1)
            np.fill_diagonal(ranks, -1)
            self._orders = np.ascontiguousarray(orders.astype(np.uint32))
            self._table = np.concatenate([ranks.T, np.full((1, k), k + 1, dtype=np.int32)])
        return self._table

    def signature(self, hashes: U64Array) -> npt.NDArray[np.uint32]:
        """Signature of one document."""
        sigs = self.signatures(hashes, np.array([0, hashes.shape[0]], dtype=np.int64))
        sig: npt.NDArray[np.uint32] = sigs[0]
        return sig


def _scan_limit(k: int) -> int:
    """With at most this many non-empty bins (of k), the densifying kernel takes the column minimum of
    their keys (m * k contiguous steps, ~0.085 ns each with AVX2); with more, it walks each empty bin's
    order (~15 ns per empty bin, mostly a mispredicted branch). Measured break-even: m * k = 176 (k - m),
    m ~ 74 of 128."""
    return max(1, 176 * k // (k + 176))


SCHEMES = ("classic", "oph")


def make_hasher(scheme: str, num_perm: int, seed: int) -> MinHasher | OnePermHasher:
    """The signature scheme by name: ``classic`` (K permutations) or ``oph`` (one permutation)."""
    if scheme == "classic":
        return MinHasher(num_perm, seed)
    if scheme == "oph":
        return OnePermHasher(num_perm, seed)
    raise ConfigError(f"unknown minhash scheme {scheme!r}: use one of {', '.join(SCHEMES)}")
