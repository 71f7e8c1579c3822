"""The retention window through crashes, with real processes: three `dedupd serve` on a count window, one
killed -9 inside an expiry step (a fault hook, tests/faulty_serve.py, says where), and a restart of an AOF
Redis while the daemons expire. Nothing is lost or doubled, no document is expired early, and none outlives
the window by more than the documented slack."""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
from helpers import dead
from procs import RedisProc, Served, check_exactly_once, counter, pairs_corpus, push_corpus, wait_for

from dedupd.index.keys import Keys

K = Keys()
FAULTY = [sys.executable, str(Path(__file__).with_name("faulty_serve.py"))]
WINDOW, BATCH, CONSUMERS = 800, 50, 3
# The slack (RETENTION-README, Operations): each daemon steps after each batch, and a step takes every
# document past the window; between two steps of one daemon it has touched at most two batches (the one it
# finishes and the next it reads), so the window holds at most that many more per daemon. A killed daemon's
# claimed documents stay until their claim lapses (claim_idle_ms) and another daemon's step takes them over:
# at most one step's worth, max(512, batch_size).
SLACK_TOUCHED = CONSUMERS * 2 * BATCH
SLACK_INDEXED = SLACK_TOUCHED + max(512, BATCH)


@dataclass
class Watch:
    """What a sampler saw of the window while the daemons ran: the most and (once the window was full) the
    fewest documents in it, and the most documents indexed (ids mapped: those being expired included)."""

    most_touched: int = 0
    fewest_touched: int | None = None
    most_indexed: int = 0
    samples: int = 0


def _consumers(r: redis.Redis) -> set[str]:
    try:
        return {c["name"].decode() for c in r.xinfo_consumers(K.docs, "dedupd")}
    except redis.ResponseError:  # no group yet
        return set()


