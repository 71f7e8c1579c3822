"""Shingling: documents to 64-bit shingle hashes, for a whole batch at once (pure, no Redis).

Course material: seeds/001 ("k-shingles", "hashing shingles") and seeds/004 (hash shingles directly
instead of keeping a shingle dictionary).

Normalisation (version :data:`dedupd.similarity.normalization.NORMALIZATION`, recorded in the index spec):
default-ignorable code points dropped (zero-width spaces and joiners, soft hyphens, bidi controls...), Unicode
NFKC, lowercase, whitespace runs collapsed to one space, ends stripped.
Units are words (maximal runs of ``\\w`` characters, as Python's ``re`` defines them) or characters.
A k-shingle is k consecutive units. The batch is processed without a Python loop per word or shingle:
the normalised texts are joined and viewed as one array of code points; a table says which code points
are word characters; each code point is mixed with its position in its word (``fmix64``) and the mixes
of a word are summed (``np.add.reduceat``) into the word's hash; k consecutive word hashes are combined
into the shingle's hash (:func:`dedupd.similarity.hashing.combine`'s multilinear form, then ``fmix64``). Characters
are their code points. A text with fewer than k units yields one shingle of all its units; a text with
no word at all (``"!!!"``) yields one shingle of its whole normalised text (hashed with xxhash); an empty
text yields none.

Word mode runs that in one compiled loop (:func:`dedupd.similarity.kernels.word_shingles`, numba) over the UTF-8
bytes of the joined NFKC texts, lowercasing through a table; the table also marks the default-ignorable code
points, and a text the kernel finds one in is normalised again without them
(:func:`dedupd.similarity.normalization.nfkc`) and shingled again, so that the others cost no search. The
numpy code described above is the reference that tests compare it with (``numpy_batch`` in
tests/reference.py). Char mode is numpy.

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
from typing import Any

import numpy as np
import numpy.typing as npt
import xxhash

from dedupd.similarity.hashing import POSITION_MULTIPLIERS, U64, U64Array, fmix64
from dedupd.similarity.normalization import DEFAULT_IGNORABLE, drop_ignorable, nfkc
from dedupd.similarity.spec import ShingleSpec

_WS_RE = re.compile(r"\s+")
_WHOLE_TEXT_SALT = U64(0x9E3779B97F4A7C15)
_CHAR_SALT = U64(0x632BE59BD9B4E019)
_POS_MUL = U64(0xD6E8FEB86659FD93)
_CP_MUL = U64(0xA0761D6478BD642F)
_LEN_MUL = U64(0xE7037ED1A0B428DB)


def normalize(text: str) -> str:
    """Default-ignorables dropped, NFKC, lowercase, collapse whitespace, strip.

    >>> normalize(" Zero\\u200bwidth  SOFT\\u00adHYPHEN ")
    'zerowidth softhyphen'
    """
    return _WS_RE.sub(" ", nfkc(text).lower()).strip()


def _kernel_text(text: str, drop: bool = False) -> bytes:
    """A non-ASCII text for the word kernel, in UTF-8: NFKC (its default-ignorable code points dropped
    first when ``drop``: the kernel flags the texts that hold some, so that the others cost no search), and
    lowercased here only if it then holds U+0130 (whose lowercase is two code points) or U+03A3 (whose
    lowercase depends on its neighbours)."""
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) >= _NFKC_BY_LINES:
        raw = _nfkc_lines(raw, drop)
    elif drop:
        raw = nfkc(text).encode("utf-8", "surrogatepass")
    elif not unicodedata.is_normalized("NFKC", text):
        raw = unicodedata.normalize("NFKC", text).encode("utf-8", "surrogatepass")
    if b"\xc4\xb0" in raw or b"\xce\xa3" in raw:  # U+0130, U+03A3
        raw = raw.decode("utf-8", "surrogatepass").lower().encode("utf-8", "surrogatepass")
    return raw


_NFKC_BY_LINES = 8192  # bytes


def _nfkc_lines(raw: bytes, drop: bool = False) -> bytes:
    """NFKC of a long UTF-8 text (without its default-ignorable code points when ``drop``:
    :func:`~dedupd.similarity.normalization.nfkc`), decoding and normalising only the lines that hold
    non-ASCII bytes (runs of them less than 1 kB apart together): every default-ignorable code point is
    non-ASCII, and ``"\\n"`` neither decomposes nor composes with what is on either side of it, so NFKC
    never reaches across it. A 755 kB source file with 580 non-ASCII characters: 1.8 ms instead of 10.8."""
    data = np.frombuffer(raw, dtype=np.uint8)
    newlines = np.flatnonzero(data == 0x0A)
    lines = np.unique(np.searchsorted(newlines, np.flatnonzero(data >= 0x80)))  # the dirty lines
    bounds = np.concatenate([[-1], newlines, [len(raw)]])
    lo, hi = bounds[lines] + 1, bounds[lines + 1]
    first = np.flatnonzero(np.concatenate([[True], lo[1:] - hi[:-1] > 1024]))
    last = np.append(first[1:] - 1, len(hi) - 1)
    parts = []
    done = 0
    for a, b in zip(lo[first].tolist(), hi[last].tolist(), strict=True):
        piece = raw[a:b].decode("utf-8", "surrogatepass")
        kept = drop_ignorable(piece) if drop else piece
        if kept is not piece or not unicodedata.is_normalized("NFKC", piece):
            parts += [raw[done:a], unicodedata.normalize("NFKC", kept).encode("utf-8", "surrogatepass")]
            done = b
    parts.append(raw[done:])
    return b"".join(parts)


def _kernel_input(texts: Sequence[str]) -> tuple[bytes, npt.NDArray[np.int64], str | None]:
    """The batch as the word kernel reads it: the texts (NFKC, not lowercased: the kernel does it) in UTF-8
    joined by ``"\\n"``, where each starts (n + 1 positions), and the joined text when all of them are ASCII
    (byte positions are then character positions). Python works per text only when the batch is not all
    ASCII."""
    joined = "\n".join(texts)
    if joined.isascii():
        doc_start = np.zeros(len(texts) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)) + 1, out=doc_start[1:])
        return joined.encode("ascii"), doc_start, joined
    buf, doc_start = _joined([t.encode("ascii") if t.isascii() else _kernel_text(t) for t in texts])
    return buf, doc_start, None


def _joined(parts: list[bytes]) -> tuple[bytes, npt.NDArray[np.int64]]:
    """The texts' bytes joined by ``"\\n"``, and where each starts (n + 1 positions)."""
    doc_start = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, parts), dtype=np.int64, count=len(parts)) + 1, out=doc_start[1:])
    return b"\n".join(parts), doc_start


