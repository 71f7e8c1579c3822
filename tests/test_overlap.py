"""Overlapping batches (overlap_batches): a batch is finished by a second thread while the next one is read and
indexed. Against a real redis-server: the same alerts, buckets and clusters as one batch at a time, updates
in order, and nothing lost when the finishing thread fails."""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest
import redis
from helpers import alerts, make_daemon, pending, push, text, variant

from dedupd.daemon.batch import BatchResult, Started
from dedupd.daemon.handoff import Handoff
from dedupd.daemon.loop import Daemon
from dedupd.daemon.processor import Processor
from dedupd.daemon.worker_thread import Worker
from dedupd.index.gateway import RedisGateway
from dedupd.index.keys import Keys
from dedupd.settings import load_settings


def drain_overlapped(daemon: Daemon, max_iterations: int = 2000) -> None:
    for _ in range(max_iterations):
        if daemon.iteration(overlap=True) is None:
            assert daemon.in_hand is None
            return
    raise AssertionError("the daemon did not drain")


def drain_one_at_a_time(daemon: Daemon, max_iterations: int = 2000) -> None:
    for _ in range(max_iterations):
        if daemon.iteration() is None:
            return
    raise AssertionError("the daemon did not drain")


def stream_of_copies(seed: int) -> list[dict[str, str]]:
    """A flood of near-copies, pairs, different texts, updates of documents a batch or two apart, deletes."""
    rng = random.Random(seed)
    base = text(rng, 60)
    docs: list[dict[str, str]] = []
    for i in range(240):
        kind = i % 8
        if kind in (0, 1, 2, 3):
            docs.append({"id": f"copy{i}", "text": variant(rng, base, 2)})
        elif kind == 4:
            other = text(rng, 40)
            docs += [{"id": f"pair{i}a", "text": other}, {"id": f"pair{i}b", "text": variant(rng, other)}]
        elif kind == 5:
            docs.append({"id": f"upd{i % 24}", "text": text(rng, 40)})  # the same ids again, batches apart
        elif kind == 6:
            docs.append({"id": f"copy{i - 6}", "op": "delete"})
        else:
            docs.append({"id": f"lone{i}", "text": text(rng, 40)})
    return docs


def state(r: redis.Redis, prefix: str) -> dict[str, Any]:
    """What a run left: its alerts (in order, without input entry ids), bucket hashes and union-find."""
    keys = Keys(prefix)
    shown = [
        (a["id"], a["duplicate_of"], a["similarity"], a["matches"], a["cluster"]) for a in alerts(r, prefix)
    ]
    buckets = {}
    for name in r.scan_iter(match=keys.band_pattern_all):
        buckets[name.decode()[len(prefix) :]] = r.hgetall(name)
    return {"alerts": shown, "buckets": buckets, "parents": r.hgetall(keys.uf_parent)}


def test_overlapped_batches_leave_what_one_batch_at_a_time_leaves(r: redis.Redis, redis_url: str) -> None:
    docs = stream_of_copies(3)
    for prefix, overlap in (("one", False), ("two", True)):
        push(r, docs, prefix)
        daemon = make_daemon(redis_url, prefix=prefix, batch_size=16)
        assert daemon.overlaps
        (drain_overlapped if overlap else drain_one_at_a_time)(daemon)
        assert pending(r, prefix) == 0
    one, two = state(r, "one"), state(r, "two")
    assert len(one["alerts"]) > 100 and one["buckets"] and one["parents"]
    assert two == one


def test_an_update_of_a_document_in_hand_waits_for_it(r: redis.Redis, redis_url: str) -> None:
    """A batch with a document of the batch being finished waits for it instead of being deferred: the last
    update wins, and each update alerts against the text before it."""
    rng = random.Random(5)
    base = text(rng, 50)
    push(r, [{"id": "a", "text": base}, {"id": "b", "text": variant(rng, base)}])
    daemon = make_daemon(redis_url, batch_size=2)
    first = daemon.iteration(overlap=True)
    assert first is not None and daemon.in_hand is not None  # the first batch is being finished
    push(r, [{"id": "b", "text": base + " appended words here"}, {"id": "c", "text": text(rng, 50)}])
    waited = daemon.iteration(overlap=True)  # shares "b": settles the first batch, then handles this one
    assert waited is not None and waited.processed == 2 and not waited.deferred
    assert daemon.in_hand is None and not daemon.deferred
    drain_overlapped(daemon)
    assert [a["id"] for a in alerts(r)] == ["b", "b"]
    assert pending(r) == 0


