"""Numpy reference implementations of what dedupd computes in compiled loops (dedupd.similarity.kernels).

The package never calls these: tests compare the kernels with them (tests/test_kernels.py). They are the
vectorized numpy code the kernels replaced, and give exactly the same values:

- :func:`numpy_batch`: :meth:`dedupd.similarity.shingling.Shingler.batch` (word mode by numpy; char mode is the
  package's own numpy code);
- :func:`numpy_distinct32`, :func:`numpy_distinct64`: :func:`dedupd.similarity.shingling.distinct32` and
  :func:`dedupd.similarity.shingling.distinct64`;
- :func:`oph_signatures`, :func:`oph_densify`: :meth:`dedupd.similarity.minhash.OnePermHasher.signatures` and
  :meth:`dedupd.similarity.minhash.OnePermHasher.densify`;
- :func:`ranked`: one key of :func:`dedupd.similarity.bounds.ranked_flat` (tests/test_bounds.py);
- :func:`pick_candidates`: one key of :func:`dedupd.similarity.bounds.pick_many` (tests/test_bounds.py).

(Classic MinHash's numpy implementation, ``MinHasher._numpy_signatures``, stays in the package: it serves
hash families over a small prime.)
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from dedupd.similarity.hashing import U64, U64Array, fmix64
from dedupd.similarity.minhash import _M32, EMPTY, SIG_DTYPE, OnePermHasher
from dedupd.similarity.normalization import DEFAULT_IGNORABLE
from dedupd.similarity.shingling import _CP_MUL, _LEN_MUL, _POS_MUL, ShingleBatch, Shingler

I64Array = npt.NDArray[np.int64]
U32Array = npt.NDArray[np.uint32]

# ----- shingling: word mode -----
_ASCII_WORD = np.zeros(256, dtype=bool)
for _c in b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_":
    _ASCII_WORD[_c] = True
_UNICODE_WORD: npt.NDArray[np.bool_] | None = None  # built on the first non-ASCII batch (0.1-0.2 s)


# the default-ignorable code points, for str.translate (the package drops them with a regular expression)
_DROP = dict.fromkeys(c for a, b in DEFAULT_IGNORABLE for c in range(a, b + 1))


def _lower_nfkc(text: str) -> str:
    """Default-ignorables dropped, NFKC, lowercase."""
    return (text if text.isascii() else unicodedata.normalize("NFKC", text.translate(_DROP))).lower()


def word_table(top: int) -> npt.NDArray[np.bool_]:
    """Which code points up to ``top`` ``re``'s ``\\w`` matches: str.isalnum() or '_' (sre's own test).

    Built on demand, the Basic Multilingual Plane first (65,536 code points, ~40 ms), the rest only when a
    text holds a code point beyond it (~0.6 s once).
    """
    global _UNICODE_WORD
    have = 0 if _UNICODE_WORD is None else _UNICODE_WORD.shape[0]
    if top >= have:
        size = 0x10000 if top < 0x10000 else 0x110000
        more = np.fromiter((chr(c).isalnum() for c in range(have, size)), dtype=bool, count=size - have)
        table = more if _UNICODE_WORD is None else np.concatenate([_UNICODE_WORD, more])
        table[ord("_")] = True
        _UNICODE_WORD = table
    assert _UNICODE_WORD is not None
    return _UNICODE_WORD


def _code_points(text: str) -> tuple[npt.NDArray[np.uint32] | npt.NDArray[np.uint8], npt.NDArray[np.bool_]]:
    """A text as an array of code points, and the word-character table to use with it."""
    if text.isascii():
        return np.frombuffer(text.encode("ascii"), dtype=np.uint8), _ASCII_WORD
    cps = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4")
    return cps, word_table(int(cps.max()))


def words(
    k: int, texts: Sequence[str], want_tails: bool
) -> tuple[U64Array, I64Array, list[str], dict[int, str]]:
    """Word units of a batch: each word's hash, words per text, each text's last k-1 words (normalised
    text: default-ignorables dropped, NFKC, lowercase), and the texts without any word (their whole
    whitespace-collapsed text is their one shingle)."""
    norm = [_lower_nfkc(t) for t in texts]
    joined = "\n".join(norm)  # '\n' is no word character: words never span two documents
    cps, table = _code_points(joined)
    mask = table[cps]
    edges = np.diff(mask.view(np.int8), prepend=np.int8(0), append=np.int8(0))
    starts = np.flatnonzero(edges == 1)
    ends = np.flatnonzero(edges == -1)
    n_words = starts.shape[0]
    word_len = ends - starts
    doc_start = np.zeros(len(norm) + 1, dtype=np.int64)
    np.cumsum([len(t) + 1 for t in norm], out=doc_start[1:])
    doc_of_word = np.searchsorted(doc_start, starts, side="right") - 1
    lengths = np.bincount(doc_of_word, minlength=len(norm)).astype(np.int64)
    if n_words:
        inword = np.flatnonzero(mask)
        first = np.zeros(n_words, dtype=np.int64)
        np.cumsum(word_len[:-1], out=first[1:])
        pos = np.arange(inword.shape[0], dtype=np.int64) - np.repeat(first, word_len)
        mixed = fmix64(cps[inword].astype(np.uint64) * _CP_MUL + pos.astype(np.uint64) * _POS_MUL)
        units = np.add.reduceat(mixed, first)
        units += word_len.astype(np.uint64) * _LEN_MUL
        fmix64(units, out=units)
    else:
        units = np.zeros(0, dtype=np.uint64)
    # texts without any word: their whole (whitespace-collapsed) text is their one shingle
    wholes = {i: w for i in np.flatnonzero(lengths == 0).tolist() if (w := " ".join(norm[i].split()))}
    tails: list[str] = []
    if want_tails:  # the normalised text from the start of the (k-1)-th last word to the end of the last
        last = np.cumsum(lengths) - 1
        for i, t in enumerate(norm):
            n = int(lengths[i])
            if n == 0 or k <= 1:
                tails.append(wholes.get(i, "") if k > 1 else "")
                continue
            lo = int(starts[last[i] - min(n, k - 1) + 1] - doc_start[i])
            tails.append(t[lo : int(ends[last[i]] - doc_start[i])])
    return units, lengths, tails, wholes


def numpy_batch(
    shingler: Shingler, texts: Sequence[str], tails: bool = True, normalized: frozenset[int] = frozenset()
) -> ShingleBatch:
    """The numpy reference implementation of :meth:`Shingler.batch` (word mode; char mode is the same)."""
    if shingler.spec.unit == "word":
        units, lengths, tail_list, wholes = words(shingler.spec.k, texts, tails)
    else:
        units, lengths, tail_list, wholes = shingler._chars(texts, normalized)
    return shingler._shingles(units, lengths, tail_list, wholes)


# ----- shingling: distinct sets -----
def numpy_distinct32(hashes: U64Array, offsets: I64Array) -> tuple[U32Array, I64Array]:
    """The reference for :func:`dedupd.similarity.shingling.distinct32`: ``np.unique`` per document."""
    low = hashes.astype(np.uint32)
    uniq = [np.unique(low[offsets[i] : offsets[i + 1]]) for i in range(len(offsets) - 1)]
    sizes = np.fromiter((u.shape[0] for u in uniq), dtype=np.int64, count=len(uniq))
    out_offsets = np.zeros(len(uniq) + 1, dtype=np.int64)
    np.cumsum(sizes, out=out_offsets[1:])
    return (np.concatenate(uniq) if uniq else low[:0]), out_offsets


def numpy_distinct64(
    hashes: U64Array, offsets: I64Array, limit: int
) -> tuple[U64Array, I64Array, npt.NDArray[np.bool_]]:
    """The reference for :func:`dedupd.similarity.shingling.distinct64`: ``np.unique`` per document."""
    parts, kept = [], []
    for i in range(len(offsets) - 1):
        part = hashes[offsets[i] : offsets[i + 1]]
        u = np.unique(part) if part.shape[0] <= 2 * limit else part[:0]
        ok = part.shape[0] <= 2 * limit and u.shape[0] <= limit
        parts.append(u if ok else part[:0])
        kept.append(ok)
    out_offsets = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum([p.shape[0] for p in parts], out=out_offsets[1:])
    flat = np.concatenate(parts) if parts else hashes[:0]
    return flat.astype(np.uint64), out_offsets, np.array(kept, dtype=bool)


# ----- one-permutation hashing -----
def oph_signatures(oph: OnePermHasher, hashes: U64Array, offsets: I64Array, densify: bool = True) -> U32Array:
    """The numpy reference implementation of :meth:`OnePermHasher.signatures`."""
    n_docs, k = len(offsets) - 1, oph.num_perm
    mixed = fmix64(hashes ^ oph._salt)
    bins = ((mixed >> U64(32)) * U64(k)) >> U64(32)
    values = (mixed & _M32).astype(SIG_DTYPE)
    doc = np.repeat(np.arange(n_docs, dtype=np.int64), np.diff(offsets))
    flat = np.full(n_docs * k, EMPTY, dtype=SIG_DTYPE)
    np.minimum.at(flat, doc * k + bins.astype(np.int64), values)
    sig = flat.reshape(n_docs, k)
    return oph_densify(oph, sig) if densify else sig


def oph_densify(oph: OnePermHasher, raw: U32Array) -> U32Array:
    """The numpy reference implementation of :meth:`OnePermHasher.densify`."""
    sig = np.array(raw, dtype=SIG_DTYPE, ndmin=2, copy=True)
    _oph_fill(oph, sig)
    return sig if raw.ndim == 2 else sig[0]


def _oph_fill(oph: OnePermHasher, sig: U32Array) -> None:
    """Each empty bin j takes the value of the non-empty bin that comes first in bin j's fixed random
    order of the bins: the first non-empty bin of an endless seeded probe sequence (Shrivastava 2017),
    with the sequence's repeats dropped. Two documents with the same non-empty bins borrow alike."""
    k = oph.num_perm
    by_bin = oph._ranks()
    empty = sig == EMPTY
    filled = k - empty.sum(axis=1)
    todo = np.flatnonzero((filled > 0) & (filled < k))
    if todo.size == 0:
        return
    # documents grouped by fill (1-2, 3-4, 5-8, ... bins), padded to the group's largest fill; a
    # non-empty bin ranks itself first, so it keeps its own value
    group = np.ceil(np.log2(filled[todo])).astype(np.int64)
    for g in np.unique(group).tolist():
        rows = todo[group == g]
        m = filled[rows]
        hi = int(m.max())
        order = np.argsort(empty[rows], axis=1, kind="stable")[:, :hi]  # non-empty bins first
        full = np.where(np.arange(hi)[None, :] < m[:, None], order, k)
        pick = np.argmin(by_bin[full], axis=1)  # (docs, hi, k) -> the first non-empty bin of each order
        donors = np.take_along_axis(full, pick, axis=1)
        sig[rows] = np.take_along_axis(sig[rows], donors, axis=1)


