"""Decoded records kept by their stored bytes (pure): a record read again unchanged is not decoded again.

In a flood of copies every copy verifies the same few recent copies, so each record is read about as many
times as it has later copies: decoding it (its signature densified, a short document's MinHash recomputed)
once is enough. The key is the exact bytes read, so a record changed by anyone decodes anew: the cache can
never answer with another version than the one Redis holds. Bounded in bytes and entries; the oldest
entries go first. A record kept holds arrays of its own: a batch's fingerprints (computed or decoded
together) are slices of the batch's arrays, and one slice kept would keep the whole of them. Safe to share
between threads (a daemon writes one batch while it verifies the last).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence

from dedupd.index.record import Record, decode_records
from dedupd.similarity.fingerprint import Fingerprint, Fingerprinter

MAX_BYTES = 8 << 20  # bytes of the records kept: stored bytes and decoded arrays (see _size)
MAX_ENTRY_BYTES = 64 << 10  # a larger record is decoded every time (and not kept)


class DecodedRecords:
    """Records decoded once per stored value, by integer id, in at most ``max_bytes`` (stored bytes and
    decoded arrays; a flood's recent copies are a few thousand records).

    >>> from dedupd.similarity.spec import IndexSpec
    >>> from dedupd.index.record import encode_record
    >>> f = Fingerprinter(IndexSpec("word:1", 64, 7, 16, 4), keep_shingles=True)
    >>> blob = encode_record("a", f.compute(["some text here"])[0], "1-0", None, True)
    >>> cache = DecodedRecords()
    >>> first = cache.decode([7], [blob], f)[7]
    >>> cache.decode([7], [bytes(blob)], f)[7] is first, cache.decode([7], [None], f)[7]
    (True, None)
    """

    def __init__(self, max_bytes: int = MAX_BYTES, max_entry_bytes: int = MAX_ENTRY_BYTES) -> None:
        self.max_bytes, self.max_entry_bytes = max_bytes, max_entry_bytes
        # oldest first; each with its size (_size). An OrderedDict: dropping the oldest is O(1), where a dict's
        # next(iter(...)) walks past every slot deleted before it (a flood drops one per document)
        self._kept: OrderedDict[int, tuple[bytes, Record, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def read(
        self,
        nums: Iterable[int],
        ahead: Sequence[int],
        held: Mapping[int, bytes | None] | None,
        stored: Callable[[list[int]], list[bytes | None]],
        fingerprinter: Fingerprinter,
    ) -> tuple[dict[int, Record | None], dict[int, bytes | None]]:
        """The records of ``nums``, decoded (Gateway.read_records): those ``held`` (stored bytes read a moment
        ago) taken from there, the others read with ``stored`` in one exchange, with the ids ``ahead`` (not
        decoded) when some record must be read. Returns the records and the stored bytes of every id read."""
        wanted = list(dict.fromkeys(nums))
        if not wanted:
            return {}, {}
        kept: dict[int, bytes | None] = {}
        extra: list[int] = []
        if held is not None:
            kept = {n: held[n] for n in wanted if n in held}
            wanted = [n for n in wanted if n not in kept]
            fetched = set(wanted)
            extra = [n for n in dict.fromkeys(ahead) if n not in kept and n not in fetched]
        read = wanted + extra if wanted else []  # (read ahead only with records that must be read)
        blobs = stored(read) if read else []
        nums_read = [*kept, *wanted]
        decoded = self.decode(nums_read, [*kept.values(), *blobs[: len(wanted)]], fingerprinter)
        return decoded, dict(zip(read, blobs, strict=True))

    def decode(
        self, nums: Sequence[int], blobs: Sequence[bytes | None], fingerprinter: Fingerprinter
    ) -> dict[int, Record | None]:
        """Each record decoded (None when missing), from the cache when its stored bytes are unchanged.

        Raises:
            ConfigError: as :func:`dedupd.index.record.decode_records`.
        """
        out: dict[int, Record | None] = {}
        todo_nums: list[int] = []
        todo_blobs: list[bytes | None] = []
        with self._lock:
            for num, blob in zip(nums, blobs, strict=True):
                kept = self._kept.get(num)
                if kept is not None and blob is not None and kept[0] == blob:
                    out[num] = kept[1]
                else:
                    todo_nums.append(num)
                    todo_blobs.append(blob)
        if todo_nums:
            decoded = decode_records(todo_nums, todo_blobs, fingerprinter)
            owning = {
                num: _owning(record)  # (decoded together: views of the arrays of all of them)
                for num, blob in zip(todo_nums, todo_blobs, strict=True)
                if (record := decoded[num]) is not None
                and blob is not None
                and len(blob) <= self.max_entry_bytes
            }
            with self._lock:
                for num, blob in zip(todo_nums, todo_blobs, strict=True):
                    self._forget(num)
                    out[num] = owning.get(num, decoded[num])
                    if blob is not None and (record := owning.get(num)) is not None:
                        self._keep(num, blob, record)
        return out

    def remember(self, num: int, blob: bytes, record: Record) -> None:
        """Keep a record this process has just written (``blob``, as stored) without decoding it: in a flood,
        the next batch's copies verify the copies of this one. Its arrays are copied when they are views (a
        batch's fingerprints are slices of the batch's arrays: kept as they are, one record would hold its
        whole batch's arrays, beyond what the bound counts)."""
        if len(blob) > self.max_entry_bytes:
            with self._lock:
                self._forget(num)
            return
        record = _owning(record)
        with self._lock:
            self._forget(num)
            self._keep(num, blob, record)

    def __len__(self) -> int:
        return len(self._kept)

    @property
    def stored_bytes(self) -> int:
        """The bytes the records kept hold (see :func:`_size`)."""
        return self._bytes

    def _keep(self, num: int, blob: bytes, record: Record) -> None:
        size = _size(blob, record)
        self._kept[num] = (blob, record, size)
        self._bytes += size
        while self._bytes > self.max_bytes:
            self._bytes -= self._kept.popitem(last=False)[1][2]

    def _forget(self, num: int) -> None:
        kept = self._kept.pop(num, None)
        if kept is not None:
            self._bytes -= kept[2]


def _owning(record: Record) -> Record:
    """``record`` with a fingerprint whose arrays own their memory (copies of those that are views)."""
    fp = record.fingerprint
    if all(a is None or a.base is None for a in (fp.shingles, fp.signature, fp.raw, fp.hashes)):
        return record
    hashes = None if fp.hashes is None else fp.hashes.copy()
    copied = Fingerprint(fp.shingles.copy(), fp.signature.copy(), fp.tail, fp.n_units, fp.raw.copy(), hashes)
    return Record(record.num, record.doc_id, copied, record.entry_id, record.source)


def _size(blob: bytes, record: Record) -> int:
    """What a kept record holds: its stored bytes and its decoded arrays (as many again or more)."""
    fp = record.fingerprint
    arrays = fp.shingles.nbytes + fp.signature.nbytes + fp.raw.nbytes
    return len(blob) + arrays + (fp.hashes.nbytes if fp.hashes is not None else 0)
