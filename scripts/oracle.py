#!/usr/bin/env python3
"""Exact all-pairs Jaccard oracle: every pair of documents with Jaccard >= t, by brute force.

The shingle sets are the package's own (``dedupd.similarity.shingling.Shingler``), so the oracle and the daemon
agree on what a shingle is; only the comparison differs (exact here, MinHash + LSH + verification in
the daemon).

Method (exact, no sampling, no hashing tricks):

1. Each document becomes its sorted distinct 64-bit shingle hashes; the hashes of the whole corpus
   are renumbered to column indices, giving a sparse binary doc x shingle matrix ``X``.
2. ``X @ X.T`` holds |A n B| for every pair that shares at least one shingle; a pair sharing none has
   J = 0 and cannot qualify. The product is computed in row chunks, so memory stays bounded.
3. J = |A n B| / (|A| + |B| - |A n B|), compared with the threshold in exact rational arithmetic
   (``inter * den >= num * union`` with t = num/den taken from its decimal form), so 4/5 counts as
   >= 0.8.

The only pruning is the size bound J(A, B) <= min(|A|, |B|) / max(|A|, |B|): documents are ordered by
set size and a chunk of rows is multiplied only with the columns whose size can still reach t. It
drops no pair with J >= t, so the result is the same as the full product.

``naive_pairs`` is a pure-Python all-pairs reference (Python sets and Fractions) for cross-checking
on small inputs (``tests/test_oracle.py``).

Command line (for a JSONL corpus)::

    .venv/bin/python scripts/oracle.py data/debian.jsonl --threshold 0.8 --shingle word:3
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from dedupd.similarity.shingling import Shingler  # noqa: E402
from dedupd.similarity.spec import ShingleSpec  # noqa: E402

U64Array = npt.NDArray[np.uint64]


def threshold_fraction(threshold: float | str | Fraction) -> Fraction:
    """The threshold as an exact fraction of its decimal form (0.8 -> 4/5)."""
    if isinstance(threshold, Fraction):
        return threshold
    return Fraction(str(threshold))


def shingle_sets(texts: Iterable[str], shingle: str = "word:3", batch: int = 512) -> list[U64Array]:
    """Sorted distinct shingle hashes of each text, with the package's own shingling."""
    sh = Shingler(ShingleSpec.parse(shingle))
    out: list[U64Array] = []
    buf: list[str] = []

    def flush() -> None:
        shingles = sh.batch(buf, tails=False)
        out.extend(shingles.distinct(i) for i in range(len(buf)))
        buf.clear()

    for t in texts:
        buf.append(t)
        if len(buf) >= batch:
            flush()
    if buf:
        flush()
    return out


def doc_shingle_matrix(sets: Sequence[npt.NDArray[np.integer]]) -> sp.csr_matrix:
    """Sparse binary matrix: row i has a 1 in the column of each distinct element of sets[i]."""
    sizes = np.fromiter((len(s) for s in sets), dtype=np.int64, count=len(sets))
    if sizes.sum() == 0:
        return sp.csr_matrix((len(sets), 0), dtype=np.int32)
    allh = np.concatenate([np.asarray(s, dtype=np.uint64) for s in sets])
    _, cols = np.unique(allh, return_inverse=True)
    indptr = np.zeros(len(sets) + 1, dtype=np.int64)
    np.cumsum(sizes, out=indptr[1:])
    data = np.ones(cols.shape[0], dtype=np.int32)
    m = sp.csr_matrix((data, cols.astype(np.int64), indptr), shape=(len(sets), int(cols.max()) + 1))
    m.sum_duplicates()  # sets are distinct already; this keeps the matrix binary if they are not
    m.data[:] = 1
    return m


@dataclass(frozen=True)
class Pairs:
    """Pairs (i < j) of document indices with their exact intersection and union sizes."""

    i: npt.NDArray[np.int64]
    j: npt.NDArray[np.int64]
    inter: npt.NDArray[np.int64]
    union: npt.NDArray[np.int64]

    def __len__(self) -> int:
        return int(self.i.shape[0])

    @property
    def jaccard(self) -> npt.NDArray[np.float64]:
        return self.inter / self.union

    def as_set(self) -> set[tuple[int, int]]:
        return set(zip(self.i.tolist(), self.j.tolist(), strict=True))