def ranked(packed: npt.NDArray[np.uint32], own: int) -> tuple[list[int], list[int]]:
    """The distinct ids of a document's bucket reads (one id per shared band) and the number of bands each
    shares with it, most shared first, then oldest (smallest id) first; the document itself left out."""
    if packed.size == 0:
        return [], []
    ids, counts = np.unique(packed, return_counts=True)
    keep = ids != own
    ids, counts = ids[keep], counts[keep]
    order = np.lexsort((ids, -counts))
    return ids[order].tolist(), counts[order].tolist()


def pick_candidates(
    ids: Sequence[int],
    roots: Sequence[int] | None,
    limit: int,
    per_cluster: int | None = None,
    clusters: int = 0,
) -> list[int]:
    """The ranked candidate ``ids`` to verify: the best-ranked one of each of the ``clusters`` best-ranked
    distinct cluster roots, then at most ``limit`` more: the best-ranked one of each other root first (the
    roots of the best-ranked clusters when there are more), then the best-ranked others, at most
    ``per_cluster`` of a root in all (None: no such bound). ``roots`` (one per id) may be None when ``ids``
    fit both bounds.

    >>> pick_candidates([5, 6, 7, 8], [1, 1, 1, 2], 2)
    [5, 8]
    >>> pick_candidates([5, 6, 7, 8], [1, 1, 1, 2], 3)
    [5, 8, 6]
    >>> pick_candidates([5, 6, 7, 8, 9], [1, 1, 1, 2, 1], 10, per_cluster=2)
    [5, 8, 6]
    >>> pick_candidates([5, 6, 7, 8], [1, 2, 2, 3], 1, clusters=2)
    [5, 6, 8]
    """
    per = len(ids) if per_cluster is None else per_cluster
    if len(ids) <= min(limit, per):
        return list(ids)
    assert roots is not None
    taken: dict[int, int] = {}
    first: list[int] = []
    rest: list[int] = []
    for n, root in zip(ids, roots, strict=True):
        count = taken.get(root, 0)
        if count < per:
            (rest if count else first).append(n)
            taken[root] = count + 1
    return first[:clusters] + (first[clusters:] + rest)[:limit]
