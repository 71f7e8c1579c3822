"""Association rules: the seed's rules, measures, monotonicity pruning, and the limits."""

from __future__ import annotations

import itertools

import pytest
from mining_oracle import SEED_BASKETS, random_baskets

from dedupd.errors import ConfigError
from dedupd.mining.apriori import apriori
from dedupd.mining.baskets import Baskets
from dedupd.mining.rules import generate_rules


def _seed_rules(**kw: object) -> dict[tuple[tuple[str, ...], tuple[str, ...]], object]:
    r = apriori(Baskets.from_lists(SEED_BASKETS), 2)
    return {(x.antecedent, x.consequent): x for x in generate_rules(r, **kw)}  # type: ignore[arg-type]


def test_seed_rules_come_out() -> None:
    """Seed output: {Milk} -> {Coke} and {Diaper, Milk} -> {Beer} at support 2, confidence 0.6."""
    rules = _seed_rules(min_confidence=0.6)
    milk_coke = rules[(("Milk",), ("Coke",))]
    assert milk_coke.confidence == pytest.approx(0.75)  # type: ignore[attr-defined]
    assert milk_coke.interest == pytest.approx(abs(0.75 - 3 / 5))  # type: ignore[attr-defined]
    assert milk_coke.lift == pytest.approx(0.75 / 0.6)  # type: ignore[attr-defined]
    dmb = rules[(("Diaper", "Milk"), ("Beer",))]
    assert dmb.confidence == pytest.approx(2 / 3) and dmb.support == pytest.approx(0.4)  # type: ignore[attr-defined]
    assert dmb.leverage == pytest.approx(0.4 - 0.6 * 0.6)  # type: ignore[attr-defined]
    assert dmb.conviction == pytest.approx((1 - 0.6) / (1 - 2 / 3))  # type: ignore[attr-defined]
    assert (("Milk",), ("Coke",)) not in _seed_rules(min_confidence=0.8)


def test_all_rules_match_exhaustive_enumeration() -> None:
    """Monotonicity pruning loses nothing: same rules as trying every split of every itemset."""
    lists = random_baskets(9, 300, 9, 7)
    r = apriori(Baskets.from_lists(lists), 15)
    counts = r.counts_by_names()
    expected = set()
    for itemset, c in counts.items():
        for k in range(1, len(itemset)):
            for ante in itertools.combinations(sorted(itemset), k):
                if c / counts[frozenset(ante)] >= 0.55:
                    expected.add((ante, tuple(sorted(itemset - set(ante)))))
    got = {(x.antecedent, x.consequent) for x in generate_rules(r, 0.55)}
    assert got == expected and expected


def test_limits_and_order() -> None:
    r = apriori(Baskets.from_lists(SEED_BASKETS), 2)
    assert all(len(x.consequent) == 1 for x in generate_rules(r, 0.0, max_consequent=1))
    assert all(len(x.antecedent) == 1 for x in generate_rules(r, 0.0, max_antecedent=1))
    top = generate_rules(r, 0.0, top_k=3, sort_by="lift")
    assert len(top) == 3 and top[0].lift >= top[1].lift >= top[2].lift
    assert all(x.interest >= 0.3 for x in generate_rules(r, 0.0, min_interest=0.3))
    with pytest.raises(ConfigError, match="confidence"):
        generate_rules(r, 1.5)
