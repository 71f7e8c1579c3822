"""Association rules: the seed's rules, measures, monotonicity pruning, and the limits."""

from __future__ import annotations

import itertools

import pytest
from mining_oracle import SEED_BASKETS, random_baskets
from rules_reference import old_generate_rules, old_render_csv, old_render_json, old_render_table

from dedupd.errors import ConfigError
from dedupd.mining.apriori import apriori
from dedupd.mining.baskets import Baskets
from dedupd.mining.output import json_chunks, render_csv, render_json, render_table
from dedupd.mining.rules import generate_rules, rule_table


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


@pytest.mark.parametrize(
    ("seed", "min_count", "kw"),
    [
        (1, 12, {}),
        (2, 10, {"max_consequent": 1}),
        (3, 15, {"max_consequent": 2, "max_antecedent": 2}),
        (4, 8, {"min_lift": 1.2, "sort_by": "lift"}),
        (5, 10, {"min_interest": 0.2, "sort_by": "interest", "top_k": 40}),
        (6, 12, {"sort_by": "leverage", "min_confidence": 0.0}),
        (7, 9, {"sort_by": "support", "min_confidence": 1.0}),
    ],
)
def test_columns_equal_the_rule_at_a_time_definition(
    seed: int, min_count: int, kw: dict[str, object]
) -> None:
    """The vectorised rules are the old one-rule-at-a-time ones: same rules, same order, every measure
    equal to the last bit (conviction None when confidence is 1)."""
    kw = {"min_confidence": 0.3, **kw}
    planted = [["x", "y", "i0"]] * 20 + [["y"]] * 5  # x -> y and x -> i0 hold always: conviction None
    r = apriori(Baskets.from_lists(random_baskets(seed, 400, 10, 8) + planted), min_count)
    old = old_generate_rules(r, **kw)  # type: ignore[arg-type]
    new = generate_rules(r, **kw)  # type: ignore[arg-type]
    assert old, "the case must produce rules"
    assert [x.as_dict() for x in new] == [x.as_dict() for x in old]
    assert any(x.conviction is None for x in old) or kw.get("min_confidence") == 0.3


def test_json_and_csv_are_the_old_text() -> None:
    """The JSON and CSV written from the columns are, byte for byte, what the old renderers wrote."""
    r = apriori(Baskets.from_lists(random_baskets(11, 500, 12, 9) + [['q"uote', "é", "i1"]] * 40), 20)
    old = old_generate_rules(r, 0.2)
    table = rule_table(r, 0.2)
    assert len(table) == len(old) > 100
    assert render_json(r, table) == old_render_json(r, old)
    assert "".join(json_chunks(r, table, chunk=7)) == old_render_json(r, old)  # pieces joined right
    assert render_csv(r, table) == old_render_csv(r, old)
    assert render_table(r, table, 20) == old_render_table(r, old, 20)
    assert render_table(r, table, None) == old_render_table(r, old, None)


def test_no_rules() -> None:
    """Itemsets of size one only: no rule, and every renderer copes."""
    r = apriori(Baskets.from_lists([["a"], ["b"], ["a"]]), 1)
    assert len(rule_table(r)) == 0 and generate_rules(r) == []
    assert render_json(r, rule_table(r)) == old_render_json(r, [])
