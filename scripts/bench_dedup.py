#!/usr/bin/env python3
"""``dedupd dedup FILE`` against ``dedupd serve`` + ``dedupd push FILE --wait`` on the same file, alternated.

A (one command): ``dedupd dedup FILE -o /dev/null``, which starts its own private Redis. Timed from its
launch to its exit.

B (the process pair): a fresh ``redis-server`` on a unix socket in a temporary directory (no persistence,
as dedup's private one), ``dedupd serve`` on it, then ``dedupd push FILE --wait``. Two times: ``cold``,
from launching ``serve`` (and ``push`` right after) to ``push --wait`` exiting, which is what a user waits
for; and ``warm``, from the moment ``serve`` is serving (its heartbeat key is written, its kernels loaded)
to ``push --wait`` exiting, the pair's best case, as ``scripts/bench_stream.py`` times it. Then the
daemon is stopped with SIGTERM and the server with it.

The runs alternate A B B A (``--rounds 2``, the default; ``--rounds 4``: A B B A A B B A), since the
machine's speed drifts within minutes. For each run: wall seconds, and CPU seconds of every process it
started (``RUSAGE_CHILDREN``: dedup and its redis-server; push, serve and their redis-server), a figure
other load on the machine moves less. The ratios printed are B's median time over A's: above 1.0 the one
command is faster; the bar is 0.8. The last line is one JSON object with every figure.

Similarity settings go to both through the environment (``--env DEDUPD_THRESHOLD=0.9``); by default
``word:3`` and 0.8.

``--check`` first runs ``dedupd dedup`` once more and checks what it kept against the exact truth
(``scripts/oracle.py``: every pair at or above the threshold by brute force, and the connected components
of those pairs): every component keeps at least one document, at most 0.1 % of the components keep two
or more, and every kept pair that is a true duplicate pair lies in one of those. The corpus must be JSONL
with distinct ids (the oracle reads one document per id).

Example::

    .venv/bin/python scripts/bench_dedup.py data/debian.jsonl --check
    .venv/bin/python scripts/bench_dedup.py data/debian.jsonl --rounds 4 --env DEDUPD_VERIFY=signature
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import redis
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))

import oracle  # noqa: E402


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def children_cpu() -> float:
    """CPU seconds of every child process waited for so far (and of their own waited-for children)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measured(run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    cpu0 = children_cpu()
    out = run()
    out["cpu_s"] = children_cpu() - cpu0
    return out


def run_dedup(dedupd: str, corpus: Path, env: dict[str, str]) -> dict[str, Any]:
    """A: the one command, output to /dev/null; its summary line."""
    t0 = time.perf_counter()
    proc = subprocess.run(
        [dedupd, "dedup", str(corpus), "-o", os.devnull], env=env, capture_output=True, timeout=3600
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"dedupd dedup exited with {proc.returncode}: {proc.stderr.decode()[-2000:]}")
    return {"wall_s": wall, "summary": proc.stderr.decode().strip().splitlines()[-1]}


def run_pair(dedupd: str, corpus: Path, env: dict[str, str], redis_server: str) -> dict[str, Any]:
    """B: a fresh redis-server on a unix socket, ``dedupd serve``, ``dedupd push --wait``."""
    workdir = Path(tempfile.mkdtemp(prefix="bench-dedup-"))
    sock = workdir / "redis.sock"
    server = subprocess.Popen(
        [
            redis_server,
            *("--port", "0", "--unixsocket", str(sock), "--unixsocketperm", "700"),
            *("--dir", str(workdir), "--save", "", "--appendonly", "no", "--logfile", str(workdir / "r.log")),
        ],
        stdin=subprocess.DEVNULL,
    )
    client = redis.Redis(unix_socket_path=str(sock))
    serve: subprocess.Popen[bytes] | None = None
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                client.ping()
                break
            except (redis.ConnectionError, FileNotFoundError):
                if time.monotonic() > deadline:
                    raise SystemExit("the redis-server of the pair did not start") from None
                time.sleep(0.02)
        env = {**env, "DEDUPD_REDIS_URL": f"unix://{sock}"}
        serve_log = open(workdir / "serve.log", "wb")  # noqa: SIM115 (closed below)
        t0 = time.perf_counter()
        serve = subprocess.Popen(
            [dedupd, "serve"], env=env, stdout=serve_log, stderr=subprocess.STDOUT, start_new_session=True
        )
        push = subprocess.Popen(
            [dedupd, "push", str(corpus), "--wait", "--timeout", "3600"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        ready = None
        while ready is None and push.poll() is None:
            if client.keys("dedupd:hb:*"):
                ready = time.perf_counter()
            elif serve.poll() is not None:
                raise SystemExit(f"dedupd serve exited with {serve.returncode}; see {workdir / 'serve.log'}")
            else:
                time.sleep(0.01)
        _, err = push.communicate(timeout=3600)
        done = time.perf_counter()
        if push.returncode != 0:
            raise SystemExit(f"dedupd push exited with {push.returncode}: {err.decode()[-2000:]}")
        counters = {k.decode(): int(v) for k, v in client.hgetall("dedupd:counters").items()}
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=120)
        serve_log.close()
        return {
            "wall_s": done - t0,
            "warm_s": done - (ready if ready is not None else t0),
            "processed": counters.get("processed", 0),
            "alerts": counters.get("alerts", 0),
        }
    finally:
        if serve is not None and serve.poll() is None:
            serve.kill()
            serve.wait()
        client.close()
        server.terminate()
        server.wait(timeout=60)
        shutil.rmtree(workdir, ignore_errors=True)


def check(dedupd: str, corpus: Path, env: dict[str, str]) -> dict[str, Any]:
    """One more ``dedupd dedup`` run, its kept ids checked against the exact truth (see the docstring)."""
    shingle, threshold = env.get("DEDUPD_SHINGLE", "word:3"), env.get("DEDUPD_THRESHOLD", "0.8")
    with tempfile.TemporaryDirectory(prefix="bench-dedup-check-") as tmp:
        out = Path(tmp) / "kept.jsonl"
        t0 = time.perf_counter()
        proc = subprocess.run([dedupd, "dedup", str(corpus), "-o", str(out)], env=env, capture_output=True)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(f"dedupd dedup exited with {proc.returncode}: {proc.stderr.decode()[-2000:]}")
        kept_ids = [json.loads(line)["id"] for line in out.read_text(encoding="utf-8").splitlines()]
    ids, texts = [], []
    with corpus.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                doc = json.loads(line)
                ids.append(str(doc["id"]))
                texts.append(doc["text"])
    if len(set(ids)) != len(ids):
        raise SystemExit(f"{corpus}: ids repeat; --check needs one document per id")
    log(f"check: dedup kept {len(kept_ids):,} of {len(ids):,} in {wall:.1f} s; computing the exact truth")
    t0 = time.perf_counter()
    pairs = oracle.similar_pairs(oracle.shingle_sets(texts, shingle), threshold)
    n = len(ids)
    graph = sp.coo_matrix((np.ones(len(pairs)), (pairs.i, pairs.j)), shape=(n, n))
    _, component = connected_components(graph, directed=False)
    position = {doc_id: k for k, doc_id in enumerate(ids)}
    kept = np.zeros(n, dtype=bool)
    kept[[position[doc_id] for doc_id in kept_ids]] = True
    kept_per = np.bincount(component, weights=kept, minlength=component.max() + 1).astype(np.int64)
    size = np.bincount(component)
    multi = size >= 2
    twice = kept_per >= 2
    both_kept = kept[pairs.i] & kept[pairs.j]
    outside = int(np.count_nonzero(both_kept & ~twice[component[pairs.i]]))
    figures = {
        "check_docs": n,
        "check_kept": int(kept.sum()),
        "check_true_pairs": len(pairs),
        "check_components": int(size.size),
        "check_components_of_2_or_more": int(multi.sum()),
        "check_components_keeping_none": int(np.count_nonzero(kept_per == 0)),
        "check_components_keeping_2_or_more": int(twice.sum()),
        "check_share_keeping_2_or_more": float(twice.sum() / size.size),
        "check_kept_true_pairs": int(both_kept.sum()),
        "check_kept_true_pairs_elsewhere": outside,
        "check_oracle_s": time.perf_counter() - t0,
    }
    ok = (
        figures["check_components_keeping_none"] == 0
        and figures["check_share_keeping_2_or_more"] <= 0.001
        and outside == 0
    )
    log(
        f"check: {len(pairs):,} true pairs, {size.size:,} components ({multi.sum():,} of two or more); "
        f"keeping none {figures['check_components_keeping_none']}, keeping two or more {twice.sum()} "
        f"({100 * figures['check_share_keeping_2_or_more']:.3f} %), kept true pairs {both_kept.sum()} "
        f"(outside those {outside}): {'PASS' if ok else 'FAIL'}"
    )
    figures["check_pass"] = ok
    return figures


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus", type=Path, help="JSONL (or text) file, as push and dedup read it")
    ap.add_argument(
        "--rounds", type=int, default=2, help="runs of each, alternated ABBA (default 2; 0: --check alone)"
    )
    ap.add_argument("--dedupd", default=str(REPO / ".venv" / "bin" / "dedupd"), help="the dedupd to run")
    ap.add_argument("--env", action="append", default=[], help="KEY=VALUE for both (repeatable)")
    ap.add_argument("--check", action="store_true", help="first check dedup's output against the oracle")
    args = ap.parse_args(argv)
    redis_server = shutil.which("redis-server")
    if redis_server is None:
        raise SystemExit("no redis-server on PATH")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEDUPD_")}
    env.update(dict(item.split("=", 1) for item in args.env))
    env["DEDUPD_METRICS_PORT"] = "0"
    env["DEDUPD_DATA_DIR"] = tempfile.mkdtemp(prefix="bench-dedup-data-")  # (never used: a URL is set)
    order = ["A", "B", "B", "A"] * (args.rounds // 2) + (["A", "B"] if args.rounds % 2 else [])
    runs: dict[str, list[dict[str, Any]]] = {"A": [], "B": []}
    checked = check(args.dedupd, args.corpus, env) if args.check else {}
    for which in order:
        if which == "A":
            r = measured(lambda: run_dedup(args.dedupd, args.corpus, env))
            log(f"A dedup       {r['wall_s']:7.2f} s wall, {r['cpu_s']:7.2f} s CPU   ({r['summary']})")
        else:
            r = measured(lambda: run_pair(args.dedupd, args.corpus, env, redis_server))
            log(
                f"B push+serve  {r['wall_s']:7.2f} s wall ({r['warm_s']:.2f} s from serving), "
                f"{r['cpu_s']:7.2f} s CPU   ({r['processed']:,} processed, {r['alerts']:,} alerts)"
            )
        runs[which].append(r)
    shutil.rmtree(env["DEDUPD_DATA_DIR"], ignore_errors=True)
    if not order:  # --rounds 0: the check alone
        print(json.dumps(checked))
        return 0 if checked.get("check_pass", True) else 1

    def med(which: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[which])

    figures = {
        "corpus": str(args.corpus),
        "order": "".join(order),
        "dedup_wall_s": med("A", "wall_s"),
        "pair_wall_s": med("B", "wall_s"),
        "pair_warm_s": med("B", "warm_s"),
        "dedup_cpu_s": med("A", "cpu_s"),
        "pair_cpu_s": med("B", "cpu_s"),
    }
    figures["speed_ratio_cold"] = figures["pair_wall_s"] / figures["dedup_wall_s"]
    figures["speed_ratio_warm"] = figures["pair_warm_s"] / figures["dedup_wall_s"]
    figures["cpu_ratio"] = figures["pair_cpu_s"] / figures["dedup_cpu_s"]
    figures.update(checked)
    print(
        f"medians: dedup {figures['dedup_wall_s']:.2f} s; push+serve {figures['pair_wall_s']:.2f} s "
        f"({figures['pair_warm_s']:.2f} s from serving)\n"
        f"speed of dedup relative to push+serve: {figures['speed_ratio_cold']:.2f}x "
        f"({figures['speed_ratio_warm']:.2f}x against the pair from serving); CPU: pair/dedup "
        f"{figures['cpu_ratio']:.2f}x (bar: 0.8x)"
    )
    print(json.dumps({k: round(v, 6) if isinstance(v, float) else v for k, v in figures.items()}))
    return 0 if checked.get("check_pass", True) else 1


if __name__ == "__main__":
    sys.exit(main())
