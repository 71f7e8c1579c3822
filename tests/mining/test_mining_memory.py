"""The memory budget: which algorithm it picks, the bytes each pass reports, and its errors."""

from __future__ import annotations

import pytest
from mining_oracle import brute_force, random_baskets

from dedupd.errors import ConfigError
from dedupd.mining.apriori import apriori
from dedupd.mining.baskets import Baskets
from dedupd.mining.memory import mine_within, parse_bytes, plan


def test_parse_bytes() -> None:
    assert parse_bytes("64MiB") == 64 * 2**20 and parse_bytes("2k") == 2000 and parse_bytes("10") == 10
    with pytest.raises(ConfigError, match="64MiB"):
        parse_bytes("lots")


def test_budget_picks_the_algorithm() -> None:
    """Ample memory: A-Priori; pair counts that do not fit: one of the hashing algorithms."""
    lists = random_baskets(0, 2000, 60, 12)
    b = Baskets.from_lists(lists)
    assert plan(b, 20, 10**8).algorithm == "apriori"
    tight = plan(b, 20, 4 * b.n_items + 1000)
    assert tight.algorithm in ("pcy", "multihash", "multistage") and tight.buckets == 250
    assert plan(b, 20, 4 * b.n_items + 1000).reason.startswith("A-Priori's pair counts need")
    with pytest.raises(ConfigError, match="too small"):
        plan(b, 20, 10)


@pytest.mark.parametrize(("budget", "algorithm"), [(60, "multistage"), (10**7, "apriori")])
def test_results_stay_exact_and_passes_report_bytes(budget: int, algorithm: str) -> None:
    lists = random_baskets(1, 500, 14, 9)
    b = Baskets.from_lists(lists)
    r = mine_within(b, 12, 4 * b.n_items + budget)
    assert r.counts_by_names() == brute_force(lists, 12)
    assert r.algorithm == algorithm and r.notes[0].startswith("--memory")
    assert all(p.nbytes > 0 for p in r.passes)
    assert r.passes[0].nbytes >= 4 * b.n_items


TRIPLES = [
    [f"x{i}", f"y{i}", f"z{i}"] for i in range(300)
] * 20  # 900 items, 900 pairs, 18,000 pair occurrences


@pytest.mark.parametrize(("buckets", "algorithm"), [(200, "multistage"), (1000, "pcy"), (2000, "multihash")])
def test_average_bucket_count_decides_the_hashing(buckets: int, algorithm: str) -> None:
    """avg >= s: Multistage; s/2 <= avg < s: PCY; avg < s/2: Multihash (s = 20 here)."""
    b = Baskets.from_lists(TRIPLES)
    p = plan(b, 20, 4 * b.n_items + 4 * buckets)
    assert (p.algorithm, p.buckets) == (algorithm, buckets)
    r = mine_within(b, 20, 4 * b.n_items + 4 * buckets)
    assert r.algorithm == algorithm
    assert r.counts_by_names() == apriori(b, 20).counts_by_names()
    assert r.passes[0].nbytes == 4 * b.n_items + 4 * sum(
        1 << (x.bit_length() - 1) for x in ([buckets] if algorithm != "multihash" else [buckets // 2] * 2)
    )
