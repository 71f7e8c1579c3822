"""Fingerprints: text to shingle set, MinHash signature and LSH band hashes, for a batch (pure).

An append updates a fingerprint incrementally: the new chunk's shingles, including the ones that span
the boundary (formed from the stored last k-1 units), are MinHashed and combined with the old
signature by element-wise minimum (seeds/001: the signature of a union is the element-wise minimum).
Appending ``chunk`` makes the document ``old + "\\n" + chunk``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dedupd.similarity.hashing import U64Array, fmix64
from dedupd.similarity.lsh import prefix_length, short_limit
from dedupd.similarity.minhash import EMPTY, make_hasher
from dedupd.similarity.shingling import Shingler, distinct32, distinct64, normalize
from dedupd.similarity.spec import IndexSpec


@dataclass(frozen=True, slots=True, eq=False)
class Fingerprint:
    """What the index keeps of a document."""

    shingles: npt.NDArray[np.uint32]  # sorted distinct 32-bit shingle fingerprints (empty if not kept)
    signature: npt.NDArray[np.uint32]  # what bands and estimates use
    tail: str  # last k-1 units, for appends
    n_units: int
    raw: npt.NDArray[np.uint32]  # before densification (== signature for classic MinHash); stored
    # sorted distinct 64-bit shingle hashes of a short document (None for a long one): stored instead of
    # ``raw`` and ``shingles`` when that is smaller (both are recomputed from them)
    hashes: U64Array | None = None

    @property
    def empty(self) -> bool:
        """A document with no shingle is stored but never banded nor matched."""
        sig = self.signature
        return int(sig[0]) == EMPTY and bool(
            np.all(sig == EMPTY)
        )  # one scalar test for nearly every document


@dataclass(frozen=True, slots=True)
class AppendTo:
    """An append request: the document's stored fingerprint and the new chunk."""

    old: Fingerprint
    chunk: str


class Fingerprinter:
    """Computes fingerprints and band hashes under one IndexSpec."""

    __slots__ = ("keep_shingles", "lsh", "minhasher", "shingler", "small", "spec")

    def __init__(self, spec: IndexSpec, keep_shingles: bool = True) -> None:
        self.spec = spec
        self.keep_shingles = keep_shingles
        self.shingler = Shingler(spec.shingle_spec)
        self.minhasher = make_hasher(spec.minhash, spec.num_perm, spec.seed)
        self.lsh = spec.lsh
        # the most distinct shingles a document can have for its 64-bit hashes (8 bytes each) to take less
        # room than its raw signature (4 bytes a position) and, when kept, its 32-bit fingerprints
        self.small = spec.num_perm - 1 if keep_shingles else (4 * spec.num_perm - 1) // 8

    def compute(self, requests: Sequence[str | AppendTo]) -> list[Fingerprint]:
        """Fingerprints for a batch: a text (upsert) or an AppendTo each.

        Returns:
            One fingerprint per request, in order.
        """
        k = self.shingler.spec.k
        # an append is the stored tail (the last k-1 units) followed by the chunk: every shingle of that
        # text is new; when the document had fewer than k units, the tail is all of it: start afresh
        chars = self.shingler.spec.unit == "char"
        texts: list[str] = []
        for req in requests:
            if isinstance(req, str):
                texts.append(req)
            elif chars:  # normalised already: joining must not strip the tail's spaces
                chunk = normalize(req.chunk)
                texts.append(req.old.tail + " " + chunk if req.old.tail and chunk else req.old.tail or chunk)
            else:
                texts.append(req.old.tail + "\n" + req.chunk)
        pre = frozenset(i for i, r in enumerate(requests) if chars and not isinstance(r, str))
        batch = self.shingler.batch(texts, normalized=pre)
        raws = self.minhasher.signatures(batch.hashes, batch.offsets, densify=False)
        if self.keep_shingles:
            fps32, offsets = distinct32(batch.hashes, batch.offsets)
        else:
            fps32, offsets = np.zeros(0, np.uint32), np.zeros(len(requests) + 1, np.int64)
        h64, h_off, kept = distinct64(batch.hashes, batch.offsets, self.small)
        grows = [not isinstance(req, str) and req.old.n_units >= k for req in requests]
        for i, req in enumerate(requests):
            if grows[i] and isinstance(req, AppendTo) and batch.n_units[i] > k - 1:
                raws[i] = np.minimum(raws[i], req.old.raw)
        sigs = self.minhasher.densify(raws) if len(requests) else raws
        out: list[Fingerprint] = []
        for i, req in enumerate(requests):
            sh = fps32[offsets[i] : offsets[i + 1]]
            hs = h64[h_off[i] : h_off[i + 1]] if kept[i] else None
            n = int(batch.n_units[i])
            if not grows[i] or isinstance(req, str):  # (a text never grows)
                out.append(Fingerprint(sh, sigs[i], batch.tails[i], n, raws[i], hs))
            elif n <= k - 1:  # the chunk has no unit: nothing new
                out.append(req.old)
            else:
                old = req.old
                if hs is not None and old.hashes is not None:
                    hs = np.union1d(old.hashes, hs)
                    hs = hs if hs.shape[0] <= self.small else None
                else:
                    hs = None
                out.append(
                    Fingerprint(
                        np.union1d(old.shingles, sh),
                        sigs[i],
                        batch.tails[i],
                        old.n_units + n - (k - 1),
                        raws[i],
                        hs,
                    )
                )
        return out

    def band_hashes(self, fps: Sequence[Fingerprint]) -> list[U64Array]:
        """Each document's band hashes: one per LSH band, then, for a short document (at most
        lsh.short_limit distinct shingles: 32 below threshold 0.75), the prefix of its sorted 64-bit shingle
        hashes that finds every document at the threshold or above (lsh.prefix_length): their buckets are
        band ``bands``."""
        if not fps:
            return []
        lsh = self.lsh.band_hashes(np.stack([fp.signature for fp in fps]))
        t, bands = self.spec.threshold, self.lsh.bands
        limit = short_limit(t)
        short = [
            (i, fp.hashes[: prefix_length(fp.hashes.size, t)])
            for i, fp in enumerate(fps)
            if fp.hashes is not None and 0 < fp.hashes.size <= limit
        ]
        if not short:
            return list(lsh)
        # the smallest hashes are the prefix; mixed again so that their buckets spread like the others
        sizes = np.array([p.size for _, p in short], dtype=np.int64)
        table = np.zeros((len(fps), bands + int(sizes.max())), dtype=np.uint64)
        table[:, :bands] = lsh
        rows_of = np.repeat(np.array([i for i, _ in short], dtype=np.int64), sizes)
        cols = bands + np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        table[rows_of, cols] = fmix64(np.concatenate([p for _, p in short]))
        width = np.full(len(fps), bands, dtype=np.int64)
        width[[i for i, _ in short]] += sizes
        return [table[i, :w] for i, w in enumerate(width.tolist())]
