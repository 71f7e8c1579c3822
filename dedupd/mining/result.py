"""What a mining run returns: frequent itemsets per size, and a report of every pass it made."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

Progress = Callable[["PassReport"], None]


@dataclass(frozen=True, slots=True)
class PassReport:
    """One pass over the baskets (or over a sample or a chunk of them).

    Attributes:
        number: 1-based pass number within the run.
        what: what the pass counted ("items", "pairs", "3-itemsets", "sample", ...).
        structure: the counting structure ("item counts", "triangular matrix", "triples", "bitmap", ...).
        nbytes: bytes of the counting structures held during the pass (the seed's memory model:
            4 bytes per count, 12 per triple, 1 bit per bucket of a bitmap).
        candidates: itemsets counted.
        frequent: itemsets found frequent.
        seconds: wall time of the pass.
        detail: anything else worth saying (the one-third rule's numbers, buckets, ...).
    """

    number: int
    what: str
    structure: str
    nbytes: int
    candidates: int
    frequent: int
    seconds: float
    detail: str = ""

    def plain(self) -> str:
        """One line in plain words for progress on stderr: what was counted and what came out."""
        return (
            f"pass {self.number}: {self.what}: {self.frequent:,} frequent of {self.candidates:,} counted "
            f"({self.seconds:.2f}s)"
        )

    def line(self) -> str:
        """The whole report on one line (``--verbose``): the counting structure, its memory, details."""
        extra = f"; {self.detail}" if self.detail else ""
        return (
            f"pass {self.number}: {self.what}: {self.candidates} counted, {self.frequent} frequent, "
            f"{self.structure} {_human(self.nbytes)}, {self.seconds:.3f}s{extra}"
        )


def _human(n: int) -> str:
    size: float = n
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size} B"  # pragma: no cover


@dataclass(slots=True)
class MiningResult:
    """Frequent itemsets of one run.

    Attributes:
        vocab: item id -> name (ids as in :class:`~dedupd.mining.baskets.Baskets`).
        n_baskets: baskets mined.
        min_count: the absolute support threshold.
        levels: ``levels[k-1] = (sets int32[n, k], counts int64[n])``, sets sorted by id within a row.
        algorithm: which algorithm produced it.
        passes: one report per pass.
        complete: False when itemsets may be missing (random sampling without a clean check).
        warnings: what the caller must know (possible misses, budget overruns).
        notes: how the run went (choices made, failed Toivonen attempts).
    """

    vocab: tuple[str, ...]
    n_baskets: int
    min_count: int
    levels: list[tuple[npt.NDArray[np.int32], npt.NDArray[np.int64]]]
    algorithm: str
    passes: list[PassReport] = field(default_factory=list)
    complete: bool = True
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def n_itemsets(self) -> int:
        return int(sum(c.shape[0] for _, c in self.levels))

    def iter_ids(self) -> Iterator[tuple[tuple[int, ...], int]]:
        """(sorted id tuple, count) for every frequent itemset, by size then id order."""
        for sets, counts in self.levels:
            for row, c in zip(sets.tolist(), counts.tolist(), strict=True):
                yield tuple(row), int(c)

    def counts_by_ids(self) -> dict[frozenset[int], int]:
        """{frozenset of ids: count}."""
        return {frozenset(s): c for s, c in self.iter_ids()}

    def counts_by_names(self) -> dict[frozenset[str], int]:
        """{frozenset of item names: count}: the form to compare with other tools."""
        v = np.array(self.vocab, dtype=object)
        out: dict[frozenset[str], int] = {}
        for sets, counts in self.levels:
            out.update(zip(map(frozenset, v[sets].tolist()), counts.tolist(), strict=True))
        return out

    def named(self) -> list[tuple[list[str], int]]:
        """(item names sorted, count), ordered by size, then count descending, then names."""
        v = np.array(self.vocab, dtype=object)
        out: list[tuple[list[str], int]] = []
        for sets, counts in self.levels:
            out.extend(zip(map(sorted, v[sets].tolist()), counts.tolist(), strict=True))
        out.sort(key=lambda x: (len(x[0]), -x[1], x[0]))
        return out

    def max_size(self) -> int:
        return len(self.levels)

    def name_ranks(self) -> npt.NDArray[np.int32]:
        """Item id -> position of its name, in sorted order, among the items of the itemsets (-1: none)."""
        present = np.zeros(len(self.vocab), dtype=bool)
        for sets, _ in self.levels:
            present[sets.ravel()] = True
        used = np.flatnonzero(present).tolist()
        rank = np.full(len(self.vocab), -1, dtype=np.int32)
        rank[sorted(used, key=self.vocab.__getitem__)] = np.arange(len(used), dtype=np.int32)
        return rank
