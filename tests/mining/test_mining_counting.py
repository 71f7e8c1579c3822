"""Vectorised counting primitives: pair generation, triangular index, extension, row lookup, merging."""

from __future__ import annotations

import itertools

import numpy as np

from dedupd.mining.counting import (
    CandidateIndex,
    Occurrences,
    count_candidates,
    expand,
    find_rows,
    merge_identical,
    pairs_triangular,
    pairs_triples,
    row_end,
    segment_pairs,
    tri_index,
)


def test_segment_pairs_lists_every_pair_once() -> None:
    """All i < j inside each segment, nothing across segments."""
    left, right = segment_pairs(np.array([0, 3, 3, 5], dtype=np.int64))
    assert list(zip(left.tolist(), right.tolist(), strict=True)) == [(0, 1), (0, 2), (1, 2), (3, 4)]


def test_expand_concatenates_ranges() -> None:
    out = expand(np.array([5, 0, 9], dtype=np.int64), np.array([2, 0, 3], dtype=np.int64))
    assert out.tolist() == [5, 6, 9, 10, 11]


def test_triangular_index_is_a_bijection() -> None:
    """tri_index maps the n(n-1)/2 pairs onto 0..n(n-1)/2-1 in lexicographic order."""
    n = 7
    pairs = list(itertools.combinations(range(n), 2))
    idx = tri_index(np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs]), n)
    assert idx.tolist() == list(range(len(pairs)))


def test_triangular_and_triples_agree_with_python() -> None:
    """Both pair structures count exactly what a double loop per basket counts."""
    rng = np.random.default_rng(3)
    baskets = [sorted(set(rng.integers(0, 9, rng.integers(0, 7)).tolist())) for _ in range(200)]
    indptr = np.zeros(len(baskets) + 1, dtype=np.int64)
    indptr[1:] = np.cumsum([len(b) for b in baskets])
    items = np.array([i for b in baskets for i in b], dtype=np.int32)
    expected: dict[tuple[int, int], int] = {}
    for b in baskets:
        for p in itertools.combinations(b, 2):
            expected[p] = expected.get(p, 0) + 1
    tri = pairs_triangular(items, row_end(indptr), 9)
    assert {p: int(tri[tri_index(np.array([p[0]]), np.array([p[1]]), 9)[0]]) for p in expected} == expected
    assert int(tri.sum()) == sum(expected.values())
    keys, counts = pairs_triples(items, row_end(indptr), 9)
    assert {(int(k) // 9, int(k) % 9): int(c) for k, c in zip(keys, counts, strict=True)} == expected


def test_extension_counts_triples_of_items() -> None:
    """Counting 3-itemsets by extending pair occurrences matches a triple loop."""
    baskets = [[0, 1, 2, 3], [0, 1, 2], [1, 2, 3], [0, 2, 3]]
    indptr = np.array([0, 4, 7, 10, 13], dtype=np.int64)
    items = np.array([i for b in baskets for i in b], dtype=np.int32)
    pairs = np.array([(0, 1), (0, 2), (1, 2), (2, 3)], dtype=np.int32)
    occ1 = Occurrences(np.arange(items.shape[0], dtype=np.int64), items)
    _, occ2 = count_candidates(
        items, row_end(indptr), occ1, CandidateIndex.build(pairs[:, 0], pairs[:, 1], 4, 4)
    )
    assert occ2 is not None
    # candidates {0,1,2} (prefix pair 0) and {1,2,3} (prefix pair 2)
    index = CandidateIndex.build(np.array([0, 2]), np.array([2, 3], dtype=np.int32), 4, 4)
    counts, _ = count_candidates(items, row_end(indptr), occ2, index)
    assert counts.tolist() == [2, 2]


def test_sparse_candidate_index_equals_dense(monkeypatch: object) -> None:
    """The searchsorted form of the index finds the same candidates as the table."""
    prefix = np.array([0, 0, 3, 5], dtype=np.int64)
    item = np.array([4, 7, 7, 9], dtype=np.int32)
    dense = CandidateIndex.build(prefix, item, 6, 10)
    CandidateIndex.DENSE_CELLS = 0  # type: ignore[misc]
    try:
        sparse = CandidateIndex.build(prefix, item, 6, 10)
    finally:
        CandidateIndex.DENSE_CELLS = 1 << 24  # type: ignore[misc]
    assert sparse.table is None and dense.table is not None
    sid = np.array([0, 0, 3, 5, 1, 5], dtype=np.int32)
    it = np.array([4, 7, 7, 9, 4, 4], dtype=np.int32)
    assert dense.find(sid, it).tolist() == sparse.find(sid, it).tolist() == [0, 1, 2, 3, -1, -1]


def test_find_rows() -> None:
    table = np.array([[0, 1], [0, 3], [2, 5]], dtype=np.int32)
    q = np.array([[2, 5], [1, 0], [0, 1]], dtype=np.int32)
    assert find_rows(table, q).tolist() == [2, -1, 0]


def test_merge_identical_keeps_weights() -> None:
    """Identical baskets merge into one with their multiplicity; different ones never merge."""
    items = np.array([0, 1, 0, 1, 1, 2, 0, 1], dtype=np.int32)
    indptr = np.array([0, 2, 4, 6, 8], dtype=np.int64)
    new_items, new_indptr, weights = merge_identical(items, indptr)
    rows = [tuple(new_items[new_indptr[i] : new_indptr[i + 1]].tolist()) for i in range(len(weights))]
    assert dict(zip(rows, weights.tolist(), strict=True)) == {(0, 1): 3, (1, 2): 1}