def copies(seed: int, n: int) -> list[dict[str, str]]:
    rng = random.Random(seed)
    base = text(rng, 50)
    return [{"id": f"d{i}", "text": variant(rng, base)} for i in range(n)]


def alerted_once(r: redis.Redis, redis_url: str, docs: list[dict[str, str]]) -> list[str]:
    """The ids alerted when ``docs`` go through one batch at a time without a failure (prefix "ref")."""
    push(r, docs, "ref")
    drain_one_at_a_time(make_daemon(redis_url, prefix="ref", batch_size=8))
    return sorted(a["id"] for a in alerts(r, "ref"))


def finishing_raises(monkeypatch: pytest.MonkeyPatch, exc: Exception, at_call: int) -> list[int]:
    """Processor.finish raises ``exc`` on its ``at_call``-th call (1-based); returns the batch sizes seen."""
    real = Processor.finish
    sizes: list[int] = []

    def finish(self: Processor, started: Started, *let_go: Any) -> BatchResult:
        sizes.append(len(started.raw))
        if len(sizes) == at_call:
            raise exc
        return real(self, started, *let_go)

    monkeypatch.setattr(Processor, "finish", finish)
    return sizes


def test_a_batch_whose_finishing_fails_is_done_again_entry_by_entry(
    r: redis.Redis, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = copies(7, 40)
    expected = alerted_once(r, redis_url, docs)
    assert len(expected) > 10
    push(r, docs)
    sizes = finishing_raises(monkeypatch, RuntimeError("a bug in finishing"), 1)
    daemon = make_daemon(redis_url, batch_size=8)
    drain_overlapped(daemon)
    assert sizes[0] == 8  # the first batch failed; its entries were done again one by one (finish of one)
    assert pending(r) == 0
    assert sorted(a["id"] for a in alerts(r)) == expected
    assert daemon.totals["processed"] == 40


def test_a_redis_error_while_finishing_leaves_the_batch_pending_then_done_once(
    r: redis.Redis, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = copies(11, 30)
    expected = alerted_once(r, redis_url, docs)
    assert len(expected) > 10
    push(r, docs)
    finishing_raises(monkeypatch, redis.exceptions.ConnectionError("the server went away"), 2)
    daemon = make_daemon(redis_url, batch_size=8)
    with pytest.raises(redis.exceptions.ConnectionError):
        drain_overlapped(daemon)
    assert daemon.in_hand is None
    daemon._recover_after_error(redis.exceptions.ConnectionError("the server went away"))
    drain_overlapped(daemon)
    assert pending(r) == 0
    assert sorted(a["id"] for a in alerts(r)) == expected  # each once: none lost, none doubled


def test_the_batch_in_hand_counts_in_the_bytes_held(r: redis.Redis, redis_url: str) -> None:
    push(r, [{"id": f"d{i}", "text": "x" * 1000} for i in range(4)])
    daemon = make_daemon(redis_url, batch_size=4)
    assert daemon.held_bytes() == 0
    daemon.iteration(overlap=True)
    assert daemon.in_hand is not None and daemon.held_bytes() >= 4000
    daemon.settle()
    assert daemon.held_bytes() == 0 and pending(r) == 0


def test_overlap_is_off_with_wait_replicas_or_when_turned_off(redis_url: str) -> None:
    assert make_daemon(redis_url).overlaps
    assert not make_daemon(redis_url, overlap_batches=False).overlaps
    assert not make_daemon(redis_url, wait_replicas=1).overlaps
    assert load_settings(redis_url=redis_url, overlap_batches=False).overlap_batches is False


def test_the_worker_runs_jobs_in_order_and_hands_back_their_errors() -> None:
    worker = Worker("test")
    done: list[int] = []
    futures = [worker.submit(lambda i=i: done.append(i)) for i in range(50)]
    failed = worker.submit(lambda: 1 // 0)
    with pytest.raises(ZeroDivisionError):
        failed.result(timeout=10)
    assert [f.result(timeout=10) for f in futures] == [None] * 50
    assert done == list(range(50))
    assert worker.submit(lambda: "after").result(timeout=10) == "after"


def cluster_r_y_then_e(r: redis.Redis, redis_url: str) -> str:
    """R, and Y in R's cluster, indexed one batch at a time; returns E's text: E matches Y only (Jaccard to Y
    0.84, to R 0.71)."""
    rng = random.Random(23)
    words = text(rng, 60).split()
    y_words = [*words[:10], "ya", "yb", "yc", *words[13:]]
    e_words = [*y_words[:40], "ea", "eb", "ec", *y_words[43:]]
    push(r, [{"id": "R", "text": " ".join(words)}, {"id": "Y", "text": " ".join(y_words)}])
    drain_one_at_a_time(make_daemon(redis_url))
    assert [(a["id"], a["cluster"]) for a in alerts(r)] == [("Y", "R")]
    return " ".join(e_words)


def slowed(monkeypatch: pytest.MonkeyPatch, method: str) -> None:
    """RedisGateway.<method> sleeps 0.3 s first: the next batch is read and started meanwhile."""
    import time

    real = getattr(RedisGateway, method)

    def slow(self: RedisGateway, *args: Any) -> Any:
        time.sleep(0.3)
        return real(self, *args)

    monkeypatch.setattr(RedisGateway, method, slow)


def test_a_delete_in_the_next_batch_comes_after_the_unions_of_the_batch_in_hand(
    r: redis.Redis, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """E matches Y only (Y matched R); the next batch deletes Y while E's batch is being finished, slowly.
    As one batch at a time: E is verified against Y and joins Y's cluster, named R, before Y goes."""
    e_text = cluster_r_y_then_e(r, redis_url)
    slowed(monkeypatch, "union")
    push(r, [{"id": "E", "text": e_text}, {"id": "Y", "op": "delete"}])
    drain_overlapped(make_daemon(redis_url, batch_size=1))
    got = {a["id"]: a for a in alerts(r)}
    assert got["E"]["duplicate_of"] == "Y" and got["E"]["cluster"] == "R"
    assert pending(r) == 0


def test_a_cluster_is_named_before_the_next_batch_can_delete_its_root(
    r: redis.Redis, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """E matches Y only, of R's cluster; the next batch deletes R while E's alert is being made, slowly. As
    one batch at a time: E's alert names the cluster R (read before the next batch may write anything)."""
    e_text = cluster_r_y_then_e(r, redis_url)
    slowed(monkeypatch, "cluster_names")
    push(r, [{"id": "E", "text": e_text}, {"id": "R", "op": "delete"}])
    drain_overlapped(make_daemon(redis_url, batch_size=1))
    got = {a["id"]: a for a in alerts(r)}
    assert got["E"]["duplicate_of"] == "Y" and got["E"]["cluster"] == "R"
    assert r.get(f"{Keys().prefix}:doc:0:1") is None  # R was deleted, after
    assert pending(r) == 0


def test_the_next_batch_waits_with_its_bucket_calls_packed_and_nothing_written(
    r: redis.Redis, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the next batch waits for (the batch in hand's evictions) is on the path of every batch of a flood:
    its bucket calls are made before it waits, and nothing of it is written until the wait is over."""
    import dedupd.index.gateway

    made: list[int] = []
    real = dedupd.index.gateway.bucket_ops
    monkeypatch.setattr(
        dedupd.index.gateway, "bucket_ops", lambda writes, *a: made.append(len(writes)) or real(writes, *a)
    )
    push(r, copies(3, 6))
    daemon = make_daemon(redis_url, batch_size=6)
    batch, _ = daemon._next_batch()
    seen: list[tuple[list[int], int, bool]] = []

    class Seen(Handoff):
        def wait(self, deletes: bool) -> None:
            seen.append((list(made), len(r.keys(f"{Keys().prefix}:doc:*")), deletes))

    started = daemon.processor.start(batch, None, Seen())
    assert seen == [([6], 0, False)]  # the calls of the six documents made; no record written yet
    assert len(r.keys(f"{Keys().prefix}:doc:*")) == 6
    daemon.processor.finish(started)


def test_a_batch_that_deletes_waits_for_the_unions_of_the_batch_in_hand_too(
    r: redis.Redis, redis_url: str
) -> None:
    """The next batch waits for the evictions of the batch in hand; one that deletes documents waits for its
    unions too (they read the names of the roots its alerts name: a root deleted first would lose its name)."""
    push(r, [{"id": "a", "text": "one two three four five six"}, {"id": "a", "op": "delete"}])
    daemon = make_daemon(redis_url, batch_size=1)
    batch, _ = daemon._next_batch()
    flags: list[bool] = []

    class Flags(Handoff):
        def wait(self, deletes: bool) -> None:
            flags.append(deletes)

    daemon.processor.finish(daemon.processor.start(batch, None, Flags()))
    batch, _ = daemon._next_batch()
    daemon.processor.finish(daemon.processor.start(batch, None, Flags()))
    assert flags == [False, True]
    handoff = Handoff()
    handoff.evicted.set()
    handoff.wait(False)  # the evictions are written: no wait
    waiter = threading.Thread(target=handoff.wait, args=(True,))
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive()  # the unions are not
    handoff.unioned.set()
    waiter.join(30)
    assert not waiter.is_alive()
