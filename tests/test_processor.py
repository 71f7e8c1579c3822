"""The batch pipeline against a real Redis: alerts, verification, updates, redelivery, dead letters."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
import redis
from helpers import alerts, dead, drain, make_daemon, pending, push, text, variant

from dedupd.daemon.entries import CODES
from dedupd.daemon.loop import Daemon
from dedupd.index.keys import Keys


def test_near_duplicates_alerted_with_contract_fields(r: redis.Redis, redis_url: str) -> None:
    rng = random.Random(1)
    a = text(rng)
    docs = [
        {"id": "a", "text": a},
        {"id": "other", "text": text(rng)},
        {"id": "b", "text": variant(rng, a), "source": "wire", "meta": {"lang": "en"}},
    ]
    inputs = push(r, docs)
    drain(make_daemon(redis_url))
    got = alerts(r)
    assert len(got) == 1
    al = got[0]
    assert (al["id"], al["duplicate_of"], al["cluster"], al["input"], al["source"], al["verify"]) == (
        "b",
        "a",
        "a",
        inputs[2],
        "wire",
        "exact",
    )
    assert json.loads(al["meta"]) == {"lang": "en"}
    assert al["matches"][0][0] == "a" and float(al["similarity"]) == al["matches"][0][1] >= 0.8
    assert pending(r) == 0


def test_duplicates_inside_one_batch(r: redis.Redis, redis_url: str) -> None:
    """All copies arrive in one read: each later copy names the earlier ones."""
    rng = random.Random(2)
    base = text(rng)
    push(r, [{"id": f"c{i}", "text": variant(rng, base) if i else base} for i in range(4)])
    daemon = make_daemon(redis_url, batch_size=100)
    result = daemon.iteration()
    assert result is not None and result.processed == 4
    got = {a["id"]: {m[0] for m in a["matches"]} for a in alerts(r)}
    assert got == {"c1": {"c0"}, "c2": {"c0", "c1"}, "c3": {"c0", "c1", "c2"}}
    assert {a["cluster"] for a in alerts(r)} == {"c0"}


def test_verification_rejects_candidates_below_threshold(r: redis.Redis, redis_url: str) -> None:
    """Low rows per band makes dissimilar pairs candidates; verification keeps them out of alerts."""
    rng = random.Random(3)
    base = text(rng, 40)
    far = variant(rng, base, edits=12)  # Jaccard well below 0.8, but shares many bands with r=1
    push(r, [{"id": "x", "text": base}, {"id": "y", "text": far}])
    for verify in ("exact", "signature"):
        r.delete(Keys().alerts)
        daemon = make_daemon(redis_url, bands=64, rows=1, verify=verify, prefix="dedupd")
        drain(daemon)
        assert alerts(r) == []
        r.flushall()
        push(r, [{"id": "x", "text": base}, {"id": "y", "text": far}])


def test_upsert_replaces_and_delete_removes(r: redis.Redis, redis_url: str) -> None:
    rng = random.Random(4)
    a, b = text(rng), text(rng)
    daemon = make_daemon(redis_url)
    push(r, [{"id": "doc", "text": a}])
    drain(daemon)
    push(r, [{"id": "doc", "text": b}])  # replace: a's bands must be gone
    drain(daemon)
    push(r, [{"id": "probe-a", "text": a}, {"id": "probe-b", "text": variant(rng, b)}])
    drain(daemon)
    got = {x["id"]: x["duplicate_of"] for x in alerts(r)}
    assert got == {"probe-b": "doc"}
    push(r, [{"id": "doc", "op": "delete"}, {"id": "probe-b2", "text": b}])
    drain(daemon)
    got = {x["id"]: x["duplicate_of"] for x in alerts(r)}
    assert got["probe-b2"] == "probe-b" and "doc" not in [
        m[0] for x in alerts(r) for m in x["matches"] if x["id"] == "probe-b2"
    ]
    assert r.hget(Keys().id_forward, "doc") is None
    assert not r.exists(Keys().doc(1))


def test_append_extends_document(r: redis.Redis, redis_url: str) -> None:
    rng = random.Random(5)
    part1, part2 = text(rng, 40), text(rng, 40)
    daemon = make_daemon(redis_url)
    push(r, [{"id": "log", "text": part1}, {"id": "log", "op": "append", "text": part2}])
    drain(daemon)
    push(r, [{"id": "copy", "text": part1 + "\n" + part2}])
    drain(daemon)
    got = alerts(r)
    assert [(a["id"], a["duplicate_of"], a["similarity"]) for a in got] == [("copy", "log", "1.0000")]


def test_redelivery_changes_nothing_and_alerts_once(r: redis.Redis, redis_url: str) -> None:
    rng = random.Random(6)
    a = text(rng)
    push(
        r,
        [
            {"id": "a", "text": a},
            {"id": "b", "text": variant(rng, a)},
            {"id": "b", "op": "append", "text": "more words at the end"},
            {"text": "no id"},
        ],
    )
    daemon = make_daemon(redis_url)
    batch, _ = daemon._next_batch()
    daemon.processor.process(batch)  # processed but never acknowledged (crash before XACK)
    state = {k: r.dump(k) for k in r.scan_iter(match=b"dedupd:doc:*")}
    before = (len(alerts(r)), len(dead(r)))
    daemon.processor.process(batch)  # redelivered
    assert (len(alerts(r)), len(dead(r))) == before == (2, 1)
    assert {k: r.dump(k) for k in r.scan_iter(match=b"dedupd:doc:*")} == state


def two_versions(
    r: redis.Redis, redis_url: str, seed: int
) -> tuple[Daemon, tuple[str, str], tuple[Any, Any]]:
    """Two upserts of document d, read as two batches and not processed yet."""
    rng = random.Random(seed)
    v1, v2 = text(rng), text(rng)
    daemon = make_daemon(redis_url)
    push(r, [{"id": "d", "text": v1}])
    old_batch, _ = daemon._next_batch()
    push(r, [{"id": "d", "text": v2}])
    new_batch, _ = daemon._next_batch()
    return daemon, (v1, v2), (old_batch, new_batch)


def test_stale_redelivery_does_not_overwrite_newer_version(r: redis.Redis, redis_url: str) -> None:
    """The older entry is applied but not acknowledged (a crash), the newer one is applied after it; the
    older one redelivered changes nothing."""
    daemon, (_, v2), (old_batch, new_batch) = two_versions(r, redis_url, 7)
    assert daemon.processor.process(old_batch).ack == [old_batch[0][0]]  # applied, never acknowledged
    assert daemon.processor.process(new_batch).ack == [new_batch[0][0]]  # the older one is applied already
    daemon.processor.process(old_batch)  # the older entry is redelivered late
    push(r, [{"id": "probe", "text": v2}])
    drain(daemon)
    assert [a["duplicate_of"] for a in alerts(r)] == ["d"]


def test_newer_entry_waits_for_an_older_one_in_flight(r: redis.Redis, redis_url: str) -> None:
    """The newer upsert reaches the processing first: it is deferred (not written, not acknowledged)
    until the older one is applied, then it wins."""
    daemon, (v1, v2), (old_batch, new_batch) = two_versions(r, redis_url, 8)
    first = daemon.processor.process(new_batch)
    assert first.deferred == [new_batch[0][0]] and first.ack == [] and first.processed == 0
    assert not list(r.scan_iter(match=b"dedupd:doc:*"))  # nothing written yet
    daemon.handle(old_batch, None)
    daemon.handle(new_batch, None)
    push(r, [{"id": "probe", "text": v2}, {"id": "probe1", "text": v1}])
    drain(daemon)
    assert [(a["id"], a["duplicate_of"]) for a in alerts(r)] == [("probe", "d")] and pending(r) == 0


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"text": "no id"}, "missing_id"),
        ({"id": "x" * 300, "text": "t"}, "id_too_long"),
        ({"id": "a"}, "missing_text"),
        ({"id": "a", "text": "x" * 2000}, "too_large"),
        ({"id": "a", "text": b"\xff\xfe bad"}, "bad_utf8"),
        ({"id": "a", "text": "t", "items": "[1,"}, "bad_json"),
        ({"id": "a", "text": "t", "op": "merge"}, "unknown_op"),
    ],
)
def test_dead_letter_codes(r: redis.Redis, redis_url: str, fields: dict[str, object], code: str) -> None:
    r.xadd(Keys().docs, fields)  # type: ignore[arg-type]
    push(r, [{"id": "fine", "text": "a perfectly good document"}])
    daemon = make_daemon(redis_url, max_doc_bytes=1000)
    drain(daemon)
    letters = dead(r)
    assert len(letters) == 1
    letter = letters[0]
    assert letter[b"error"].decode() == code and code in CODES and letter[b"detail"]
    for k, v in fields.items():  # the original fields are kept as they were
        assert letter[k.encode()] == (v if isinstance(v, bytes) else str(v).encode())
    assert pending(r) == 0
    assert r.hget(Keys().id_forward, "fine") is not None


def test_max_deliveries_dead_letters(r: redis.Redis, redis_url: str) -> None:
    push(r, [{"id": "p", "text": "poison"}])
    daemon = make_daemon(redis_url, max_deliveries=2)
    batch, _ = daemon._next_batch()
    daemon.handle(batch, {batch[0][0]: 3})
    letters = dead(r)
    assert [x[b"error"] for x in letters] == [b"max_deliveries"] and pending(r) == 0


def test_processing_failure_is_retried_then_dead_lettered(
    r: redis.Redis, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An entry that makes processing raise stays pending, is redelivered, and ends in the dead letters."""
    push(r, [{"id": "ok", "text": "fine text here"}, {"id": "boom", "text": "explodes"}])
    daemon = make_daemon(redis_url, max_deliveries=2, claim_idle_ms=100)
    real = daemon.processor._process_run

    def flaky(entries, result, *rest):  # type: ignore[no-untyped-def]
        if any(e.doc_id == "boom" for e in entries):
            raise RuntimeError("bug")
        return real(entries, result, *rest)

    monkeypatch.setattr(daemon.processor, "_process_run", flaky)
    daemon.redelivery.claim.last = float(
        "inf"
    )  # no claim while draining: on a slow machine the first pass can outlast
    drain(daemon)  # claim_idle_ms, and the entry would be claimed and dead-lettered before the check below
    assert pending(r) == 1 and dead(r) == []
    import time

    for _ in range(5):
        time.sleep(0.15)
        daemon.redelivery.claim.now()
        daemon.iteration()
    assert pending(r) == 0
    assert [x[b"error"] for x in dead(r)] in ([b"processing_failed"], [b"max_deliveries"])
    assert r.hget(Keys().id_forward, "ok") is not None


