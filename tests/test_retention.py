"""The retention window against a real Redis: documents past the window (by count or by age) are forgotten
as a delete forgets them, but leave nothing behind; documents within it, or kept alive by their copies, are
found; an id pushed again after its document expired is a new document; an update racing an expiry ends as
the stream says."""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis
from helpers import alerts, dead, drain, make_daemon, pending, push, text, variant
from procs import Served, check_exactly_once, counter, pairs_corpus, push_corpus, wait_for

from dedupd.daemon.entries import DOC_TOO_LARGE, TOO_LARGE
from dedupd.daemon.expiry import expire_step
from dedupd.daemon.loop import Daemon
from dedupd.index.keys import Keys
from dedupd.ops.stats import collect, render

K = Keys()


def wait_until(what: Callable[[], bool], step: Callable[[], Any], deadline_s: float = 60.0) -> None:
    """Run ``step`` until ``what`` holds (a generous deadline, never a timed assertion)."""
    end = time.monotonic() + deadline_s
    while not what():
        assert time.monotonic() < end, "the condition did not come about"
        step()


def settle_expiry(daemon: Daemon) -> None:
    """Steps until nothing is past the window (the backlog the last step saw is 0 and nothing is claimed)."""
    r = daemon.client

    def done() -> bool:
        daemon._expire()
        return daemon.metrics.expiry_backlog._value.get() == 0 and not r.exists(K.expiring)

    wait_until(done, lambda: time.sleep(0.01))


def query(r: redis.Redis, daemon: Daemon, doc_id: str, body: str) -> dict[str, str]:
    push(r, [{"id": doc_id, "text": body, "op": "query", "reply_to": "t"}])
    drain(daemon)
    _, fields = r.xrange(K.reply("t"))[-1]
    return {k.decode(): v.decode() for k, v in fields.items()}


def named(r: redis.Redis, doc_id: str) -> list[str]:
    """The ids the alerts of ``doc_id`` name."""
    return [m[0] for a in alerts(r) if a["id"] == doc_id for m in a["matches"]]


def _footprint(r: redis.Redis) -> dict[str, int]:
    """What the index holds per document, as counts: records, ids, touch times, claims, tombstones, union-find
    fields, and the band bucket fields (one per distinct band hash: at most bands + 1 per document)."""
    buckets = sum(int(r.hlen(k)) for k in r.scan_iter(match=K.band_pattern_all))
    return {
        "records": len(r.keys("dedupd:doc:*")),
        "ids": int(r.hlen(K.id_forward)),
        "touched": int(r.zcard(K.touched)),
        "claims": int(r.zcard(K.expiring)) + int(r.hlen(K.expiring_ids)),
        "tombstones": int(r.hlen(K.tombstones)),
        "union-find": sum(
            int(r.hlen(k)) for k in (K.uf_parent, K.uf_children, K.uf_gone, K.uf_ring, K.uf_reps)
        ),
        "buckets": min(buckets, 20 * 26),
    }


def test_a_count_window_keeps_the_newest_documents_and_forgets_the_others(
    r: redis.Redis, redis_url: str
) -> None:
    rng = random.Random(1)
    daemon = make_daemon(redis_url, max_documents=20, batch_size=10)
    texts = [text(rng) for _ in range(60)]
    push(r, [{"id": f"d{i}", "text": t} for i, t in enumerate(texts)])
    drain(daemon)
    settle_expiry(daemon)
    assert r.zcard(K.touched) == 20
    assert int(r.hlen(K.id_forward)) == 20
    assert len(r.keys("dedupd:doc:*")) == 20
    before = _footprint(r)
    later = [text(rng) for _ in range(60)]
    push(r, [{"id": f"e{i}", "text": t} for i, t in enumerate(later)])  # 60 more: memory stays flat
    drain(daemon)
    settle_expiry(daemon)
    assert _footprint(r) == before and r.hlen(K.id_forward) == 20
    shown = collect(r, K)
    assert shown.retention is not None
    assert (shown.retention["expired"], shown.retention["backlog"], shown.retention["max_documents"]) == (
        100,
        0,
        20,
    )
    assert shown.retention["oldest_age_s"] is not None
    assert re.search(
        r"retention +window 20 documents \(a match restarts a document's age\); oldest", render(shown)
    )
    # an old one is forgotten: its copy finds nothing, a query of it is no duplicate
    assert query(r, daemon, "q-old", texts[5])["duplicate"] == "0"
    assert query(r, daemon, "q-new", later[55])["duplicate"] == "1"
    push(
        r,
        [
            {"id": "copy-old", "text": variant(rng, texts[55])},
            {"id": "copy-new", "text": variant(rng, later[55])},
        ],
    )
    drain(daemon)
    assert named(r, "copy-old") == []
    assert named(r, "copy-new") == ["e55"]


