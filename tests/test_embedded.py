"""The embedded Redis with real processes: shared by every dedupd process of a data directory, never left
running after the last one exits (whatever the order or the signal), at a stable socket that redis-cli reaches."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from procs import wait_for

DEDUPD = [sys.executable, "-m", "dedupd"]
REDIS_CLI = shutil.which("redis-cli") or "redis-cli"
GONE_S = 10  # the server stops within a moment of the last process; generous for a loaded machine
_STARTED: list[Proc] = []  # the processes of the running test, killed after it whatever happened


def env(data: Path) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith("DEDUPD_")}
    out.update(DEDUPD_DATA_DIR=str(data), DEDUPD_BLOCK_MS="100", DEDUPD_METRICS_PORT="0")
    return out


class Proc:
    """A dedupd command run on the embedded Redis of ``data``, its stderr in a file."""

    def __init__(self, data: Path, *args: str) -> None:
        self.log = data.parent / f"{args[0]}-{time.monotonic_ns()}.log"
        with open(self.log, "wb") as err:
            self.proc = subprocess.Popen([*DEDUPD, *args], env=env(data), stdout=subprocess.PIPE, stderr=err)
        _STARTED.append(self)

    @property
    def stderr(self) -> str:
        return self.log.read_text(errors="replace")

    def signal(self, sig: int) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=30)


def servers(data: Path) -> list[int]:
    """The pids of the redis-servers running in ``data`` (a redis-server works in its data directory)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if (entry / "comm").read_text().strip() == "redis-server" and Path(
                os.readlink(entry / "cwd")
            ) == data.resolve():
                found.append(int(entry.name))
        except (OSError, ValueError):
            continue
    return found


def serving(data: Path) -> Proc:
    """A `dedupd serve` that has started consuming."""
    proc = Proc(data, "serve")
    wait_for(lambda: "serving" in proc.stderr or proc.proc.poll() is not None, 60, "serve to start")
    assert proc.proc.poll() is None, proc.stderr
    return proc


def following(data: Path) -> Proc:
    """A `dedupd alerts --follow` that holds the embedded server."""
    proc = Proc(data, "alerts", "--follow")
    wait_for(lambda: bool(servers(data)) or proc.proc.poll() is not None, 60, "the embedded server")
    # in its loop once it has said it waits (the alerts are empty here): a Ctrl-C before, while it still
    # imports on a busy machine, would end it 130 (a fixed half-second was not always enough)
    wait_for(lambda: "Ctrl-C stops" in proc.stderr or proc.proc.poll() is not None, 60, "the follower's loop")
    assert proc.proc.poll() is None, proc.stderr
    return proc


def assert_no_server_left(data: Path) -> None:
    wait_for(lambda: not servers(data), GONE_S, f"the embedded redis-server of {data} to stop", poll=0.1)


def cli(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [REDIS_CLI, "-s", str(data / "redis.sock"), *args], capture_output=True, text=True, timeout=30
    )


@pytest.fixture
def data(tmp_path: Path) -> Iterator[Path]:
    """The data directory; afterwards every process of the test and any server left in it are killed."""
    data = tmp_path / "data"
    yield data
    for proc in _STARTED:
        if proc.proc.poll() is None:
            proc.proc.kill()
            proc.proc.wait()
    _STARTED.clear()
    for pid in servers(data):
        os.kill(pid, signal.SIGKILL)


def still_up(data: Path) -> bool:
    return len(servers(data)) == 1


def test_follower_then_serve_sigint_follower_then_sigterm_serve(data: Path) -> None:
    follower = following(data)
    serve = serving(data)
    assert still_up(data)  # serve uses the follower's server
    assert follower.signal(signal.SIGINT) == 0  # Ctrl-C is how following ends
    assert still_up(data)  # serve still has it
    assert serve.signal(signal.SIGTERM) == 0
    assert_no_server_left(data)


def test_two_serves_stopped_in_turn(data: Path) -> None:
    first, second = serving(data), serving(data)
    assert first.signal(signal.SIGTERM) == 0
    assert still_up(data)
    assert second.signal(signal.SIGTERM) == 0
    assert_no_server_left(data)


def test_kill_9_of_the_follower_then_serve_exits(data: Path) -> None:
    follower = following(data)
    serve = serving(data)
    assert follower.signal(signal.SIGKILL) == -signal.SIGKILL
    assert still_up(data)
    assert serve.signal(signal.SIGTERM) == 0
    assert_no_server_left(data)


def test_kill_of_a_lone_follower(data: Path) -> None:
    follower = following(data)
    assert follower.signal(signal.SIGTERM) == -signal.SIGTERM  # no exit handler runs
    assert_no_server_left(data)


def test_kill_9_of_the_last_process(data: Path) -> None:
    serve = serving(data)
    assert serve.signal(signal.SIGKILL) == -signal.SIGKILL
    assert_no_server_left(data)


def test_second_sigint_of_serve_while_a_follower_runs(data: Path) -> None:
    serve = serving(data)
    follower = following(data)
    serve.proc.send_signal(signal.SIGINT)
    serve.proc.send_signal(signal.SIGINT)
    assert serve.proc.wait(timeout=30) in (0, 130)
    assert still_up(data)  # the follower still has it
    assert follower.signal(signal.SIGINT) == 0  # Ctrl-C is how following ends
    assert_no_server_left(data)


def test_kill_9_of_the_supervisor_takes_the_server_with_it(data: Path) -> None:
    follower = following(data)
    supervisor = int((data / "supervisor.pid").read_text())
    os.kill(supervisor, signal.SIGKILL)
    assert_no_server_left(data)
    follower.proc.kill()
    follower.proc.wait(timeout=30)