def test_baskets(r: redis.Redis, redis_url: str) -> None:
    push(
        r,
        [{"id": "a", "text": "Beer and Bread", "items": ["Beer", "Bread"]}, {"id": "b", "text": "Milk now"}],
    )
    drain(make_daemon(redis_url, baskets="words"))
    got = [(f[b"id"], json.loads(f[b"items"])) for _, f in r.xrange(Keys().baskets)]
    assert got == [(b"a", ["Beer", "Bread"]), (b"b", ["milk", "now"])]


def test_overlapping_redelivery_emits_each_entry_once_in_order(r: redis.Redis, redis_url: str) -> None:
    """Outputs go out in one script call per batch and stream; an entry seen before is skipped inside it,
    the new ones around it still go out, in input order."""
    rng = random.Random(12)
    base = text(rng, 200)
    docs = [{"id": f"d{i}", "text": variant(rng, base)} for i in range(6)] + [{"text": "no id"}]
    push(r, docs)
    daemon = make_daemon(redis_url, baskets="words")
    batch, _ = daemon._next_batch()
    assert len(batch) == 7
    daemon.processor.process(batch[:4])
    daemon.processor.process(batch[2:])  # d2, d3 again (a redelivery), then the rest
    daemon.processor.process(batch)  # everything again
    assert [f[b"id"] for _, f in r.xrange(Keys().baskets)] == [f"d{i}".encode() for i in range(6)]
    assert [a["id"] for a in alerts(r)] == [f"d{i}" for i in range(1, 6)]
    assert [f[b"input"].decode() for _, f in r.xrange(Keys().dead)] == [batch[6][0]]


