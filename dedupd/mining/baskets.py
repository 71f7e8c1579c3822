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
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import chain, islice, pairwise
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
        return [self.slice(int(a), int(b)) for a, b in pairwise(bounds) if b > a]

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


def iter_baskets(lines: Iterable[str], source: str = "<input>") -> Iterator[list[str]]:
    """Parse basket lines: whitespace-separated items, or JSON lines (``{"items": [...]}`` or ``[...]``).

    The format is decided by the first non-blank line: JSON if it starts with ``{`` or ``[``.

    Raises:
        InputError: ``bad_basket`` with the line number and what a valid line looks like.
    """
    is_json: bool | None = None
    for lineno, line in enumerate(lines, 1):
        stripped = line.strip()
        if not stripped:
            continue
        if is_json is None:
            is_json = stripped[0] in "{["
        if not is_json:
            yield stripped.split()
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
        yield items


def parse_lines(lines: Iterable[str], source: str = "<input>") -> list[list[str]]:
    """All baskets of :func:`iter_baskets` as a list."""
    return list(iter_baskets(lines, source))


@contextmanager
def _open_lines(path: str | Path) -> Iterator[tuple[Iterable[str], str]]:
    if str(path) == "-":
        yield sys.stdin, "<stdin>"
        return
    try:
        f = Path(path).open(encoding="utf-8")  # noqa: SIM115 (`with f` below closes it; only open's OSError is caught)
    except OSError as exc:
        raise InputError("no_file", f"cannot read basket file {str(path)!r}: {exc}") from None
    with f:
        try:
            yield f, str(path)
        except UnicodeDecodeError as exc:
            raise InputError("no_file", f"cannot read basket file {str(path)!r}: {exc}") from None


def read_basket_lists(path: str | Path) -> list[list[str]]:
    """Read a basket file (``-`` for standard input) into lists of item names.

    Raises:
        InputError: ``no_file`` when it cannot be read, ``bad_basket`` for a malformed line.
    """
    with _open_lines(path) as (lines, source):
        return parse_lines(lines, source)


BLOCK = 1 << 16  # baskets converted to ids at a time while loading a file


def load_baskets(path: str | Path) -> Baskets:
    """Read a basket file into :class:`Baskets`, streaming in blocks: the whole file is never held as
    Python lists (a million baskets of ten items load in about 100 MB beyond the result).

    Raises:
        InputError: as :func:`read_basket_lists`.
    """
    if str(path) != "-":
        try:
            with Path(path).open("rb") as f:
                head = f.read(4096).lstrip()
        except OSError as exc:
            raise InputError("no_file", f"cannot read basket file {str(path)!r}: {exc}") from None
        if not head.startswith((b"{", b"[")):
            return _load_plain(Path(path))
    index: dict[str, int] = {}
    ids: list[I32] = []
    lens: list[I64] = []
    with _open_lines(path) as (lines, source):
        it = iter_baskets(lines, source)
        while True:
            block = list(islice(it, BLOCK))
            if not block:
                break
            flat = list(chain.from_iterable(block))
            for name in dict.fromkeys(flat):
                if name not in index:
                    index[name] = len(index)
            ids.append(np.fromiter(map(index.__getitem__, flat), dtype=np.int32, count=len(flat)))
            lens.append(np.fromiter(map(len, block), dtype=np.int64, count=len(block)))
    if not ids:
        return Baskets.from_lists([])
    return Baskets.from_ids(np.concatenate(lens), np.concatenate(ids), list(index))


READ_BYTES = 1 << 24  # bytes of a whitespace-separated file tokenised at a time
_SPACE = np.zeros(256, dtype=bool)  # the bytes bytes.split() splits on
_SPACE[[9, 10, 11, 12, 13, 32]] = True


def _load_plain(path: Path) -> Baskets:
    """Whitespace-separated baskets: ``bytes.split`` per block, items per line counted with numpy."""
    index: dict[bytes, int] = {}
    ids: list[I32] = []
    lens: list[I64] = []
    rest = b""
    with path.open("rb") as f:
        while True:
            chunk = f.read(READ_BYTES)
            data = rest + chunk
            if not chunk:
                rest = b""
            else:
                cut = data.rfind(b"\n") + 1
                data, rest = data[:cut], data[cut:]
            if data:
                tokens = data.split()
                arr = np.frombuffer(data, dtype=np.uint8)
                space = _SPACE[arr]
                starts = np.flatnonzero(~space & np.concatenate(([True], space[:-1])))
                line = np.searchsorted(np.flatnonzero(arr == 10), starts)  # newlines before each token
                per_line = np.bincount(line, minlength=int(line[-1]) + 1 if line.size else 0)
                lens.append(per_line[per_line > 0].astype(np.int64))
                for tok in dict.fromkeys(tokens):
                    if tok not in index:
                        index[tok] = len(index)
                ids.append(np.fromiter(map(index.__getitem__, tokens), dtype=np.int32, count=len(tokens)))
            if not chunk:
                break
    if not ids:
        return Baskets.from_lists([])
    try:
        names = [t.decode("utf-8") for t in index]
    except UnicodeDecodeError as exc:
        raise InputError("no_file", f"basket file {str(path)!r} is not UTF-8: {exc}") from None
    return Baskets.from_ids(np.concatenate(lens), np.concatenate(ids), names)
