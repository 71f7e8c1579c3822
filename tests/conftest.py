"""Shared fixtures: a real redis-server per test session (flushed per test), settings factories."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest
import redis

if TYPE_CHECKING:
    from procs import RedisProc


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_redis_server(workdir: Path, *extra: str) -> tuple[subprocess.Popen[bytes], int]:
    """Start a real redis-server on a free loopback port; returns the process and the port."""
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.exit("redis-server is not installed: run scripts/test.sh, which installs it", returncode=3)
    port = free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [
            exe,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(workdir),
            *extra,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    client = redis.Redis(port=port)
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise RuntimeError(f"redis-server did not start on port {port}") from None
            time.sleep(0.05)
    client.close()
    return proc, port


@contextlib.contextmanager
def private_redis(tmp_path: Path, *options: str) -> Iterator[RedisProc]:
    """A redis-server of the test's own (``options`` on its command line), killed at the end."""
    from procs import RedisProc  # (procs imports this module)

    server = RedisProc(tmp_path / "redis", free_port(), *options)
    server.start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
def aof_redis(tmp_path: Path) -> Iterator[RedisProc]:
    """A private redis-server of the test with AOF on (appendfsync always): restarts lose nothing acknowledged."""
    with private_redis(tmp_path, "--appendonly", "yes", "--appendfsync", "always") as server:
        yield server


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a real redis-server started for this test session."""
    proc, port = start_redis_server(tmp_path_factory.mktemp("redis"))
    yield f"redis://127.0.0.1:{port}/0"
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture
def redis_url(redis_server: str) -> Iterator[str]:
    """The session server's URL, flushed before each test."""
    client = redis.Redis.from_url(redis_server)
    client.flushall()
    client.close()
    yield redis_server


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    """A raw (bytes) client on the flushed session server."""
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No DEDUPD_* from the outer environment leaks into a test; embedded data goes to tmp."""
    for key in list(os.environ):
        if key.startswith("DEDUPD_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("DEDUPD_DATA_DIR", str(tmp_path / "embedded"))
    monkeypatch.setenv("DEDUPD_METRICS_PORT", "0")  # tests that want metrics choose a free port


@pytest.fixture(autouse=True)
def _no_daemon_left() -> Iterator[None]:
    """A test that fails before it stops its `dedupd serve` processes does not leave them running."""
    from procs import STARTED

    yield
    for served in STARTED:
        if served.proc.poll() is None:
            served.proc.kill()
            served.proc.wait(timeout=10)
    STARTED.clear()


@pytest.fixture(scope="session", autouse=True)
def _compiled_kernels() -> None:
    """Compile dedupd's numba kernels once, before any test spawns a daemon: they are cached on disk
    (dedupd/__pycache__), so every `dedupd serve` the tests start loads them instead of compiling
    (seconds each on a fresh checkout). Both schemes, ASCII and non-ASCII texts, an append."""
    from dedupd.similarity.fingerprint import AppendTo, Fingerprinter
    from dedupd.similarity.spec import IndexSpec
    from dedupd.similarity.verify import jaccard_pairs

    for scheme in ("oph", "classic"):
        fpr = Fingerprinter(IndexSpec("word:3", 16, 1, 4, 4, scheme))
        fps = fpr.compute(["warm the kernels up", "wärm them up"])
        fpr.compute([AppendTo(fps[0], "once")])
    jaccard_pairs([fps[0].shingles, fps[1].shingles], np.zeros(1, np.int64), np.ones(1, np.int64))