def similar_pairs(
    sets: Sequence[npt.NDArray[np.integer]],
    threshold: float | str | Fraction = 0.8,
    chunk_rows: int = 2000,
    max_chunk_cells: int = 60_000_000,
) -> Pairs:
    """Every pair (i < j) with exact Jaccard(sets[i], sets[j]) >= threshold.

    Args:
        sets: distinct elements of each document (any integer dtype; duplicates are ignored).
        threshold: t in (0, 1].
        chunk_rows: most rows multiplied at once.
        max_chunk_cells: rows x columns budget per chunk (the product's worst-case size).
    """
    t = threshold_fraction(threshold)
    if not 0 < t <= 1:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    num, den = t.numerator, t.denominator
    x = doc_shingle_matrix(sets)
    n = x.shape[0]
    sizes = np.diff(x.indptr).astype(np.int64)
    order = np.argsort(sizes, kind="stable")
    xs = x[order].tocsr()
    ssz = sizes[order]
    out_i: list[npt.NDArray[np.int64]] = []
    out_j: list[npt.NDArray[np.int64]] = []
    out_in: list[npt.NDArray[np.int64]] = []
    start = int(np.searchsorted(ssz, 1))  # empty sets never qualify
    while start < n:
        # Column range for rows [start, stop): sizes s_col with s_col <= s_row_max / t.
        stop = min(n, start + chunk_rows)
        while True:
            smax = int(ssz[stop - 1])
            hi = int(np.searchsorted(ssz, (smax * den) // num, side="right"))
            if (stop - start) * (hi - start) <= max_chunk_cells or stop - start <= 1:
                break
            stop = start + max(1, (stop - start) // 2)
        block = xs[start:stop] @ xs[start:hi].T  # (stop-start) x (hi-start), |A n B|
        block = block.tocoo()
        r = block.row.astype(np.int64) + start
        c = block.col.astype(np.int64) + start
        inter = block.data.astype(np.int64)
        keep = c > r
        r, c, inter = r[keep], c[keep], inter[keep]
        union = ssz[r] + ssz[c] - inter
        keep = inter * den >= num * union
        out_i.append(r[keep])
        out_j.append(c[keep])
        out_in.append(inter[keep])
        start = stop
    if out_i:
        ri, rj, rin = np.concatenate(out_i), np.concatenate(out_j), np.concatenate(out_in)
    else:
        ri = rj = rin = np.zeros(0, dtype=np.int64)
    gi, gj = order[ri], order[rj]
    lo, hi_ = np.minimum(gi, gj), np.maximum(gi, gj)
    union = sizes[lo] + sizes[hi_] - rin
    srt = np.lexsort((hi_, lo))
    return Pairs(lo[srt].astype(np.int64), hi_[srt].astype(np.int64), rin[srt], union[srt].astype(np.int64))


def pair_jaccard(a: npt.NDArray[np.integer], b: npt.NDArray[np.integer]) -> float:
    """Exact Jaccard of two distinct-element arrays (0.0 when both are empty)."""
    if len(a) == 0 and len(b) == 0:
        return 0.0
    inter = np.intersect1d(a, b).size
    return inter / (np.unique(a).size + np.unique(b).size - inter)


def naive_pairs(
    sets: Sequence[Iterable[int]], threshold: float | str | Fraction = 0.8
) -> dict[tuple[int, int], Fraction]:
    """Pure-Python reference: every pair (i < j) with Jaccard >= threshold, as exact Fractions."""
    t = threshold_fraction(threshold)
    py = [set(int(v) for v in s) for s in sets]
    out: dict[tuple[int, int], Fraction] = {}
    for i in range(len(py)):
        for j in range(i + 1, len(py)):
            union = len(py[i] | py[j])
            if union == 0:
                continue
            jac = Fraction(len(py[i] & py[j]), union)
            if jac >= t:
                out[(i, j)] = jac
    return out


def read_jsonl(path: Path) -> tuple[list[str], list[str]]:
    """(ids, texts) of a JSONL corpus; a repeated id keeps its last text (upsert semantics)."""
    by_id: dict[str, str] = {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                d = json.loads(line)
                by_id.pop(str(d["id"]), None)
                by_id[str(d["id"])] = d.get("text", "")
    return list(by_id), list(by_id.values())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus", type=Path, help='JSONL file of {"id", "text"} lines')
    ap.add_argument("--threshold", default="0.8", help="Jaccard threshold (default %(default)s)")
    ap.add_argument("--shingle", default="word:3", help="shingling, word:K or char:K (default %(default)s)")
    ap.add_argument("--show", type=int, default=5, help="print this many example pairs")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    ids, texts = read_jsonl(args.corpus)
    sets = shingle_sets(texts, args.shingle)
    t1 = time.perf_counter()
    pairs = similar_pairs(sets, args.threshold)
    t2 = time.perf_counter()
    for k in range(min(args.show, len(pairs))):
        print(f"  {ids[pairs.i[k]]!r} ~ {ids[pairs.j[k]]!r}  J={pairs.inter[k]}/{pairs.union[k]}")
    print(
        json.dumps(
            {
                "docs": len(ids),
                "pairs": len(pairs),
                "shingle_s": round(t1 - t0, 2),
                "pairs_s": round(t2 - t1, 2),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
