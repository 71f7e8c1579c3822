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

The work is done a whole level at a time, in columns: for the k-itemsets and one choice of
consequent positions (e.g. "the 2nd item"), every antecedent count is found with one vectorised
row lookup in the (k-1)-itemsets, every confidence with one division; a consequent of size c + 1
is tried on the rows where each of its size-c parts passed. The measures are the same float64
operations, in the same order, as the one-rule-at-a-time definition above, so the values are equal
to the last bit (``tests/mining/test_mining_rules.py`` compares them with that definition).

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

from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from itertools import combinations
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from dedupd.errors import ConfigError
from dedupd.mining.counting import RowLookup
from dedupd.mining.result import MiningResult

SortKey = Literal["confidence", "lift", "interest", "support", "leverage"]
I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
Mask = npt.NDArray[np.bool_]
MEASURES = ("support", "confidence", "interest", "lift", "leverage", "conviction")
COLUMNS = ("antecedent", "consequent", "count", "ante_count", "cons_count", *MEASURES)


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


@dataclass(frozen=True, slots=True)
class RuleTable:
    """Rules as columns, one row per rule, in output order (what :func:`rule_table` returns).

    Attributes:
        vocab: item id -> name.
        antecedent, consequent: ``int32[n, w]`` item ids, each row in name order, padded with -1.
        count: ``int64[n]`` baskets holding the antecedent and the consequent together.
        ante_count, cons_count: ``int64[n]`` baskets holding the antecedent, the consequent (the
            measures are functions of the three counts and the number of baskets).
        support, confidence, interest, lift, leverage: ``float64[n]``.
        conviction: ``float64[n]``, NaN where the confidence is 1 (None in a :class:`Rule`).
    """

    vocab: tuple[str, ...]
    antecedent: I32
    consequent: I32
    count: I64
    ante_count: I64
    cons_count: I64
    support: F64
    confidence: F64
    interest: F64
    lift: F64
    leverage: F64
    conviction: F64

    def __len__(self) -> int:
        return int(self.count.shape[0])

    @classmethod
    def none(cls, vocab: tuple[str, ...]) -> RuleTable:
        """No rules (``dedupd mine --no-rules``)."""
        ids = np.zeros((0, 1), dtype=np.int32)
        i, f = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        return cls(vocab, ids, ids, i, i, i, f, f, f, f, f, f)

    def take(self, rows: npt.NDArray[np.integer] | slice) -> RuleTable:
        """The rules ``rows`` (an index array or a slice), in that order."""
        return RuleTable(self.vocab, *(getattr(self, c)[rows] for c in COLUMNS))

    def names(self, ids: I32) -> list[tuple[str, ...]]:
        """Each row of ``ids`` (an antecedent or consequent matrix) as a tuple of item names."""
        v = self.vocab
        return [tuple(v[i] for i in row if i >= 0) for row in ids.tolist()]

    def rules(self) -> list[Rule]:
        """The rules as :class:`Rule` objects (for the Python API and small outputs)."""
        cols = [getattr(self, m).tolist() for m in MEASURES]
        cols[-1] = [None if c != c else c for c in cols[-1]]  # NaN conviction: None
        return [
            Rule(a, c, n, *measures)
            for a, c, n, *measures in zip(
                self.names(self.antecedent),
                self.names(self.consequent),
                self.count.tolist(),
                *cols,
                strict=True,
            )
        ]


@dataclass(frozen=True, slots=True)
class _Limits:
    min_confidence: float
    max_antecedent: int | None
    max_consequent: int | None


@dataclass(slots=True)
class _Levels:
    """The frequent itemsets by size, with a row lookup per size built when first needed."""

    result: MiningResult
    lookups: dict[int, RowLookup] = field(default_factory=dict)

    def count_of(self, rows: I32) -> I64:
        """The count of each itemset ``rows`` (``int32[q, size]``, ids sorted), -1 when not frequent."""
        size = rows.shape[1]
        if size > len(self.result.levels) or self.result.levels[size - 1][1].shape[0] == 0:
            return np.full(rows.shape[0], -1, dtype=np.int64)
        sets, counts = self.result.levels[size - 1]
        lookup = self.lookups.get(size)
        if lookup is None:
            lookup = self.lookups[size] = RowLookup(sets)
        idx = lookup.find(rows)
        return np.where(idx >= 0, counts[idx], -1).astype(np.int64)


