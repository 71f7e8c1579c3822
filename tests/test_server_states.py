"""A server state never counts against an entry (issue 29, item 1): however long the server answers with an
error, BUSY, LOADING or OOM, the daemon's own pending entries are read again with their delivery counts left
as they were, so nothing is dead-lettered for it; a batch done again logs its dead letters once."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from conftest import private_redis
from helpers import dead, make_daemon, pending, push, text
from procs import RedisProc, Served, counter, pairs_corpus, push_corpus, wait_for

from dedupd.daemon.dead_letters import dead_letter
from dedupd.daemon.loop import Daemon
from dedupd.index.keys import GROUP, Keys
from dedupd.server.connection import is_transient


def _through(daemon: Daemon, failures: int, exc: Exception) -> None:
    """Run the daemon's loop as ``run()`` does while each of its first ``failures`` batches meets ``exc``
    (the server's state: nothing of the batch is written), recovering after each; then drain."""
    real = daemon.processor.process
    left = [failures]

    def process(raw, deliveries=None):  # type: ignore[no-untyped-def]
        if left[0] > 0:
            left[0] -= 1
            raise exc
        return real(raw, deliveries)

    daemon.processor.process = process  # type: ignore[method-assign]
    for _ in range(2000):
        try:
            if daemon.iteration() is None and left[0] == 0:
                return
        except Exception as err:
            assert is_transient(err)
            daemon._recover_after_error(err)
    raise AssertionError("the daemon did not drain")


@pytest.mark.parametrize(
    "exc",
    [
        redis.exceptions.OutOfMemoryError("OOM command not allowed when used memory > 'maxmemory'."),
        redis.exceptions.BusyLoadingError("BUSY Redis is busy running a script."),
        redis.exceptions.ConnectionError("Connection reset by peer"),
    ],
    ids=["oom", "busy", "reset"],
)
def test_a_server_state_lasting_many_backoff_steps_dead_letters_nothing(
    r: redis.Redis, redis_url: str, exc: Exception
) -> None:
    """Twelve failed attempts in a row (max_deliveries is 3): every entry is processed once it passes, none is
    dead-lettered, and the delivery counts the daemon saw never grew with the retries."""
    import random

    rng = random.Random(29)
    docs = [{"id": f"d{i}", "text": text(rng, 30)} for i in range(30)]
    push(r, docs)
    daemon = make_daemon(redis_url, batch_size=10, max_deliveries=3)
    seen: list[int] = []
    counts = daemon.stream.delivery_counts

    def spy(entry_ids: list[str]) -> dict[str, int]:
        got = counts(entry_ids)
        seen.extend(got.values())
        return got

    daemon.stream.delivery_counts = spy  # type: ignore[method-assign]
    _through(daemon, 12, exc)
    assert dead(r) == [] and pending(r) == 0
    assert counter(r, "processed") == len(docs)
    assert r.hlen(Keys().id_forward) == len(docs)
    assert seen and max(seen) == 1  # read again twelve times, each time still its first delivery


def test_a_restart_after_a_crash_still_counts_a_delivery(r: redis.Redis, redis_url: str) -> None:
    """The daemon died holding an entry: the restart reads it again, and that counts (an entry that kills
    the daemon every time ends in the dead letters)."""
    push(r, [{"id": "a", "text": "one two three four five"}])
    first = make_daemon(redis_url, consumer="same")
    first._next_batch()  # read, then "killed": never processed
    again = make_daemon(redis_url, consumer="same")
    batch, deliveries = again._next_batch()
    assert [e for e, _ in batch] and deliveries == {batch[0][0]: 2}


def test_a_batch_done_again_logs_its_dead_letters_once(
    r: redis.Redis, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The batch wrote its dead letters, then met a server error and is done again: the dead letters are
    written once and logged once."""
    daemon = make_daemon(redis_url)
    letter = (("1-0", {b"id": b"x"}), "missing_text", "no text")
    with caplog.at_level(logging.INFO, logger="dedupd.processor"):
        dead_letter(daemon.gateway, daemon.settings, [letter])
        dead_letter(daemon.gateway, daemon.settings, [letter])
    assert len(dead(r)) == 1
    assert [rec.message for rec in caplog.records if "dead-lettered" in rec.message] == [
        "dead-lettered 1-0: missing_text (no text)"
    ]
    assert any("written already" in rec.message for rec in caplog.records)


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisProc]:
    """A redis-server of this test's own (its memory limit is changed), noeviction as dedupd needs."""
    with private_redis(tmp_path, "--appendonly", "no", "--maxmemory-policy", "noeviction") as server:
        yield server


@pytest.mark.slow
def test_a_full_server_held_for_seconds_loses_and_dead_letters_nothing(
    own_redis: RedisProc, tmp_path: Path
) -> None:
    """The trial of issue 29: a backlog, the server's maxmemory set just above its use (noeviction: writes are
    refused with OOM) for several seconds, then lifted. No dead letter, every document indexed once, every
    pair alerted once."""
    r = redis.Redis(port=own_redis.port)
    docs, _ = pairs_corpus(6000, 61, words=40)
    push_corpus(r, docs)
    daemon = Served(own_redis.url, tmp_path / "serve.log", "--batch-size", "100", DEDUPD_MAX_DELIVERIES="3")
    wait_for(lambda: counter(r, "processed") >= 300, 120, "300 processed documents")
    used = int(r.info("memory")["used_memory"])
    r.config_set("maxmemory", used + (1 << 20))
    wait_for(lambda: b"maxmemory" in daemon.log.read_bytes(), 60, "the daemon to meet the full server")
    time.sleep(6)  # full for longer than the daemon's backoff steps to max_deliveries took before
    r.config_set("maxmemory", 0)
    wait_for(
        lambda: not r.xpending(Keys().docs, GROUP)["pending"] and counter(r, "processed") >= len(docs),
        300,
        "the backlog drained",
    )
    assert r.xlen(Keys().dead) == 0, daemon.stderr
    assert r.hlen(Keys().id_forward) == len(docs)
    inputs = [e[1][b"input"] for e in r.xrange(Keys().alerts)]
    assert len(inputs) == len(set(inputs)) == len(docs) // 2
    assert daemon.stop() == 0
    assert "dead-lettered" not in daemon.stderr and "Traceback" not in daemon.stderr
