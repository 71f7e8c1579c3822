"""Server states a daemon rides out (issue: hardening, item 2): a Redis restarted without persistence (the
consumer group is gone: NOGROUP) and another client's long script (BUSY). The daemon waits and goes on; no
entry is dead-lettered because of the server's state, and it exits 0 on SIGTERM."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from conftest import private_redis
from helpers import make_daemon
from procs import RedisProc, Served, counter, pairs_corpus, push_corpus, wait_for

from dedupd.daemon.monitor import wait_drained
from dedupd.index.keys import Keys


@pytest.fixture
def volatile_redis(tmp_path: Path) -> Iterator[RedisProc]:
    """A redis-server without persistence, restartable; scripts longer than 100 ms make it answer BUSY."""
    with private_redis(tmp_path, "--appendonly", "no", "--lua-time-limit", "100") as server:
        yield server


@pytest.mark.slow
def test_restart_without_persistence_recreates_the_group(volatile_redis: RedisProc, tmp_path: Path) -> None:
    docs, _ = pairs_corpus(300, 51, words=40)
    r = redis.Redis(port=volatile_redis.port)
    push_corpus(r, docs[:200])
    daemon = Served(volatile_redis.url, tmp_path / "serve.log")
    assert wait_drained(r, Keys(), 60), daemon.stderr
    volatile_redis.shutdown()  # SHUTDOWN (no persistence): everything is gone, the consumer group too
    time.sleep(1.0)
    volatile_redis.start()
    r = redis.Redis(port=volatile_redis.port)
    time.sleep(1.0)  # the daemon reads again and meets NOGROUP
    push_corpus(r, docs[200:])
    assert wait_drained(r, Keys(), 60), daemon.stderr
    assert daemon.proc.poll() is None, daemon.stderr
    assert counter(r, "processed") == len(docs) - 200 and r.xlen(Keys().dead) == 0  # the counters went too
    assert daemon.stop() == 0
    err = daemon.stderr
    assert "Traceback" not in err and "consumer group" in err and "history before" in err


@pytest.mark.slow
def test_a_busy_script_of_another_client_is_waited_out(volatile_redis: RedisProc, tmp_path: Path) -> None:
    docs, _ = pairs_corpus(400, 52, words=40)
    r = redis.Redis(port=volatile_redis.port)
    daemon = Served(volatile_redis.url, tmp_path / "serve.log", "--batch-size", "20")
    wait_for(
        lambda: (
            b"dedupd" in [g["name"] for g in r.xinfo_groups(Keys().docs)] if r.exists(Keys().docs) else False
        ),
        30,
        "the consumer group",
    )
    push_corpus(r, docs)
    wait_for(lambda: counter(r, "processed") >= 40, 30, "40 processed documents")
    spin = (
        "local t = redis.call('TIME') while true do local n = redis.call('TIME') "
        "if (n[1] - t[1]) * 1000000 + (n[2] - t[2]) > 1500000 then break end end return 1"
    )
    busy = threading.Thread(target=lambda: redis.Redis(port=volatile_redis.port).eval(spin, 0))
    busy.start()
    busy.join(timeout=10)
    assert wait_drained(r, Keys(), 60), daemon.stderr
    assert daemon.proc.poll() is None, daemon.stderr
    assert r.xlen(Keys().dead) == 0
    inputs = [e[1][b"input"] for e in r.xrange(Keys().alerts)]
    assert len(inputs) == len(set(inputs)) == len(docs) // 2  # every pair alerted once, nothing doubled
    # the counters are added once a batch's writes are done; only a batch whose acknowledgement met the busy
    # server after that (the two are not one step: other slots on a Redis Cluster) counts twice
    assert len(docs) <= counter(r, "processed") <= len(docs) + 20
    assert daemon.stop() == 0
    assert "Traceback" not in daemon.stderr and "BUSY" in daemon.stderr


SPIN = (  # spins ARGV[1] microseconds; with lua-time-limit 100 every other client gets BUSY meanwhile
    "local t = redis.call('TIME') while true do local n = redis.call('TIME') "
    "if (n[1] - t[1]) * 1000000 + (n[2] - t[2]) > tonumber(ARGV[1]) then break end end return 1"
)


def _busy_for(server: RedisProc, seconds: float) -> threading.Thread:
    """Another client's script that keeps the server BUSY for ``seconds`` (started when this returns)."""
    busy = threading.Thread(target=lambda: redis.Redis(port=server.port).eval(SPIN, 0, int(seconds * 1e6)))
    busy.start()
    probe = redis.Redis(port=server.port)

    def answers_busy() -> bool:
        try:
            probe.ping()
        except redis.ResponseError as exc:
            return "BUSY" in str(exc)
        return False

    wait_for(answers_busy, 10, "the server to answer BUSY")
    return busy


