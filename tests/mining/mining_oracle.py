"""Brute-force oracle for the mining tests: every itemset counted naively, and basket generators."""

from __future__ import annotations

import itertools
import random

from hypothesis import strategies as st

SEED_BASKETS = [
    ["Bread", "Coke", "Milk"],
    ["Beer", "Bread"],
    ["Beer", "Coke", "Diaper", "Milk"],
    ["Beer", "Bread", "Diaper", "Milk"],
    ["Coke", "Diaper", "Milk"],
]


def brute_force(
    baskets: list[list[str]], min_count: int, max_size: int | None = None
) -> dict[frozenset[str], int]:
    """Every itemset with count >= min_count, found by enumerating all subsets of the item universe."""
    sets = [frozenset(b) for b in baskets]
    universe = sorted(set().union(*sets)) if sets else []
    out: dict[frozenset[str], int] = {}
    for k in range(1, len(universe) + 1):
        if max_size is not None and k > max_size:
            break
        found = False
        for combo in itertools.combinations(universe, k):
            c = frozenset(combo)
            n = sum(1 for s in sets if c <= s)
            if n >= min_count:
                out[c] = n
                found = True
        if not found:
            break
    return out


def random_baskets(seed: int, n_baskets: int, n_items: int, max_len: int) -> list[list[str]]:
    """Baskets with skewed item popularity (so that larger itemsets are frequent too)."""
    rng = random.Random(seed)
    weights = [1.0 / (i + 1) for i in range(n_items)]
    names = [f"i{i}" for i in range(n_items)]
    return [rng.choices(names, weights, k=rng.randint(0, max_len)) for _ in range(n_baskets)]


@st.composite
def basket_lists(
    draw: st.DrawFn, max_items: int = 10, max_baskets: int = 50, max_len: int = 7
) -> list[list[str]]:
    """Hypothesis strategy: small lists of baskets over few items."""
    n_items = draw(st.integers(1, max_items))
    item = st.integers(0, n_items - 1).map(lambda i: f"i{i}")
    return draw(st.lists(st.lists(item, max_size=max_len), min_size=1, max_size=max_baskets))
