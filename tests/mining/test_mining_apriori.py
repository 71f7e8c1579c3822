"""A-Priori: the seed's example, the one-third rule, and equality with a brute-force oracle."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mining_oracle import SEED_BASKETS, basket_lists, brute_force, random_baskets

from dedupd.errors import ConfigError
from dedupd.mining.apriori import CandidateLimitError, apriori, tri_cells_to_pairs
from dedupd.mining.baskets import Baskets


def test_seed_example_support_of_beer_bread_is_two() -> None:
    """Seed: 'Support of {Beer, Bread} = 2 baskets'."""
    r = apriori(Baskets.from_lists(SEED_BASKETS), 2)
    counts = r.counts_by_names()
    assert counts[frozenset({"Beer", "Bread"})] == 2
    assert counts == brute_force(SEED_BASKETS, 2)
    assert [p.what for p in r.passes] == ["items", "pairs", "3-itemsets"]


def test_one_third_rule_is_applied_and_reported() -> None:
    """Few occurring pairs among many frequent items -> triples; dense pairs -> triangular matrix."""
    sparse = [[f"a{i}", f"b{i}"] for i in range(40)] * 2  # 80 frequent items, 40 of 3160 pairs occur
    r = apriori(Baskets.from_lists(sparse), 2)
    assert r.passes[1].structure == "triples" and "< 1/3" in r.passes[1].detail
    assert r.passes[1].nbytes == 12 * 40
    dense = r2 = apriori(Baskets.from_lists(SEED_BASKETS), 1)
    del dense
    assert r2.passes[1].structure == "triangular matrix" and r2.passes[1].nbytes == 4 * 10


def test_triangular_cells_invert() -> None:
    import numpy as np

    for n in (2, 3, 10, 1000):
        cells = np.arange(n * (n - 1) // 2, dtype=np.int64)
        i, j = tri_cells_to_pairs(cells, n)
        assert (i < j).all() and (j < n).all()
        assert (i.astype(np.int64) * (2 * n - i - 1) // 2 + j - i - 1 == cells).all()


@pytest.mark.parametrize("pairs", ["triangular", "triples"])
@pytest.mark.parametrize("layout", ["horizontal", "vertical"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_equals_oracle_on_generated_baskets(pairs: str, layout: str, seed: int) -> None:
    """Every (pair structure, layout) gives exactly the brute-force itemsets and counts."""
    lists = random_baskets(seed, 300, 12, 8)
    b = Baskets.from_lists(lists)
    for min_count in (3, 10, 40):
        got = apriori(b, min_count, pairs=pairs, layout=layout).counts_by_names()  # type: ignore[arg-type]
        assert got == brute_force(lists, min_count)


@settings(max_examples=60, deadline=None)
@given(basket_lists(), st.integers(1, 6), st.sampled_from([None, 1, 2, 3]))
def test_equals_oracle_property(lists: list[list[str]], min_count: int, max_size: int | None) -> None:
    assert apriori(Baskets.from_lists(lists), min_count, max_size).counts_by_names() == brute_force(
        lists, min_count, max_size
    )


def test_edge_cases() -> None:
    """No frequent item, a single frequent item, and an invalid max size."""
    b = Baskets.from_lists([["a"], ["b"]])
    assert apriori(b, 2).n_itemsets == 0
    assert apriori(b, 1).counts_by_names() == {frozenset({"a"}): 1, frozenset({"b"}): 1}
    with pytest.raises(ConfigError, match="max size"):
        apriori(b, 1, max_size=0)


def test_candidate_limit_refuses_before_the_pass() -> None:
    """max_candidates: CandidateLimitError (a ConfigError naming --max-size) before the pass that would
    go over; None (the default) means no limit."""
    b = Baskets.from_lists(SEED_BASKETS)
    with pytest.raises(CandidateLimitError, match="--max-size") as exc:
        apriori(b, 1, max_candidates=12)  # 10 pairs, then 10 triples would make 20
    assert exc.value.size == 3 and exc.value.counted == 20
    with pytest.raises(CandidateLimitError):
        apriori(b, 1, max_candidates=9)  # the 10 pairs already
    assert apriori(b, 1, max_candidates=10_000).counts_by_names() == apriori(b, 1).counts_by_names()
