"""Compiled hot loops (numba): word shingle hashing, one-permutation hashing, classic MinHash (pure).

The numpy code in :mod:`dedupd.similarity.shingling` and :mod:`dedupd.similarity.minhash` is vectorized over a batch, but a
numpy batch cannot fuse loops: every step is a pass over memory with its own temporaries, and the per-
document work that does not vectorize (densifying the ~120 empty bins of a short document's one-
permutation signature) is paid in Python-level grouping. These kernels do the same arithmetic in one
loop per document, and give *exactly* the same values as the numpy reference implementations (in
tests/reference.py; tests/test_kernels.py compares the two). They are compiled on first use and cached
next to this file (``cache=True``), and they release the GIL (``nogil=True``).

This module imports numba: import it lazily (the CLI does not need it).
"""

from __future__ import annotations

import numba
import numpy as np

_U64 = np.uint64
_C1 = _U64(0xFF51AFD7ED558CCD)
_C2 = _U64(0xC4CEB9FE1A85EC53)
_S33 = _U64(33)
_S32 = _U64(32)
_S29 = _U64(29)
_S61 = _U64(61)
_S3 = _U64(3)
_M32 = _U64(0xFFFFFFFF)
_M29 = _U64((1 << 29) - 1)
_P61 = _U64((1 << 61) - 1)
_ONE = _U64(1)
_ZERO = _U64(0)
# the word-hash constants of dedupd.similarity.shingling (kept equal there: tests check it)
_POS_MUL = _U64(0xD6E8FEB86659FD93)
_CP_MUL = _U64(0xA0761D6478BD642F)
_LEN_MUL = _U64(0xE7037ED1A0B428DB)
_EMPTY = np.uint32(0xFFFFFFFF)
_WORD = np.uint32(0x80000000)  # in the fold table: a word character
_IGNORABLE = np.uint32(0x40000000)  # in the fold table: a default-ignorable code point (never a word one)
_CP_BITS = np.uint32(0x3FFFFFFF)  # in the fold table: the lowercase code point
_IGNORED = -2  # what the word scan returns for a document that holds a default-ignorable code point

_jit = numba.njit(cache=True, nogil=True)
_inline = numba.njit(cache=True, nogil=True, inline="always")


@_inline
def fmix64(h: np.uint64) -> np.uint64:
    """MurmurHash3's 64-bit finalizer (wrapping arithmetic), as :func:`dedupd.similarity.hashing.fmix64`."""
    h ^= h >> _S33
    h *= _C1
    h ^= h >> _S33
    h *= _C2
    h ^= h >> _S33
    return h


@_inline
def _decode(buf, i):  # type: ignore[no-untyped-def]
    """The code point of the UTF-8 sequence at ``buf[i]`` and where the next one starts."""
    c = np.int64(buf[i])
    if c < 0x80:
        return c, i + 1
    if c < 0xE0:
        return ((c & 0x1F) << 6) | (np.int64(buf[i + 1]) & 0x3F), i + 2
    if c < 0xF0:
        return ((c & 0x0F) << 12) | ((np.int64(buf[i + 1]) & 0x3F) << 6) | (
            np.int64(buf[i + 2]) & 0x3F
        ), i + 3
    return (
        ((c & 0x07) << 18)
        | ((np.int64(buf[i + 1]) & 0x3F) << 12)
        | ((np.int64(buf[i + 2]) & 0x3F) << 6)
        | (np.int64(buf[i + 3]) & 0x3F)
    ), i + 4


@_inline
def _isspace(c: int) -> bool:
    """``str.isspace`` of one code point (the separators ``str.split()`` drops)."""
    if c <= 0x20:
        return c == 0x20 or 9 <= c <= 13 or 0x1C <= c <= 0x1F
    if c < 0x85:
        return False
    return (
        c == 0x85
        or c == 0xA0
        or c == 0x1680
        or 0x2000 <= c <= 0x200A
        or c == 0x2028
        or c == 0x2029
        or c == 0x202F
        or c == 0x205F
        or c == 0x3000
    )