@dataclass(frozen=True, slots=True)
class _Block:
    """Rules of one itemset size and one choice of consequent positions (ids in id order)."""

    antecedent: I32
    consequent: I32
    count: I64
    ante_count: I64
    cons_count: I64


def _check(
    min_confidence: float, max_antecedent: int | None, max_consequent: int | None, top_k: int | None
) -> None:
    if not 0 <= min_confidence <= 1:
        raise ConfigError(f"confidence must be between 0 and 1; got {min_confidence}")
    for name, v in (("max antecedent", max_antecedent), ("max consequent", max_consequent), ("top-k", top_k)):
        if v is not None and v < 1:
            raise ConfigError(f"{name} must be at least 1 (or unset); got {v}")


def _tried(comb: tuple[int, ...], passed: dict[tuple[int, ...], Mask], m: int) -> Mask:
    """Rows whose consequent ``comb`` is worth trying: every part one smaller passed (all rows for size 1)."""
    if len(comb) == 1:
        return np.ones(m, dtype=bool)
    tried = np.ones(m, dtype=bool)
    for drop in range(len(comb)):
        part = passed.get(comb[:drop] + comb[drop + 1 :])
        if part is None:
            return np.zeros(m, dtype=bool)
        tried &= part
    return tried


def _grow(alive: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """Consequent positions one larger whose every part one smaller is in ``alive`` (A-Priori's join)."""
    have = set(alive)
    out = {
        a + b[-1:]
        for a, b in combinations(sorted(alive), 2)
        if a[:-1] == b[:-1] and all(s in have for s in combinations(a + b[-1:], len(a)))
    }
    return sorted(out)


def _level_rules(levels: _Levels, k: int, lim: _Limits) -> Iterator[_Block]:
    """The rules of the frequent k-itemsets that pass the confidence threshold, one block per
    consequent size (every choice of consequent positions of that size looked up together)."""
    sets, counts = levels.result.levels[k - 1]
    m = int(sets.shape[0])
    passed: dict[tuple[int, ...], Mask] = {}
    combos: list[tuple[int, ...]] = [(p,) for p in range(k)]
    size = 1
    while combos and (lim.max_consequent is None or size <= lim.max_consequent) and size < k:
        rows = [np.flatnonzero(_tried(comb, passed, m)) for comb in combos]
        rests = [[p for p in range(k) if p not in comb] for comb in combos]
        ante = np.concatenate([sets[r][:, rest] for r, rest in zip(rows, rests, strict=True)])
        cons = np.concatenate([sets[r][:, list(comb)] for r, comb in zip(rows, combos, strict=True)])
        row = np.concatenate(rows)
        ante_count = levels.count_of(ante)
        ok = (ante_count > 0) & (counts[row] / np.maximum(ante_count, 1) >= lim.min_confidence)
        at = 0
        for comb, r in zip(combos, rows, strict=True):
            passed[comb] = np.zeros(m, dtype=bool)
            passed[comb][r[ok[at : at + r.shape[0]]]] = True
            at += r.shape[0]
        if lim.max_antecedent is None or k - size <= lim.max_antecedent:
            cons = cons[ok]
            yield _Block(ante[ok], cons, counts[row[ok]], ante_count[ok], levels.count_of(cons))
        combos = _grow([c for c in combos if passed[c].any()])
        size += 1


def name_order(ids: I32, rank: I32) -> I32:
    """``ids`` (rows of item ids) with each row sorted by item name, padded to ``width`` with -1."""
    order = np.argsort(rank[ids], axis=1, kind="stable")
    return np.take_along_axis(ids, order, axis=1)


def _stack(parts: list[I32], rank: I32) -> I32:
    """Rows of several widths, each sorted by name, padded on the right with -1 to the widest."""
    width = max((p.shape[1] for p in parts), default=1)
    out = np.full((sum(p.shape[0] for p in parts), width), -1, dtype=np.int32)
    at = 0
    for p in parts:
        out[at : at + p.shape[0], : p.shape[1]] = name_order(p, rank)
        at += p.shape[0]
    return out


def _measures(result: MiningResult, blocks: list[_Block], rank: I32) -> RuleTable:
    """The measures of every rule, in the float64 operations of the definitions (module docstring)."""
    count, ante_count, cons_count = (
        np.concatenate([getattr(b, f) for b in blocks] + [np.zeros(0, dtype=np.int64)])
        for f in ("count", "ante_count", "cons_count")
    )
    n = max(result.n_baskets, 1)
    support = count / n
    confidence = count / ante_count
    p_cons = cons_count / n
    with np.errstate(divide="ignore", invalid="ignore"):
        conviction = np.where(confidence >= 1, np.nan, (1 - p_cons) / (1 - confidence))
        lift = confidence / p_cons
    return RuleTable(
        result.vocab,
        _stack([b.antecedent for b in blocks], rank),
        _stack([b.consequent for b in blocks], rank),
        count.astype(np.int64),
        ante_count,
        cons_count,
        support,
        confidence,
        np.abs(confidence - p_cons),
        lift,
        support - (ante_count / n) * p_cons,
        conviction,
    )


def name_keys(ids: I32, rank: I32) -> list[I64]:
    """Integer keys, most significant first, whose order is the order of the rows' tuples of names.

    Each item is its name's rank + 1 (0 for the -1 padding, so that a tuple sorts before its
    extensions), packed as many to an int64 as fit.
    """
    bits = max(1, int(rank.max(initial=0) + 1).bit_length())
    per = max(1, 63 // bits)
    values = np.append(rank.astype(np.int64) + 1, 0)[ids]  # id -1 takes the appended 0
    keys: list[I64] = []
    for start in range(0, ids.shape[1], per):
        part = values[:, start : start + per]
        shifts = np.arange(part.shape[1] - 1, -1, -1, dtype=np.int64) * bits
        keys.append(part @ (np.int64(1) << shifts))
    return keys


def _order(table: RuleTable, rows: I64, rank: I32, sort_by: SortKey) -> I64:
    """``rows`` sorted by ``sort_by`` descending, then lift and support descending, then the names of
    the antecedent and of the consequent."""
    keys: list[npt.NDArray[Any]] = [
        *reversed(name_keys(table.consequent[rows], rank)),  # np.lexsort: the last key is the first
        *reversed(name_keys(table.antecedent[rows], rank)),
        -table.support[rows],
        -table.lift[rows],
        -getattr(table, sort_by)[rows],
    ]
    return rows[np.lexsort(keys)]


def rule_table(
    result: MiningResult,
    min_confidence: float = 0.5,
    max_antecedent: int | None = None,
    max_consequent: int | None = None,
    top_k: int | None = None,
    min_lift: float | None = None,
    min_interest: float | None = None,
    sort_by: SortKey = "confidence",
) -> RuleTable:
    """All rules ``A -> I \\ A`` with confidence >= ``min_confidence``, as columns (see :func:`generate_rules`).

    Raises:
        ConfigError: for a confidence outside [0, 1] or a non-positive size or k.
    """
    _check(min_confidence, max_antecedent, max_consequent, top_k)
    levels = _Levels(result)
    lim = _Limits(min_confidence, max_antecedent, max_consequent)
    blocks = [b for k in range(2, len(result.levels) + 1) for b in _level_rules(levels, k, lim)]
    rank = result.name_ranks()
    table = _measures(result, blocks, rank)
    keep = table.cons_count > 0
    if min_lift is not None:
        keep &= ~(table.lift < min_lift)
    if min_interest is not None:
        keep &= ~(table.interest < min_interest)
    return table.take(_order(table, np.flatnonzero(keep), rank, sort_by)[:top_k])


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

    Returns:
        The rules, best first; :func:`rule_table` gives the same as columns (faster for many rules).

    Raises:
        ConfigError: for a confidence outside [0, 1] or a non-positive size or k.
    """
    return rule_table(
        result, min_confidence, max_antecedent, max_consequent, top_k, min_lift, min_interest, sort_by
    ).rules()
