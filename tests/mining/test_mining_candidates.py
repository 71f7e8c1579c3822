"""Candidate generation (join + prune) and the negative border."""

from __future__ import annotations

import itertools

import numpy as np

from dedupd.mining.candidates import apriori_gen, negative_border


def _naive_gen(prev: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    have = set(prev)
    k = len(prev[0]) + 1
    items = sorted({i for s in prev for i in s})
    return [
        c
        for c in itertools.combinations(items, k)
        if all(s in have for s in itertools.combinations(c, k - 1))
    ]


def test_join_and_prune_match_the_definition() -> None:
    """C_k = the k-sets all of whose (k-1)-subsets are in L_{k-1}, for random L_{k-1}."""
    rng = np.random.default_rng(1)
    for k in (2, 3, 4):
        sets = sorted({tuple(sorted(rng.choice(8, k - 1, replace=False).tolist())) for _ in range(25)})
        cand = apriori_gen(np.array(sets, dtype=np.int32))
        assert [tuple(r) for r in cand.sets.tolist()] == _naive_gen(sets)
        assert (cand.sets[:, :-1] == np.array(sets, dtype=np.int32)[cand.prefix]).all()
        assert (cand.sets[:, -1] == cand.item).all()


def test_negative_border() -> None:
    """Not in the family, every immediate subset in it."""
    fam = [np.array([[0], [1], [2]], dtype=np.int32), np.array([[0, 1], [1, 2]], dtype=np.int32)]
    border = negative_border(fam, 4)
    assert border[0].tolist() == [[3]]
    assert border[1].tolist() == [[0, 2]]
    assert len(border) == 2 or border[2].shape[0] == 0
