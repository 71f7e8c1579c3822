"""Shutdown of a real `dedupd serve` in the middle of a slow batch: SIGTERM drains, a second signal exits now."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import redis
from helpers import pending
from procs import Served, check_exactly_once, check_indexed_once, counter, pairs_corpus, push_corpus, wait_for

from dedupd.daemon.monitor import group_state, wait_drained
from dedupd.index.keys import Keys

BATCH = 500


def _slow_batch(r: redis.Redis, tmp_path: Path) -> tuple[Served, dict[str, str], set[tuple[str, str]]]:
    """Two batches of long texts (each takes about a second) and a daemon that has just read the first."""
    docs, expected = pairs_corpus(BATCH, 31, words=2500)
    inputs = push_corpus(r, docs)
    daemon = Served(_url(r), tmp_path / "serve.log", "--batch-size", str(BATCH), "--consumer", "worker")
    wait_for(
        lambda: (group_state(r, Keys()) or {"pending": 0})["pending"] > 0, 60, "the first batch to be read"
    )
    assert counter(r, "processed") == 0  # the batch is in hand, not finished
    return daemon, inputs, expected


def _url(r: redis.Redis) -> str:
    kw = r.connection_pool.connection_kwargs
    return f"redis://{kw['host']}:{kw['port']}/{kw.get('db', 0)}"


def test_sigterm_finishes_the_batch_acknowledges_and_exits_0(
    r: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    daemon, inputs, expected = _slow_batch(r, tmp_path)
    sent = time.monotonic()
    daemon.proc.send_signal(signal.SIGTERM)
    assert daemon.proc.wait(timeout=30) == 0, daemon.stderr
    assert time.monotonic() - sent < 30
    assert "finishing the current batch" in daemon.stderr and "Traceback" not in daemon.stderr
    assert counter(r, "processed") == BATCH  # the batch in hand was finished ...
    assert pending(r) == 0  # ... and acknowledged
    state = group_state(r, Keys())
    assert state is not None and state["lag"] == len(inputs) - BATCH  # and nothing more was read
    again = Served(redis_url, tmp_path / "again.log", "--batch-size", str(BATCH))
    assert wait_drained(r, Keys(), 120)
    assert again.stop() == 0
    check_exactly_once(r, expected, inputs)
    check_indexed_once(r, redis_url, inputs)


def test_second_signal_exits_at_once_and_nothing_is_lost(
    r: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    daemon, inputs, expected = _slow_batch(r, tmp_path)
    daemon.proc.send_signal(signal.SIGTERM)
    time.sleep(0.05)
    sent = time.monotonic()
    daemon.proc.send_signal(signal.SIGINT)
    assert daemon.proc.wait(timeout=10) == 130, daemon.stderr
    assert time.monotonic() - sent < 2
    assert "second signal: exiting now" in daemon.stderr
    assert counter(r, "processed") == 0 and pending(r) > 0  # the batch was abandoned, not acknowledged
    again = Served(redis_url, tmp_path / "again.log", "--batch-size", str(BATCH), "--consumer", "worker")
    assert wait_drained(r, Keys(), 120), again.stderr
    assert again.stop() == 0
    check_exactly_once(r, expected, inputs)
    check_indexed_once(r, redis_url, inputs)


def test_sigterm_while_starting_exits_0(tmp_path: Path) -> None:
    """A SIGTERM before the daemon serves (here: while it waits for a Redis that does not answer yet) stops
    it cleanly, exit 0: it has read nothing (a process manager stops it as it stops a serving one)."""
    from conftest import free_port

    daemon = Served(f"redis://127.0.0.1:{free_port()}/0", tmp_path / "serve.log", "--wait-for-redis", "60")
    wait_for(
        lambda: "retrying" in daemon.stderr or "Redis" in daemon.stderr, 60, "the first connection retry"
    )
    daemon.proc.send_signal(signal.SIGTERM)
    assert daemon.proc.wait(timeout=30) == 0, daemon.stderr
    assert "while starting" in daemon.stderr and "Traceback" not in daemon.stderr
