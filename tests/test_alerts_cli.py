"""`dedupd alerts` and `dedupd dead`: the newest N, --since (id, now), following, SIGPIPE; dead letters.

Alerts are written with XADD in the alert schema (the daemon's own output is tested elsewhere); the dead
letters come from a real daemon processing bad input.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner
from helpers import drain, make_daemon
from procs import Served, seconds_until

from dedupd.cli import cli
from dedupd.errors import ConfigError
from dedupd.index.keys import Keys
from dedupd.ops.alerts import parse_since, read_stream, stream_end

DEDUPD = [sys.executable, "-m", "dedupd"]
KEYS = Keys()


def add_alerts(r: redis.Redis, n: int, tag: str = "d") -> list[str]:
    ids = []
    for i in range(1, n + 1):
        fields = {
            "id": f"{tag}{i}",
            "duplicate_of": "a",
            "similarity": "0.9",
            "matches": '[["a", 0.9], ["b", 0.85]]',
            "cluster": "a",
            "verify": "exact",
            "input": f"{i}-0",
        }
        ids.append(r.xadd(KEYS.alerts, fields).decode())  # type: ignore[arg-type]
    return ids


@pytest.fixture
def run(redis_url: str):  # type: ignore[no-untyped-def]
    def invoke(*args: str):  # type: ignore[no-untyped-def]
        return CliRunner().invoke(
            cli, list(args), env={"DEDUPD_REDIS_URL": redis_url}, catch_exceptions=False
        )

    return invoke


def shown_ids(output: str) -> list[str]:
    return [line.split(" ", 1)[0] for line in output.splitlines() if line.strip()]


def test_count_is_the_newest(run, r: redis.Redis) -> None:  # type: ignore[no-untyped-def]
    add_alerts(r, 5)
    res = run("alerts", "-n", "2")
    assert res.exit_code == 0 and shown_ids(res.output) == ["d4", "d5"]  # newest two, oldest first
    assert shown_ids(run("alerts").output) == ["d1", "d2", "d3", "d4", "d5"]
    assert run("alerts", "-n", "0").output == ""
    assert shown_ids(run("alerts", "-n", "9").output) == ["d1", "d2", "d3", "d4", "d5"]
    assert "d5 ~ a  similarity 0.900 (exact) (+1 more)  cluster a" in run("alerts", "-n", "1").output


@pytest.mark.parametrize(
    ("command", "said"),
    [
        ("alerts", "no alerts yet (dedupd:alerts is empty; no daemon is heartbeating: `dedupd serve`"),
        ("dead", "no dead letters yet (dedupd:dead is empty)"),
    ],
)
def test_an_empty_stream_says_so_on_stderr(run, command: str, said: str) -> None:  # type: ignore[no-untyped-def]
    """Nothing to show is one line on stderr (exit 0), never silence; stdout stays empty for pipes,
    --json included."""
    for args in ((command,), (command, "--json")):
        res = run(*args)
        assert res.exit_code == 0 and res.stdout == "", res.output
        assert res.stderr.startswith(said) and res.stderr.count("\n") == 1, res.stderr


def test_empty_alerts_with_a_daemon_and_nothing_since(run, redis_url: str, r: redis.Redis) -> None:  # type: ignore[no-untyped-def]
    """With a daemon heartbeating the line does not send the user to start one; --since past every alert
    says how many older ones the stream holds."""
    daemon = make_daemon(redis_url, consumer="probe")
    daemon.iteration()  # heartbeats
    assert run("alerts").stderr == "no alerts yet (dedupd:alerts is empty)\n"
    ids = add_alerts(r, 2)
    res = run("alerts", "--since", f"({ids[1]}")
    assert (
        res.stdout == "" and res.stderr == f"no alerts since ({ids[1]} (dedupd:alerts holds 2 older ones)\n"
    )
    daemon._farewell()


def test_following_an_empty_stream_says_at_once_that_it_waits(redis_url: str, tmp_path: Path) -> None:
    """`alerts --follow` on an empty stream says within seconds (a real process) that it waits for new ones."""
    follower = Served(redis_url, tmp_path / "follow.log", command=[*DEDUPD, "alerts", "--follow"])
    try:
        took = seconds_until(lambda: "waiting for new ones" in follower.stderr, 60, "the waiting line")
        assert took < 5, took
        assert follower.stderr.startswith("no alerts yet (dedupd:alerts is empty")
        assert follower.stderr.rstrip().endswith("; waiting for new ones (Ctrl-C stops)")
    finally:
        follower.proc.send_signal(signal.SIGINT)
        assert follower.proc.wait(timeout=120) == 0


def test_since_id_inclusive_exclusive_and_now(run, r: redis.Redis) -> None:  # type: ignore[no-untyped-def]
    ids = add_alerts(r, 4)
    assert shown_ids(run("alerts", "--since", ids[2]).output) == ["d3", "d4"]
    assert shown_ids(run("alerts", "--since", f"({ids[2]}").output) == ["d4"]
    assert shown_ids(run("alerts", "--since", ids[1], "-n", "1").output) == ["d4"]
    for now in ("now", "NOW", "$", "+"):
        res = run("alerts", "--since", now)
        assert res.exit_code == 0 and res.stdout == "" and "no new alerts" in res.stderr
    ms = ids[0].split("-")[0]
    assert shown_ids(run("alerts", "--since", ms).output) == ["d1", "d2", "d3", "d4"]  # ms alone: seq 0


def test_json_lines(run, r: redis.Redis) -> None:  # type: ignore[no-untyped-def]
    add_alerts(r, 2)
    lines = [json.loads(line) for line in run("alerts", "--json", "-n", "1").output.splitlines()]
    assert len(lines) == 1 and lines[0]["id"] == "d2" and lines[0]["matches"] == [["a", 0.9], ["b", 0.85]]
    assert lines[0]["similarity"] == 0.9 and lines[0]["alert"]


def _follow(redis_url: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*DEDUPD, *args],
        env={**os.environ, "DEDUPD_REDIS_URL": redis_url},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_blocked(r: redis.Redis, proc: subprocess.Popen[str]) -> None:
    """Until the follower is blocked in XREAD (so what is added next is 'new')."""
    deadline = time.monotonic() + 120
    while not any(c.get("cmd") == "xread" for c in r.client_list()):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.02)


def _stop(proc: subprocess.Popen[str]) -> tuple[str, str]:
    proc.send_signal(signal.SIGINT)
    try:
        return proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize(
    ("args", "first"),
    [(("-n", "1"), ["d3"]), (("--since", "now"), []), (("--since", "+"), []), (("-n", "0"), [])],
)
def test_follow(redis_url: str, r: redis.Redis, args: tuple[str, ...], first: list[str]) -> None:
    """`--follow -n 1` prints the newest alert then follows; `--since now` (or +, or -n 0) only new ones,
    saying on stderr that it waits for them."""
    add_alerts(r, 3)
    proc = _follow(redis_url, "alerts", "--follow", *args)
    assert proc.stdout is not None
    try:
        for expected in first:
            assert proc.stdout.readline().startswith(f"{expected} ~ a")
        _wait_blocked(r, proc)
        add_alerts(r, 1, tag="new")
        assert proc.stdout.readline().startswith("new1 ~ a")
    finally:
        out, err = _stop(proc)
    waits = "" if first else "waiting for new alerts (Ctrl-C stops); dedupd:alerts holds 3 older ones\n"
    assert proc.returncode == 0 and out == "" and err == waits, err


def test_follow_misses_nothing_between_reads(redis_url: str, r: redis.Redis) -> None:
    """Entries added while the follower is between two blocking reads are still shown, once each."""
    proc = _follow(redis_url, "alerts", "--follow", "--since", "now", "--json")
    assert proc.stdout is not None
    try:
        _wait_blocked(r, proc)
        for burst in range(3):
            add_alerts(r, 50, tag=f"b{burst}-")
            time.sleep(0.05)
        got = [json.loads(proc.stdout.readline())["id"] for _ in range(150)]
    finally:
        _stop(proc)
    assert got == [f"b{b}-{i}" for b in range(3) for i in range(1, 51)]


def test_head_closes_the_pipe_quietly(redis_url: str, r: redis.Redis) -> None:
    """`dedupd alerts | head -1`: status 0, nothing on stderr (more output than a pipe buffer holds)."""
    pipe = r.pipeline()
    for i in range(5000):
        pipe.xadd(KEYS.alerts, {"id": f"x{i}", "duplicate_of": "a", "similarity": "0.9", "cluster": "a"})
    pipe.execute()
    for args in ("alerts", "alerts --json", "alerts --follow"):
        res = subprocess.run(
            ["bash", "-c", f"set -o pipefail; {' '.join(DEDUPD)} {args} | head -1"],
            env={**os.environ, "DEDUPD_REDIS_URL": redis_url},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert res.returncode == 0 and res.stderr == "", (args, res.stderr)
        assert res.stdout.count("\n") == 1 and "x0" in res.stdout


def test_dead_letters(run, redis_url: str, r: redis.Redis) -> None:  # type: ignore[no-untyped-def]
    long_text = "word " * 200
    r.xadd(KEYS.docs, {"id": "no-text"})
    r.xadd(KEYS.docs, {"id": "weird", "op": "frobnicate", "text": long_text})
    r.xadd(KEYS.docs, {"id": "fine", "text": "a perfectly good document"})
    drain(make_daemon(redis_url))
    res = run("dead")
    lines = res.output.splitlines()
    assert res.exit_code == 0 and len(lines) == 2
    assert " missing_text" in lines[0] and 'id="no-text"' in lines[0]
    assert " unknown_op" in lines[1] and 'op="frobnicate"' in lines[1] and "…" in lines[1]
    assert len(lines[1]) < 300  # the 1,000-character text is shortened for display
    full = [json.loads(line) for line in run("dead", "--json").output.splitlines()]
    assert [d["error"] for d in full] == ["missing_text", "unknown_op"]
    assert full[1]["text"] == long_text and full[1]["op"] == "frobnicate" and full[1]["input"]
    assert {"dead", "input", "error", "detail", "id"} <= set(full[0])
    assert shown_ids(run("dead", "-n", "1").output) == [full[1]["input"]]
    assert run("dead", "--since", "now").stdout == ""


def test_dead_follow(redis_url: str, r: redis.Redis) -> None:
    proc = _follow(redis_url, "dead", "--follow", "--since", "now")
    assert proc.stdout is not None
    try:
        _wait_blocked(r, proc)
        r.xadd(KEYS.dead, {"id": "x", "error": "bad_json", "detail": "items: not JSON", "input": "7-0"})
        assert proc.stdout.readline().strip() == '7-0 bad_json: items: not JSON  id="x"'
    finally:
        _stop(proc)
    assert proc.returncode == 0


# ----- the shared stream reader -----
def test_parse_since() -> None:
    assert parse_since("-") == "-" and parse_since(" now ") == "now" and parse_since("$") == "now"
    assert parse_since("1700000000000-5") == "1700000000000-5" and parse_since("(12") == "(12"
    for bad in ("bogus", "12-", "-5", "1-2-3", "18446744073709551616-0", ""):
        with pytest.raises(ConfigError, match="--since must be a stream id like 1700000000000-0"):
            parse_since(bad)


def test_read_stream_pages_and_newest(r: redis.Redis) -> None:
    ids = [r.xadd("s", {"n": str(i)}).decode() for i in range(2500)]
    assert [e[0] for e in read_stream(r, "s")] == ids  # three pages
    assert [e[0] for e in read_stream(r, "s", count=3)] == ids[-3:]
    assert [e[0] for e in read_stream(r, "s", count=3, newest=False)] == ids[:3]
    assert [e[0] for e in read_stream(r, "s", since=ids[10], count=1200, newest=False)] == ids[10:1210]
    assert [e[0] for e in read_stream(r, "s", until=ids[4])] == ids[:5]
    assert list(read_stream(r, "missing")) == [] and stream_end(r, "missing") == "0-0"
    assert stream_end(r, "s") == ids[-1]
