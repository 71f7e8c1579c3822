"""One step of the retention window's expiry (index/retention.py says how it is shared and why it is safe).

:func:`expire_step` claims at most ``limit`` documents past the window, reads their records, notes their
ids, deletes the records and leaves their buckets as a delete does (one BUCKETS exchange, each record
conditional on being the version read), then ends the claim (ids, union-find nodes, representatives, the
expired count; no tombstone). A daemon runs a step after each batch and on a timer while idle
(daemon/loop.py), so an idle index still expires; any number of daemons share the work through the claims.

:class:`Steps` runs a daemon's steps one at a time: in its own thread while the daemon overlaps batches (a
step is mostly waiting for Redis: it runs beside the next batch's start instead of before it), else in the
caller's. A step that found a backlog (more past the window than it took) makes the next one larger, up to
``BACKLOG_FACTOR`` times: a call's work stays bounded by settings, never by the backlog.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future

from dedupd.daemon.indexing import band_hashes
from dedupd.daemon.worker_thread import Worker
from dedupd.index.buckets import DocWrite
from dedupd.index.docstate import sid
from dedupd.index.protocol import Gateway
from dedupd.index.record import Record
from dedupd.index.retention import EXPIRED, Expired, outcome

STEP_LIMIT = 512  # documents claimed per step at least (a daemon's batch size when larger)
BACKLOG_FACTOR = 4  # a step after one that left a backlog claims up to this many times more
InFlight = Callable[[list[str]], list[tuple[str, ...]]]  # stream.ConsumerStream.inflight


class Steps:
    """A daemon's expiry steps, one at a time: ``base`` documents a step (more after a backlog), claims
    lasting ``lease_ms``, the in-flight entries looked up with ``in_flight``."""

    def __init__(self, name: str, base: int, lease_ms: int, in_flight: InFlight | None) -> None:
        self.base, self.limit, self.lease_ms, self.in_flight = base, base, lease_ms, in_flight
        self._worker = Worker(name)
        self._running: Future[Expired] | None = None

    def run(self, gw: Gateway) -> Expired:
        """One step on ``gw``'s index, here (after the step in the background, if any: :meth:`settle`)."""
        self.settle()
        return self._step(gw)

    def start(self, gw: Gateway) -> None:
        """One step on ``gw``'s index in the background (after the one before: settle it first)."""
        assert self._running is None, "settle the step in the background first"
        self._running = self._worker.submit(lambda: self._step(gw))

    def settle(self) -> Expired | None:
        """What the step in the background did, once it is done (None: no step was); raises what it raised."""
        running, self._running = self._running, None
        return None if running is None else running.result()

    def _step(self, gw: Gateway) -> Expired:
        done = expire_step(gw, self.limit, self.lease_ms, self.in_flight)
        self.limit = self.base * BACKLOG_FACTOR if done.backlog else self.base
        return done


def expire_step(gw: Gateway, limit: int, lease_ms: int, in_flight: InFlight | None = None) -> Expired:
    """Expire at most ``limit`` documents past the window of ``gw``'s index (its spec); a claim lasts
    ``lease_ms`` before another daemon may take it over. Returns what the step did.

    A claimed document with an entry ``in_flight`` (delivered, not acknowledged) not newer than its record's
    version is kept, and touched again: that entry was applied (or superseded) by a consumer that died before
    its acknowledgement, and delivered again after the expiry it would bring the document back as a new one
    (an expiry leaves no tombstone); its redelivery touches it again, as any redelivery does. An entry newer
    than the record waits for the expiry (the expiry came first: resolve_ids.lua)."""
    claim = gw.claim_expiry(limit, lease_ms)
    if not claim.nums:
        return Expired(0, claim.backlog, claim.oldest_ms, claim.now_ms)
    records = gw.load_leaving(claim.nums)
    present = [n for n in claim.nums if records.get(n) is not None]
    ids = {n: records[n].doc_id for n in present}  # type: ignore[union-attr]
    gw.note_expiry(claim.deadline, list(ids.items()))
    if in_flight is not None and ids:
        names = list(dict.fromkeys(ids.values()))
        flights = dict(zip(names, in_flight(names), strict=True))
        present = [n for n in present if not _applied_in_flight(records[n], flights[ids[n]])]
    fps = [records[n].fingerprint for n in present]  # type: ignore[union-attr]
    bands = band_hashes(gw, fps)
    writes = []
    for n, b in zip(present, bands, strict=True):
        rec = records[n]
        assert rec is not None
        w = DocWrite(n, expected=rec.entry_id)
        w.remove, w.delete = b, True
        writes.append(w)
    applied, _ = gw.apply(gw.prepare(writes)) if writes else ([], None)
    deleted = {w.num: f is not None for w, f in zip(writes, applied, strict=True)}
    done = []
    for n in claim.nums:
        rec = records.get(n)
        noted = claim.noted.get(n, "")
        what = outcome(rec is not None, deleted.get(n, False), noted)
        done.append((n, rec.doc_id if rec is not None else noted, what))
    expired = gw.finish_expiry(claim.deadline, done)  # (counted in the same call: keys.expired_count)
    assert all(what != EXPIRED or doc for _, doc, what in done)
    return Expired(expired, claim.backlog, claim.oldest_ms, claim.now_ms)


def _applied_in_flight(record: Record | None, flight: tuple[str, ...]) -> bool:
    """Whether an entry in ``flight`` (a document's unacknowledged entries) is not newer than ``record``.

    >>> from dedupd.similarity.fingerprint import Fingerprinter
    >>> from dedupd.similarity.spec import IndexSpec
    >>> fp = Fingerprinter(IndexSpec("word:1", 8, 1, 2, 4, "oph")).compute(["a b"])[0]
    >>> rec = Record(1, "x", fp, "5-0", None)
    >>> _applied_in_flight(rec, ("5-0",)), _applied_in_flight(rec, ("7-0",)), _applied_in_flight(rec, ())
    (True, False, False)
    """
    return record is not None and any(sid(e) <= sid(record.entry_id) for e in flight)
