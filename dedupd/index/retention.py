"""The retention window (pure): what one step of expiry claimed, and what became of each document it claimed.

With ``retention_s`` and/or ``max_documents`` in the index's spec, every document has a *touch* time (the
Redis server's clock, ms) in a sorted set (:attr:`~dedupd.index.keys.Keys.touched`): set by its own upsert
or append when it is written (scripts/touch.lua, queued just before the write, so that a document is never
expired between its write and its touch; an entry that is refused, deferred or dead-lettered touches nothing)
and, with ``refresh_on_duplicate``, by a later document's alert naming it (the same script, another mode).
Expiry runs in steps (daemon/expiry.py), each bounded by a limit, shared by the daemons through claims:

1. ``expire_claim``: at most ``limit`` documents move from the touch set to the claims
   (:attr:`~dedupd.index.keys.Keys.expiring`, with a deadline): claims of a dead daemon whose deadline has
   passed first, then the least recently touched documents past the window (older than ``retention_s``, or
   beyond the ``max_documents`` newest). An entry of a claimed document waits (planner.decide: DEFER).
2. the claimed documents' records are read, their ids noted (``expire_note``: a daemon that takes the claim
   over after the record went still knows the id);
3. each record is deleted and its buckets left, as a delete does, in one BUCKETS call, conditional on the
   record being the one read (an update that got there first keeps its document);
4. ``expire_finish``: the ids, union-find nodes and representatives of the expired documents go, as a
   delete's do, but no tombstone is left; a document an update kept goes back to the touch set.

A step killed anywhere is redone by whoever takes its lapsed claims over: every part is idempotent (a record
already gone, an id no longer mapped, a bucket already left change nothing).

>>> c = Claim.of([1700000000000, 1700000030000, 5, b"1699999990000", b"7", b"", b"9", b"doc-9"])
>>> c.nums, c.noted, c.backlog, c.oldest_ms
([7, 9], {9: 'doc-9'}, 5, 1699999990000)
>>> outcome(present=True, deleted=True), outcome(present=True, deleted=False), outcome(False, False, "doc-9")
('x', 'k', 'x')
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

EXPIRED, KEPT, NONE = "x", "k", "-"  # a claimed document's outcome (expire_finish.lua)


def _text(raw: Any) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)


@dataclass(frozen=True, slots=True)
class Claim:
    """What one ``expire_claim`` call gave: the server's time, the claim's deadline (its token), the documents
    past the window left unclaimed, the oldest touch time left, and the claimed integer ids with the ids noted
    for those taken over."""

    now_ms: int
    deadline: int
    backlog: int
    oldest_ms: int | None
    nums: list[int]
    noted: dict[int, str]

    @classmethod
    def of(cls, reply: Sequence[Any]) -> Claim:
        """Parse expire_claim.lua's reply."""
        now, deadline, backlog, oldest = int(reply[0]), int(reply[1]), int(reply[2]), _text(reply[3])
        nums, noted = [], {}
        for raw_n, raw_id in zip(reply[4::2], reply[5::2], strict=True):
            n, doc_id = int(raw_n), _text(raw_id)
            nums.append(n)
            if doc_id:
                noted[n] = doc_id
        return cls(now, deadline, max(0, backlog), int(float(oldest)) if oldest else None, nums, noted)


def outcome(present: bool, deleted: bool, noted: str = "") -> str:
    """What became of a claimed document: expired (its record deleted now, or gone already with its id noted:
    a step killed after the delete), kept (its record changed since it was read: an update came first), or
    nothing known (no record and no id: a document whose record was never written)."""
    if present:
        return EXPIRED if deleted else KEPT
    return EXPIRED if noted else NONE


@dataclass(frozen=True, slots=True)
class Expired:
    """What one step did: documents expired, those left past the window (the backlog), the oldest touch
    time left (ms; None: no document) and the server's time (ms)."""

    expired: int
    backlog: int
    oldest_ms: int | None
    now_ms: int

    @property
    def oldest_age_s(self) -> float | None:
        """The age of the least recently touched document, in seconds."""
        return None if self.oldest_ms is None else max(0.0, (self.now_ms - self.oldest_ms) / 1000)