def bucket_members(r: redis.Redis) -> dict[int, int]:
    """How many buckets hold each integer id (decoded from every bucket hash)."""
    import numpy as np

    counts: dict[int, int] = {}
    for key in r.scan_iter(match=b"dedupd:b:*"):
        for value in r.hvals(key):
            for n in np.frombuffer(value, dtype="<u4").tolist():
                counts[n] = counts.get(n, 0) + 1
    return counts


def test_buckets_follow_upserts_and_deletes(r: redis.Redis, redis_url: str) -> None:
    """Each live document sits in exactly `bands` buckets; replaced bands and deleted documents leave none."""
    rng = random.Random(8)
    daemon = make_daemon(redis_url)
    bands = daemon.gateway.spec.bands
    base = text(rng)
    push(r, [{"id": f"d{i}", "text": variant(rng, base, 3)} for i in range(6)])
    drain(daemon)
    assert bucket_members(r) == {n: bands for n in range(1, 7)}
    push(
        r,
        [
            {"id": "d0", "text": text(rng)},
            {"id": "d1", "op": "delete"},
            {"id": "d2", "op": "append", "text": text(rng)},
            {"id": "d3", "text": variant(rng, base, 3)},
        ],
    )
    drain(daemon)
    assert bucket_members(r) == {n: bands for n in (1, 3, 4, 5, 6)}
    push(r, [{"id": f"d{i}", "op": "delete"} for i in range(7)])
    drain(daemon)
    assert bucket_members(r) == {}
    assert list(r.scan_iter(match=b"dedupd:doc:*")) == []


