"""Helpers for the reliability tests: real `dedupd serve` processes, private redis-servers, corpora, checks."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis
from helpers import alerts, text, variant

from dedupd.index.gateway import RedisGateway
from dedupd.index.keys import Keys
from dedupd.settings import load_settings

DEDUPD = [sys.executable, "-m", "dedupd"]


STARTED: list[
    Served
] = []  # every Served of the test in hand (conftest kills what a failed test left running)


class Served:
    """A `dedupd serve` process whose stderr goes to a file (no pipe to fill up)."""

    def __init__(self, url: str, log: Path, *args: str, command: list[str] | None = None, **env: str) -> None:
        self.log = log
        e = {
            **os.environ,
            "DEDUPD_REDIS_URL": url,
            "DEDUPD_BLOCK_MS": "100",
            "DEDUPD_METRICS_PORT": "0",
            **env,
        }
        argv = [*(command or [*DEDUPD, "serve"]), *args]
        with open(log, "ab") as err:
            self.proc = subprocess.Popen(argv, env=e, stdout=subprocess.DEVNULL, stderr=err)
        STARTED.append(self)

    @property
    def stderr(self) -> str:
        return self.log.read_text(errors="replace")

    def kill9(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)

    def stop(self, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
        return self.proc.wait(timeout=timeout)


def wait_for(cond: Callable[[], bool], timeout: float, what: str, poll: float = 0.02) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(poll)


def seconds_until(cond: Callable[[], bool], timeout: float, what: str) -> float:
    """How long it took until ``cond()`` held (an AssertionError after ``timeout``): for "answers within
    N seconds", with a deadline generous enough that a slow machine fails only the N."""
    started = time.monotonic()
    wait_for(cond, timeout, what)
    return time.monotonic() - started


def counter(r: redis.Redis, name: str, prefix: str = "dedupd") -> int:
    return int(r.hget(Keys(prefix).counters, name) or 0)


def pairs_corpus(
    n_pairs: int, seed: int, words: int = 50
) -> tuple[list[dict[str, str]], set[tuple[str, str]]]:
    """``p<i>a`` and a one-word variant ``p<i>b`` (pushed right after it): each b is a duplicate of its a."""
    rng = random.Random(seed)
    docs, expected = [], set()
    for i in range(n_pairs):
        base = text(rng, words)
        docs.append({"id": f"p{i}a", "text": base})
        docs.append({"id": f"p{i}b", "text": variant(rng, base)})
        expected.add((f"p{i}b", f"p{i}a"))
    return docs, expected


def check_exactly_once(
    r: redis.Redis,
    expected: set[tuple[str, str]],
    inputs: dict[str, str],
    prefix: str = "dedupd",
    ordered: bool = True,
) -> list[dict[str, Any]]:
    """Every expected pair alerted exactly once (one alert per input entry and per document), nothing else.

    Args:
        expected: (document, duplicate_of) pairs; with ``ordered=False`` either direction counts.
        inputs: input stream entry id -> document id of every pushed entry.
    """
    got = alerts(r, prefix)
    per_input = Counter(a["input"] for a in got)
    per_doc = Counter(a["id"] for a in got)
    assert max(per_input.values(), default=1) == 1, [k for k, v in per_input.items() if v > 1]
    assert max(per_doc.values(), default=1) == 1, [k for k, v in per_doc.items() if v > 1]
    assert all(inputs[a["input"]] == a["id"] for a in got)
    found = {(a["id"], m[0]) for a in got for m in a["matches"]}
    if ordered:
        assert found == expected
    else:
        assert {frozenset(p) for p in found} == {frozenset(p) for p in expected}
    assert len(got) == len(expected)
    return got


def check_indexed_once(r: redis.Redis, url: str, inputs: dict[str, str], prefix: str = "dedupd") -> None:
    """Every pushed document has one integer id, a record, and the record was written by its (last) entry."""
    keys = Keys(prefix)
    last_entry = {doc: entry for entry, doc in inputs.items()}  # dicts keep push order: the last entry wins
    assert r.hlen(keys.id_forward) == len(last_entry)
    assert int(r.get(keys.id_seq) or 0) == len(last_entry)  # no id was assigned twice
    settings = load_settings(redis_url=url, prefix=prefix)
    client = redis.Redis.from_url(url)
    index = RedisGateway.open(client, keys, settings.index_spec())
    docs = list(last_entry)
    nums = index.nums_of(docs)
    assert all(n > 0 for n in nums)
    records = index.load_records(nums)
    for doc, num in zip(docs, nums, strict=True):
        rec = records[num]
        assert rec is not None and rec.doc_id == doc and rec.entry_id == last_entry[doc], (doc, rec)
    client.close()


def push_corpus(r: redis.Redis, docs: list[dict[str, str]], prefix: str = "dedupd") -> dict[str, str]:
    """Pipelined XADD; returns entry id -> document id."""
    pipe = r.pipeline(transaction=False)
    for d in docs:
        pipe.xadd(Keys(prefix).docs, d)  # type: ignore[arg-type]
    ids = [x.decode() for x in pipe.execute()]
    return {e: d["id"] for e, d in zip(ids, docs, strict=True)}


class RedisProc:
    """A private redis-server on a fixed port and directory, so it can be stopped and started again."""

    def __init__(self, workdir: Path, port: int, *extra: str) -> None:
        self.workdir, self.port, self.extra = workdir, port, extra
        self.proc: subprocess.Popen[bytes] | None = None
        workdir.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, *, wait: bool = True) -> None:
        exe = shutil.which("redis-server")
        assert exe is not None
        self.proc = subprocess.Popen(
            [
                exe,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.workdir),
                "--save",
                "",
                *self.extra,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        if wait:
            self.wait_up()

    def wait_up(self, timeout: float = 15, **client_kw: Any) -> None:
        client = redis.Redis(port=self.port, **client_kw)
        deadline = time.monotonic() + timeout
        while True:
            try:
                client.ping()
                break
            except (redis.ConnectionError, redis.ResponseError):
                assert self.proc is not None
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError(f"redis-server did not start on port {self.port}") from None
                time.sleep(0.05)
        client.close()

    def shutdown(self, **client_kw: Any) -> None:
        """SHUTDOWN (the AOF is flushed and fsynced), then wait for the process."""
        with contextlib.suppress(redis.ConnectionError):  # the server closes the connection as it stops
            redis.Redis(port=self.port, **client_kw).shutdown()
        assert self.proc is not None
        self.proc.wait(timeout=30)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
