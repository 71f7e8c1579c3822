"""Backpressure: producers that outpace the daemon are paced (push --max-lag), the daemon trims the
acknowledged input history (docs_retention_s), and trimming never drops an entry not yet processed."""

from __future__ import annotations

import json
import os
import random
import subprocess
import threading
from pathlib import Path

import redis
from helpers import make_daemon, pending, push, text
from procs import DEDUPD, Served, counter

from dedupd.index.keys import Keys


def test_trimming_keeps_every_entry_not_yet_processed(r: redis.Redis, redis_url: str) -> None:
    rng = random.Random(71)
    ids = push(r, [{"id": f"d{i}", "text": text(rng, 8)} for i in range(1500)])
    done = make_daemon(redis_url, consumer="done", batch_size=1000, docs_retention_s=0)
    assert done.iteration() is not None  # entries 0..999 processed and acknowledged
    stuck = make_daemon(redis_url, consumer="stuck", batch_size=200)
    stuck._next_batch()  # entries 1000..1199 delivered, never acknowledged (a crashed consumer)
    push(r, [{"id": "late", "text": "pushed after the reads"}])  # 1200..1500 unread
    done.stream.trim(0)
    left = [e.decode() for e, _ in r.xrange(Keys().docs)]
    assert len(left) < 1000  # acknowledged history went (in whole stream nodes: XTRIM MINID ~) ...
    assert left[-301:] == [*ids[1200:], left[-1]] and set(ids[1000:1200]) <= set(left)  # ... nothing else
    # the stranded entries are claimed and processed later: nothing was lost
    rescuer = make_daemon(redis_url, consumer="rescuer", claim_idle_ms=100, batch_size=500)
    for _ in range(1000):
        if rescuer.iteration() is None and pending(r) == 0:
            break
    assert pending(r) == 0 and r.hlen(Keys().id_forward) == 1501


def test_retention_keeps_recent_history(r: redis.Redis, redis_url: str) -> None:
    """With docs_retention_s=3600 nothing recent is trimmed; None (the default) never trims."""
    push(r, [{"id": f"d{i}", "text": "x y z"} for i in range(500)])
    for retention in (3600, None):
        daemon = make_daemon(redis_url, batch_size=1000, docs_retention_s=retention)
        daemon.iteration()
        daemon.housekeeping.trim.now()
        daemon.iteration()  # trims when a retention is set (and nothing recent)
        assert r.xlen(Keys().docs) == 500


def test_push_max_lag_bounds_the_stream_while_producers_outpace_the_daemon(
    r: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    n, max_lag = 20_000, 1000
    rng = random.Random(72)
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps({"id": f"d{i}", "text": text(rng, 30)}) + "\n" for i in range(n)))
    daemon = Served(redis_url, tmp_path / "serve.log", "--batch-size", "100", DEDUPD_DOCS_RETENTION_S="0")
    lengths: list[int] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            lengths.append(r.xlen(Keys().docs))
            stop.wait(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        env = {**os.environ, "DEDUPD_REDIS_URL": redis_url}
        pushed = subprocess.run(
            [*DEDUPD, "push", str(src), "--max-lag", str(max_lag), "--wait"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        stop.set()
        sampler.join()
    assert pushed.returncode == 0, pushed.stderr
    assert daemon.stop() == 0, daemon.stderr
    # unread <= max_lag, plus one producer chunk (500), the batch in hand, what the daemon acknowledges
    # between two trims (0.2 s) and whole stream nodes (XTRIM ~): a few thousand, not the 20,000 pushed
    assert max(lengths) <= 4 * max_lag, max(lengths)
    assert r.xlen(Keys().docs) <= 400
    assert counter(r, "processed") == n and r.hlen(Keys().id_forward) == n and pending(r) == 0
