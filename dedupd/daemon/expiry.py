"""One step of the retention window's expiry (index/retention.py says how it is shared and why it is safe).

:func:`expire_step` claims at most ``limit`` documents past the window, reads their records, notes their
ids, deletes the records and leaves their buckets as a delete does (one BUCKETS exchange, each record
conditional on being the version read), then ends the claim (ids, union-find nodes, representatives; no
tombstone). A daemon runs a step after each batch and on a timer while idle (daemon/loop.py), so an idle
index still expires; any number of daemons share the work through the claims.
"""

from __future__ import annotations

from dedupd.daemon.indexing import band_hashes
from dedupd.index.buckets import DocWrite
from dedupd.index.protocol import Gateway
from dedupd.index.retention import EXPIRED, Expired, outcome

STEP_LIMIT = 512  # documents claimed per step at least (a daemon's batch size when larger)


def expire_step(gw: Gateway, limit: int, lease_ms: int) -> Expired:
    """Expire at most ``limit`` documents past the window of ``gw``'s index (its spec); a claim lasts
    ``lease_ms`` before another daemon may take it over. Returns what the step did."""
    claim = gw.claim_expiry(limit, lease_ms)
    if not claim.nums:
        return Expired(0, claim.backlog, claim.oldest_ms, claim.now_ms)
    records = gw.load_records(claim.nums)
    present = [n for n in claim.nums if records.get(n) is not None]
    gw.note_expiry(claim.deadline, [(n, records[n].doc_id) for n in present])  # type: ignore[union-attr]
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
    expired = gw.finish_expiry(claim.deadline, done)
    if expired:
        gw.count({"expired": expired})
    assert all(what != EXPIRED or doc for _, doc, what in done)
    return Expired(expired, claim.backlog, claim.oldest_ms, claim.now_ms)
