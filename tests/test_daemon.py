"""The daemon as users run it: real `dedupd serve` processes against a real redis-server."""

from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from helpers import alerts, drain, handle_at_once, make_daemon, pending, push, text, variant

from dedupd.daemon.monitor import group_state, wait_drained
from dedupd.index.keys import Keys

DEDUPD = [sys.executable, "-m", "dedupd"]


def serve(url: str, *args: str, **env: str) -> subprocess.Popen[str]:
    e = {**os.environ, "DEDUPD_REDIS_URL": url, "DEDUPD_BLOCK_MS": "100", **env}
    return subprocess.Popen(
        [*DEDUPD, "serve", *args], env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def wait_serving(proc: subprocess.Popen[str], timeout: float = 60.0) -> None:
    """Read the daemon's log until it says it is serving."""
    assert proc.stderr is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stderr], [], [], 0.5)
        line = proc.stderr.readline() if ready else ""
        if " serving " in line:
            return
        assert proc.poll() is None, "dedupd serve exited before serving"
    raise AssertionError("dedupd serve did not start serving")


def pairs_corpus(n_pairs: int, seed: int) -> tuple[list[dict[str, str]], set[tuple[str, str]]]:
    rng = random.Random(seed)
    docs, expected = [], set()
    for i in range(n_pairs):
        base = text(rng, 50)
        docs.append({"id": f"p{i}a", "text": base})
        docs.append({"id": f"p{i}b", "text": variant(rng, base)})
        expected.add((f"p{i}b", f"p{i}a"))
    return docs, expected


def found_pairs(r: redis.Redis) -> set[tuple[str, str]]:
    out = set()
    for a in alerts(r):
        for m in a["matches"]:
            out.add((a["id"], m[0]))
    return out


def test_sigterm_drains_and_leaves_nothing_pending(r: redis.Redis, redis_url: str) -> None:
    docs, expected = pairs_corpus(1500, 11)
    push(r, docs)
    proc = serve(redis_url, "--batch-size", "50")
    deadline = time.monotonic() + 60
    while int(r.hget(Keys().counters, "processed") or 0) < 200:
        assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert "finishing the current batch" in err and "Traceback" not in err
    assert pending(r) == 0
    # a new daemon picks up where the first stopped; every pair is found once
    proc2 = serve(redis_url)
    assert wait_drained(r, Keys(), 120)
    proc2.send_signal(signal.SIGINT)
    assert proc2.wait(timeout=20) == 0
    assert found_pairs(r) == expected
    assert len(alerts(r)) == len(expected)


def test_refuses_mismatched_parameters(r: redis.Redis, redis_url: str) -> None:
    drain(make_daemon(redis_url))  # creates the index with the defaults
    proc = serve(redis_url, DEDUPD_NUM_PERM="64")
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert "was built with num_perm 128, but DEDUPD_NUM_PERM gives 64" in err
    assert "unset DEDUPD_NUM_PERM" in err and "dedupd rebuild --num-perm 64" in err
    assert "Traceback" not in err


def test_two_consumers_at_the_same_moment_find_the_pair(r: redis.Redis, redis_url: str) -> None:
    """Two consumers insert-and-query the two copies at once: at least one of them reports the pair."""
    rng = random.Random(12)
    for trial in range(5):
        r.flushall()
        base = text(rng)
        d1, d2 = make_daemon(redis_url, consumer="one"), make_daemon(redis_url, consumer="two")
        push(r, [{"id": "first", "text": base}])
        b1, _ = d1._next_batch()
        push(r, [{"id": "second", "text": variant(rng, base)}])
        b2, _ = d2._next_batch()
        handle_at_once([(d1, b1), (d2, b2)])
        pairs = {frozenset((a["id"], a["duplicate_of"])) for a in alerts(r)}
        assert pairs == {frozenset(("first", "second"))}, trial
        assert pending(r) == 0


def consumers(r: redis.Redis) -> int:
    """The consumers of the group (0 before a daemon made the stream and the group)."""
    try:
        return len(r.xinfo_consumers(Keys().docs, "dedupd"))
    except redis.ResponseError:
        return 0


def test_two_daemon_processes_share_the_stream(r: redis.Redis, redis_url: str) -> None:
    docs, expected = pairs_corpus(400, 13)
    procs = [serve(redis_url, "--batch-size", "8", "--consumer", f"c{i}") for i in range(2)]
    deadline = time.monotonic() + 60  # both read (and are in the group) before anything is pushed
    while time.monotonic() < deadline and consumers(r) < 2:
        time.sleep(0.1)
    push(r, docs)
    assert wait_drained(r, Keys(), 120)
    assert len(r.xinfo_consumers(Keys().docs, "dedupd")) == 2
    for p in procs:
        p.send_signal(signal.SIGTERM)
    for p in procs:
        assert p.wait(timeout=20) == 0
    got = {tuple(sorted(p)) for p in found_pairs(r)}
    assert {tuple(sorted(p)) for p in expected} <= got
    assert (
        r.xinfo_consumers(Keys().docs, "dedupd") == []
    )  # a clean exit with nothing pending leaves the group
    state = group_state(r, Keys())
    assert state is not None and state["pending"] == 0


def test_embedded_redis_end_to_end(tmp_path: Path) -> None:
    """No DEDUPD_REDIS_URL: serve starts an embedded Redis; push and alerts find it."""
    env = {**os.environ, "DEDUPD_DATA_DIR": str(tmp_path / "data"), "DEDUPD_BLOCK_MS": "100"}
    env.pop("DEDUPD_REDIS_URL", None)
    rng = random.Random(14)
    base = text(rng)
    sample = tmp_path / "docs.jsonl"
    sample.write_text(
        f'{{"id": "orig", "text": "{base}"}}\n{{"id": "copy", "text": "{variant(rng, base)}"}}\n'
    )
    proc = subprocess.Popen([*DEDUPD, "serve"], env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while subprocess.run([*DEDUPD, "check"], env=env, capture_output=True).returncode != 0:
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.2)
        pushed = subprocess.run(
            [*DEDUPD, "push", str(sample), "--wait", "--timeout", "60"],
            env=env,
            capture_output=True,
            text=True,
        )
        if pushed.returncode:
            proc.terminate()
            raise AssertionError(pushed.stderr + proc.communicate(timeout=30)[1])
        shown = subprocess.run([*DEDUPD, "alerts"], env=env, capture_output=True, text=True)
        assert shown.returncode == 0 and "copy ~ orig" in shown.stdout
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert (tmp_path / "data").exists()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_idle_daemon_stops_promptly(redis_url: str, sig: int) -> None:
    proc = serve(redis_url, DEDUPD_BLOCK_MS="1000")
    wait_serving(proc)  # its signal handlers are installed (a loaded machine may take seconds to start it)
    time.sleep(0.5)
    t = time.monotonic()
    proc.send_signal(sig)
    assert proc.wait(timeout=10) == 0
    assert time.monotonic() - t < 5
