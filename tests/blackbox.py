"""Black-box helpers: real `python -m dedupd ...` processes and only dedupd's public Redis interface.

Nothing here imports dedupd or reads its internal keys. A test talks to dedupd through:

- the input stream ``dedupd:docs`` and its consumer group ``dedupd`` (XADD, XINFO, XPENDING, XREADGROUP),
- the alerts stream ``dedupd:alerts``,
- the CLI (``serve``, ``rebuild``, ``stats --json``) with ``DEDUPD_*`` variables, exit codes and stderr.

The state of a document is inspected with probes: a probe document pushed through the stream gets an alert that
names every indexed document it matches (an exact copy of a document's text matches it with similarity 1.0).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import string
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import redis

DEDUPD = [sys.executable, "-m", "dedupd"]
DOCS = "dedupd:docs"
ALERTS = "dedupd:alerts"
GROUP = "dedupd"


# ----- texts -----
def random_text(rng: random.Random, words: int = 40) -> str:
    """``words`` random pseudo-words (5-9 letters): two such texts share no 3-shingle (or 2-shingle)."""
    return " ".join("".join(rng.choices(string.ascii_lowercase, k=rng.randint(5, 9))) for _ in range(words))


def corpus(rng: random.Random, n: int, tag: str, words: int = 40) -> list[dict[str, str]]:
    """``n`` unrelated documents ``<tag><i>``."""
    return [{"id": f"{tag}{i}", "text": random_text(rng, words)} for i in range(n)]


# ----- environment and processes -----
def dedupd_env(url: str, **extra: str) -> dict[str, str]:
    """The environment of a dedupd process: the outer one (already stripped of DEDUPD_* by conftest) plus the
    test settings and ``extra``."""
    env = {
        **os.environ,
        "DEDUPD_REDIS_URL": url,
        "DEDUPD_METRICS_PORT": "0",
        "DEDUPD_BLOCK_MS": "100",
        "DEDUPD_CLAIM_IDLE_MS": "1000",
    }
    env.update(extra)
    return env


def run_cli(url: str, *args: str, timeout: float = 60, **env: str) -> subprocess.CompletedProcess[str]:
    """Run one ``dedupd`` command to completion (bounded by ``timeout``)."""
    return subprocess.run(
        [*DEDUPD, *args], env=dedupd_env(url, **env), capture_output=True, text=True, timeout=timeout
    )


class Proc:
    """A background ``dedupd`` process whose stderr goes to a file (no pipe to fill up)."""

    def __init__(self, url: str, log: Path, *args: str, **env: str) -> None:
        self.log = log
        self.argv = [*DEDUPD, *args]
        with open(log, "ab") as err:
            self.proc = subprocess.Popen(
                self.argv, env=dedupd_env(url, **env), stdout=subprocess.DEVNULL, stderr=err
            )

    @property
    def stderr(self) -> str:
        return self.log.read_text(errors="replace")

    def running(self) -> bool:
        return self.proc.poll() is None

    def wait(self, timeout: float) -> int:
        """Exit status; raises AssertionError (after killing it) when it does not exit within ``timeout``."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"{' '.join(self.argv[2:])} did not exit within {timeout:.0f}s; stderr:\n"
                f"{self.stderr[-3000:]}"
            ) from None

    def stop(self, timeout: float = 20) -> int:
        """SIGTERM, then wait (SIGKILL if it does not exit in time)."""
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return -9

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)

    def wait_log(self, needle: str, timeout: float) -> None:
        """Wait until ``needle`` appears in the process's stderr."""
        wait_for(lambda: needle in self.stderr or not self.running(), timeout, f"{needle!r} in the log")
        assert needle in self.stderr, (
            f"exited ({self.proc.returncode}) before logging {needle!r}:\n{self.stderr[-3000:]}"
        )


class Procs:
    """Every background process a test starts; all of them are killed when the test ends."""

    def __init__(self, url: str, tmp: Path) -> None:
        self.url, self.tmp, self.all = url, tmp, []  # type: ignore[var-annotated]
        self._n = 0

    def start(self, *args: str, **env: str) -> Proc:
        self._n += 1
        name = "-".join(a.lstrip("-") for a in args[:2] if a) or "dedupd"
        p = Proc(self.url, self.tmp / f"{self._n:02d}-{name.replace('/', '_')}.log", *args, **env)
        self.all.append(p)
        return p

    def serve(self, *args: str, ready: bool = True, **env: str) -> Proc:
        """``dedupd serve``; with ``ready``, wait until it has started serving."""
        p = self.start("serve", *args, **env)
        if ready:
            p.wait_log("serving", 60)
        return p

    def close(self) -> None:
        for p in self.all:
            p.stop(timeout=10)


def procs_fixture(redis_url: str, tmp_path: Path) -> Iterator[Procs]:
    """Body of a test module's ``procs`` fixture: starts background dedupd processes and kills whatever is
    still running at the end of the test."""
    ps = Procs(redis_url, tmp_path)
    try:
        yield ps
    finally:
        ps.close()


