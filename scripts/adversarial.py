#!/usr/bin/env python3
"""Adversarial input for the memory bounds (issue 14): entries with huge junk fields, texts that expand under
NFKC, long append chains, and realistic multi-megabyte documents with a near-duplicate each.

With ``--serve`` it pushes the entries, starts a real ``dedupd serve`` on the URL, waits until the group has
processed them all, stops the daemon and prints one JSON line: the daemon's peak resident memory (VmHWM),
the dead letters by code, the alerts and the bytes held by the dead-letter stream. Fixed seed, same entries
every run.

    .venv/bin/python scripts/adversarial.py --url redis://127.0.0.1:6379/0 --serve
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import redis

WORDS = [f"w{i}" for i in range(20_000)]
FDFA = "\ufdfa"  # one code point, 3 UTF-8 bytes, NFKC: 18 characters, 4 words
MB = 1_000_000


def realistic(rng: random.Random, n_bytes: int) -> str:
    """A text of about ``n_bytes`` of words drawn from a 20,000-word vocabulary, in lines of 12 words."""
    words: list[str] = []
    size = 0
    while size < n_bytes:
        w = rng.choice(WORDS)
        words.append(w)
        size += len(w) + 1
    lines = [" ".join(words[i : i + 12]) for i in range(0, len(words), 12)]
    return "\n".join(lines)


def near_copy(rng: random.Random, text: str, edits: int = 20) -> str:
    """``text`` with ``edits`` words replaced."""
    words = text.split(" ")
    for _ in range(edits):
        words[rng.randrange(len(words))] = "edited"
    return " ".join(words)


def entries(
    seed: int, junk: int, junk_mb: int, nfkc: int, chains: int, appends: int, large: int, large_mb: float
) -> Iterator[dict[str, Any]]:
    """The adversarial entries, in push order."""
    rng = random.Random(seed)
    for i in range(junk):  # a short valid document with one enormous extra field
        yield {"id": f"junk{i}", "text": realistic(rng, 200), "junk": rng.randbytes(junk_mb * MB)}
    for i in range(nfkc):  # 1 MB of U+FDFA: 333,333 code points, 1.3 million words after NFKC
        yield {"id": f"nfkc{i}", "text": FDFA * (MB // 3 - 1)}
    for i in range(chains):  # an append chain of 0.99 MB chunks
        yield {"id": f"chain{i}", "text": realistic(rng, 990_000)}
        for _ in range(appends):
            yield {"id": f"chain{i}", "op": "append", "text": realistic(rng, 990_000)}
    for i in range(large):  # a realistic multi-megabyte document and a near-duplicate of it
        base = realistic(rng, int(large_mb * MB))
        yield {"id": f"large{i}a", "text": base}
        yield {"id": f"large{i}b", "text": near_copy(rng, base)}


def push(client: redis.Redis, stream: str, docs: Iterator[dict[str, Any]]) -> int:
    n = 0
    for d in docs:
        client.xadd(stream, d)
        n += 1
    return n


def peak_rss_mb(pid: int) -> float:
    """VmHWM of a running process, in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM")


def processed(client: redis.Redis, stream: str, group: str) -> bool:
    """Whether the group has read and acknowledged every entry of the stream."""
    try:
        info = next(g for g in client.xinfo_groups(stream) if g["name"].decode() == group)
    except (StopIteration, redis.ResponseError):
        return False
    return bool(info["lag"] == 0 and info["pending"] == 0)


def serve_and_measure(
    url: str, prefix: str, docs: Iterator[dict[str, Any]], timeout: float
) -> dict[str, Any]:
    """Push, start ``dedupd serve`` (so that its first read could take everything at once), wait until
    processed, stop it; what happened."""
    client = redis.Redis.from_url(url)
    stream = f"{prefix}:docs"
    n = push(client, stream, docs)
    env = {**os.environ, "DEDUPD_REDIS_URL": url, "DEDUPD_PREFIX": prefix, "DEDUPD_METRICS_PORT": "0"}
    log = tempfile.TemporaryFile()  # noqa: SIM115 (read after the process ends)
    proc = subprocess.Popen(
        [sys.executable, "-m", "dedupd", "serve"], env=env, stdout=subprocess.DEVNULL, stderr=log
    )
    try:
        started = time.monotonic()
        while not processed(client, stream, "dedupd"):
            if proc.poll() is not None:
                raise RuntimeError(f"dedupd serve exited with {proc.returncode}")
            if time.monotonic() - started > timeout:
                raise RuntimeError(f"not processed within {timeout:.0f}s")
            time.sleep(0.2)
        peak = peak_rss_mb(proc.pid)
        seconds = time.monotonic() - started
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        log.seek(0)
        err = log.read()
    dead = Counter(f[b"error"].decode() for _, f in client.xrange(f"{prefix}:dead"))
    return {
        "entries": n,
        "peak_rss_mb": round(peak, 1),
        "seconds": round(seconds, 1),
        "dead": dict(sorted(dead.items())),
        "alerts": client.xlen(f"{prefix}:alerts"),
        "dead_stream_bytes": client.memory_usage(f"{prefix}:dead") or 0,
        "exit": proc.returncode,
        "stderr_tail": err.decode(errors="replace").splitlines()[-3:],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default=os.environ.get("DEDUPD_REDIS_URL", "redis://127.0.0.1:6379/0"))
    p.add_argument("--prefix", default="dedupd")
    p.add_argument("--seed", type=int, default=14)
    p.add_argument("--junk", type=int, default=8, help="entries with a junk field")
    p.add_argument("--junk-mb", type=int, default=30, help="size of the junk field, MB")
    p.add_argument("--nfkc", type=int, default=4, help="1 MB texts of U+FDFA")
    p.add_argument("--chains", type=int, default=1, help="append chains")
    p.add_argument("--appends", type=int, default=16, help="appends of 0.99 MB per chain")
    p.add_argument("--large", type=int, default=2, help="realistic large documents (each with a near-copy)")
    p.add_argument("--large-mb", type=float, default=2.0)
    p.add_argument("--serve", action="store_true", help="run dedupd serve and print its peak memory")
    p.add_argument("--timeout", type=float, default=600)
    a = p.parse_args(argv)
    docs = entries(a.seed, a.junk, a.junk_mb, a.nfkc, a.chains, a.appends, a.large, a.large_mb)
    if a.serve:
        print(json.dumps(serve_and_measure(a.url, a.prefix, docs, a.timeout)))
    else:
        print(json.dumps({"pushed": push(redis.Redis.from_url(a.url), f"{a.prefix}:docs", docs)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
