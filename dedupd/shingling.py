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
_WHOLE_TEXT_SALT = U64(0x9E3779B97F4A7C15)
_MEMO_LIMIT = 2_000_000


def normalize(text: str) -> str:
    """NFKC, lowercase, collapse whitespace, strip."""
    return _WS_RE.sub(" ", unicodedata.normalize("NFKC", text).lower()).strip()


class _WordHashes(dict[str, int]):
    """Memo of word -> xxh3_64; ``map(memo.__getitem__, words)`` stays in C for known words."""

    def __missing__(self, word: str) -> int:
        h = xxhash.xxh3_64_intdigest(word.encode("utf-8", "surrogatepass"))
        self[word] = h
        return h


@dataclass(frozen=True, slots=True)
class Units:
    """The units of one normalised text: a word list or a string of characters."""

    values: list[str] | str
    text: str  # the normalised text

    def __len__(self) -> int:
        return len(self.values)

    def tail(self, k: int) -> str:
        """The last k-1 units, stored so that an append can form the boundary shingles."""
        if k <= 1:
            return ""
        last = self.values[-(k - 1) :]
        return " ".join(last) if isinstance(last, list) else last


class Shingler:
    """Cuts texts into shingle hash sets according to a :class:`ShingleSpec`."""

    __slots__ = ("spec", "_memo")

    def __init__(self, spec: ShingleSpec) -> None:
        self.spec = spec
        self._memo = _WordHashes()

    # ----- units -----
    def units(self, text: str) -> Units:
        """Normalise a text and cut it into units."""
        norm = normalize(text)
        if self.spec.unit == "word":
            return Units(_WORD_RE.findall(norm), norm)
        return Units(norm, norm)

    def append_units(self, tail: str, n_old: int, chunk: str) -> Units:
        """Units for the shingles an append adds: the stored tail, then the chunk's units.

        Appending ``chunk`` means the document becomes ``old + "\\n" + chunk``.
        """
        new = self.units(chunk)
        if self.spec.unit == "word":
            words = tail.split(" ") if tail else []
            return Units(words + list(new.values), new.text)
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

    def hash_sets(self, docs: Sequence[Units]) -> tuple[U64Array, npt.NDArray[np.int64]]:
        """Sorted distinct shingle hashes of many documents at once.

        Args:
            docs: the units of each document (see :meth:`units`).

        Returns:
            ``(hashes, offsets)``: document i's hashes are ``hashes[offsets[i]:offsets[i+1]]``.
        """
        k = self.spec.k
        lengths = np.fromiter((len(d) for d in docs), dtype=np.int64, count=len(docs))
        parts = [self.unit_hashes(d) for d in docs]
        units = np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint64)
        starts = np.zeros(len(docs) + 1, dtype=np.int64)
        np.cumsum(lengths, out=starts[1:])
        n = units.shape[0]
        padded = np.concatenate([units, np.zeros(k, dtype=np.uint64)])

        # Full k-windows that stay inside their document.
        doc_of = np.repeat(np.arange(len(docs), dtype=np.int64), lengths)
        pos = np.arange(n, dtype=np.int64) - starts[:-1][doc_of]
        full = pos <= (lengths[doc_of] - k)
        acc = np.full(n, U64(k), dtype=np.uint64)
        for j in range(k):
            acc += padded[j : j + n] * POSITION_MULTIPLIERS[j]
        win_hash = acc[full]
        win_doc = doc_of[full]

        # Documents shorter than k units: one shingle of all their units.
        short = np.flatnonzero((lengths > 0) & (lengths < k))
        if short.size:
            s_len = lengths[short]
            s_acc = s_len.astype(np.uint64)
            for j in range(k - 1):
                term = padded[starts[short] + j] * POSITION_MULTIPLIERS[j]
                s_acc = s_acc + np.where(j < s_len, term, U64(0))
            win_hash = np.concatenate([win_hash, s_acc])
            win_doc = np.concatenate([win_doc, short])

        # Texts with no unit but some characters (word mode, e.g. "!!!"): the whole text.
        empty = [i for i, d in enumerate(docs) if len(d) == 0 and d.text]
        if empty:
            whole = np.array(
                [xxhash.xxh3_64_intdigest(docs[i].text.encode("utf-8", "surrogatepass")) for i in empty],
                dtype=np.uint64,
            )
            win_hash = np.concatenate([win_hash, whole ^ _WHOLE_TEXT_SALT])
            win_doc = np.concatenate([win_doc, np.array(empty, dtype=np.int64)])

        fmix64(win_hash, out=win_hash)
        order = np.lexsort((win_hash, win_doc))
        win_hash, win_doc = win_hash[order], win_doc[order]
        keep = np.ones(win_hash.shape[0], dtype=bool)
        keep[1:] = (win_hash[1:] != win_hash[:-1]) | (win_doc[1:] != win_doc[:-1])
        win_hash, win_doc = win_hash[keep], win_doc[keep]
        offsets = np.searchsorted(win_doc, np.arange(len(docs) + 1, dtype=np.int64), side="left")
        return win_hash, offsets.astype(np.int64)


def jaccard(a: U64Array, b: U64Array) -> float:
    """Exact Jaccard similarity of two sorted distinct hash sets (0.0 when both are empty)."""
    if a.size == 0 and b.size == 0:
        return 0.0
    inter = np.intersect1d(a, b, assume_unique=True).size
    return inter / (a.size + b.size - inter)
