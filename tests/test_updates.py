"""Updates at the storage level: append is incremental, unknown ids behave, and concurrent upserts of one id."""

from __future__ import annotations

import random
import time
from collections import Counter

import numpy as np
import pytest
import redis
from helpers import FailOnce, alerts, drain, handle_at_once, make_daemon, pending, push, text
from redis.crc import key_slot

from dedupd.daemon.loop import Daemon
from dedupd.index.buckets import ClusterEncoding
from dedupd.index.keys import Keys


def memberships(r: redis.Redis, daemon: Daemon) -> Counter[int]:
    """How many band buckets hold each integer id (sets of ids, or hashes of packed uint32 ids)."""
    out: Counter[int] = Counter()
    for key in r.scan_iter(match=Keys().band_pattern(daemon.gateway.generation), count=1000):
        kind = r.type(key)
        if kind == b"set":
            out.update(int(x) for x in r.smembers(key))
        elif kind == b"hash":
            for value in r.hvals(key):
                out.update(np.frombuffer(value, dtype="<u4").tolist())
    return out


def num_of(daemon: Daemon, doc_id: str) -> int:
    return int(daemon.client.hget(Keys().id_forward, doc_id) or 0)


def test_append_updates_the_stored_signature_incrementally(r: redis.Redis, redis_url: str) -> None:
    """After appends, the stored signature is the one of the whole text (boundary shingles included)."""
    rng = random.Random(61)
    parts = [text(rng, 30) for _ in range(3)]
    daemon = make_daemon(redis_url)
    push(r, [{"id": "log", "text": parts[0]}, {"id": "log", "op": "append", "text": parts[1]}])
    drain(daemon)
    push(r, [{"id": "log", "op": "append", "text": parts[2]}])
    drain(daemon)
    num = num_of(daemon, "log")
    stored = daemon.gateway.load_records([num])[num]
    whole = daemon.gateway.fingerprinter.compute(["\n".join(parts)])[0]
    assert stored is not None
    assert np.array_equal(stored.fingerprint.signature, whole.signature)
    assert memberships(r, daemon)[num] == daemon.gateway.spec.bands
    push(r, [{"id": "copy", "text": "\n".join(parts)}])
    drain(daemon)
    assert [(a["id"], a["duplicate_of"], a["similarity"]) for a in alerts(r)] == [("copy", "log", "1.0000")]


def test_append_to_unknown_id_indexes_it_and_delete_of_unknown_id_is_harmless(
    r: redis.Redis, redis_url: str
) -> None:
    rng = random.Random(62)
    body = text(rng)
    daemon = make_daemon(redis_url)
    push(
        r,
        [
            {"id": "nobody", "op": "delete"},
            {"id": "new", "op": "append", "text": body},
            {"id": "new", "op": "delete"},
            {"id": "new", "text": body},
            {"id": "twin", "text": body},
        ],
    )
    drain(daemon)
    assert pending(r) == 0 and r.xlen(Keys().dead) == 0
    assert r.hget(Keys().id_forward, "nobody") is None
    assert [(a["id"], a["duplicate_of"]) for a in alerts(r)] == [("twin", "new")]
    counts = memberships(r, daemon)
    assert counts[num_of(daemon, "new")] == counts[num_of(daemon, "twin")] == daemon.gateway.spec.bands
    assert sum(counts.values()) == 2 * daemon.gateway.spec.bands  # the deleted version left nothing behind


def test_concurrent_upserts_of_one_id_leave_a_consistent_index(r: redis.Redis, redis_url: str) -> None:
    """Two consumers upsert the same id at the same moment: the record is the later entry's, and the
    document sits in exactly the buckets of that record (no stale bucket membership)."""
    rng = random.Random(63)
    v0, v1, v2 = text(rng), text(rng), text(rng)
    d1, d2 = (make_daemon(redis_url, consumer=name, claim_idle_ms=100) for name in ("one", "two"))
    push(r, [{"id": "doc", "text": v0}])
    drain(d1)
    push(r, [{"id": "doc", "text": v1}])
    b1, _ = d1._next_batch()
    push(r, [{"id": "doc", "text": v2}])
    b2, _ = d2._next_batch()
    handle_at_once([(d1, b1), (d2, b2)])  # both have read the stored record before either writes
    time.sleep(0.15)  # idle longer than claim_idle_ms
    for d in (d1, d2):  # an entry left pending because its document changed meanwhile is processed again
        d.redelivery.claim.now()
        drain(d)
    assert pending(r) == 0
    num = num_of(d1, "doc")
    stored = d1.gateway.load_records([num])[num]
    assert stored is not None and stored.entry_id == b2[0][0]  # the later entry wins
    assert memberships(r, d1)[num] == d1.gateway.spec.bands  # and only its bands hold the document