@pytest.mark.parametrize("first", ["older", "newer"])
def test_concurrent_upserts_of_one_id_converge(r: redis.Redis, redis_url: str, first: str) -> None:
    """Two consumers handle two upserts of one document at once, in either order: the newer entry waits
    until the older one is applied (per-document order); the later entry wins and only its buckets hold the
    doc."""
    import threading

    rng = random.Random(9)
    d1, d2 = make_daemon(redis_url, consumer="one"), make_daemon(redis_url, consumer="two")
    push(r, [{"id": "doc", "text": text(rng)}])
    drain(d1)
    push(r, [{"id": "doc", "text": text(rng)}])
    older, _ = d1._next_batch()
    push(r, [{"id": "doc", "text": text(rng)}])
    newer, _ = d2._next_batch()
    order = [d1, d2] if first == "older" else [d2, d1]
    gate = threading.Event()
    for d in (d1, d2):
        real = d.gateway.apply
        calls = []

        def held(prepared, _real=real, _d=d, _calls=calls):  # type: ignore[no-untyped-def]
            _calls.append(1)
            if len(_calls) == 1:  # both have read the record before either writes
                if _d is order[1]:
                    gate.wait(timeout=10)
                out = _real(prepared)
                if _d is order[0]:
                    gate.set()
                return out
            return _real(prepared)

        d.gateway.apply = held  # type: ignore[method-assign]
    threads = [threading.Thread(target=d.handle, args=(b, None)) for d, b in ((d1, older), (d2, newer))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    for d in (d1, d2):  # the newer entry waited for the older one: it goes in now
        drain(d)
    assert pending(r) == 0
    num = int(r.hget(Keys().id_forward, "doc"))
    stored = d1.gateway.load_records([num])[num]
    assert stored is not None and stored.entry_id == newer[0][0]
    assert bucket_members(r) == {num: d1.gateway.spec.bands}


def test_redelivery_after_a_crash_before_the_alert_still_alerts(
    r: redis.Redis, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """X indexes `a` and dies before its alert; `b` (a later entry) was handled by Y a moment before and
    could not see `a`. The redelivered `a` must still report `b` (the soak found this pair missing)."""
    rng = random.Random(10)
    base = text(rng)
    x, y = make_daemon(redis_url, consumer="x"), make_daemon(redis_url, consumer="y")
    push(r, [{"id": "a", "text": base}])
    batch_a, _ = x._next_batch()
    push(r, [{"id": "b", "text": variant(rng, base)}])
    y.handle(*y._next_batch())  # b first: nothing to compare with yet
    assert alerts(r) == []

    def crash(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise SystemExit("killed before the alert")

    monkeypatch.setattr("dedupd.daemon.processor.write_outputs", crash)
    with pytest.raises(SystemExit):
        x.processor.process(batch_a)
    monkeypatch.undo()
    x.handle(batch_a, {batch_a[0][0]: 2})  # redelivered
    assert [(a["id"], a["duplicate_of"]) for a in alerts(r)] == [("a", "b")]
    x.handle(batch_a, {batch_a[0][0]: 3})  # and again: nothing more
    assert len(alerts(r)) == 1 and pending(r) == 0


def test_the_in_flight_registry_stays_a_hashtable(r: redis.Redis, redis_url: str) -> None:
    """The registry's hash keeps its hashtable encoding (a listpack is scanned on every lookup) and holds
    only its marker field once everything is acknowledged."""
    from dedupd.index.keys import INFLIGHT_SENTINEL

    rng = random.Random(13)
    push(r, [{"id": f"d{i}", "text": text(rng)} for i in range(20)])
    daemon = make_daemon(redis_url)
    daemon._next_batch()
    assert r.object("encoding", Keys().inflight) == b"hashtable" and r.hlen(Keys().inflight) == 21
    daemon.redelivery.recover()
    drain(daemon)
    assert r.hkeys(Keys().inflight) == [INFLIGHT_SENTINEL] and int(r.get(Keys().inflight_count)) == 0