def server_ms(r: redis.Redis) -> int:
    seconds, micros = r.time()
    return int(seconds) * 1000 + int(micros) // 1000


def test_a_time_window_finds_a_document_within_it_and_never_one_past_it(
    r: redis.Redis, redis_url: str
) -> None:
    """retention_s = 2: a query while the document's window lasts finds it; a query after a step that began
    past the window never does. The daemon's own timer expires it while idle."""
    rng = random.Random(2)
    daemon = make_daemon(redis_url, retention_s=2)
    body = text(rng)
    push(r, [{"id": "a", "text": body}])
    drain(daemon)
    touched = int(r.zscore(K.touched, "1") or 0)
    window_end = touched + 2000
    seen_within = seen_past = 0
    while seen_past < 3:
        step_began = server_ms(r)
        daemon._expire()
        verdict = query(r, daemon, "q", body)
        answered = server_ms(r)
        if answered < window_end:
            assert verdict["duplicate"] == "1"  # within the window: always found
            seen_within += 1
        elif step_began > window_end:
            assert verdict["duplicate"] == "0"  # a step ran past the window: never found
            seen_past += 1
        time.sleep(0.05)
    assert seen_within > 0
    # idle: the daemon's timer alone expires another one
    push(r, [{"id": "b", "text": text(rng)}])
    drain(daemon)
    wait_until(lambda: not r.hexists(K.id_forward, "b"), lambda: daemon.iteration())
    assert not r.exists(K.touched) and len(r.keys("dedupd:doc:*")) == 0
    assert int(r.get(K.expired_count) or 0) == 2 and not r.exists(K.tombstones)


def _copy_every(refresh: bool, redis_url: str, r: redis.Redis) -> tuple[bool, bool]:
    """A count window of 10; "kept" is re-copied every 5 documents, "once" copied once at the start; 40
    other documents pass. Whether each is still indexed at the end."""
    rng = random.Random(3)
    daemon = make_daemon(redis_url, max_documents=10, batch_size=1, refresh_on_duplicate=refresh)
    kept, once = text(rng), text(rng)
    push(r, [{"id": "kept", "text": kept}, {"id": "once", "text": once}])
    push(r, [{"id": "once-copy", "text": variant(rng, once)}])
    for i in range(40):
        if i % 5 == 4:
            push(r, [{"id": f"kept-copy{i}", "text": variant(rng, kept)}])
        push(r, [{"id": f"other{i}", "text": text(rng)}])
    drain(daemon)
    settle_expiry(daemon)
    return bool(r.hexists(K.id_forward, "kept")), bool(r.hexists(K.id_forward, "once"))


def test_refresh_on_duplicate_keeps_a_document_its_copies_keep_naming(r: redis.Redis, redis_url: str) -> None:
    assert _copy_every(True, redis_url, r) == (True, False)
    r.flushall()
    assert _copy_every(False, redis_url, r) == (False, False)


def test_a_dead_lettered_entry_touches_nothing(r: redis.Redis, redis_url: str) -> None:
    """A window of 3: "old", "a", "b", then entries under "old" that are all dead-lettered (an upsert and an
    append whose stored document would be larger than max_stored_bytes, a text larger than max_doc_bytes),
    then "c". None of them was applied, so none touches "old": it is the least recently touched and leaves,
    as if they had not been pushed (touched by them, "a" would leave instead)."""
    rng = random.Random(8)
    daemon = make_daemon(redis_url, max_documents=3, max_stored_bytes=6_000, max_doc_bytes=20_000)
    chunk = [" ".join(f"w{c}x{i}" for i in range(1000)) for c in range(2)]  # ~4 kB stored each
    push(r, [{"id": "old", "text": chunk[0]}, {"id": "a", "text": text(rng)}, {"id": "b", "text": text(rng)}])
    drain(daemon)
    settle_expiry(daemon)
    time.sleep(0.01)  # (the entries below come at a later millisecond of the server's clock)
    push(r, [{"id": "old", "op": "append", "text": chunk[1]}])
    push(r, [{"id": "old", "text": chunk[0] + " " + chunk[1]}])
    push(r, [{"id": "old", "text": "z" * 21_000}])
    drain(daemon)
    settle_expiry(daemon)
    assert sorted(x[b"error"].decode() for x in dead(r)) == [DOC_TOO_LARGE, DOC_TOO_LARGE, TOO_LARGE]
    time.sleep(0.01)
    push(r, [{"id": "c", "text": text(rng)}])
    drain(daemon)
    settle_expiry(daemon)
    assert sorted(k.decode() for k in r.hkeys(K.id_forward)) == ["a", "b", "c"]
    assert r.zcard(K.touched) == 3 and int(r.get(K.expired_count) or 0) == 1


