"""PCY, Multistage and Multihash: exact results whatever the buckets, and the pruning they report."""

from __future__ import annotations

import pytest
from mining_oracle import SEED_BASKETS, brute_force, random_baskets

from dedupd.errors import ConfigError
from dedupd.mining.baskets import Baskets
from dedupd.mining.pcy import multihash, multistage, pcy

ALGOS = [pcy, multistage, multihash]


@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("buckets", [2, 16, 4096])
@pytest.mark.parametrize("seed", [0, 1])
def test_equals_oracle(algo, buckets: int, seed: int) -> None:  # type: ignore[no-untyped-def]
    """Hashing only prunes: with few buckets (most frequent) or many, the result is exact."""
    lists = random_baskets(seed, 250, 11, 7)
    b = Baskets.from_lists(lists)
    for min_count in (4, 25):
        assert algo(b, min_count, buckets=buckets).counts_by_names() == brute_force(lists, min_count)


def test_passes_and_pruning_are_reported() -> None:
    """PCY makes 2 passes for pairs, Multistage 3, Multihash 2; the bitmap prunes infrequent pairs."""
    b = Baskets.from_lists(SEED_BASKETS)
    assert [p.number for p in pcy(b, 2, buckets=1024).passes][:2] == [1, 2]
    ms = multistage(b, 2, buckets=1024)
    assert ms.passes[1].what == "rehash candidate pairs" and ms.passes[2].what == "pairs"
    mh = multihash(b, 2, buckets=1024)
    assert "table 1" in mh.passes[0].detail and mh.passes[1].what == "pairs"
    # 10 pairs occur, 7 are frequent: with 1024 buckets the 3 infrequent ones are (almost surely) pruned
    assert pcy(b, 2, buckets=1024).passes[1].candidates < 10
    assert pcy(b, 2, buckets=1024).counts_by_names() == brute_force(SEED_BASKETS, 2)


def test_bad_parameters() -> None:
    b = Baskets.from_lists(SEED_BASKETS)
    with pytest.raises(ConfigError, match="buckets"):
        pcy(b, 2, buckets=1)
    with pytest.raises(ConfigError, match="stage"):
        multistage(b, 2, stages=0)
