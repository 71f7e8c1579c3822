"""Batch verification of candidate pairs against plain-Python set arithmetic."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dedupd.similarity.minhash import estimate
from dedupd.similarity.verify import agreement_pairs, jaccard_pairs

small_sets = st.lists(st.sets(st.integers(0, 40), max_size=30), min_size=1, max_size=8)


@settings(max_examples=200, deadline=None)
@given(small_sets, st.data())
def test_jaccard_pairs_equals_set_arithmetic(sets: list[set[int]], data: st.DataObject) -> None:
    arrays = [np.array(sorted(s), dtype=np.uint32) for s in sets]
    n = len(sets)
    pairs = data.draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=20))
    left = np.array([p[0] for p in pairs], dtype=np.int64)
    right = np.array([p[1] for p in pairs], dtype=np.int64)
    got = jaccard_pairs(arrays, left, right)
    for (a, b), sim in zip(pairs, got.tolist(), strict=True):
        union = sets[a] | sets[b]
        assert sim == (len(sets[a] & sets[b]) / len(union) if union else 0.0)


def test_jaccard_pairs_on_large_sets_with_the_full_uint32_range() -> None:
    rng = np.random.default_rng(3)
    base = rng.integers(0, 2**32, 5000, dtype=np.uint64).astype(np.uint32)
    a = np.unique(base)
    b = np.unique(
        np.concatenate([base[:4000], rng.integers(0, 2**32, 900, dtype=np.uint64).astype(np.uint32)])
    )
    sa, sb = set(a.tolist()), set(b.tolist())
    got = jaccard_pairs([a, b], np.array([0, 1]), np.array([1, 0]))
    assert got.tolist() == [len(sa & sb) / len(sa | sb)] * 2


def test_agreement_pairs_equals_estimate() -> None:
    rng = np.random.default_rng(5)
    sigs = rng.integers(0, 4, (6, 128), dtype=np.uint32)
    left, right = np.array([0, 1, 2, 5]), np.array([3, 1, 4, 0])
    got = agreement_pairs(sigs, left, right)
    assert got.tolist() == [estimate(sigs[a], sigs[b]) for a, b in zip(left, right, strict=True)]


def test_no_pairs() -> None:
    assert jaccard_pairs([], np.zeros(0, np.int64), np.zeros(0, np.int64)).shape == (0,)
    assert agreement_pairs(
        np.zeros((0, 4), np.uint32), np.zeros(0, np.int64), np.zeros(0, np.int64)
    ).shape == (0,)
