"""Decoded records kept by their stored bytes (pure): a record read again unchanged is not decoded again.

In a flood of copies every copy verifies the same few recent copies, so each record is read about as many
times as it has later copies: decoding it (its signature densified, a short document's MinHash recomputed)
once is enough. The key is the exact bytes read, so a record changed by anyone decodes anew: the cache can
never answer with another version than the one Redis holds. Bounded in bytes and entries; the oldest
entries go first.
"""

from __future__ import annotations

from collections.abc import Sequence

from dedupd.fingerprint import Fingerprint, Fingerprinter
from dedupd.hashing import U64Array
from dedupd.record import Record, decode_records

MAX_BYTES = 8 << 20  # bytes of the records kept: stored bytes and decoded arrays (see _size)
MAX_ENTRY_BYTES = 64 << 10  # a larger record is decoded every time (and not kept)


class DecodedRecords:
    """Records decoded once per stored value, by integer id, in at most ``max_bytes`` (stored bytes and
    decoded arrays; a flood's recent copies are a few thousand records).

    >>> from dedupd.spec import IndexSpec
    >>> from dedupd.record import encode_record
    >>> f = Fingerprinter(IndexSpec("word:1", 64, 7, 16, 4), keep_shingles=True)
    >>> blob = encode_record("a", f.compute(["some text here"])[0], "1-0", None, True)
    >>> cache = DecodedRecords()
    >>> first = cache.decode([7], [blob], f)[7]
    >>> cache.decode([7], [bytes(blob)], f)[7] is first, cache.decode([7], [None], f)[7]
    (True, None)
    """

    def __init__(self, max_bytes: int = MAX_BYTES, max_entry_bytes: int = MAX_ENTRY_BYTES) -> None:
        self.max_bytes, self.max_entry_bytes = max_bytes, max_entry_bytes
        self._kept: dict[int, tuple[bytes, Record]] = {}
        self._bands: dict[int, U64Array] = {}  # band hashes of kept records, once asked for
        self._bytes = 0

    def decode(
        self, nums: Sequence[int], blobs: Sequence[bytes | None], fingerprinter: Fingerprinter
    ) -> dict[int, Record | None]:
        """Each record decoded (None when missing), from the cache when its stored bytes are unchanged.

        Raises:
            ConfigError: as :func:`dedupd.record.decode_records`.
        """
        out: dict[int, Record | None] = {}
        todo_nums: list[int] = []
        todo_blobs: list[bytes | None] = []
        for num, blob in zip(nums, blobs, strict=True):
            kept = self._kept.get(num)
            if kept is not None and blob is not None and kept[0] == blob:
                out[num] = kept[1]
            else:
                todo_nums.append(num)
                todo_blobs.append(blob)
        if todo_nums:
            decoded = decode_records(todo_nums, todo_blobs, fingerprinter)
            for num, blob in zip(todo_nums, todo_blobs, strict=True):
                out[num] = record = decoded[num]
                self._forget(num)
                if record is not None and blob is not None and len(blob) <= self.max_entry_bytes:
                    self._keep(num, blob, record)
        return out

    def band_hashes(
        self, nums: Sequence[int], fps: Sequence[Fingerprint], fingerprinter: Fingerprinter
    ) -> list[U64Array]:
        """The band hashes of each fingerprint (of the record ``nums[i]``), computed once for a record kept
        here (the fingerprint this cache decoded, the very object), every time for any other.

        >>> from dedupd.spec import IndexSpec
        >>> from dedupd.record import encode_record
        >>> f = Fingerprinter(IndexSpec("word:1", 64, 7, 16, 4), keep_shingles=True)
        >>> fp = f.compute(["some text here"])[0]
        >>> cache = DecodedRecords()
        >>> kept = cache.decode([7], [encode_record("a", fp, "1-0", None, True)], f)[7].fingerprint
        >>> rows = cache.band_hashes([7, 8], [kept, fp], f)
        >>> rows[0] is cache.band_hashes([7], [kept], f)[0], bool((rows[0] == f.band_hashes([fp])[0]).all())
        (True, True)
        """
        out: list[U64Array | None] = []
        todo: list[int] = []
        for i, (num, fp) in enumerate(zip(nums, fps, strict=True)):
            row = self._bands.get(num) if self._holds(num, fp) else None
            out.append(row)
            if row is None:
                todo.append(i)
        for i, row in zip(todo, fingerprinter.band_hashes([fps[i] for i in todo]), strict=True):
            out[i] = row
            if self._holds(nums[i], fps[i]):
                self._bands[nums[i]] = row
        return out  # type: ignore[return-value]

    def _holds(self, num: int, fp: Fingerprint) -> bool:
        """Whether ``fp`` is the fingerprint this cache decoded for record ``num`` (the very object)."""
        kept = self._kept.get(num)
        return kept is not None and kept[1].fingerprint is fp

    def __len__(self) -> int:
        return len(self._kept)

    @property
    def stored_bytes(self) -> int:
        """The bytes the records kept hold (see :func:`_size`)."""
        return self._bytes

    def _keep(self, num: int, blob: bytes, record: Record) -> None:
        self._kept[num] = (blob, record)
        self._bytes += _size(blob, record)
        while self._bytes > self.max_bytes:
            self._forget(next(iter(self._kept)))

    def _forget(self, num: int) -> None:
        kept = self._kept.pop(num, None)
        self._bands.pop(num, None)
        if kept is not None:
            self._bytes -= _size(*kept)


def _size(blob: bytes, record: Record) -> int:
    """What a kept record holds: its stored bytes and its decoded arrays (as many again or more)."""
    fp = record.fingerprint
    arrays = fp.shingles.nbytes + fp.signature.nbytes + fp.raw.nbytes
    return len(blob) + arrays + (fp.hashes.nbytes if fp.hashes is not None else 0)
