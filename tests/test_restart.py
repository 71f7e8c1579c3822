"""Redis going away: a restart with AOF in the middle of a stream, and Redis unreachable when serve starts."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
import redis
from conftest import free_port
from procs import (
    DEDUPD,
    RedisProc,
    Served,
    check_exactly_once,
    check_indexed_once,
    counter,
    pairs_corpus,
    push_corpus,
    seconds_until,
    wait_for,
)

from dedupd.daemon.monitor import wait_drained
from dedupd.errors import RedisUnavailableError
from dedupd.index.keys import Keys
from dedupd.server.connection import connect
from dedupd.settings import load_settings


@pytest.mark.slow
def test_redis_restart_mid_stream_loses_and_doubles_nothing(aof_redis: RedisProc, tmp_path: Path) -> None:
    """SHUTDOWN and restart of an AOF Redis while the daemon works: it backs off, reconnects, and goes on."""
    docs, expected = pairs_corpus(2000, 41, words=60)
    r = redis.Redis(port=aof_redis.port)
    inputs = push_corpus(r, docs[:2400])
    daemon = Served(aof_redis.url, tmp_path / "serve.log", "--batch-size", "100")
    wait_for(lambda: counter(r, "processed") >= 600, 60, "600 processed documents")
    aof_redis.shutdown()
    time.sleep(1.5)  # the daemon retries with backoff meanwhile
    assert daemon.proc.poll() is None
    aof_redis.start()
    r = redis.Redis(port=aof_redis.port)
    assert counter(r, "processed") < len(docs)
    inputs |= push_corpus(r, docs[2400:])
    assert wait_drained(r, Keys(), 120), daemon.stderr
    assert daemon.stop() == 0
    err = daemon.stderr
    assert "Redis error" in err and "retrying in" in err and "Traceback" not in err
    check_exactly_once(r, expected, inputs)
    check_indexed_once(r, aof_redis.url, inputs)
    assert r.xlen(Keys().dead) == 0


def test_redis_unreachable_at_start_fails_at_once_with_one_line(tmp_path: Path) -> None:
    """By default a Redis that cannot be reached ends serve's start within seconds (a real process): exit 2,
    one line naming the URL (password hidden) and what to do, no retry warnings, no traceback."""
    port = free_port()
    url = f"redis://user:s3cret-pw@127.0.0.1:{port}/0"
    daemon = Served(url, tmp_path / "serve.log")
    took = seconds_until(lambda: daemon.proc.poll() is not None, 60, "serve to give up")
    assert took < 5, (took, daemon.stderr)
    assert daemon.proc.returncode == 2
    lines = daemon.stderr.splitlines()
    assert len(lines) == 1, daemon.stderr
    assert lines[0].startswith(f"dedupd: error: cannot reach Redis at redis://user:***@127.0.0.1:{port}/0: ")
    assert "Is the server running" in lines[0] and "dedupd serve --wait-for-redis SECONDS" in lines[0]
    assert "s3cret-pw" not in daemon.stderr


def test_redis_unreachable_at_start_retries_then_serves(tmp_path: Path) -> None:
    """With --wait-for-redis, no traceback: one warning per retry (capped backoff); once Redis is up, the
    daemon serves."""
    server = RedisProc(tmp_path / "redis", free_port())
    daemon = Served(server.url, tmp_path / "serve.log", "--wait-for-redis", "60")
    try:
        wait_for(lambda: daemon.stderr.count("unreachable") >= 3, 20, "three retry warnings")
        assert daemon.proc.poll() is None
        server.start()
        r = redis.Redis(port=server.port)
        docs, expected = pairs_corpus(5, 42)
        inputs = push_corpus(r, docs)
        assert wait_drained(r, Keys(), 60), daemon.stderr
        check_exactly_once(r, expected, inputs)
        assert daemon.stop() == 0
    finally:
        daemon.stop()
        server.kill()
    err = daemon.stderr
    assert f"Redis at redis://127.0.0.1:{server.port}/0 unreachable" in err and "retrying in" in err
    assert "Traceback" not in err
    delays = [
        float(line.rsplit("retrying in ", 1)[1].rstrip("s"))
        for line in err.splitlines()
        if "unreachable" in line
    ]
    assert delays[:3] == [0.1, 0.2, 0.4] and max(delays) <= 5.0  # capped exponential backoff


def test_redis_unreachable_gives_up_with_a_clear_message(tmp_path: Path) -> None:
    """After its retry budget, connect raises one readable error; the CLI prints it (no password, no traceback)."""
    port = free_port()
    url = f"redis://user:s3cret-pw@127.0.0.1:{port}/0"
    with pytest.raises(RedisUnavailableError) as info:
        connect(load_settings(redis_url=url), retry_for_s=0.5)
    msg = str(info.value)
    assert "cannot reach Redis at redis://user:***@127.0.0.1:" in msg and "DEDUPD_REDIS_URL" in msg
    assert "s3cret-pw" not in msg
    shown = subprocess.run(
        [*DEDUPD, "alerts", "--redis-url", url], capture_output=True, text=True, timeout=60
    )
    assert shown.returncode == 2
    assert shown.stderr.startswith("dedupd: error: cannot reach Redis at redis://user:***@")
    assert "Traceback" not in shown.stderr and "s3cret-pw" not in shown.stderr
