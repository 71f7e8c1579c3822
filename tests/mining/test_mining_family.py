"""Counting a downward-closed family exactly (SON pass 2, Toivonen's full pass)."""

from __future__ import annotations

import itertools

import numpy as np
from mining_oracle import random_baskets

from dedupd.mining.baskets import Baskets
from dedupd.mining.family import count_family, union_levels


def test_counts_every_member_exactly() -> None:
    lists = random_baskets(5, 200, 8, 6)
    b = Baskets.from_lists(lists)
    universe = list(range(b.n_items))
    family = [
        np.array([[i] for i in universe], dtype=np.int32),
        np.array(list(itertools.combinations(universe, 2)), dtype=np.int32),
        np.array(list(itertools.combinations(universe[:5], 3)), dtype=np.int32),
    ]
    counts = count_family(b, family)
    sets = [frozenset(b.vocab.index(x) for x in basket) for basket in lists]
    for level, c in zip(family, counts, strict=True):
        for row, n in zip(level.tolist(), c.tolist(), strict=True):
            assert n == sum(1 for s in sets if set(row) <= s)


def test_union_levels() -> None:
    a = [np.array([[0], [2]], dtype=np.int32), np.array([[0, 2]], dtype=np.int32)]
    b = [np.array([[1], [2]], dtype=np.int32)]
    u = union_levels([a, b])
    assert u[0].tolist() == [[0], [1], [2]] and u[1].tolist() == [[0, 2]]
