#!/usr/bin/env python3
"""Retention (issue 31): an endless stream through a count window, in bounded memory, with exact truth.

The stream: N documents (``--docs``, default 1,000,000) of ``--words`` random words from a made-up
vocabulary (two of them are never near-duplicates), with planted near-duplicate pairs (a copy with one word
replaced, Jaccard about 0.9 on word:3) at known stream distances: ``--per-distance`` pairs at each of 0.1,
0.5, 0.9, 1.1, 2 and 5 times the window W (``--window``, default 100,000; those that fit in N); one text
(``kept``) re-copied every 0.8 W through the whole stream (each copy a different one-word variant, so the
original stays every copy's best match); one (``once``) copied once, 0.1 W after it.

Two fresh redis-servers, the same stream, in-process daemons (``batch_size`` 256, overlap as `dedupd serve`):
``window`` with ``max_documents = W`` and ``none`` without a window. The stream is pushed in ten chunks; each
chunk is pushed to one server, drained there (timed), then the same to the other, alternating which goes
first: the drain rate of each is N over the sum of its drain times (the windowed one's with the expiry steps
that end its chunk's backlog), the push left out. After each chunk the input stream is trimmed whole
(``XTRIM MAXLEN 0``: every entry is acknowledged by then), so ``used_memory`` is the index (and the small
alerts stream) alone. Printed: ``used_memory`` of the windowed server after 0.2 N
and after N (and their ratio: the bound of issue 31 is 1.15), the unwindowed one's, the drain rates and their
ratio (bound 0.9), and the truth: each planted pair closer than W alerted (its copy's alert names its
original), none farther; ``kept`` still indexed at the end and named by every copy's alert; ``once`` gone.
The last line is one JSON object with every figure. Exit status 0 (a measurement) unless ``--check``: then 1
when a bound or a verdict fails.

``--redis-url URL`` (``--cluster``: a Redis Cluster, e.g. from scripts/cluster-up.sh) runs both on that
server, flushed first, under two prefixes (``window`` and ``none``); on a Redis Cluster the daemons do not
overlap batches (as `dedupd serve` there). ``used_memory`` (summed over a cluster's primaries) is then shared
by the two: each one's figure is the sum of the changes measured across its own chunks (push, drain, trim), an
approximation.

Examples::

    .venv/bin/python scripts/bench_retention.py --docs 20000 --window 4000
    .venv/bin/python scripts/bench_retention.py                  # 1,000,000 through 100,000 (about an hour)
    bash scripts/cluster-up.sh 30000 /tmp/dedupd-cluster
    .venv/bin/python scripts/bench_retention.py --docs 20000 --window 4000 \
        --redis-url redis://127.0.0.1:30000 --cluster
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import string
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_p = str(Path(__file__).resolve().parent)
if _p not in sys.path:
    sys.path.insert(0, _p)

from bench_stream import FreshRedis  # noqa: E402
from quality import connect_existing, used_memory  # noqa: E402

from dedupd.daemon.loop import Daemon  # noqa: E402
from dedupd.daemon.upkeep import tune_gc  # noqa: E402
from dedupd.index.keys import Keys  # noqa: E402
from dedupd.settings import load_settings  # noqa: E402

DISTANCES = (0.1, 0.5, 0.9, 1.1, 2.0, 5.0)  # planted pairs' distances, in windows
CHUNKS = 10
K = Keys()


@dataclass
class Side:
    """One of the two runs (``window`` or ``none``): its server's client and URL, its keys, whether it
    shares the server with the other run (then its memory is measured by difference)."""

    name: str
    client: Any
    url: str
    keys: Keys
    cluster: bool = False
    shared: bool = False
    grown: int = 0  # shared: the sum of the changes of used_memory across this side's chunks
    memory: dict[str, int] = field(default_factory=dict)  # used_memory after each chunk (by documents)

    def measure(self, docs: int, before: int) -> None:
        """Note used_memory after the chunk that ended at ``docs`` documents (``before``: before it)."""
        now = used_memory(self.client)
        if self.shared:
            self.grown += now - before
            now = self.grown
        self.memory[str(docs)] = now


@contextlib.contextmanager
def sides(exe: str, url: str | None, cluster: bool, tmp: Path) -> Iterator[dict[str, Side]]:
    """The two runs: each on a fresh redis-server, or both on the Redis (Cluster) at ``url``, flushed."""
    if url is None:
        with FreshRedis(exe, tmp) as rw, FreshRedis(exe, tmp) as rn:
            yield {"window": Side("window", rw.client, rw.url, K), "none": Side("none", rn.client, rn.url, K)}
        return
    client = connect_existing(url, cluster)
    try:
        yield {
            name: Side(name, client, url, Keys(name), cluster=cluster, shared=True)
            for name in ("window", "none")
        }
    finally:
        client.close()


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def vocabulary(size: int, rng: random.Random) -> list[str]:
    return ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(4, 9))) for _ in range(size)]


def variant(text: str, rng: random.Random, vocab: list[str]) -> str:
    """``text`` with one word (not at either end) replaced."""
    words = text.split()
    words[rng.randrange(2, len(words) - 2)] = rng.choice(vocab)
    return " ".join(words)


def build_stream(
    n: int, w: int, words: int, per_distance: int, seed: int
) -> tuple[list[dict[str, str]], dict[str, Any]]:
    """The documents, and the truth: planted pairs (original, copy, distance), the kept text's copies."""
    rng = random.Random(seed)
    vocab = vocabulary(20_000, rng)
    texts = [" ".join(rng.choices(vocab, k=words)) for _ in range(n)]
    ids = [f"d{i}" for i in range(n)]
    used: set[int] = set()
    ids[0], ids[min(1, n - 1)] = "kept", "once"
    used |= {0, 1}
    copies = []
    step = max(1, int(0.8 * w))
    for at in range(step, n, step):
        texts[at], ids[at] = variant(texts[0], rng, vocab), f"kept-copy{at}"
        used.add(at)
        copies.append(f"kept-copy{at}")
    once_copy = min(n - 1, max(2, w // 10 + 1))
    texts[once_copy], ids[once_copy] = variant(texts[1], rng, vocab), "once-copy"
    used.add(once_copy)
    pairs = []
    for factor in DISTANCES:
        d = int(factor * w)
        for _ in range(per_distance):
            for _try in range(1000):
                a = rng.randrange(2, max(3, n - d))
                if a + d < n and a not in used and a + d not in used:
                    break
            else:
                continue
            used |= {a, a + d}
            ids[a], ids[a + d] = f"p{len(pairs)}a", f"p{len(pairs)}b"
            texts[a + d] = variant(texts[a], rng, vocab)
            pairs.append((ids[a], ids[a + d], d))
    docs = [{"id": i, "text": t} for i, t in zip(ids, texts, strict=True)]
    return docs, {"pairs": pairs, "copies": copies}


def drain(daemon: Daemon, total: int) -> None:
    """Iterations until the daemon has processed ``total`` documents since it started, nothing in hand."""
    while daemon.totals["processed"] < total or daemon.in_hand is not None:
        daemon.iteration(overlap=daemon.overlaps and daemon.totals["processed"] + 256 < total)
    daemon.settle()


def push(client: Any, docs: list[dict[str, str]], keys: Keys = K) -> None:
    for lo in range(0, len(docs), 5000):
        pipe = client.pipeline(transaction=False)
        for d in docs[lo : lo + 5000]:
            pipe.xadd(keys.docs, d)
        pipe.execute()


def settle_expiry(daemon: Daemon, client: Any, keys: Keys = K) -> None:
    """Expiry steps until nothing is past the window (as an idle daemon's timer would)."""
    while True:
        daemon._expire()
        if daemon.metrics.expiry_backlog._value.get() == 0 and not client.exists(keys.expiring):
            return


def verdicts(client: Any, truth: dict[str, Any], w: int, keys: Keys = K) -> dict[str, Any]:
    named: dict[str, set[str]] = {}
    for _, fields in client.xrange(keys.alerts):
        f = {k.decode(): v.decode() for k, v in fields.items()}
        named[f["id"]] = {m[0] for m in json.loads(f["matches"])}
    out: dict[str, Any] = {}
    for a, b, d in truth["pairs"]:
        got = a in named.get(b, set())
        key = f"{d / w:g}W"
        row = out.setdefault(key, {"distance": d, "pairs": 0, "alerted": 0})
        row["pairs"] += 1
        row["alerted"] += int(got)
    copies = truth["copies"]
    return {
        "pairs": out,
        "kept_indexed": bool(client.hexists(keys.id_forward, "kept")),
        "kept_named_by": sum("kept" in named.get(c, set()) for c in copies),
        "kept_copies": len(copies),
        "once_named": "once" in named.get("once-copy", set()),
        "once_indexed": bool(client.hexists(keys.id_forward, "once")),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--window", type=int, default=100_000)
    ap.add_argument("--words", type=int, default=40)
    ap.add_argument("--per-distance", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--check", action="store_true")
    ap.add_argument(
        "--redis-url", help="run both on this Redis (flushed first) instead of fresh redis-servers"
    )
    ap.add_argument("--cluster", action="store_true", help="--redis-url is a node of a Redis Cluster")
    args = ap.parse_args(argv)
    if args.cluster and not args.redis_url:
        ap.error("--cluster needs --redis-url (a node of the cluster; scripts/cluster-up.sh starts one)")
    n, w = args.docs, args.window
    exe = shutil.which("redis-server")
    if exe is None:
        log("no redis-server on PATH")
        return 2
    log(f"building {n:,} documents ...")
    docs, truth = build_stream(n, w, args.words, args.per_distance, args.seed)
    for var in [v for v in os.environ if v.startswith("DEDUPD_")]:
        del os.environ[var]
    figures: dict[str, Any] = {"docs": n, "window": w}
    if args.redis_url:
        figures["redis"] = {"url": args.redis_url, "cluster": args.cluster}
    with tempfile.TemporaryDirectory() as tmp, sides(exe, args.redis_url, args.cluster, Path(tmp)) as runs:
        daemons = {}
        for name, side in runs.items():
            extra = {"max_documents": w} if name == "window" else {}
            settings = load_settings(
                redis_url=side.url,
                redis_cluster=side.cluster,
                prefix=side.keys.prefix,
                batch_size=256,
                block_ms=1,  # (a drain's last read finds nothing: it must not wait for more)
                metrics_port=0,
                **extra,
            )
            daemons[name] = Daemon(settings, client=None if side.shared else side.client)
            daemons[name].processor.warm_up()
        tune_gc()  # (as `dedupd serve` does once its kernels are loaded)
        spent = {"window": 0.0, "none": 0.0}
        size = (n + CHUNKS - 1) // CHUNKS
        for c in range(CHUNKS):
            chunk = docs[c * size : (c + 1) * size]
            order = ["window", "none"] if c % 2 == 0 else ["none", "window"]
            for name in order:
                side, daemon = runs[name], daemons[name]
                before = used_memory(side.client) if side.shared else 0
                push(side.client, chunk, side.keys)
                started = time.monotonic()
                drain(daemon, min(n, (c + 1) * size))
                if name == "window":  # (timed: what the steps left behind is the window's work too)
                    settle_expiry(daemon, side.client, side.keys)
                spent[name] += time.monotonic() - started
                side.client.xtrim(side.keys.docs, maxlen=0, approximate=False)
                side.measure(min(n, (c + 1) * size), before)
            log(f"chunk {c + 1}/{CHUNKS}: window {spent['window']:.1f}s, none {spent['none']:.1f}s")
        at_fifth = str(min(n, 2 * size))
        memory = {name: side.memory for name, side in runs.items()}
        figures["used_memory"] = memory
        figures["window_memory_ratio"] = memory["window"][str(n)] / memory["window"][at_fifth]
        figures["none_memory_ratio"] = memory["none"][str(n)] / memory["none"][at_fifth]
        figures["rate"] = {k: n / v for k, v in spent.items()}
        figures["rate_ratio"] = figures["rate"]["window"] / figures["rate"]["none"]
        figures["indexed"] = {k: int(s.client.hlen(s.keys.id_forward)) for k, s in runs.items()}
        rw, rn = runs["window"], runs["none"]
        figures["expired"] = int(rw.client.get(rw.keys.expired_count) or 0)
        figures["truth"] = verdicts(rw.client, truth, w, rw.keys)
        figures["truth_none"] = verdicts(rn.client, truth, w, rn.keys)["pairs"]
        for d in daemons.values():
            if runs["window"].shared:
                d.client.close()
    t = figures["truth"]
    print(
        f"documents {n:,}, window {w:,}; indexed at the end: window {figures['indexed']['window']:,}, none "
        f"{figures['indexed']['none']:,}; expired {figures['expired']:,}"
    )
    shared = " (shared server: each side's changes summed)" if args.redis_url else ""
    print(
        f"used_memory{shared} (input stream trimmed), windowed: {memory['window'][at_fifth]:,} B after "
        f"{int(at_fifth):,}, "
        f"{memory['window'][str(n)]:,} B after {n:,}: {figures['window_memory_ratio']:.3f}x (bound 1.15); "
        f"without a window: {figures['none_memory_ratio']:.3f}x"
    )
    print(
        f"drain rate: window {figures['rate']['window']:,.0f} docs/s, none {figures['rate']['none']:,.0f} "
        f"docs/s: {figures['rate_ratio']:.3f}x (bound 0.9)"
    )
    fails = []
    for key, row in t["pairs"].items():
        expect = row["distance"] < w
        ok = row["alerted"] == (row["pairs"] if expect else 0)
        fails += [] if ok else [key]
        print(
            f"planted pairs at {key} ({row['distance']:,}): {row['alerted']} of {row['pairs']} alerted "
            f"({'all' if expect else 'none'} expected; without a window "
            f"{figures['truth_none'][key]['alerted']}) {'ok' if ok else 'WRONG'}"
        )
    print(
        f"kept (re-copied every 0.8 W): indexed at the end {t['kept_indexed']}, named by {t['kept_named_by']} "
        f"of {t['kept_copies']} copies; once (copied once): named {t['once_named']}, indexed at the end "
        f"{t['once_indexed']}"
    )
    verdict_ok = (
        not fails
        and t["kept_indexed"]
        and t["kept_named_by"] == t["kept_copies"]
        and t["once_named"]
        and not t["once_indexed"]
    )
    bounds_ok = figures["window_memory_ratio"] <= 1.15 and figures["rate_ratio"] >= 0.9
    print(
        f"verdicts {'PASS' if verdict_ok else 'FAIL'}; memory and rate bounds {'PASS' if bounds_ok else 'FAIL'}"
    )
    print(json.dumps(figures))
    return 1 if args.check and not (verdict_ok and bounds_ok) else 0


if __name__ == "__main__":
    sys.exit(main())
