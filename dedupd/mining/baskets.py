"""Market baskets in compressed sparse row form: dense integer items, loaded from files or lists.

Course material ``seeds/000`` ("Itemsets: Computation Model"): baskets are stored basket by basket
and the major cost is reading them; "Trick: re-number frequent items 1, 2, ... and keep a map to the
original item IDs". Here every item name gets a dense ``int32`` id once, in *ascending* order of
frequency (the rarest item is 0), so that the level-wise counting extends rare prefixes by frequent
items and touches as few basket positions as possible. A basket is a sorted run of distinct ids.

    >>> b = Baskets.from_lists([["Bread", "Coke", "Milk"], ["Beer", "Bread"]])
    >>> b.n_baskets, len(b.vocab), b.names(b.row(1))
    (2, 4, ['Beer', 'Bread'])

Files: one basket per line, items separated by whitespace; or JSON lines, each an object with an
``items`` array (or a bare array). Blank lines are skipped; an item repeated in a basket counts once.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path

import numpy as np
import numpy.typing as npt

from dedupd.errors import InputError

I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Baskets:
    """Baskets as CSR arrays: basket ``b`` holds ``items[indptr[b]:indptr[b+1]]`` (sorted, distinct).

    Attributes:
        indptr: ``int64[n_baskets + 1]`` row offsets.
        items: ``int32[nnz]`` item ids.
        vocab: item id -> item name.
        item_counts: ``int64[len(vocab)]`` number of baskets holding each item.
    """

    indptr: I64
    items: I32
    vocab: tuple[str, ...]
    item_counts: I64 = field(repr=False)

    @property
    def n_baskets(self) -> int:
        return int(self.indptr.shape[0] - 1)

    @property
    def n_items(self) -> int:
        return len(self.vocab)

    @property
    def nnz(self) -> int:
        return int(self.items.shape[0])

    def lengths(self) -> I64:
        """Items per basket, ``int64[n_baskets]``."""
        return np.diff(self.indptr)

    def row(self, b: int) -> I32:
        """The item ids of basket ``b``."""
        return self.items[self.indptr[b] : self.indptr[b + 1]]

    def names(self, ids: Iterable[int]) -> list[str]:
        """Item names of ids, sorted by name."""
        return sorted(self.vocab[int(i)] for i in ids)

    def nbytes(self) -> int:
        """Bytes held by the CSR arrays."""
        return int(self.indptr.nbytes + self.items.nbytes)

    def take(self, rows: npt.NDArray[np.int64]) -> Baskets:
        """The baskets ``rows`` (in that order), same vocabulary and ids."""
        rows = np.asarray(rows, dtype=np.int64)
        starts = self.indptr[rows]
        lens = self.indptr[rows + 1] - starts
        indptr = np.zeros(rows.shape[0] + 1, dtype=np.int64)
        np.cumsum(lens, out=indptr[1:])
        pos = np.repeat(starts - indptr[:-1], lens) + np.arange(int(indptr[-1]), dtype=np.int64)
        items = self.items[pos]
        counts = np.bincount(items, minlength=self.n_items).astype(np.int64)
        return Baskets(indptr, items, self.vocab, counts)

    def slice(self, start: int, stop: int) -> Baskets:
        """Baskets ``start:stop`` as a new object (views where possible)."""
        indptr = self.indptr[start : stop + 1] - self.indptr[start]
        items = self.items[self.indptr[start] : self.indptr[stop]]
        counts = np.bincount(items, minlength=self.n_items).astype(np.int64)
        return Baskets(indptr.astype(np.int64), items, self.vocab, counts)

    def split(self, k: int) -> list[Baskets]:
        """``k`` contiguous chunks of nearly equal basket counts (SON's chunks)."""
        bounds = np.linspace(0, self.n_baskets, max(1, k) + 1).astype(np.int64)
        return [self.slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]

    @classmethod
    def from_lists(cls, baskets: Sequence[Sequence[str]]) -> Baskets:
        """Build from Python lists of item names (duplicates within a basket count once).

        Ids are given in ascending order of frequency (ties broken by first appearance), so
        output is deterministic for a given input.
        """
        flat = list(chain.from_iterable(baskets))
        lengths = np.fromiter(map(len, baskets), dtype=np.int64, count=len(baskets))
        index = dict.fromkeys(flat, 0)
        names = list(index)
        index = dict(zip(names, range(len(names)), strict=True))
        raw = np.fromiter(map(index.__getitem__, flat), dtype=np.int32, count=len(flat))
        return cls.from_ids(lengths, raw, names)

    @classmethod
    def from_ids(cls, lengths: I64, raw: I32, names: Sequence[str]) -> Baskets:
        """Build from basket lengths and a flat array of ids into ``names`` (any order, duplicates ok)."""
        n_names = len(names)
        occurrences = np.bincount(raw, minlength=n_names)
        # ascending frequency, ties by the old id: a stable argsort
        order = np.argsort(occurrences, kind="stable").astype(np.int32)
        rank = np.empty(n_names, dtype=np.int32)
        rank[order] = np.arange(n_names, dtype=np.int32)
        rows = np.repeat(np.arange(lengths.shape[0], dtype=np.int64), lengths)
        key = rows * np.int64(max(n_names, 1)) + rank[raw].astype(np.int64)
        key.sort()
        keep = np.ones(key.shape[0], dtype=bool)
        keep[1:] = key[1:] != key[:-1]
        key = key[keep]
        items = (key % np.int64(max(n_names, 1))).astype(np.int32)
        kept_rows = key // np.int64(max(n_names, 1))
        indptr = np.zeros(lengths.shape[0] + 1, dtype=np.int64)
        np.cumsum(np.bincount(kept_rows, minlength=lengths.shape[0]), out=indptr[1:])
        vocab = tuple(np.array(names, dtype=object)[order].tolist())
        counts = np.bincount(items, minlength=n_names).astype(np.int64)
        return cls(indptr, items, vocab, counts)


def parse_lines(lines: Iterable[str], source: str = "<input>") -> list[list[str]]:
    """Parse basket lines: whitespace-separated items, or JSON lines (``{"items": [...]}`` or ``[...]``).

    The format is decided by the first non-blank line: JSON if it starts with ``{`` or ``[``.

    Raises:
        InputError: ``bad_basket`` with the line number and what a valid line looks like.
    """
    out: list[list[str]] = []
    is_json: bool | None = None
    for lineno, line in enumerate(lines, 1):
        stripped = line.strip()
        if not stripped:
            continue
        if is_json is None:
            is_json = stripped[0] in "{["
        if not is_json:
            out.append(stripped.split())
            continue
        try:
            obj = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise InputError("bad_basket", f"{source}:{lineno}: not valid JSON ({exc.msg})") from None
        items = obj.get("items") if isinstance(obj, dict) else obj
        if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
            raise InputError(
                "bad_basket",
                f'{source}:{lineno}: expected {{"items": ["a", "b", ...]}} or ["a", "b", ...] (strings)',
            )
        out.append(items)
    return out


def read_basket_lists(path: str | Path) -> list[list[str]]:
    """Read a basket file (``-`` for standard input) into lists of item names.

    Raises:
        InputError: ``no_file`` when it cannot be read, ``bad_basket`` for a malformed line.
    """
    if str(path) == "-":
        return parse_lines(sys.stdin, "<stdin>")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError("no_file", f"cannot read basket file {str(path)!r}: {exc}") from None
    return parse_lines(text.splitlines(), str(path))


def load_baskets(path: str | Path) -> Baskets:
    """Read a basket file into :class:`Baskets` (see :func:`read_basket_lists`)."""
    return Baskets.from_lists(read_basket_lists(path))
