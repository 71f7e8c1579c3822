"""The rule generation and JSON/CSV rendering of dedupd before issue 16 (one rule at a time in Python), kept
as the reference the vectorized ``dedupd.mining.rules`` and ``dedupd.mining.output`` must agree with, value for
value and byte for byte."""

from __future__ import annotations

import csv
import io
import json
import math
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


def old_generate_rules(
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


RULE_KEYS = (
    "antecedent",
    "consequent",
    "support",
    "confidence",
    "interest",
    "lift",
    "count",
    "leverage",
    "conviction",
)


def old_payload(result: MiningResult, rules: list[Rule]) -> dict[str, Any]:
    """``{"itemsets": [{"items": [...], "count": N}, ...], "rules": [{...}, ...]}``."""
    return {
        "itemsets": [{"items": items, "count": count} for items, count in result.named()],
        "rules": [{k: _finite(v) for k, v in r.as_dict().items()} for r in rules],
    }


def _finite(v: Any) -> Any:
    return None if isinstance(v, float) and not math.isfinite(v) else v


def old_render_json(result: MiningResult, rules: list[Rule]) -> str:
    return json.dumps(old_payload(result, rules))


def old_render_csv(result: MiningResult, rules: list[Rule]) -> str:
    """One CSV: ``kind`` is ``itemset`` or ``rule``; item lists are joined with ``|``."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(
        [
            "kind",
            "items",
            "antecedent",
            "consequent",
            "count",
            "support",
            "confidence",
            "interest",
            "lift",
            "leverage",
            "conviction",
        ]
    )
    n = max(result.n_baskets, 1)
    for items, count in result.named():
        w.writerow(["itemset", "|".join(items), "", "", count, _fmt(count / n), "", "", "", "", ""])
    for r in rules:
        w.writerow(
            [
                "rule",
                "",
                "|".join(r.antecedent),
                "|".join(r.consequent),
                r.count,
                _fmt(r.support),
                _fmt(r.confidence),
                _fmt(r.interest),
                _fmt(r.lift),
                _fmt(r.leverage),
                "" if r.conviction is None else _fmt(r.conviction),
            ]
        )
    return out.getvalue()


def _fmt(x: float) -> str:
    return f"{x:.6g}"


def old_render_table(result: MiningResult, rules: list[Rule], limit: int | None = 50) -> str:
    """Human-readable: itemsets (size, count, support, items), then rules, ``limit`` rows each."""
    lines: list[str] = []
    named = result.named()
    n = max(result.n_baskets, 1)
    lines.append(
        f"{len(named)} frequent itemsets in {result.n_baskets} baskets (support >= {result.min_count}), "
        f"algorithm {result.algorithm}"
    )
    lines.append(f"{'size':>4}  {'count':>8}  {'support':>8}  items")
    shown = named if limit is None else sorted(named, key=lambda x: (-x[1], len(x[0]), x[0]))[:limit]
    for items, count in shown:
        lines.append(f"{len(items):>4}  {count:>8}  {count / n:>8.4f}  {' '.join(items)}")
    if limit is not None and len(named) > limit:
        lines.append(
            f"... {len(named) - limit} more (--limit 0 shows all; --format json or csv for machines)"
        )
    lines.append("")
    lines.append(f"{len(rules)} rules")
    if rules:
        lines.append(f"{'conf':>6}  {'lift':>6}  {'interest':>8}  {'support':>8}  rule")
        for r in rules if limit is None else rules[:limit]:
            lines.append(
                f"{r.confidence:>6.3f}  {r.lift:>6.2f}  {r.interest:>8.3f}  {r.support:>8.4f}  "
                f"{{{', '.join(r.antecedent)}}} -> {{{', '.join(r.consequent)}}}"
            )
        if limit is not None and len(rules) > limit:
            lines.append(f"... {len(rules) - limit} more")
    return "\n".join(lines) + "\n"