@pytest.mark.slow
def test_a_daemon_started_during_a_busy_script_waits_for_it(
    volatile_redis: RedisProc, tmp_path: Path
) -> None:
    """The soak found `dedupd serve` started while another client's script ran exiting 1 with "Redis: BUSY"
    (its first PING got BUSY): it must wait, as for a server not yet up, and then serve."""
    docs, _ = pairs_corpus(50, 53, words=40)
    r = redis.Redis(port=volatile_redis.port)
    busy = _busy_for(volatile_redis, 3.0)
    daemon = Served(volatile_redis.url, tmp_path / "serve.log")
    busy.join(timeout=15)
    push_corpus(r, docs)
    assert wait_drained(r, Keys(), 60), daemon.stderr
    assert daemon.proc.poll() is None, daemon.stderr
    assert counter(r, "processed") == len(docs) and r.xlen(Keys().dead) == 0
    assert daemon.stop() == 0, daemon.stderr
    assert "Traceback" not in daemon.stderr and "BUSY" in daemon.stderr


@pytest.mark.slow
def test_sigterm_during_a_busy_script_exits_0(volatile_redis: RedisProc, tmp_path: Path) -> None:
    """A clean stop while another client's script holds the server: the farewell (heartbeat, trim, leaving
    the group) is best effort; the daemon exits 0 and its entries are safe (nothing was pending)."""
    r = redis.Redis(port=volatile_redis.port)
    daemon = Served(volatile_redis.url, tmp_path / "serve.log")
    wait_for(lambda: bool(r.keys(Keys().heartbeat("*"))), 30, "the daemon's heartbeat")
    busy = _busy_for(volatile_redis, 3.0)
    daemon.proc.terminate()
    code = daemon.proc.wait(timeout=30)
    busy.join(timeout=15)
    assert code == 0, daemon.stderr
    assert "Traceback" not in daemon.stderr


def test_a_trim_after_the_input_stream_is_gone_does_nothing(r: redis.Redis, redis_url: str) -> None:
    """A restart without persistence can take the input stream between a read and the trim after it, or
    before a clean exit's last trim (XINFO GROUPS then answers "no such key"): nothing to trim, no crash."""
    daemon = make_daemon(redis_url, docs_retention_s=0)
    r.flushall()  # what such a restart leaves
    daemon.stream.trim(0)
    daemon._farewell()
    assert not r.exists(Keys().docs)


@pytest.mark.parametrize(
    ("reply", "transient"),
    [
        ("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.", True),
        ("Command # 1 (EVALSHA 2ab6 2 dedupd:alerts) of pipeline caused error: BUSY Redis is busy", True),
        (
            "NOGROUP No such key 'dedupd:docs' or consumer group 'dedupd' in XREADGROUP with GROUP option",
            True,
        ),
        ("ERR Error running script (call to f_1): @user_script:3: NOGROUP No such key", True),
        ("LOADING Redis is loading the dataset in memory", True),
        ("ERR wrong number of arguments for 'xadd' command", False),
        ("WRONGTYPE Operation against a key holding the wrong kind of value", False),
        ("BUSYGROUP Consumer Group name already exists", False),
    ],
)
def test_which_replies_are_a_passing_server_state(reply: str, transient: bool) -> None:
    from dedupd.server.connection import is_transient

    assert is_transient(redis.ResponseError(reply)) is transient


def test_a_batch_done_again_after_its_writes_counts_once(r: redis.Redis, redis_url: str) -> None:
    """The server goes busy right after a batch's outputs were written (the busy-script test saw 'processed'
    at 820 for 800 documents: the counters rode in the outputs' pipeline, ran, and the batch was done again).
    Counters are added once the batch's writes are all done."""
    from helpers import alerts, drain, push

    from dedupd.server import connection

    docs, _ = pairs_corpus(20, 61, words=40)
    push(r, docs)
    daemon = make_daemon(redis_url, batch_size=50)
    real, calls = connection.ScriptPipeline.execute, [0]

    def then_busy(self: connection.ScriptPipeline) -> list[object]:
        out = real(self)
        calls[0] += 1
        if (
            calls[0] == 2
        ):  # the first batch's buckets (1), then its outputs (2) were written: the server is busy
            raise redis.exceptions.BusyLoadingError("BUSY Redis is busy running a script")
        return out

    connection.ScriptPipeline.execute = then_busy  # type: ignore[method-assign]
    try:
        with pytest.raises(redis.exceptions.BusyLoadingError):
            drain(daemon)
        daemon._recover_after_error(redis.exceptions.BusyLoadingError("busy"))
        drain(daemon)
    finally:
        connection.ScriptPipeline.execute = real  # type: ignore[method-assign]
    got = alerts(r)
    assert counter(r, "processed") == len(docs)
    assert counter(r, "alerts") == len(got) == len(docs) // 2