def as_on_a_cluster(daemon: Daemon) -> None:
    """The gateway writes as on a Redis Cluster (records compare-and-set one by one, then the buckets in one call
    per slot), here on one server."""
    daemon.gateway.cluster = True
    daemon.gateway.encoding = ClusterEncoding(lambda name: key_slot(name.encode()))


def fail_buckets_once(daemon: Daemon) -> None:
    """The next bucket step fails (a node down, a failover) after the records were written."""
    daemon.gateway._buckets = FailOnce(daemon.gateway._buckets)


def leaving_keys(r: redis.Redis) -> list[bytes]:
    return list(r.scan_iter(match="{dedupd:doc:*}:leave"))


def test_on_a_cluster_a_retry_after_the_record_write_leaves_the_old_buckets(
    r: redis.Redis, redis_url: str
) -> None:
    """An update whose record was written and whose bucket step failed is redone: the old version's buckets are
    left too (the retry finds the record at the new version), and a delete afterwards leaves nothing."""
    rng = random.Random(64)
    v1, v2 = text(rng), text(rng)
    daemon = make_daemon(redis_url)
    as_on_a_cluster(daemon)
    push(r, [{"id": "doc", "text": v1}])
    drain(daemon)
    num, bands = num_of(daemon, "doc"), daemon.gateway.spec.bands
    assert memberships(r, daemon)[num] == bands
    fail_buckets_once(daemon)
    [entry] = push(r, [{"id": "doc", "text": v2}])
    with pytest.raises(redis.ConnectionError):
        drain(daemon)
    record = daemon.gateway.load_records([num])[num]
    assert record is not None and record.entry_id == entry  # the record write landed, the buckets did not
    daemon._recover_after_error(redis.ConnectionError("down"))  # as Daemon.run does: re-read own pending
    drain(daemon)
    assert pending(r) == 0
    assert memberships(r, daemon)[num] == bands  # v2's buckets only
    assert not leaving_keys(r)
    push(r, [{"id": "doc", "op": "delete"}])
    drain(daemon)
    assert memberships(r, daemon)[num] == 0 and not leaving_keys(r)


def test_on_a_cluster_buckets_a_failed_write_left_are_left_by_the_next_version(
    r: redis.Redis, redis_url: str
) -> None:
    """An update whose bucket step failed and whose entry was given up (acknowledged without a retry, as a
    dead letter is): the next version of the document leaves the buckets of both earlier versions."""
    rng = random.Random(65)
    v1, v2, v3 = text(rng), text(rng), text(rng)
    daemon = make_daemon(redis_url)
    as_on_a_cluster(daemon)
    push(r, [{"id": "doc", "text": v1}])
    drain(daemon)
    num, bands = num_of(daemon, "doc"), daemon.gateway.spec.bands
    fail_buckets_once(daemon)
    [entry] = push(r, [{"id": "doc", "text": v2}])
    with pytest.raises(redis.ConnectionError):
        drain(daemon)
    daemon.stream.ack([(entry, {b"id": b"doc"})])
    push(r, [{"id": "doc", "text": v3}])
    drain(daemon)
    assert pending(r) == 0
    assert memberships(r, daemon)[num] == bands  # v3's buckets only
    assert not leaving_keys(r)


def test_on_a_cluster_a_retry_leaves_a_short_documents_prefix_buckets_too(
    r: redis.Redis, redis_url: str
) -> None:
    """The same with short documents, whose rows of band hashes go on past the LSH bands (their shingle
    prefix: lsh.prefix_length), so the rows kept to leave differ in length."""
    v1, v2 = "alpha beta gamma delta epsilon zeta", "one two three four five six seven eight nine ten"
    daemon = make_daemon(redis_url, threshold=0.5)  # (short documents' prefixes: below threshold 0.75)
    as_on_a_cluster(daemon)
    fpr = daemon.gateway.fingerprinter
    width = {t: row.size for t, row in zip((v1, v2), fpr.band_hashes(fpr.compute([v1, v2])), strict=True)}
    assert width[v1] != width[v2] and min(width.values()) > daemon.gateway.spec.bands
    push(r, [{"id": "doc", "text": v1}])
    drain(daemon)
    num = num_of(daemon, "doc")
    assert memberships(r, daemon)[num] == width[v1]
    fail_buckets_once(daemon)
    push(r, [{"id": "doc", "text": v2}])
    with pytest.raises(redis.ConnectionError):
        drain(daemon)
    daemon._recover_after_error(redis.ConnectionError("down"))
    drain(daemon)
    assert memberships(r, daemon)[num] == width[v2] and not leaving_keys(r)
