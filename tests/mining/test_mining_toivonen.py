"""Toivonen: never a wrong answer, however small the sample; the attempts are reported."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mining_oracle import basket_lists, brute_force, random_baskets

from dedupd.errors import ConfigError
from dedupd.mining.baskets import Baskets
from dedupd.mining.toivonen import toivonen


def test_exact_across_many_samples() -> None:
    """Tiny samples fail often; the answer is still always exact (retries or fallback)."""
    lists = random_baskets(3, 300, 12, 8)
    b = Baskets.from_lists(lists)
    truth = brute_force(lists, 20)
    outcomes = set()
    for seed in range(8):
        r = toivonen(b, 20, fraction=0.03, seed=seed, max_attempts=2)
        assert r.counts_by_names() == truth
        assert r.complete and not r.warnings
        outcomes.add(len(r.notes) > 0)
        assert len(r.passes) >= 2
    assert True in outcomes  # at least one run needed a retry or the fallback, and said so


@settings(max_examples=40, deadline=None)
@given(basket_lists(), st.integers(1, 5), st.floats(0.05, 1.0), st.integers(0, 1000))
def test_never_wrong(lists: list[list[str]], min_count: int, fraction: float, seed: int) -> None:
    r = toivonen(Baskets.from_lists(lists), min_count, fraction=fraction, seed=seed, max_attempts=2)
    assert r.counts_by_names() == brute_force(lists, min_count)


def _wide_baskets() -> list[list[str]]:
    """200 baskets of 14 of 40 items: a sample of 20 at a lowered threshold of 1 holds ~16,000 subsets
    of each of its baskets."""
    rng = random.Random(1)
    items = [f"i{i}" for i in range(40)]
    return [rng.sample(items, 14) for _ in range(200)]


def test_candidates_are_bounded_with_a_message_that_says_what_to_change() -> None:
    """Toivonen's sample explodes at a lowered threshold of 1: refused, in one line naming --max-size
    and --support, after at most the allowed candidates (not minutes of counting); with --max-size
    the same run is exact."""
    lists = _wide_baskets()
    b = Baskets.from_lists(lists)
    with pytest.raises(
        ConfigError, match=r"more than 20,000 candidate itemsets.*--max-size.*--support"
    ) as exc:
        toivonen(b, 10, max_candidates=20_000)
    assert "\n" not in str(exc.value) and "threshold of 1 (of 10)" in str(exc.value)
    r = toivonen(b, 10, max_size=2, max_candidates=20_000)
    assert r.counts_by_names() == brute_force(lists, 10, 2)
    counted = sum(p.candidates for p in r.passes if "full pass" in p.what)
    assert 0 < counted <= 20_000  # the full pass reports what it counted: the sample's itemsets and border