def test_redis_cli_reaches_a_running_serve_at_the_printed_socket(data: Path) -> None:
    serve = serving(data)
    sock = data / "redis.sock"
    assert f"embedded Redis at unix socket {sock} (redis-cli -s {sock})" in serve.stderr
    policy = cli(data, "CONFIG", "GET", "maxmemory-policy").stdout.split()
    assert policy == ["maxmemory-policy", "noeviction"]
    words = "storm hits the coast thousands without power as the river floods the old town tonight"
    for doc_id, text in (("a", words), ("b", words + " again")):
        added = cli(data, "XADD", "dedupd:docs", "*", "id", doc_id, "text", text)
        assert added.returncode == 0 and "-" in added.stdout, added
    shown: list[subprocess.CompletedProcess[str]] = []

    def alerted() -> bool:
        shown.append(subprocess.run([*DEDUPD, "alerts"], env=env(data), capture_output=True, text=True))
        return "b ~ a" in shown[-1].stdout

    wait_for(alerted, 60, "the alert", poll=0.2)
    assert "embedded Redis" not in shown[-1].stderr  # a one-shot command is quiet by default
    verbose = subprocess.run([*DEDUPD, "alerts", "-v"], env=env(data), capture_output=True, text=True)
    assert f"embedded Redis at unix socket {sock}" in verbose.stderr  # -v: every command says where it is
    assert serve.signal(signal.SIGTERM) == 0
    assert_no_server_left(data)


def test_one_shot_commands_are_quiet_by_default(data: Path) -> None:
    """`push` and `check` on the embedded Redis print no INFO line (in `push` it landed in the progress
    bar): their own words only. -v, --log-level info or DEDUPD_LOG_LEVEL=info bring the lines back."""
    docs = data.parent / "docs.jsonl"
    docs.write_text('{"id": "a", "text": "one two three four"}\n')

    def run(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*DEDUPD, *args], env={**env(data), **extra}, capture_output=True, text=True, timeout=60
        )

    pushed = run("push", str(docs))
    assert pushed.returncode == 0 and pushed.stderr == "pushed 1 document to dedupd:docs\n", pushed.stderr
    verbose = run("push", str(docs), "-v")
    assert (
        verbose.returncode == 0 and " INFO dedupd.embedded: embedded Redis at unix socket" in verbose.stderr
    )
    follower = following(data)  # holds the server, so that `check` finds it running
    checked = run("check")
    assert checked.returncode == 1 and "no daemon is heartbeating" in checked.stdout
    assert checked.stderr == "", checked.stderr
    for loud, extra in (
        (("check", "--verbose"), {}),
        (("check", "--log-level", "info"), {}),
        (("check",), {"DEDUPD_LOG_LEVEL": "info"}),
    ):
        assert " INFO dedupd.embedded: embedded Redis" in run(*loud, **extra).stderr, (loud, extra)
    assert follower.signal(signal.SIGINT) == 0
    assert_no_server_left(data)


def test_the_data_outlives_the_server(data: Path) -> None:
    follower = following(data)
    assert cli(data, "SET", "kept", "1").stdout.strip() == "OK"
    follower.signal(signal.SIGTERM)
    assert_no_server_left(data)
    follower = following(data)
    assert cli(data, "GET", "kept").stdout.strip() == "1"
    follower.signal(signal.SIGTERM)
    assert_no_server_left(data)


def test_a_server_left_running_on_the_data_is_stopped_before_another_starts(data: Path) -> None:
    from dedupd.server.embedded import redis_server_executable

    data.mkdir(parents=True)
    orphan = [redis_server_executable(), "--port", "0", "--unixsocket", str(data / "old.sock")]
    orphan += ["--dir", str(data), "--pidfile", str(data / "redis.pid"), "--daemonize", "yes", "--save", ""]
    subprocess.run(orphan, check=True, capture_output=True, timeout=30)
    wait_for(lambda: (data / "redis.pid").exists() and len(servers(data)) == 1, 30, "the orphan server")
    old = servers(data)[0]
    shown = subprocess.run([*DEDUPD, "alerts"], env=env(data), capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and f"stopping the embedded redis-server (pid {old})" in shown.stderr
    assert_no_server_left(data)


def test_check_starts_no_server(data: Path) -> None:
    check = Proc(data, "check")
    assert check.proc.wait(timeout=30) == 1
    assert check.proc.stdout is not None and b"no embedded Redis is running" in check.proc.stdout.read()
    assert not servers(data)


def test_a_data_dir_too_long_for_a_socket_gets_a_stable_short_one(tmp_path: Path) -> None:
    from dedupd.server.embedded import MAX_SOCKET_PATH, Layout, describe

    deep = tmp_path / ("d" * 60) / ("e" * 60)
    layout = Layout.of(deep)
    assert layout.socket_elsewhere and len(os.fsencode(layout.socket)) <= MAX_SOCKET_PATH
    assert Layout.of(deep).socket == layout.socket != Layout.of(tmp_path / ("d" * 60) / ("f" * 60)).socket
    assert "would be longer than the 107 bytes" in describe(layout)
    short = Layout.of(tmp_path / "data")
    assert short.socket == tmp_path / "data" / "redis.sock" and not short.socket_elsewhere


def test_the_embedded_server_never_evicts(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """It is started with maxmemory-policy noeviction (dedupd refuses any other: see dedupd/server/eviction.py)."""
    from dedupd.server import embedded

    started: list[list[str]] = []

    class NoServer:
        def __init__(self, argv: list[str], **kwargs: object) -> None:
            started.append(argv)

    monkeypatch.setattr(embedded.subprocess, "Popen", NoServer)
    embedded._run_server(embedded.Layout.of(tmp_path), "redis-server")
    argv = started[0]
    assert argv[argv.index("--maxmemory-policy") + 1] == "noeviction"
