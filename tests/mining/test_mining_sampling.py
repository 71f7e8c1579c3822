"""Random sampling: the threshold scales, false positives are removed, and misses are never silent."""

from __future__ import annotations

from mining_oracle import brute_force, random_baskets

from dedupd.mining.baskets import Baskets
from dedupd.mining.sampling import random_sampling, sample_threshold


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