# lowercase | word flag << 31 | default-ignorable flag << 30, built as texts need it
_FOLD: npt.NDArray[np.uint32] | None = None


def _fold_table(top: int) -> npt.NDArray[np.uint32]:
    """For each code point up to at least ``top``: its lowercase (``str.lower``; U+0130, whose lowercase
    is two code points, gets "i": the kernel never sees it) with bit 31 set when that is a word character
    (``re``'s ``\\w``), or else bit 30 when the code point is default-ignorable (its lowercase is itself; the
    kernel flags the texts that hold one).

    ASCII first, then the Basic Multilingual Plane (a few ms), the rest only when a text needs it.
    """
    global _FOLD
    if _FOLD is None or top >= _FOLD.shape[0]:
        size = 0x80 if top < 0x80 else 0x10000 if top < 0x10000 else 0x110000
        chars = np.arange(size, dtype="<u4").tobytes().decode("utf-32-le", "surrogatepass")
        low = chars.replace("\u0130", "\u0130".lower()[0]).lower()
        assert len(low) == size
        word = re.sub(r"\W", "\0", low)  # word characters stay, the others become 0 (0 itself is none)
        cps = np.frombuffer(low.encode("utf-32-le", "surrogatepass"), dtype="<u4")
        flags = np.frombuffer(word.encode("utf-32-le", "surrogatepass"), dtype="<u4") != 0
        ignorable = np.zeros(size, dtype=bool)
        for a, b in DEFAULT_IGNORABLE:
            ignorable[a : b + 1] = True  # (a range beyond the table is empty)
        flags &= ~ignorable  # the Hangul fillers are word characters: the kernel stops at them all the same
        _FOLD = (
            cps | (flags.astype(np.uint32) << np.uint32(31)) | (ignorable.astype(np.uint32) << np.uint32(30))
        )
    return _FOLD