def test_an_id_pushed_again_after_its_document_expired_is_a_new_document(
    r: redis.Redis, redis_url: str
) -> None:
    rng = random.Random(4)
    daemon = make_daemon(redis_url, max_documents=3, batch_size=1)
    first, other = text(rng), text(rng)
    push(r, [{"id": "x", "text": first}, {"id": "x-copy", "text": variant(rng, first)}])
    push(r, [{"id": f"o{i}", "text": text(rng)} for i in range(5)])
    drain(daemon)
    settle_expiry(daemon)
    assert not r.hexists(K.id_forward, "x") and not r.hexists(K.tombstones, "x")
    push(r, [{"id": "x", "text": other}])  # the same id, another text: no cluster carried over
    push(r, [{"id": "y", "text": variant(rng, other)}, {"id": "z", "text": variant(rng, first)}])
    drain(daemon)
    by_id = {a["id"]: a for a in alerts(r)}
    assert by_id["y"]["cluster"] == "x" and [m[0] for m in by_id["y"]["matches"]] == ["x"]
    assert "z" not in by_id  # the first text expired with its copy


def test_an_update_racing_an_expiry_ends_as_the_stream_says(r: redis.Redis, redis_url: str) -> None:
    """An append that comes while its document is being expired waits for the expiry and then starts a new
    document (the expiry came first); an update written between the expiry's read and its delete keeps the
    document (the update came first) and puts it back in the window."""
    rng = random.Random(5)
    daemon = make_daemon(redis_url, max_documents=1)
    gw = daemon.gateway
    push(r, [{"id": "a", "text": "alpha beta gamma delta"}])
    drain(daemon)
    push(r, [{"id": "b", "text": text(rng)}])
    daemon.handle(daemon.stream.read_new(10, 50), None)  # (no step yet)
    claim = gw.claim_expiry(10, 60_000)
    assert claim.nums == [int(r.hget(K.id_forward, "a") or 0)]
    push(r, [{"id": "a", "op": "append", "text": "epsilon zeta"}])
    result = daemon.handle(daemon.stream.read_new(10, 50), None)
    assert result.deferred and not result.processed  # it waits for the expiry
    gw.claim_expiry(0, 60_000)  # (nothing more)
    r.zadd(K.expiring, {str(claim.nums[0]): 0})  # the claim lapses: the next step takes it over
    settle_expiry(daemon)
    drain(daemon)
    record = gw.load_records([int(r.hget(K.id_forward, "a") or 0)])
    (only,) = record.values()
    assert only is not None and only.fingerprint.n_units == 2  # the chunk alone: "epsilon zeta"

    # the other order: the update's write lands between the step's read and its delete
    r.flushall()
    daemon = make_daemon(redis_url, max_documents=1)
    gw = daemon.gateway
    push(r, [{"id": "c", "text": text(rng)}, {"id": "d", "text": text(rng)}])
    daemon.handle(daemon.stream.read_new(10, 50), None)
    num = int(r.hget(K.id_forward, "c") or 0)
    note = gw.note_expiry

    def update_first(deadline: int, notes: list[tuple[int, str]]) -> None:
        note(deadline, notes)
        old = gw.load_records([num])[num]
        assert old is not None
        from dedupd.index.buckets import DocWrite
        from dedupd.index.record import encode_record

        fp = gw.fingerprinter.compute(["an update that came first"])[0]
        blob = encode_record("c", fp, "9999999999999-0", None, gw.spec.store_shingles)
        gw.apply(gw.prepare([DocWrite(num, expected=old.entry_id, record=blob)]))

    gw.note_expiry = update_first  # type: ignore[method-assign]
    done = expire_step(gw, 10, 60_000)
    assert done.expired == 0
    assert r.hget(K.id_forward, "c") == str(num).encode() and r.zscore(K.touched, str(num)) is not None
    assert gw.load_records([num])[num] is not None and not r.exists(K.expiring)


