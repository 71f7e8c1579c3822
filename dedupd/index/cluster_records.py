"""The record half of a batch's writes on a Redis Cluster, where a record and its buckets live in other slots.

On a single Redis one script checks and writes a document's record and its buckets together (lua.BUCKETS).
On a Redis Cluster that cannot be: each record is compare-and-set first (lua.RECORD_CAS), then the buckets
are written, one script per slot (gateway.apply), then the record is *settled* (lua.RECORD_SETTLE: a deleted
record goes only now, after its buckets were left).

Between the two steps a node can fail (down, a failover): the record is at its new version and the buckets
still hold the previous one. The batch is done again, and the retry finds the record at the new version (its
entry was applied: it rejoins the buckets), but no longer knows the previous version's band hashes. So a record
write also keeps the band hashes of the buckets it leaves beside the record, in its slot (keys.leaving), from
its compare-and-set until it is settled; a compare-and-set hands back what is kept there, and the batch leaves
those buckets as well. What is kept is rows of band hashes (uint64 LE, 0 = none; each row its length first: a
short document's rows go on past the LSH bands), one per write not yet settled; it holds one only while a write is between its two steps (or its retry is still to come).

Costs on a Redis Cluster only (a single Redis is not touched by this module): the compare-and-set of an update
whose bands change writes its row (about 8 x bands bytes), and a batch with such updates or deletes settles
them in one more pipelined round trip (a batch with deletes already had one: the records' DEL).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from dedupd.index import argv, lua
from dedupd.index.buckets import DocWrite
from dedupd.index.keys import Keys
from dedupd.index.lua import Op
from dedupd.index.record import record_entry_id
from dedupd.server.connection import RedisClient, ScriptPipeline
from dedupd.similarity.lsh import left_behind

Left = bytes | None  # per write: None when its record had changed (nothing written), else the rows to leave


class ClusterRecords:
    """Compare-and-set and settle the records of one generation's writes (Redis Cluster)."""

    def __init__(self, client: RedisClient, keys: Keys, generation: int) -> None:
        self.client = client
        self.keys = keys
        self.generation = generation
        self._cas = client.register_script(lua.RECORD_CAS)
        self._settle = client.register_script(lua.RECORD_SETTLE)

    def _keys(self, num: int) -> list[str]:
        return [self.keys.doc(num, self.generation), self.keys.leaving(num, self.generation)]

    @staticmethod
    def _own_row(w: DocWrite) -> bytes:
        """The band hashes of the buckets a record write leaves ('' when none: a new document, a delete whose
        record stays until it is settled, a check)."""
        if w.record is None or not w.remove.any():
            return b""
        return np.concatenate([np.array([w.remove.size], np.uint64), w.remove]).astype("<u8").tobytes()

    def check(self, writes: Sequence[DocWrite]) -> list[Left]:
        """Compare-and-set every checked write's record (one call each, pipelined per node); a delete's record
        stays until :meth:`settle`.

        Returns:
            Per write: None when its record changed since it was read (nothing of it was written), else the
            rows of band hashes earlier writes of that record left to leave (b'' when none, or not checked).
        """
        pipe = ScriptPipeline(self.client)
        checked = [w for w in writes if w.expected is not None]
        for w in checked:
            op = w.check_op if w.check_op is not Op.CHECK_DELETE else Op.CHECK
            pipe.script(
                self._cas,
                self._keys(w.num),
                argv.record_cas(op, w.expected or "", w.record or b"", self._own_row(w)),
            )
        replies: Any = iter(pipe.execute() if checked else [])
        out: list[Left] = []
        for w in writes:
            if w.expected is None:
                out.append(b"")
                continue
            ok, left = next(replies)
            out.append(bytes(left) if ok else None)
        return out

    def with_leftovers(
        self, writes: Sequence[DocWrite], left: Sequence[Left]
    ) -> tuple[list[DocWrite], list[int]]:
        """The writes to send to the buckets: each write whose record passed, after one leave-only write per row
        of buckets earlier writes left to leave (except those it joins); one that did not pass as nothing.

        Returns:
            The writes, and the position of each of ``writes`` among them.
        """
        sent: list[DocWrite] = []
        at: list[int] = []
        for w, rows in zip(writes, left, strict=True):
            if rows is None:
                w = DocWrite(w.num)
            elif rows:
                for kept in _rows(rows):
                    row = left_behind(kept, w.add)
                    if row.any():
                        sent.append(DocWrite(w.num, remove=row))
            at.append(len(sent))
            sent.append(w)
        return sent, at

    def settle(self, writes: Sequence[DocWrite], left: Sequence[Left], done: Sequence[bool]) -> None:
        """After the buckets of the writes that are ``done``: delete the records of deletes and forget the
        buckets to leave (one call per record that has either, pipelined per node)."""
        pipe = ScriptPipeline(self.client)
        n = 0
        for w, rows, ok in zip(writes, left, done, strict=True):
            if not ok or rows is None or not (w.delete or rows or self._own_row(w)):
                continue
            version = record_entry_id(w.record) if w.record is not None else w.expected or ""
            pipe.script(self._settle, self._keys(w.num), argv.record_settle(version, w.delete))
            n += 1
        if n:
            pipe.execute()


def _rows(blob: bytes) -> list[npt.NDArray[np.uint64]]:
    """The rows of band hashes kept to leave (each its length first).

    >>> [r.tolist() for r in _rows(np.array([2, 7, 8, 1, 9], "<u8").tobytes())]
    [[7, 8], [9]]
    """
    flat = np.frombuffer(blob, dtype="<u8").astype(np.uint64)
    out, at = [], 0
    while at < flat.size:
        n = int(flat[at])
        out.append(flat[at + 1 : at + 1 + n].copy())
        at += 1 + n
    return out
