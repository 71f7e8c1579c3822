#!/usr/bin/env python3
"""What the batch script (lua.BUCKETS) costs the Redis server, measured on its own by replaying a real run.

The end-to-end CPU per document (``scripts/bench_stream.py``) mixes everything redis-server does. This
script isolates the bucket joins, the part that bounds the rate:

1. starts a fresh ``redis-server``, pushes the corpus with ``dedupd push``, and runs the daemon's own
   processing in this process (a ``dedupd.daemon.loop.Daemon``, default settings) until the stream is
   drained, recording every BUCKETS call (keys and arguments) the index sends, in order;
2. replays those calls, in the same order, on another fresh ``redis-server`` (the same states, the same
   replies) ``--rounds`` times, each on a new server, and prints per document: the server's CPU
   (``INFO cpu``), the script's time (``INFO commandstats``, ``evalsha``) and the time of each command the
   script calls.

Usage:
    .venv/bin/python scripts/replay_buckets.py [--corpus debian|python|FILE] [--rounds 2]

``--lua FILE`` replays a variant of the script instead (a Python file defining ``BUCKETS``), to try a
change of the script on the very same calls.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import redis

SCRIPTS = Path(__file__).resolve().parent
REPO = SCRIPTS.parent
for p in (str(SCRIPTS), str(REPO)):
    if p not in sys.path:
        sys.path.insert(0, p)

import corpora  # noqa: E402
import quality  # noqa: E402

from dedupd.index import buckets as buckets_module  # noqa: E402
from dedupd.index import lua  # noqa: E402


def record_calls(
    redis_server: str, corpus: Path, workdir: Path, batch_size: int = 256
) -> list[tuple[list[Any], list[Any]]]:
    """Push the corpus and drain it with the daemon's processing, keeping every BUCKETS call."""
    from dedupd.daemon.loop import Daemon
    from dedupd.settings import load_settings

    calls: list[tuple[list[Any], list[Any]]] = []
    original = buckets_module.SingleEncoding.calls

    def spy(self: Any, ops: Any, writes: Any, record_key: Any, *bounds: int) -> Any:
        groups = original(self, ops, writes, record_key, *bounds)
        calls.extend((keys, args) for keys, args, _ in groups)
        return groups

    workdir.mkdir(parents=True, exist_ok=True)
    proc, port = quality.start_redis(redis_server, workdir)
    try:
        url = f"redis://127.0.0.1:{port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("DEDUPD_")}
        env["DEDUPD_REDIS_URL"] = url
        subprocess.run(
            [quality.find_dedupd(None), "push", "--format", "jsonl", str(corpus)],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        buckets_module.SingleEncoding.calls = spy  # type: ignore[method-assign]
        try:
            settings = load_settings(
                redis_url=url, metrics_port=0, consumer="replay", block_ms=50, batch_size=batch_size
            )
            daemon = Daemon(settings, client=redis.Redis.from_url(url))
            daemon.processor.warm_up()
            while daemon.iteration() is not None:  # the only consumer: nothing read = all done
                pass
        finally:
            buckets_module.SingleEncoding.calls = original  # type: ignore[method-assign]
    finally:
        proc.terminate()
        proc.wait()
    return calls


def replay(
    redis_server: str, calls: list[tuple[list[Any], list[Any]]], script_text: str, workdir: Path
) -> dict[str, float]:
    """Run the calls on a fresh server; server CPU, script time and inner command times, in us per document."""
    docs = sum(args[0].count(b"d") for _, args in calls)
    workdir.mkdir(parents=True, exist_ok=True)
    proc, port = quality.start_redis(redis_server, workdir)
    try:
        client = redis.Redis(port=port)
        script = client.register_script(script_text)
        client.config_resetstat()
        before = quality.server_cpu(client)
        for keys, args in calls:
            script(keys=keys, args=args)
        cpu = quality.server_cpu(client) - before
        stats = client.info("commandstats")
    finally:
        proc.terminate()
        proc.wait()
    out = {
        "docs": float(docs),
        "server_cpu": cpu / docs * 1e6,
        "script": stats.get("cmdstat_evalsha", {}).get("usec", 0) / docs,
    }
    for name, st in stats.items():
        if name != "cmdstat_evalsha" and st["usec"] / docs >= 0.05:
            out[name.removeprefix("cmdstat_")] = st["usec"] / docs
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default="debian", help="debian, python or a JSONL file (default debian)")
    ap.add_argument("--rounds", type=int, default=2, help="replays, each on a fresh server (default 2)")
    ap.add_argument("--lua", help="a Python file defining BUCKETS: replay that script instead")
    ap.add_argument("--redis-server", default=shutil.which("redis-server"), help="redis-server binary")
    args = ap.parse_args()
    if not args.redis_server:
        print(
            "redis-server not found: install it (apt-get install -y redis-server) or pass --redis-server",
            file=sys.stderr,
        )
        return 2
    script_text = lua.BUCKETS
    if args.lua:
        spec = importlib.util.spec_from_file_location("variant", args.lua)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        script_text = module.BUCKETS
    ns = argparse.Namespace(corpus=args.corpus, max_docs=None, limit=None, corpus_seed=corpora.DEFAULT_SEED)
    corpus = quality.resolve_corpus(ns)
    with tempfile.TemporaryDirectory(prefix="replay-buckets-") as tmp:
        calls = record_calls(args.redis_server, corpus, Path(tmp) / "record")
        joins = sum(len(a[2]) // 4 for _, a in calls)
        print(f"{corpus.name}: {len(calls)} BUCKETS calls recorded, {joins} bucket ops")
        for r in range(args.rounds):
            got = replay(args.redis_server, calls, script_text, Path(tmp) / f"replay{r}")
            inner = ", ".join(
                f"{k} {v:.2f}"
                for k, v in sorted(got.items(), key=lambda kv: -kv[1])
                if k not in ("docs", "server_cpu", "script")
            )
            print(
                f"  round {r + 1}: {int(got['docs'])} documents, {joins / got['docs']:.1f} bucket ops each; "
                f"server CPU {got['server_cpu']:.1f} us/doc, script {got['script']:.1f} us/doc "
                f"(inside it, us/doc: {inner})"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