@_jit
def isspace_table(n: int) -> np.ndarray:
    """The kernel's whitespace test for code points 0..n-1 (for tests)."""
    out = np.zeros(n, dtype=np.bool_)
    for c in range(n):
        out[c] = _isspace(c)
    return out


@_jit
def word_shingles(buf, fold, doc_start, k, pm):  # type: ignore[no-untyped-def]
    """Word k-shingle hashes of a batch, as ``numpy_batch`` in tests/reference.py computes them.

    Args:
        buf: uint8, the texts in UTF-8 (surrogates passed), joined by ``"\\n"``, in NFKC (and, for the
            documents flagged by an earlier call, without their default-ignorable code points:
            :func:`dedupd.similarity.normalization.nfkc`).
        fold: uint32 per code point: its lowercase (``str.lower``, which is one code point for every
            code point but U+0130, and context-free but for U+03A3: texts holding those come lowercased
            already, and ``str.lower`` is idempotent) with bit 31 set when that is a word character
            (``re``'s ``\\w``), or else bit 30 when the code point is default-ignorable.
        doc_start: int64, n_docs + 1: document d is ``buf[doc_start[d] : doc_start[d+1] - 1]``
            (``doc_start[n_docs] == len(buf) + 1``).
        k: shingle length in words (>= 1).
        pm: uint64 position multipliers (``dedupd.similarity.hashing.POSITION_MULTIPLIERS``), at least k.

    Returns:
        ``(hashes, offsets, n_units, whole, tail_lo, tail_hi, ignored, top)``: the shingle hashes
        (document d's are ``hashes[offsets[d]:offsets[d+1]]``); words per document; ``whole[d]`` when
        document d has no word but some non-space character: its one slot in ``hashes`` is left 0 for the
        caller to fill with the whole-text hash; the byte range of the text's last k-1 words (empty when it
        has no word or k == 1); ``ignored[d]`` when document d holds a default-ignorable code point (then
        its values are not valid: call again with it normalised without them); ``top``: -1, or a code
        point beyond ``fold`` (then nothing else is valid: call again with a larger table).
    """
    n_docs = doc_start.shape[0] - 1
    n = buf.shape[0]
    units = np.empty(n // 2 + 2, dtype=np.uint64)
    wstart = np.empty(n // 2 + 2, dtype=np.int64)
    out = np.empty(n // 2 + 2 * n_docs + 2, dtype=np.uint64)
    offsets = np.zeros(n_docs + 1, dtype=np.int64)
    n_units = np.zeros(n_docs, dtype=np.int64)
    whole = np.zeros(n_docs, dtype=np.bool_)
    tail_lo = np.zeros(n_docs, dtype=np.int64)
    tail_hi = np.zeros(n_docs, dtype=np.int64)
    ignored = np.zeros(n_docs, dtype=np.bool_)
    o = 0
    for d in range(n_docs):
        s = doc_start[d]
        e = doc_start[d + 1] - 1
        nw, last_end, top = _scan_words(buf, fold, s, e, units, wstart)
        if top >= 0:
            return out[:0], offsets, n_units, whole, tail_lo, tail_hi, ignored, top
        if top == _IGNORED:  # no shingle: the caller drops them and calls again
            ignored[d] = True
            offsets[d + 1] = o
            tail_lo[d] = s
            tail_hi[d] = s
            continue
        n_units[d] = nw
        if nw > 0:
            o = _emit_shingles(units, nw, k, pm, out, o)
        elif _has_non_space(buf, fold, s, e):  # no word: one slot for the whole text, unless all whitespace
            whole[d] = True
            out[o] = 0
            o += 1
        offsets[d + 1] = o
        if nw > 0 and k > 1:
            tail_lo[d] = wstart[nw - min(nw, k - 1)]
            tail_hi[d] = last_end
        else:
            tail_lo[d] = s
            tail_hi[d] = s
    return out[:o], offsets, n_units, whole, tail_lo, tail_hi, ignored, np.int64(-1)


@_inline
def _scan_words(buf, fold, s, e, units, wstart):  # type: ignore[no-untyped-def]
    """The words of ``buf[s:e]``: each one's hash into ``units`` and its first byte into ``wstart``.

    Returns ``(words, end of the last word, top)``: ``top`` is -1, or a code point beyond ``fold``, or
    ``_IGNORED`` at the first default-ignorable code point (then the rest is not valid).
    """
    size = fold.shape[0]
    nw = 0
    last_end = s
    i = s
    while i < e:  # between words
        at = i
        c, i = _decode(buf, i)
        if c >= size:
            return nw, last_end, c
        f = fold[c]
        if f >= _WORD:  # a word starts
            wstart[nw] = at
            unit, i, last_end, c = _hash_word(buf, fold, f, i, e)
            if c != -1:
                return nw, last_end, c
            units[nw] = unit
            nw += 1
        elif f >= _IGNORABLE:
            return nw, last_end, np.int64(_IGNORED)
    return nw, last_end, np.int64(-1)


@_inline
def _hash_word(buf, fold, f, i, e):  # type: ignore[no-untyped-def]
    """The hash of the word whose first character folds to ``f``, its other characters read from
    ``buf[i:e]`` in a tight loop.

    Returns ``(hash, i, end, top)``: where reading stopped (after the first non-word character), where
    the word ends, and -1, or a code point beyond ``fold``, or ``_IGNORED`` when that character is a
    default-ignorable code point (then the rest is not valid).
    """
    size = fold.shape[0]
    acc = _ZERO
    pp = _ZERO  # position in the word * _POS_MUL
    length = _ZERO
    while True:
        acc += fmix64(_U64(f & _CP_BITS) * _CP_MUL + pp)
        pp += _POS_MUL
        length += _ONE
        if i >= e:
            return fmix64(acc + length * _LEN_MUL), i, i, np.int64(-1)
        at = i
        c, i = _decode(buf, i)
        if c >= size:
            return _ZERO, i, at, c
        f = fold[c]
        if f < _WORD:
            if f >= _IGNORABLE:
                return _ZERO, i, at, np.int64(_IGNORED)
            return fmix64(acc + length * _LEN_MUL), i, at, np.int64(-1)


@_inline
def _emit_shingles(units, nw, k, pm, out, o):  # type: ignore[no-untyped-def]
    """The shingle hashes of a document's ``nw`` >= 1 word hashes, written to ``out`` from ``o``: every k
    consecutive words, or all of them when there are fewer than k. Returns the new end."""
    if nw >= k:
        ku = _U64(k)
        for w in range(nw - k + 1):
            acc = ku
            for j in range(k):
                acc += units[w + j] * pm[j]
            out[o] = fmix64(acc)
            o += 1
    else:
        acc = _U64(nw)
        for j in range(nw):
            acc += units[j] * pm[j]
        out[o] = fmix64(acc)
        o += 1
    return o


@_inline
def _has_non_space(buf, fold, s, e):  # type: ignore[no-untyped-def]
    """Whether ``buf[s:e]`` (all code points within ``fold``) holds a character that is not whitespace."""
    i = s
    while i < e:
        c, i = _decode(buf, i)
        if not _isspace(fold[c] & _CP_BITS):
            return True
    return False


@_inline
def _densify_row(row, keys, orders, full, donors, best, shift_mask, scan_limit):  # type: ignore[no-untyped-def]
    """Optimal densification of one raw OPH signature, in place (as the numpy reference's ``_oph_fill``).

    Each empty bin j takes the value of the non-empty bin that comes first in bin j's seeded order.
    ``keys[i, j] = (rank of bin i in bin j's order + 1) << shift | i``, so the smallest key of column j
    over the non-empty bins i names the donor (a non-empty bin ranks itself first: it keeps its value).
    Two ways, the cheaper per document: with m non-empty bins, take the column minimum over their m rows
    (m * k steps, contiguous, vectorized), or walk each empty bin's order until a non-empty bin (about
    k / m steps per empty bin, random access).
    """
    k = row.shape[0]
    m = 0
    for j in range(k):
        donors[m] = j
        m += row[j] != _EMPTY
    if m == 0 or m == k:
        return
    if m <= scan_limit:
        mask = best.dtype.type(shift_mask)
        first = keys[donors[0]]
        for j in range(k):
            best[j] = first[j]
        for t in range(1, m):
            kt = keys[donors[t]]
            for j in range(k):
                best[j] = min(best[j], kt[j])
        for j in range(k):
            row[j] = row[best[j] & mask]
    else:
        for j in range(k):
            full[j] = row[j] != _EMPTY
        for j in range(k):
            if not full[j]:
                oj = orders[j]
                t = 0
                while not full[oj[t]]:
                    t += 1
                row[j] = row[oj[t]]


@_jit
def oph_signatures(hashes, offsets, salt, k, keys, orders, shift_mask, scan_limit, densify):  # type: ignore[no-untyped-def]
    """One-permutation signatures, shape (n_docs, k) uint32, as the numpy reference's ``oph_signatures``.

    Each shingle h: ``mixed = fmix64(h ^ salt)``, bin ``((mixed >> 32) * k) >> 32``, value the low 32
    bits; each bin keeps its minimum (0xFFFFFFFF = empty); then, if ``densify``, empty bins are filled.
    """
    n_docs = offsets.shape[0] - 1
    sig = np.empty((n_docs, k), dtype=np.uint32)
    full = np.zeros(k, dtype=np.bool_)
    donors = np.empty(k, dtype=np.uint32)
    best = np.empty(k, dtype=keys.dtype)
    ku = _U64(k)
    for d in range(n_docs):
        row = sig[d]
        row[:] = _EMPTY
        for t in range(offsets[d], offsets[d + 1]):
            mixed = fmix64(hashes[t] ^ salt)
            b = ((mixed >> _S32) * ku) >> _S32
            v = np.uint32(mixed & _M32)
            row[b] = min(row[b], v)
        if densify:
            _densify_row(row, keys, orders, full, donors, best, shift_mask, scan_limit)
    return sig


@_jit
def oph_densify(sig, keys, orders, shift_mask, scan_limit):  # type: ignore[no-untyped-def]
    """Densify raw signatures (shape (n, k) uint32) in place."""
    k = sig.shape[1]
    full = np.zeros(k, dtype=np.bool_)
    donors = np.empty(k, dtype=np.uint32)
    best = np.empty(k, dtype=keys.dtype)
    for d in range(sig.shape[0]):
        _densify_row(sig[d], keys, orders, full, donors, best, shift_mask, scan_limit)


@_jit
def classic_signatures(hashes, offsets, a, b):  # type: ignore[no-untyped-def]
    """Classic MinHash over ``h_i(x) = (a[i] * x + b[i]) mod (2**61 - 1)``: the top 32 bits (``>> 29``)
    of each minimum, shape (n_docs, len(a)) uint32, as ``HashFamily.apply`` + ``minhash_matrix``.

    ``x`` is the shingle hash reduced into the field first; an empty document gets 0xFFFFFFFF.
    """
    n_docs = offsets.shape[0] - 1
    k = a.shape[0]
    ah = np.empty(k, dtype=np.uint64)
    al = np.empty(k, dtype=np.uint64)
    for i in range(k):
        ah[i] = a[i] >> _S32
        al[i] = a[i] & _M32
    mins = np.empty(k, dtype=np.uint64)
    out = np.empty((n_docs, k), dtype=np.uint32)
    for d in range(n_docs):
        mins[:] = _P61
        for t in range(offsets[d], offsets[d + 1]):
            x = hashes[t]
            x = (x & _P61) + (x >> _S61)
            if x >= _P61:
                x -= _P61
            xh = x >> _S32
            xl = x & _M32
            for i in range(k):
                hi = ah[i] & _M32
                lo = al[i] & _M32
                # a*x = ah*xh*2^64 + (ah*xl + al*xh)*2^32 + al*xl, and 2^61 = 1 (mod p) so 2^64 = 8
                v = (xh * hi) << _S3
                mid = xh * lo + xl * hi
                v += mid >> _S29
                v += (mid & _M29) << _S32
                low = xl * lo
                v += (low & _P61) + (low >> _S61)
                v += b[i]
                v = (v & _P61) + (v >> _S61)
                if v >= _P61:
                    v -= _P61
                mins[i] = min(mins[i], v)
        for i in range(k):
            out[d, i] = np.uint32(mins[i] >> _S29)
    return out


@_jit
def _sorted_distinct_into(part, out, at):  # type: ignore[no-untyped-def]
    """Sort ``part`` (non-empty) in place and write its distinct values to ``out`` from ``at``; returns the
    new end."""
    part.sort()
    out[at] = part[0]
    at += 1
    for i in range(1, part.shape[0]):
        if part[i] != part[i - 1]:
            out[at] = part[i]
            at += 1
    return at


@_jit
def distinct_low32(hashes, offsets):  # type: ignore[no-untyped-def]
    """Each document's sorted distinct low 32 bits of its shingle hashes, as :func:`dedupd.similarity.shingling.distinct32`.

    Returns the concatenated values and the per-document offsets (one sort per document, in place).
    """
    n_docs = offsets.shape[0] - 1
    out = np.empty(hashes.shape[0], dtype=np.uint32)
    out_offsets = np.zeros(n_docs + 1, dtype=np.int64)
    at = 0
    for d in range(n_docs):
        lo, hi = offsets[d], offsets[d + 1]
        if hi > lo:
            part = np.empty(hi - lo, dtype=np.uint32)
            for i in range(lo, hi):
                part[i - lo] = np.uint32(hashes[i] & _M32)
            at = _sorted_distinct_into(part, out, at)
        out_offsets[d + 1] = at
    return out[:at].copy(), out_offsets


@_jit
def distinct_small64(hashes, offsets, limit):  # type: ignore[no-untyped-def]
    """Each document's sorted distinct 64-bit shingle hashes when it has at most ``limit`` of them, as
    :func:`dedupd.similarity.shingling.distinct64`.

    A document with more than ``2 * limit`` hashes (repeats counted) is not sorted at all. Returns the
    concatenated values, the per-document offsets and whether each document's set was kept.
    """
    n_docs = offsets.shape[0] - 1
    out = np.empty(hashes.shape[0], dtype=np.uint64)
    out_offsets = np.zeros(n_docs + 1, dtype=np.int64)
    kept = np.zeros(n_docs, dtype=np.bool_)
    at = 0
    for d in range(n_docs):
        lo, hi = offsets[d], offsets[d + 1]
        if hi - lo <= 2 * limit:
            start = at
            if hi > lo:
                at = _sorted_distinct_into(hashes[lo:hi].copy(), out, at)
            if at - start > limit:
                at = start
            else:
                kept[d] = True
        out_offsets[d + 1] = at
    return out[:at].copy(), out_offsets, kept


@_jit
def pair_jaccards(flat, offsets, left, right, out):  # type: ignore[no-untyped-def]
    """Exact Jaccard of sets ``left[p]`` and ``right[p]`` for every p (sorted distinct values, set i is
    ``flat[offsets[i]:offsets[i+1]]``), by merging the two runs; 0.0 when both are empty."""
    for p in range(left.shape[0]):
        i, a_end = offsets[left[p]], offsets[left[p] + 1]
        j, b_end = offsets[right[p]], offsets[right[p] + 1]
        size = (a_end - i) + (b_end - j)
        n = 0
        while i < a_end and j < b_end:
            x, y = flat[i], flat[j]
            if x == y:
                n += 1
                i += 1
                j += 1
            elif x < y:
                i += 1
            else:
                j += 1
        union = size - n
        out[p] = n / union if union > 0 else 0.0
