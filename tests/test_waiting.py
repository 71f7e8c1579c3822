"""No silent wait in `dedupd push` (dedupd/cli/waiting.py; `delete --wait` shares it): --wait and --max-lag say within seconds what they
wait for, and at once when no daemon heartbeats; --timeout still ends --wait. Real `dedupd push` processes,
timed until their first word."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import redis
from helpers import drain, make_daemon
from procs import DEDUPD, Served, seconds_until, wait_for

from dedupd.index.keys import Keys

NO_DAEMON = "no daemon is heartbeating, so nothing processes dedupd:docs: start one with `dedupd serve`"


def _documents(tmp_path: Path, n: int) -> Path:
    path = tmp_path / "docs.jsonl"
    path.write_text(
        "".join(f'{{"id": "d{i}", "text": "document number {i} of the wait"}}\n' for i in range(n))
    )
    return path


def test_push_wait_says_at_once_that_no_daemon_runs_and_keeps_waiting(
    redis_url: str, r: redis.Redis, tmp_path: Path
) -> None:
    """Within 5 s of starting, `push --wait` with no daemon says so (and how to start one) on stderr; it
    keeps waiting, and ends with status 0 once a daemon has processed everything."""
    push = Served(
        redis_url, tmp_path / "push.log", command=[*DEDUPD, "push", str(_documents(tmp_path, 3)), "--wait"]
    )
    took = seconds_until(lambda: NO_DAEMON in push.stderr, 60, "the line saying no daemon runs")
    assert took < 5, (took, push.stderr)
    assert "waiting up to 600s for one (--timeout)" in push.stderr
    wait_for(lambda: "waiting for the daemons: 3 entries" in push.stderr, 30, "the progress line")
    assert push.proc.poll() is None  # still waiting
    daemon = make_daemon(redis_url, consumer="late")
    drain(daemon)
    assert push.proc.wait(timeout=60) == 0, push.stderr
    assert push.stderr.rstrip().endswith("all pushed documents are processed")
    assert "Traceback" not in push.stderr and " INFO " not in push.stderr
    daemon._farewell()


def test_push_wait_timeout_ends_it_with_the_reason(redis_url: str, tmp_path: Path) -> None:
    """--timeout still ends the wait: exit 1 (a failure while working; the documents stay in the stream)
    with one line saying why."""
    started = time.monotonic()
    res = subprocess.run(
        [*DEDUPD, "push", str(_documents(tmp_path, 2)), "--wait", "--timeout", "1"],
        env={**os.environ, "DEDUPD_REDIS_URL": redis_url},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert time.monotonic() - started < 15
    assert res.returncode == 1, res.stderr
    last = res.stderr.splitlines()[-1]
    assert (
        last
        == f"dedupd: error: the daemons did not process every entry of dedupd:docs within 1s: {NO_DAEMON}"
    )


def test_max_lag_says_why_it_pauses(redis_url: str, r: redis.Redis, tmp_path: Path) -> None:
    """--max-lag with no daemon: within 5 s of the pause, a line says the push pauses for the daemons and
    that none runs; once one drains the stream, the push goes on and ends with status 0."""
    log = tmp_path / "push.log"
    with open(log, "wb") as err:
        push = subprocess.Popen(
            [*DEDUPD, "push", "-", "--max-lag", "1"],
            env={**os.environ, "DEDUPD_REDIS_URL": redis_url},
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    assert push.stdin is not None
    try:
        push.stdin.write(b"first line\nsecond line\nthird line\n")
        push.stdin.flush()
        wait_for(lambda: r.xlen(Keys().docs) > 1, 60, "a send past --max-lag")
        took = seconds_until(lambda: NO_DAEMON in log.read_text(), 60, "the pause to be explained")
        assert took < 5, took
        said = log.read_text()
        assert "entries wait for the daemons, more than --max-lag 1; the push goes on as they" in said
        daemon = make_daemon(redis_url, consumer="catching-up")
        drain(daemon)
        push.stdin.close()
        assert push.wait(timeout=60) == 0, log.read_text()
        daemon._farewell()
    finally:
        if push.poll() is None:
            push.kill()
            push.wait()
    assert "pushed 3 documents" in log.read_text()
