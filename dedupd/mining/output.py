"""Rendering a mining result: the JSON object of the public contract, CSV, and a plain table."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from dedupd.mining.result import MiningResult
from dedupd.mining.rules import MEASURES, RuleTable, name_keys, name_order

I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
RULE_KEYS = ("antecedent", "consequent", "count", *MEASURES)  # the order of a rule's JSON object


def payload(result: MiningResult, rules: RuleTable) -> dict[str, Any]:
    """``{"itemsets": [{"items": [...], "count": N}, ...], "rules": [{...}, ...]}``."""
    return {"itemsets": _itemsets(result), "rules": _rule_dicts(rules)}


def _itemsets(result: MiningResult) -> list[dict[str, Any]]:
    return [{"items": items, "count": count} for items, count in result.named()]


def _rule_dicts(rules: RuleTable) -> list[dict[str, Any]]:
    """The rules as JSON-ready dicts (non-finite numbers as None), keys in the order of ``RULE_KEYS``."""
    cols: list[list[Any]] = [
        rules.names(rules.antecedent),
        rules.names(rules.consequent),
        rules.count.tolist(),
    ]
    cols += [[_finite(x) for x in getattr(rules, m).tolist()] for m in MEASURES]
    return [
        dict(zip(RULE_KEYS, (list(a), list(c), *rest), strict=True))
        for a, c, *rest in zip(*cols, strict=True)
    ]


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


def render_json(result: MiningResult, rules: RuleTable) -> str:
    """``json.dumps(payload(result, rules))``: the same text (see :func:`json_chunks`)."""
    return "".join(json_chunks(result, rules))


CHUNK = 1 << 14  # itemsets or rules per piece of JSON text


def json_chunks(result: MiningResult, rules: RuleTable, chunk: int = CHUNK) -> Iterator[str]:
    """The text of ``json.dumps(payload(result, rules))`` in pieces of ``chunk`` itemsets or rules,
    written from the columns: each distinct number and name is formatted once and each piece is
    joined in one go (128,248 rules in about 0.1 s, where a dict per rule took seconds)."""
    yield '{"itemsets": ['
    rank = result.name_ranks()
    first = True
    for ids, counts in result.levels:
        sets = name_order(ids, rank)
        order = np.lexsort([*reversed(name_keys(sets, rank)), -counts])
        cols: list[_Names | _Numbers | _Tails] = [
            _Names(sets, result.vocab, ', {"items": ['),
            _Numbers(counts, '], "count": ', "}"),
        ]
        for at in range(0, order.shape[0], chunk):
            yield _join(cols, order[at : at + chunk], first)
            first = False
    yield '], "rules": ['
    cols = [
        _Names(rules.antecedent, rules.vocab, ', {"antecedent": ['),
        _Names(rules.consequent, rules.vocab, '], "consequent": ['),
        _Tails(rules),
    ]
    for at in range(0, len(rules), chunk):
        yield _join(cols, np.arange(at, min(at + chunk, len(rules))), at == 0)
    yield "]}"


def _join(cols: list[_Names | _Numbers | _Tails], rows: I64, first: bool) -> str:
    """The text of ``rows``: the columns' pieces side by side; each row starts with the ``, `` that
    separates it from the one before, dropped for the first row of the array."""
    pieces = np.concatenate([c.pieces(rows) for c in cols], axis=1)
    if first:
        pieces[0, 0] = pieces[0, 0][2:]
    return "".join(pieces.ravel().tolist())


class _Numbers:
    """A column of numbers as ``json.dumps`` writes them (``repr``; null for NaN and infinities),
    between ``before`` and ``after``; every distinct value is formatted once (bit patterns compared,
    so that -0.0 stays -0.0)."""

    def __init__(self, col: I64 | F64, before: str, after: str = "") -> None:
        bits, self.inverse = np.unique(col.view(np.int64), return_inverse=True)
        if col.dtype == np.float64:
            text = [repr(x) if math.isfinite(x) else "null" for x in bits.view(np.float64).tolist()]
        else:
            text = [str(x) for x in bits.tolist()]
        self.text = np.array([before + t + after for t in text], dtype=object)

    def pieces(self, rows: I64) -> npt.NDArray[np.object_]:
        return self.text[self.inverse[rows]][:, None]


class _Tails:
    """The rest of each rule's object, ``], "count": 3, "support": ..., "conviction": null}``, written
    once per distinct (count, antecedent count, consequent count): the measures are functions of
    those three (rules of one itemset share them often: 6,000 distinct among 128,248 rules)."""

    def __init__(self, rules: RuleTable) -> None:
        _, first, self.inverse = np.unique(
            _triple_keys(rules), axis=0, return_index=True, return_inverse=True
        )
        self.inverse = self.inverse.reshape(-1)
        values = [rules.count[first].tolist()] + [getattr(rules, m)[first].tolist() for m in MEASURES]
        keys = RULE_KEYS[2:]
        self.text = np.array(
            [
                "], " + ", ".join(f'"{k}": {_json_number(v)}' for k, v in zip(keys, row, strict=True)) + "}"
                for row in zip(*values, strict=True)
            ],
            dtype=object,
        )

    def pieces(self, rows: I64) -> npt.NDArray[np.object_]:
        return self.text[self.inverse[rows]][:, None]


def _triple_keys(rules: RuleTable) -> npt.NDArray[np.int64]:
    """One int64 per rule that is equal exactly when (count, ante_count, cons_count) are (the three as
    rows when their product does not fit in 63 bits)."""
    ante, cons = int(rules.ante_count.max(initial=0)) + 1, int(rules.cons_count.max(initial=0)) + 1
    if int(rules.count.max(initial=0)) * ante * cons < 1 << 62:
        return (rules.count * ante + rules.ante_count) * cons + rules.cons_count
    return np.stack([rules.count, rules.ante_count, rules.cons_count], axis=1)


def _json_number(x: float) -> str:
    """A number as ``json.dumps`` writes it (``repr``; null for NaN and infinities, as ``payload``)."""
    return repr(x) if math.isfinite(x) else "null"


class _Names:
    """Rows of item ids (-1: padding) as JSON arrays of names in pieces: ``before "a"``, ``, "b"``,
    ``""`` for each padding; every distinct name is quoted once."""

    def __init__(self, ids: I32, vocab: tuple[str, ...], before: str) -> None:
        self.ids = ids
        present = np.zeros(len(vocab) + 1, dtype=bool)
        present[ids] = True  # the padding -1 marks the extra last slot
        used = np.flatnonzero(present[:-1])
        quoted = [json.dumps(vocab[i]) for i in used.tolist()]
        self.first = np.empty(len(vocab) + 1, dtype=object)  # by item id; the last slot for -1
        self.more = np.empty(len(vocab) + 1, dtype=object)
        self.first[used] = [before + q for q in quoted]
        self.more[used] = [", " + q for q in quoted]
        self.more[-1] = ""

    def pieces(self, rows: I64) -> npt.NDArray[np.object_]:
        at = self.ids[rows]
        out = np.empty(at.shape, dtype=object)
        out[:, 0] = self.first[at[:, 0]]
        out[:, 1:] = self.more[at[:, 1:]]
        return out


def render_csv(result: MiningResult, rules: RuleTable) -> str:
    """One CSV: ``kind`` is ``itemset`` or ``rule``; item lists are joined with ``|``."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(CSV_HEADER)
    n = max(result.n_baskets, 1)
    for items, count in result.named():
        w.writerow(["itemset", "|".join(items), "", "", count, _fmt(count / n), "", "", "", "", ""])
    measures = [[_fmt(x) if x == x else "" for x in getattr(rules, m).tolist()] for m in MEASURES]
    w.writerows(
        ["rule", "", "|".join(a), "|".join(c), count, *values]
        for a, c, count, *values in zip(
            rules.names(rules.antecedent),
            rules.names(rules.consequent),
            rules.count.tolist(),
            *measures,
            strict=True,
        )
    )
    return out.getvalue()


CSV_HEADER = (
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
)


def _fmt(x: float) -> str:
    return f"{x:.6g}"


def render_table(result: MiningResult, rules: RuleTable, limit: int | None = 50) -> str:
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
    if len(rules):
        lines.append(f"{'conf':>6}  {'lift':>6}  {'interest':>8}  {'support':>8}  rule")
        for r in rules.take(slice(0, limit)).rules():
            lines.append(
                f"{r.confidence:>6.3f}  {r.lift:>6.2f}  {r.interest:>8.3f}  {r.support:>8.4f}  "
                f"{{{', '.join(r.antecedent)}}} -> {{{', '.join(r.consequent)}}}"
            )
        if limit is not None and len(rules) > limit:
            lines.append(f"... {len(rules) - limit} more")
    return "\n".join(lines) + "\n"