def _sample(port: int, watch: Watch, stop: threading.Event) -> None:
    """Poll the window every 10 ms (a Redis away for its restart is skipped)."""
    client = redis.Redis(port=port, socket_timeout=2)
    while not stop.is_set():
        try:
            pipe = client.pipeline(transaction=False)
            pipe.zcard(K.touched)
            pipe.hlen(K.id_forward)
            touched, indexed = (int(x) for x in pipe.execute())
        except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
            time.sleep(0.05)
            continue
        watch.samples += 1
        watch.most_touched = max(watch.most_touched, touched)
        watch.most_indexed = max(watch.most_indexed, indexed)
        if watch.fewest_touched is not None or touched >= WINDOW:
            watch.fewest_touched = min(watch.fewest_touched or touched, touched)
        time.sleep(0.01)
    client.close()


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["claimed", "noted", "deleted"])
def test_kill9_inside_an_expiry_step_and_a_redis_restart_lose_double_and_keep_nothing_wrong(
    aof_redis: RedisProc, tmp_path: Path, stage: str
) -> None:
    """3,200 documents (1,600 pairs, each copy pushed right after its original) through a window of 800 and
    three `dedupd serve` on an AOF Redis. One is killed -9 in its first expiry step that claims documents
    (``stage``: before it notes their ids, before it deletes their records, or before it ends the claim) and
    started again under its name; later Redis is shut down and started again while the daemons expire.
    Every pair alerted exactly once, no id given twice, each of the 2,400 expired documents expired once
    (none left behind: no claim, no tombstone), exactly the window left, the last 600 pushed among it; while
    they ran, the window never held fewer than 800 documents once full (none expired early) and never more
    than the slack above it."""
    docs, expected = pairs_corpus(1600, seed=31, words=40)
    url = aof_redis.url
    r = redis.Redis(port=aof_redis.port)
    env = {
        "DEDUPD_MAX_DOCUMENTS": str(WINDOW),
        "DEDUPD_CLAIM_IDLE_MS": "1000",
        "DEDUPD_BATCH_SIZE": str(BATCH),
    }
    watch, stop = Watch(), threading.Event()
    sampler = threading.Thread(target=_sample, args=(aof_redis.port, watch, stop), daemon=True)
    sampler.start()
    victim = Served(
        url, tmp_path / "c0.log", "--consumer", "c0", command=FAULTY, FAULT=f"expiry-{stage}", **env
    )
    others = [Served(url, tmp_path / f"c{i}.log", "--consumer", f"c{i}", **env) for i in (1, 2)]
    wait_for(lambda: _consumers(r) >= {"c0", "c1", "c2"}, 120, "the three consumers to read")
    inputs: dict[str, str] = {}
    # a batch at a time, until the victim steps with documents to expire (on a busy machine the other two may
    # take every claim for a while: up to 2,600 documents, 36 batches past the window, leaving 600 for later)
    for lo in range(0, len(docs) - 600, BATCH):
        inputs |= push_corpus(r, docs[lo : lo + BATCH])
        wait_for(
            lambda n=lo + BATCH: counter(r, "processed") >= n or victim.proc.poll() is not None,
            120,
            "the batch to be processed",
        )
        if victim.proc.poll() is not None:
            break
    wait_for(lambda: victim.proc.poll() is not None, 120, "the victim to die in an expiry step")
    assert victim.proc.returncode == -9, victim.stderr
    assert f"FAULT: killed in an expiry step, {stage} (" in victim.stderr
    assert r.zcard(K.expiring) > 0  # its claims are left (they lapse after claim_idle_ms)
    again = Served(url, tmp_path / "c0-again.log", "--consumer", "c0", **env)  # re-reads its pending entries

    def pending_of_c0() -> int:
        return sum(int(c["pending"]) for c in r.xinfo_consumers(K.docs, "dedupd") if c["name"] == b"c0")

    wait_for(lambda: "compiled kernels loaded" in again.stderr, 120, "the restarted consumer to serve")
    wait_for(lambda: pending_of_c0() == 0, 120, "the restarted consumer to take up its pending entries")
    busy = len(inputs) + 200
    inputs |= push_corpus(r, docs[len(inputs) : len(inputs) + 600])
    wait_for(lambda: counter(r, "processed") >= busy, 120, f"{busy:,} processed documents")
    # (expiry runs beside the batches: on a busy machine it may come a little after them)
    wait_for(lambda: int(r.get(K.expired_count) or 0) > 0, 120, "an expiry step before the restart")
    aof_redis.shutdown()  # while the daemons index and expire
    time.sleep(1.5)  # they retry with backoff meanwhile
    aof_redis.start()
    r = redis.Redis(port=aof_redis.port)
    assert counter(r, "processed") < len(inputs)
    # the batches the restart interrupted are done again (a consumer reads its own pending entries again, one
    # at a time) while the others go on: the rest is pushed once they are, so that no pair's two documents
    # are processed farther apart than the window (the window follows processing order)
    wait_for(lambda: int(r.xpending(K.docs, "dedupd")["pending"]) == 0, 120, "the interrupted batches")
    inputs |= push_corpus(r, docs[len(inputs) :])
    daemons = [again, *others]

    def settled() -> bool:
        return (
            counter(r, "processed") >= len(docs)
            and int(r.xpending(K.docs, "dedupd")["pending"]) == 0
            and r.zcard(K.touched) == WINDOW
            and not r.exists(K.expiring)
        )

    wait_for(settled, 240, "the daemons to drain and expire")
    stop.set()
    sampler.join(timeout=10)
    assert [d.stop() for d in daemons] == [0, 0, 0]
    assert all("Traceback" not in d.stderr for d in daemons)
    assert any("retrying in" in d.stderr for d in daemons)  # the restart landed while they worked
    check_exactly_once(r, expected, inputs, ordered=False)  # lost 0, doubled 0
    assert dead(r) == []
    assert int(r.get(K.id_seq) or 0) == len(docs)  # no id given twice
    assert int(r.get(K.expired_count) or 0) == len(docs) - WINDOW  # each expired document once
    assert r.hlen(K.id_forward) == WINDOW and len(r.keys("dedupd:doc:*")) == WINDOW
    assert not r.exists(K.tombstones) and not r.exists(K.expiring_ids)
    assert all(r.hexists(K.id_forward, d["id"]) for d in docs[-600:])
    print(f"window {WINDOW}: {watch}")  # (shown with -s)
    assert watch.samples > 100
    assert watch.fewest_touched is not None and watch.fewest_touched >= WINDOW  # none expired early
    assert watch.most_touched <= WINDOW + SLACK_TOUCHED, watch
    assert watch.most_indexed <= WINDOW + SLACK_INDEXED, watch
