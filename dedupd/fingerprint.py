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

from dedupd.hashing import U64Array
from dedupd.minhash import EMPTY, make_hasher
from dedupd.shingling import Shingler, Units, distinct32
from dedupd.spec import IndexSpec


@dataclass(frozen=True, slots=True, eq=False)
class Fingerprint:
    """What the index keeps of a document."""

    shingles: npt.NDArray[np.uint32]  # sorted distinct 32-bit shingle fingerprints (empty if not kept)
    signature: npt.NDArray[np.uint32]  # what bands and estimates use
    tail: str  # last k-1 units, for appends
    n_units: int
    raw: npt.NDArray[np.uint32]  # before densification (== signature for classic MinHash); stored

    @property
    def empty(self) -> bool:
        """A document with no shingle is stored but never banded nor matched."""
        return bool(np.all(self.signature == EMPTY))


@dataclass(frozen=True, slots=True)
class AppendTo:
    """An append request: the document's stored fingerprint and the new chunk."""

    old: Fingerprint
    chunk: str


class Fingerprinter:
    """Computes fingerprints and band hashes under one IndexSpec."""

    __slots__ = ("spec", "shingler", "minhasher", "lsh", "keep_shingles")

    def __init__(self, spec: IndexSpec, keep_shingles: bool = True) -> None:
        self.spec = spec
        self.keep_shingles = keep_shingles
        self.shingler = Shingler(spec.shingle_spec)
        self.minhasher = make_hasher(spec.minhash, spec.num_perm, spec.seed)
        self.lsh = spec.lsh

    def compute(self, requests: Sequence[str | AppendTo]) -> list[Fingerprint]:
        """Fingerprints for a batch: a text (upsert) or an AppendTo each.

        Returns:
            One fingerprint per request, in order.
        """
        k = self.shingler.spec.k
        units: list[Units] = []
        for req in requests:
            if isinstance(req, str):
                units.append(self.shingler.units(req))
            elif req.old.n_units < k:  # the stored tail is the whole old text: recompute exactly
                units.append(self.shingler.units(req.old.tail + "\n" + req.chunk))
            else:
                chunk_units = self.shingler.units(req.chunk)
                units.append(self.shingler.append_units(req.old.tail, req.old.n_units, req.chunk)
                             if len(chunk_units) else Units([], ""))
        hashes, offsets = self.shingler.hash_sets(units, distinct=False)
        raws = self.minhasher.signatures(hashes, offsets, densify=False)
        if self.keep_shingles:
            fps32, offsets = distinct32(hashes, offsets)
        else:
            fps32, offsets = np.zeros(0, np.uint32), np.zeros(len(requests) + 1, np.int64)
        for i, req in enumerate(requests):  # an append: the union's raw signature is the minimum
            if not isinstance(req, str) and req.old.n_units >= k and len(units[i]):
                raws[i] = np.minimum(raws[i], req.old.raw)
        sigs = self.minhasher.densify(raws) if len(requests) else raws
        out: list[Fingerprint] = []
        for i, req in enumerate(requests):
            sh = fps32[offsets[i] : offsets[i + 1]]
            if isinstance(req, str) or req.old.n_units < k:
                out.append(Fingerprint(sh, sigs[i], units[i].tail(k), len(units[i]), raws[i]))
            elif len(units[i]) == 0:  # nothing new
                out.append(req.old)
            else:
                old = req.old
                added = len(units[i]) - (k - 1)
                out.append(Fingerprint(np.union1d(old.shingles, sh), sigs[i], units[i].tail(k),
                                       old.n_units + added, raws[i]))
        return out

    def from_raw(self, shingles: npt.NDArray[np.uint32], raw: npt.NDArray[np.uint32], tail: str, n_units: int) -> Fingerprint:
        """A stored document's fingerprint (its signature densified from the stored raw one)."""
        return Fingerprint(shingles, self.minhasher.densify(raw), tail, n_units, raw)

    def band_hashes(self, fps: Sequence[Fingerprint]) -> U64Array:
        """Band hashes, shape (len(fps), bands)."""
        if not fps:
            return np.zeros((0, self.lsh.bands), dtype=np.uint64)
        return self.lsh.band_hashes(np.stack([fp.signature for fp in fps]))