def _word_kernel(buf: bytes, doc_start: npt.NDArray[np.int64], k: int, top: int) -> tuple[Any, ...]:
    """:func:`dedupd.similarity.kernels.word_shingles` of a joined batch, the fold table grown until it holds
    every code point of the batch (from one covering ``top``). Returns the kernel's values, the last
    one the top the table now covers."""
    from dedupd.similarity.kernels import word_shingles

    data = np.frombuffer(buf, dtype=np.uint8)
    while True:
        *out, beyond = word_shingles(data, _fold_table(top), doc_start, k, POSITION_MULTIPLIERS)
        if beyond < 0:
            return (*out, top)
        top = int(beyond)


@dataclass(frozen=True, slots=True, eq=False)
class ShingleBatch:
    """The shingles of a batch of documents."""

    hashes: U64Array  # document i's shingle hashes are hashes[offsets[i]:offsets[i+1]] (repeats kept)
    offsets: npt.NDArray[np.int64]
    n_units: npt.NDArray[np.int64]  # words (or characters) per document
    tails: list[str]  # each document's last k-1 units (normalised text), so an append can continue it

    def distinct(self, i: int) -> U64Array:
        """Document i's sorted distinct shingle hashes."""
        return np.unique(self.hashes[self.offsets[i] : self.offsets[i + 1]])


class Shingler:
    """Cuts texts into shingle hashes according to a :class:`ShingleSpec`."""

    __slots__ = ("spec",)

    def __init__(self, spec: ShingleSpec) -> None:
        self.spec = spec

    def hash_set(self, text: str) -> U64Array:
        """Sorted distinct shingle hashes of one text."""
        return self.batch([text]).distinct(0)

    def batch(
        self, texts: Sequence[str], tails: bool = True, normalized: frozenset[int] = frozenset()
    ) -> ShingleBatch:
        """The shingles of many texts at once.

        Args:
            texts: the texts.
            tails: also keep each text's last k-1 units (``False`` for signatures only).
            normalized: indices of texts already normalised (an append's tail and chunk, char mode).
        """
        if self.spec.unit == "word":
            return self._word_batch(texts, tails)
        units, lengths, tail_list, wholes = self._chars(texts, normalized)
        return self._shingles(units, lengths, tail_list, wholes)

    # ----- word mode, compiled -----
    def _word_batch(self, texts: Sequence[str], want_tails: bool) -> ShingleBatch:
        """Word shingles by :func:`dedupd.similarity.kernels.word_shingles`: the same hashes as the numpy reference
        (tests/reference.py: ``words`` + :meth:`_shingles`), with no Python work per ASCII document.

        The kernel flags the texts that hold default-ignorable code points (none is ASCII): they are
        normalised again without them and shingled in a second call of their own (NFKC makes none of
        another code point: once is enough), whose results take their places."""
        k = self.spec.k
        buf, doc_start, joined = _kernel_input(texts)
        top = 0 if joined is not None else 0x80
        hashes, offsets, n_units, whole, tail_lo, tail_hi, ignored, top = _word_kernel(buf, doc_start, k, top)
        starts, ends = doc_start[:-1], doc_start[1:] - 1
        if ignored.any():
            again = np.flatnonzero(ignored)
            buf2, start2 = _joined([_kernel_text(texts[i], drop=True) for i in again.tolist()])
            h2, off2, n2, whole2, lo2, hi2, still, top = _word_kernel(buf2, start2, k, top)
            assert not still.any(), "a text without default-ignorables still holds some"
            counts = np.diff(offsets)
            counts[again] = np.diff(off2)
            offsets = np.zeros(len(texts) + 1, dtype=np.int64)
            np.cumsum(counts, out=offsets[1:])
            theirs = np.repeat(ignored, counts)
            merged = np.empty(int(offsets[-1]), dtype=np.uint64)
            merged[~theirs], merged[theirs] = hashes, h2
            hashes = merged
            n_units[again], whole[again] = n2, whole2
            # positions in the second buffer, after the first: one buffer for the pieces read below
            shift = len(buf) + 1
            buf = buf + b"\n" + buf2
            starts, ends = starts.copy(), ends.copy()
            starts[again], ends[again] = start2[:-1] + shift, start2[1:] - 1 + shift
            tail_lo[again], tail_hi[again] = lo2 + shift, hi2 + shift

        def text(lo: int, hi: int) -> str:  # a piece of a normalised (lowercased) text
            piece = joined[lo:hi] if joined is not None else buf[lo:hi].decode("utf-8", "surrogatepass")
            return piece.lower()

        wholes = {}
        if whole.any():  # texts without any word: their whole (whitespace-collapsed) text, hashed here
            for i in np.flatnonzero(whole).tolist():
                w = " ".join(text(int(starts[i]), int(ends[i])).split())
                wholes[i] = w
                h = xxhash.xxh3_64_intdigest(w.encode("utf-8", "surrogatepass"))
                hashes[offsets[i]] = fmix64(np.array([h], dtype=np.uint64) ^ _WHOLE_TEXT_SALT)[0]
        tails: list[str] = []
        if want_tails:
            if k <= 1:
                tails = [""] * len(texts)
            else:
                tails = [text(a, b) for a, b in zip(tail_lo.tolist(), tail_hi.tolist(), strict=True)]
                for i, w in wholes.items():
                    tails[i] = w
        return ShingleBatch(hashes, offsets, n_units, tails)

    def _chars(
        self, texts: Sequence[str], normalized: frozenset[int]
    ) -> tuple[U64Array, npt.NDArray[np.int64], list[str], dict[int, str]]:
        k = self.spec.k
        norm = [t if i in normalized else normalize(t) for i, t in enumerate(texts)]
        lengths = np.fromiter((len(t) for t in norm), dtype=np.int64, count=len(norm))
        joined = "".join(norm)
        cps = np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), dtype="<u4").astype(np.uint64)
        units = fmix64(cps + _CHAR_SALT)
        tails = [t[-(k - 1) :] if k > 1 else "" for t in norm]
        return units, lengths, tails, {}

    # ----- shingles -----
    def _shingles(
        self, units: U64Array, lengths: npt.NDArray[np.int64], tails: list[str], wholes: dict[int, str]
    ) -> ShingleBatch:
        k = self.spec.k
        n_docs = lengths.shape[0]
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
        # characters (the whole normalised text).
        short = np.flatnonzero((lengths > 0) & (lengths < k))
        whole = sorted(wholes)
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
                out[offsets[whole]] = (
                    np.array(
                        [xxhash.xxh3_64_intdigest(wholes[i].encode("utf-8", "surrogatepass")) for i in whole],
                        dtype=np.uint64,
                    )
                    ^ _WHOLE_TEXT_SALT
                )
        else:
            out[:] = win
        fmix64(out, out=out)
        return ShingleBatch(out, offsets, lengths, tails)


