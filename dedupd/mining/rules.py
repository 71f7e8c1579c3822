"""Association rules from frequent itemsets: confidence, interest, lift and friends, pruned by monotonicity.

Course material ``seeds/000`` ("Association Rules", "Interesting Association Rules", "Mining
Association Rules", "Rule Generation"): for a frequent itemset I and a non-empty proper subset A,
the rule ``A -> I \\ A`` has

- support ``supp(I) / n`` and confidence ``supp(I) / supp(A)``;
- interest ``|conf - Pr[consequent]|`` (the seed's definition; interesting rules have interest
  above about 0.5), and the usual count-derived measures: lift ``conf / Pr[consequent]``, leverage
  ``Pr[I] - Pr[A] Pr[C]`` and conviction ``(1 - Pr[C]) / (1 - conf)`` (None when conf = 1).

Monotonicity: if B is a subset of A then ``conf(B -> I \\ B) <= conf(A -> I \\ A)``. So consequents
are grown level-wise (A-Priori over consequents): once ``A -> I \\ A`` fails the confidence threshold,
no rule with a smaller antecedent (a larger consequent containing ``I \\ A``) is tried.

Worked example (the seed's baskets): supp{Milk} = 4, supp{Milk, Coke} = 3, so conf(Milk -> Coke)
= 0.75 and its interest is |0.75 - 3/5| = 0.15; supp{Diaper, Milk} = 3, supp{Beer, Diaper, Milk}
= 2, so conf({Diaper, Milk} -> Beer) = 2/3.

    >>> from dedupd.mining.apriori import apriori
    >>> from dedupd.mining.baskets import Baskets
    >>> b = Baskets.from_lists([["Bread", "Coke", "Milk"], ["Beer", "Bread"], ["Beer", "Coke", "Diaper", "Milk"],
    ...                         ["Beer", "Bread", "Diaper", "Milk"], ["Coke", "Diaper", "Milk"]])
    >>> rules = {(r.antecedent, r.consequent): r for r in generate_rules(apriori(b, 2), 0.6)}
    >>> r = rules[(("Milk",), ("Coke",))]
    >>> r.confidence, round(r.interest, 2), round(rules[(("Diaper", "Milk"), ("Beer",))].confidence, 3)
    (0.75, 0.15, 0.667)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from itertools import combinations
from typing import Any, Literal

from dedupd.errors import ConfigError
from dedupd.mining.result import MiningResult

SortKey = Literal["confidence", "lift", "interest", "support", "leverage"]


@dataclass(frozen=True, slots=True)
class Rule:
    """``antecedent -> consequent`` (item names sorted) with its measures."""

    antecedent: tuple[str, ...]
    consequent: tuple[str, ...]
    count: int
    support: float
    confidence: float
    interest: float
    lift: float
    leverage: float
    conviction: float | None

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["antecedent"] = list(self.antecedent)
        d["consequent"] = list(self.consequent)
        return d


def _grow(consequents: list[frozenset[int]]) -> list[frozenset[int]]:
    """Consequents one larger whose every subset one smaller is in ``consequents``."""
    have = set(consequents)
    out: set[frozenset[int]] = set()
    for a, b in combinations(consequents, 2):
        u = a | b
        if len(u) == len(a) + 1 and u not in out and all(u - {x} in have for x in u):
            out.add(u)
    return sorted(out, key=sorted)


def generate_rules(
    result: MiningResult,
    min_confidence: float = 0.5,
    max_antecedent: int | None = None,
    max_consequent: int | None = None,
    top_k: int | None = None,
    min_lift: float | None = None,
    min_interest: float | None = None,
    sort_by: SortKey = "confidence",
) -> list[Rule]:
    """All rules ``A -> I \\ A`` from the frequent itemsets with confidence >= ``min_confidence``.

    Args:
        result: frequent itemsets (every subset of a frequent itemset is in it, as A-Priori gives).
        min_confidence: in [0, 1].
        max_antecedent, max_consequent: size limits (None: no limit).
        top_k: keep the best k by ``sort_by`` (ties: lift, support, then names).
        min_lift, min_interest: further filters.

    Raises:
        ConfigError: for a confidence outside [0, 1] or a non-positive size or k.
    """
    if not 0 <= min_confidence <= 1:
        raise ConfigError(f"confidence must be between 0 and 1; got {min_confidence}")
    for name, v in (("max antecedent", max_antecedent), ("max consequent", max_consequent), ("top-k", top_k)):
        if v is not None and v < 1:
            raise ConfigError(f"{name} must be at least 1 (or unset); got {v}")
    counts = result.counts_by_ids()
    n = max(result.n_baskets, 1)
    vocab = result.vocab
    rules: list[Rule] = []
    for itemset, count in counts.items():
        if len(itemset) < 2:
            continue
        level = [frozenset({j}) for j in sorted(itemset)]
        size = 1
        while level and (max_consequent is None or size <= max_consequent) and size < len(itemset):
            passed: list[frozenset[int]] = []
            for cons in level:
                ante = itemset - cons
                ante_count = counts.get(ante)
                if ante_count is None:  # not frequent: cannot happen for a complete result
                    continue
                conf = count / ante_count
                if conf < min_confidence:
                    continue  # monotonicity: no larger consequent containing cons is tried
                passed.append(cons)
                if max_antecedent is not None and len(ante) > max_antecedent:
                    continue
                p_cons = counts[cons] / n
                lift = conf / p_cons
                interest = abs(conf - p_cons)
                if (min_lift is not None and lift < min_lift) or (
                    min_interest is not None and interest < min_interest
                ):
                    continue
                rules.append(
                    Rule(
                        tuple(sorted(vocab[i] for i in ante)),
                        tuple(sorted(vocab[i] for i in cons)),
                        count,
                        count / n,
                        conf,
                        interest,
                        lift,
                        count / n - (ante_count / n) * p_cons,
                        None if conf >= 1 else (1 - p_cons) / (1 - conf),
                    )
                )
            level = _grow(passed)
            size += 1
    rules.sort(key=lambda r: (-getattr(r, sort_by), -r.lift, -r.support, r.antecedent, r.consequent))
    return rules[:top_k] if top_k is not None else rules