# ----- waiting -----
def wait_for(cond: Callable[[], bool], timeout: float, what: str, poll: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(poll)


def group_info(r: redis.Redis) -> dict[str, Any] | None:
    """The consumer group's pending count and whether every entry of the stream has been delivered."""
    try:
        groups = r.xinfo_groups(DOCS)
        stream = r.xinfo_stream(DOCS)
    except redis.ResponseError:
        return None
    for g in groups:
        if g["name"] in (b"dedupd", "dedupd"):
            return {
                "pending": int(g["pending"]),
                "delivered_all": g["last-delivered-id"] == stream["last-generated-id"],
            }
    return None


def drained(r: redis.Redis) -> bool:
    g = group_info(r)
    return g is not None and g["delivered_all"] and g["pending"] == 0


def wait_drained(r: redis.Redis, timeout: float, *watch: Proc) -> None:
    """Wait until every entry was delivered and acknowledged; fails early when a watched process died."""

    def cond() -> bool:
        for p in watch:
            if not p.running():
                raise AssertionError(
                    f"{' '.join(p.argv[2:])} exited ({p.proc.returncode}) before the stream "
                    f"drained:\n{p.stderr[-3000:]}"
                )
        return drained(r)

    wait_for(cond, timeout, "the consumer group to drain (no lag, nothing pending)", poll=0.1)


# ----- streams -----
def push(r: redis.Redis, fields: dict[str, str]) -> str:
    return r.xadd(DOCS, fields).decode()  # type: ignore[arg-type, union-attr]


def push_many(r: redis.Redis, docs: list[dict[str, str]], chunk: int = 1000) -> list[str]:
    ids: list[str] = []
    for i in range(0, len(docs), chunk):
        pipe = r.pipeline(transaction=False)
        for d in docs[i : i + chunk]:
            pipe.xadd(DOCS, d)  # type: ignore[arg-type]
        ids += [x.decode() for x in pipe.execute()]
    return ids


def alerts(r: redis.Redis) -> list[dict[str, Any]]:
    out = []
    for _, fields in r.xrange(ALERTS):
        a = {k.decode(): v.decode() for k, v in fields.items()}
        a["matches"] = json.loads(a.get("matches", "[]"))
        out.append(a)
    return out


def matches_of(r: redis.Redis, entry_id: str) -> dict[str, float]:
    """Document id -> similarity of every match in the alert(s) of one input entry ({} when no alert)."""
    out: dict[str, float] = {}
    for a in alerts(r):
        if a.get("input") == entry_id:
            for doc, sim in a["matches"]:
                out[doc] = max(out.get(doc, 0.0), float(sim))
            if a.get("duplicate_of"):
                out.setdefault(a["duplicate_of"], float(a.get("similarity", 0.0)))
    return out


class Probes:
    """Push probe documents, then (after a drain) read what each of them matched."""

    def __init__(self, r: redis.Redis) -> None:
        self.r = r
        self.entries: dict[str, str] = {}
        self._n = 0

    def push(self, label: str, text: str) -> None:
        self._n += 1
        self.entries[label] = push(self.r, {"id": f"probe-{self._n}-{label}", "text": text})

    def matches(self, label: str) -> dict[str, float]:
        return matches_of(self.r, self.entries[label])


# ----- CLI outputs -----
def stats_json(url: str, **env: str) -> dict[str, Any]:
    res = run_cli(url, "stats", "--json", "--interval", "0", timeout=30, **env)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def rebuild_progress_fields(stats: dict[str, Any]) -> dict[str, Any]:
    """Every field of ``dedupd stats --json`` (any depth) that speaks of a rebuild or of a next generation."""
    found: dict[str, Any] = {}

    def walk(obj: Any, path: str) -> None:
        if isinstance(obj, dict):
            for k, v in obj.items():
                p = f"{path}.{k}" if path else str(k)
                if "rebuild" in str(k).lower() or str(k).lower().startswith("next"):
                    found[p] = v
                else:
                    walk(v, p)

    walk(stats, "")
    return found


def assert_no_rebuild_in_progress(url: str) -> dict[str, Any]:
    """``dedupd stats --json`` says that no rebuild is in progress; returns the stats."""
    stats = stats_json(url)
    fields = rebuild_progress_fields(stats)
    assert fields, (
        "`dedupd stats --json` does not say whether a rebuild is in progress (no field naming a "
        f"rebuild or a next generation): {sorted(stats)}"
    )
    in_progress = {k: v for k, v in fields.items() if v not in (None, False, 0, "", [], {}, "none", "idle")}
    assert not in_progress, f"`dedupd stats --json` shows a rebuild in progress: {in_progress}"
    return stats


def assert_clean_error(res: subprocess.CompletedProcess[str] | str, what: str) -> None:
    """A refusal: no traceback, and a one-line error message."""
    err = res if isinstance(res, str) else res.stderr
    assert "Traceback" not in err, f"{what} printed a traceback:\n{err[-3000:]}"
    lines = [ln for ln in err.splitlines() if "error" in ln.lower()]
    assert lines, f"{what} printed no error message:\n{err[-3000:]}"


def wait_rebuild_begun(rebuild: Proc, daemon: Proc, settle: float = 1.0) -> None:
    """Wait until ``dedupd rebuild`` has recorded its target (it says "rebuilding ..."), then ``settle`` seconds
    more (or until the daemon logs that it writes into the new generation too), so that the daemon writes each
    new document into both generations and the rebuild is filling the new one."""
    wait_for(lambda: "rebuilding" in rebuild.stderr or not rebuild.running(), 30, "the rebuild to begin")
    deadline = time.monotonic() + settle
    while time.monotonic() < deadline and "writing into it too" not in daemon.stderr:
        time.sleep(0.05)
    time.sleep(0.2)