def distinct32(
    hashes: U64Array, offsets: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.int64]]:
    """Each document's sorted distinct 32-bit shingle fingerprints (the low 32 bits of the hashes).

    What exact verification stores: half the memory of 64-bit hashes, and two documents of n shingles
    each share a spurious fingerprint with probability about n*n / 2**32.
    """
    from dedupd.similarity.kernels import distinct_low32

    fps: npt.NDArray[np.uint32]
    fp_offsets: npt.NDArray[np.int64]
    fps, fp_offsets = distinct_low32(hashes, offsets.astype(np.int64, copy=False))
    return fps, fp_offsets


def distinct64(
    hashes: U64Array, offsets: npt.NDArray[np.int64], limit: int
) -> tuple[U64Array, npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """Each document's sorted distinct 64-bit shingle hashes, for the documents that have at most ``limit``.

    What a short document's record stores instead of its signature: the signature and the 32-bit
    fingerprints are recomputed from them. Returns the concatenated hashes, per-document offsets (a
    document whose set was not kept has none) and which documents were kept.
    """
    from dedupd.similarity.kernels import distinct_small64

    flat: U64Array
    flat_offsets: npt.NDArray[np.int64]
    kept: npt.NDArray[np.bool_]
    flat, flat_offsets, kept = distinct_small64(hashes, offsets.astype(np.int64, copy=False), limit)
    return flat, flat_offsets, kept


def jaccard(a: npt.NDArray[np.unsignedinteger], b: npt.NDArray[np.unsignedinteger]) -> float:
    """Exact Jaccard similarity of two sorted distinct hash sets (0.0 when both are empty)."""
    if a.size == 0 and b.size == 0:
        return 0.0
    inter = np.intersect1d(a, b, assume_unique=True).size
    return inter / (a.size + b.size - inter)