def test_three_consumers_one_killed_during_expiry_lose_nothing_double_nothing_expire_nothing_early(
    r: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    """1,200 documents (600 pairs, each copy pushed right after its original) through a window of 800 and
    three `dedupd serve`, one killed -9 once expiry has begun and replaced: every pair alerted exactly once,
    no integer id given twice, exactly 800 documents left with nothing else of the 400 expired (no
    tombstone, no claim, no id), and the last 600 pushed all indexed (the killed daemon's two batches in flight,
    kept while they wait, may outlast 100 of the 700 pushed after the 400 that must go: README, slack)."""
    docs, expected = pairs_corpus(600, seed=7)
    env = {"DEDUPD_MAX_DOCUMENTS": "800", "DEDUPD_CLAIM_IDLE_MS": "1000", "DEDUPD_BATCH_SIZE": "50"}
    daemons = [Served(redis_url, tmp_path / f"d{i}.log", "--consumer", f"c{i}", **env) for i in range(3)]
    inputs = push_corpus(r, docs)
    wait_for(lambda: int(r.get(K.expired_count) or 0) > 0, 120, "expiry to begin")
    daemons[0].kill9()
    daemons.append(Served(redis_url, tmp_path / "d3.log", "--consumer", "c3", **env))

    def settled() -> bool:
        return (
            counter(r, "processed") >= len(docs)
            and int(r.xpending(K.docs, "dedupd")["pending"]) == 0
            and r.zcard(K.touched) == 800
            and not r.exists(K.expiring)
        )

    wait_for(settled, 180, "the daemons to drain and expire")
    assert [d.stop() for d in daemons[1:3]] == [0, 0]
    daemons[3].stop()  # (it may still be starting)
    check_exactly_once(r, expected, inputs)
    assert int(r.get(K.id_seq) or 0) == len(docs)  # no id assigned twice
    assert r.hlen(K.id_forward) == 800 and len(r.keys("dedupd:doc:*")) == 800
    assert not r.exists(K.tombstones) and not r.exists(K.expiring_ids)
    # the window follows processing order: the killed daemon's documents (at most two batches of 50, written
    # and not acknowledged) are kept while their entries wait and touched again by their redelivery, so they
    # can outlast as many later ones; every other document of the last 700 pushed stays
    early = [
        at for at, d in enumerate(docs) if at >= len(docs) - 600 and not r.hexists(K.id_forward, d["id"])
    ]
    assert not early, f"expired early (positions pushed): {early}; kept: {_positions(r, docs)[:120]}"


def _positions(r: redis.Redis, docs: list[dict[str, str]]) -> list[int]:
    return [at for at, d in enumerate(docs) if r.hexists(K.id_forward, d["id"])]


def test_a_document_whose_entry_is_unacknowledged_is_not_expired_and_brought_back_by_its_redelivery(
    r: redis.Redis, redis_url: str
) -> None:
    """A consumer writes a document and dies before its acknowledgement; the window moves past the document
    before another consumer claims the entry. Expired then, the document would come back as a new one when
    the entry is delivered again (no tombstone: it looks new). Its entry in flight keeps it (the redelivery
    touches it again, as any redelivery does), and the next document past the window goes instead: no id is
    given twice, and exactly the window is left."""
    rng = random.Random(6)
    dead = make_daemon(redis_url, max_documents=2, consumer="dead")
    push(r, [{"id": "x", "text": text(rng)}])
    batch = dead.stream.read_new(10, 50)
    dead.processor.process(batch, None)  # written, never acknowledged: the consumer died
    assert r.hexists(K.id_forward, "x") and pending(r) == 1
    live = make_daemon(redis_url, max_documents=2, consumer="live", claim_idle_ms=300)
    push(r, [{"id": f"o{i}", "text": text(rng)} for i in range(3)])
    drain(live)  # (each batch followed by an expiry step)
    settle_expiry(live)
    wait_until(lambda: pending(r) == 0, lambda: (live.iteration(), time.sleep(0.05)))  # x's entry claimed
    settle_expiry(live)
    assert int(r.get(K.id_seq) or 0) == 4  # x was not created again
    assert int(r.get(K.expired_count) or 0) == 2 and r.zcard(K.touched) == 2
    assert r.hexists(K.id_forward, "x") and r.hexists(K.id_forward, "o2")


def test_with_overlapping_batches_the_steps_run_in_the_background_and_are_all_accounted_for(
    r: redis.Redis, redis_url: str
) -> None:
    """As `dedupd serve` runs (overlap_batches): each batch's step runs beside the next batch's start; what
    each did is counted before the next one starts, and when the daemon settles."""
    rng = random.Random(7)
    daemon = make_daemon(redis_url, max_documents=20, batch_size=10)
    assert daemon.overlaps
    push(r, [{"id": f"d{i}", "text": text(rng)} for i in range(100)])
    background = 0
    for _ in range(1000):
        if daemon.iteration(overlap=True) is None:
            break
        background += daemon.housekeeping.expiry._running is not None
    daemon.settle()
    daemon.settle_expiry()
    assert background > 0 and daemon.housekeeping.expiry._running is None
    settle_expiry(daemon)
    assert r.zcard(K.touched) == 20 and r.hlen(K.id_forward) == 20
    assert daemon.totals["expired"] == 80 == int(r.get(K.expired_count) or 0)
