"""Rendering a mining result: the JSON object of the public contract, CSV, and a plain table."""

from __future__ import annotations

import csv
import io
import json
import math
from typing import Any

from dedupd.mining.result import MiningResult
from dedupd.mining.rules import Rule

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


def payload(result: MiningResult, rules: list[Rule]) -> dict[str, Any]:
    """``{"itemsets": [{"items": [...], "count": N}, ...], "rules": [{...}, ...]}``."""
    return {
        "itemsets": [{"items": items, "count": count} for items, count in result.named()],
        "rules": [{k: _finite(v) for k, v in r.as_dict().items()} for r in rules],
    }


def _finite(v: Any) -> Any:
    return None if isinstance(v, float) and not math.isfinite(v) else v


def params(result: MiningResult, **given: Any) -> dict[str, Any]:
    """The ``params`` object stored with a result in Redis: what was asked and how it went."""
    return {
        **given,
        "algorithm": result.algorithm,
        "n_baskets": result.n_baskets,
        "min_count": result.min_count,
        "complete": result.complete,
        "warnings": result.warnings,
        "notes": result.notes,
        "passes": [
            {
                "pass": p.number,
                "what": p.what,
                "structure": p.structure,
                "bytes": p.nbytes,
                "candidates": p.candidates,
                "frequent": p.frequent,
                "seconds": round(p.seconds, 6),
                "detail": p.detail,
            }
            for p in result.passes
        ],
    }


def render_json(result: MiningResult, rules: list[Rule]) -> str:
    return json.dumps(payload(result, rules))


def render_csv(result: MiningResult, rules: list[Rule]) -> str:
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


def render_table(result: MiningResult, rules: list[Rule], limit: int | None = 50) -> str:
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
