"""Random sampling: the threshold scales, false positives are removed, and misses are never silent."""

from __future__ import annotations

import numpy as np
import pytest
from mining_oracle import brute_force, random_baskets

from dedupd.errors import ConfigError
from dedupd.mining.apriori import apriori
from dedupd.mining.baskets import Baskets
from dedupd.mining.sampling import random_sampling, sample_threshold, verify


def test_threshold_scales_with_the_sample() -> None:
    assert sample_threshold(50, 100, 1000, 1.0) == 5
    assert sample_threshold(50, 100, 1000, 0.5) == 3
    assert sample_threshold(1, 10, 1000, 1.0) == 1


def test_verified_sampling_is_exact_or_says_it_missed() -> None:
    """Over many samples: no false positive ever; whenever itemsets are missing, the result says so."""
    lists = random_baskets(7, 400, 12, 8)
    b = Baskets.from_lists(lists)
    truth = brute_force(lists, 30)
    saw_miss = False
    for seed in range(12):
        r = random_sampling(b, 30, fraction=0.05, seed=seed)
        got = r.counts_by_names()
        assert set(got.items()) <= set(truth.items())  # exact counts, nothing wrong
        if got != truth:
            saw_miss = True
            assert not r.complete
            assert any("missed" in w for w in r.warnings)
        else:
            assert r.complete or r.warnings
    assert saw_miss  # a 5% sample of 400 baskets does miss sometimes: the check above was exercised


def test_unverified_sampling_always_warns() -> None:
    lists = random_baskets(1, 200, 8, 6)
    r = random_sampling(Baskets.from_lists(lists), 20, fraction=0.5, verify_pass=False)
    assert not r.complete
    assert "estimates" in r.warnings[0] and "missing" in r.warnings[0]


def test_candidates_are_bounded() -> None:
    """The sample and the verifying pass each refuse more than max_candidates, in one line that names
    --max-size and --support; a wide limit changes nothing."""
    lists = random_baskets(7, 400, 12, 8)
    b = Baskets.from_lists(lists)
    with pytest.raises(
        ConfigError, match=r"sample of 40 baskets .*more than 50 candidate.*--max-size.*--support"
    ):
        random_sampling(b, 30, fraction=0.1, max_candidates=50)
    sample = [s for s, _ in apriori(b.take(np.arange(40, dtype=np.int64)), 3).levels]
    with pytest.raises(ConfigError, match=r"negative border are \d[\d,]* itemsets to count, more than 10:"):
        verify(b, sample, 30, None, max_candidates=10)
    assert (
        random_sampling(b, 30, fraction=0.1).counts_by_names()
        == random_sampling(b, 30, fraction=0.1, max_candidates=None).counts_by_names()
    )
