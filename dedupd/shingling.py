"""Shingling: documents to sets of 64-bit shingle hashes (pure, vectorized over a batch).

Course material: seeds/001 ("k-shingles", "hashing shingles") and seeds/004 (hash shingles directly
instead of keeping a shingle dictionary).

Normalisation: Unicode NFKC, lowercase, whitespace runs collapsed to one space, ends stripped.
Units are words (maximal runs of ``\\w`` in the normalised text) or characters. A k-shingle is k
consecutive units. Each word is hashed with xxhash (xxh3_64, memoised, so the per-word work is a
C-level dict lookup); characters are their code points. The k unit hashes of a shingle are combined
with :func:`dedupd.hashing.combine`. A text with fewer than k units yields one shingle of all its
units; a text with no word at all (``"!!!"``) yields one shingle of its whole normalised text; an
empty text yields none.

Example:
    >>> sh = Shingler(ShingleSpec("word", 2))
    >>> len(sh.hash_set("a rose is a rose"))  # {a rose, rose is, is a}
    3
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import xxhash

from dedupd.hashing import POSITION_MULTIPLIERS, U64, U64Array, fmix64
from dedupd.settings import ShingleSpec

_WORD_RE = re.compile(r"\w+")
_WS_RE = re.compile(r"\s+")
_ASCII_WORD = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
# bytes.translate table: ASCII non-word characters become spaces (for ASCII text, ``\w+`` == split()).
_ASCII_TABLE = bytes(c if c in _ASCII_WORD or c >= 128 else 32 for c in range(256))
_WHOLE_TEXT_SALT = U64(0x9E3779B97F4A7C15)
_MEMO_LIMIT = 2_000_000


def normalize(text: str) -> str:
    """NFKC, lowercase, collapse whitespace, strip."""
    return _WS_RE.sub(" ", unicodedata.normalize("NFKC", text).lower()).strip()


class _WordHashes(dict[str | bytes, int]):
    """Memo of word -> xxh3_64 of its UTF-8; ``map(memo.__getitem__, words)`` stays in C for known words."""

    def __missing__(self, word: str | bytes) -> int:
        data = word if isinstance(word, bytes) else word.encode("utf-8", "surrogatepass")
        h = xxhash.xxh3_64_intdigest(data)
        self[word] = h
        return h


@dataclass(frozen=True, slots=True)
class Units:
    """The units of one normalised text: a word list (str, or bytes for ASCII text) or a string of characters."""

    values: list[str] | list[bytes] | str
    text: str  # the normalised text when it has no word (word mode), else may be ""

    def __len__(self) -> int:
        return len(self.values)

    def tail(self, k: int) -> str:
        """The last k-1 units, stored so that an append can form the boundary shingles."""
        if k <= 1:
            return ""
        last = self.values[-(k - 1) :]
        if isinstance(last, str):
            return last
        return " ".join(w.decode() if isinstance(w, bytes) else w for w in last)


class Shingler:
    """Cuts texts into shingle hash sets according to a :class:`ShingleSpec`."""

    __slots__ = ("spec", "_memo")

    def __init__(self, spec: ShingleSpec) -> None:
        self.spec = spec
        self._memo = _WordHashes()

    # ----- units -----
    def units(self, text: str) -> Units:
        """Normalise a text and cut it into units."""
        if self.spec.unit == "char":
            norm = normalize(text)
            return Units(norm, norm)
        low = unicodedata.normalize("NFKC", text).lower()
        words: list[str] | list[bytes]
        if low.isascii():
            words = low.encode("ascii").translate(_ASCII_TABLE).split()
        else:
            words = _WORD_RE.findall(low)
        return Units(words, "" if words else " ".join(low.split()))

    def append_units(self, tail: str, n_old: int, chunk: str) -> Units:
        """Units for the shingles an append adds: the stored tail, then the chunk's units.

        Appending ``chunk`` means the document becomes ``old + "\\n" + chunk``.
        """
        new = self.units(chunk)
        if self.spec.unit == "word":
            words: list[str | bytes] = list(tail.split(" ")) if tail else []
            return Units(words + list(new.values), new.text)  # type: ignore[arg-type]
        joined = (tail + " " + new.text) if (tail and new.text) else (tail or new.text)
        return Units(joined, joined)

    def unit_hashes(self, units: Units) -> U64Array:
        """One uint64 per unit."""
        if isinstance(units.values, list):
            if len(self._memo) > _MEMO_LIMIT:
                self._memo.clear()
            return np.fromiter(map(self._memo.__getitem__, units.values), dtype=np.uint64, count=len(units))
        cps = np.frombuffer(units.values.encode("utf-32-le", "surrogatepass"), dtype="<u4").astype(np.uint64)
        return fmix64(cps + U64(0x632BE59BD9B4E019))

    # ----- shingles -----
    def hash_set(self, text: str) -> U64Array:
        """Sorted distinct shingle hashes of one text."""
        hashes, offsets = self.hash_sets([self.units(text)])
        return hashes[offsets[0] : offsets[1]]

    def hash_sets(self, docs: Sequence[Units], distinct: bool = True) -> tuple[U64Array, npt.NDArray[np.int64]]:
        """Shingle hashes of many documents at once.

        Args:
            docs: the units of each document (see :meth:`units`).
            distinct: sort each document's hashes and drop repeats (MinHash does not need it).

        Returns:
            ``(hashes, offsets)``: document i's hashes are ``hashes[offsets[i]:offsets[i+1]]``.
        """
        k = self.spec.k
        n_docs = len(docs)
        lengths = np.fromiter((len(d) for d in docs), dtype=np.int64, count=n_docs)
        parts = [self.unit_hashes(d) for d in docs]
        units = np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint64)
        starts = np.zeros(n_docs + 1, dtype=np.int64)
        np.cumsum(lengths, out=starts[1:])
        n = units.shape[0]
        padded = np.concatenate([units, np.zeros(k, dtype=np.uint64)])

        # Full k-windows that stay inside their document, in document order.
        acc = np.full(n, U64(k), dtype=np.uint64)
        for j in range(k):
            acc += padded[j : j + n] * POSITION_MULTIPLIERS[j]
        n_full = np.maximum(lengths - k + 1, 0)
        if k > 1 and n:
            doc_of = np.repeat(np.arange(n_docs, dtype=np.int64), lengths)
            full = (np.arange(n, dtype=np.int64) - starts[:-1][doc_of]) < n_full[doc_of]
            win = acc[full]
        else:
            win = acc

        # One extra shingle for texts shorter than k units (all their units), or with no unit but some
        # characters (word mode, e.g. "!!!": the whole normalised text).
        short = np.flatnonzero((lengths > 0) & (lengths < k))
        whole = [i for i, d in enumerate(docs) if len(d) == 0 and d.text]
        counts = n_full.copy()
        counts[short] = 1
        counts[whole] = 1
        offsets = np.zeros(n_docs + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        out = np.empty(int(offsets[-1]), dtype=np.uint64)
        if short.size or whole:
            extra_doc = np.zeros(n_docs, dtype=bool)
            extra_doc[short] = True
            extra_doc[whole] = True
            out[np.repeat(~extra_doc, counts)] = win
            if short.size:
                s_len = lengths[short]
                s_acc = s_len.astype(np.uint64)
                for j in range(k - 1):
                    term = padded[starts[short] + j] * POSITION_MULTIPLIERS[j]
                    s_acc = s_acc + np.where(j < s_len, term, U64(0))
                out[offsets[short]] = s_acc
            if whole:
                out[offsets[whole]] = np.array(
                    [xxhash.xxh3_64_intdigest(docs[i].text.encode("utf-8", "surrogatepass")) for i in whole],
                    dtype=np.uint64) ^ _WHOLE_TEXT_SALT
        else:
            out[:] = win
        fmix64(out, out=out)
        if not distinct:
            return out, offsets
        uniq = [np.unique(out[offsets[i] : offsets[i + 1]]) for i in range(n_docs)]
        sizes = np.fromiter((u.shape[0] for u in uniq), dtype=np.int64, count=n_docs)
        offsets = np.zeros(n_docs + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        return (np.concatenate(uniq) if uniq else out[:0]), offsets


def distinct32(hashes: U64Array, offsets: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.uint32],
                                                                          npt.NDArray[np.int64]]:
    """Each document's sorted distinct 32-bit shingle fingerprints (the low 32 bits of the hashes).

    What exact verification stores: half the memory of 64-bit hashes, and two documents of n shingles
    each share a spurious fingerprint with probability about n*n / 2**32.
    """
    low = hashes.astype(np.uint32)
    uniq = [np.unique(low[offsets[i] : offsets[i + 1]]) for i in range(len(offsets) - 1)]
    sizes = np.fromiter((u.shape[0] for u in uniq), dtype=np.int64, count=len(uniq))
    out_offsets = np.zeros(len(uniq) + 1, dtype=np.int64)
    np.cumsum(sizes, out=out_offsets[1:])
    return (np.concatenate(uniq) if uniq else low[:0]), out_offsets


def jaccard(a: npt.NDArray[np.unsignedinteger], b: npt.NDArray[np.unsignedinteger]) -> float:
    """Exact Jaccard similarity of two sorted distinct hash sets (0.0 when both are empty)."""
    if a.size == 0 and b.size == 0:
        return 0.0
    inter = np.intersect1d(a, b, assume_unique=True).size
    return inter / (a.size + b.size - inter)
