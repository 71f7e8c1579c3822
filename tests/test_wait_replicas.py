"""wait_replicas (issue 14, item 8): a batch is acknowledged only once that many replicas have its writes;
until then it stays pending and is done again, without a second alert. Real primary and replica servers."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
import redis
from conftest import start_redis_server
from helpers import alerts, make_daemon, pending, push, text, variant

from dedupd.errors import ReplicasBehindError
from dedupd.server.connection import is_transient


def _replica_in_sync(primary: redis.Redis, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = primary.info("replication")
        if info.get("connected_slaves", 0) >= 1 and "online" in str(info.get("slave0", "")):
            return
        time.sleep(0.05)
    raise AssertionError("the replica did not come online")


def test_a_batch_waits_for_its_replicas(tmp_path: Path) -> None:
    primary_proc, port = start_redis_server(tmp_path / "primary")
    replica_proc = None
    try:
        url = f"redis://127.0.0.1:{port}/0"
        r = redis.Redis.from_url(url)
        rng = random.Random(2)
        base = text(rng, 50)
        push(r, [{"id": "a", "text": base}, {"id": "b", "text": variant(rng, base)}])
        # no replica: WAIT can only time out (a short timeout is safe here: however busy the machine, no
        # replica acknowledges); the writes are done, the batch is not acknowledged (a passing state)
        daemon = make_daemon(url, wait_replicas=1, wait_timeout_ms=100)
        with pytest.raises(ReplicasBehindError) as caught:
            daemon.iteration()
        assert is_transient(caught.value)
        assert pending(r) == 2 and len(alerts(r)) == 1
        replica_proc, _ = start_redis_server(tmp_path / "replica", "--replicaof", "127.0.0.1", str(port))
        _replica_in_sync(r)
        # now WAIT returns once the replica acknowledged: a generous timeout, not 100 ms a busy machine misses
        daemon.settings = daemon.settings.model_copy(update={"wait_timeout_ms": 60_000})
        daemon._recover_after_error(caught.value)  # as the serve loop does: read its own pending again
        deadline = time.monotonic() + 60
        while pending(r) and time.monotonic() < deadline:
            daemon.iteration()
        assert pending(r) == 0 and len(alerts(r)) == 1  # done again: acknowledged, no second alert
    finally:
        for proc in (replica_proc, primary_proc):
            if proc is not None:
                proc.terminate()
                proc.wait()
