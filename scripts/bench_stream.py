#!/usr/bin/env python3
"""End to end through a real redis-server: dedupd's daemons vs datasketch ``MinHashLSH`` on Redis.

Same corpus, same run, same Redis binary: a fresh ``redis-server`` process on a free loopback port for
every measured run (stricter than ``FLUSHALL``, after which the server keeps some allocations).
Everything a user would see is timed:

dedupd (one row per ``--consumers`` x ``--verify``)
    ``--consumers`` x ``dedupd serve`` are started and have joined the consumer group; then
    ``dedupd push --format jsonl FILE`` runs, and the clock stops when the group ``dedupd`` on
    ``dedupd:docs`` has read every pushed entry, has lag 0 and nothing pending (``XINFO GROUPS``,
    polled every 20 ms; the harness helpers are ``scripts/quality.py``'s). Defaults everywhere except
    ``DEDUPD_VERIFY`` (``exact`` is the default; ``signature`` stores no shingles) and any ``--env``.
    Redis ``used_memory`` (INFO memory) is read before the push, right after it, after the drain,
    and after deleting the input stream once the daemons have stopped, so that memory per indexed
    document is reported three ways:

    - ``total``   = after drain - before: everything in Redis, the input stream (which holds the
      texts) included;
    - ``index``   = total - what deleting ``dedupd:docs`` freed: what dedupd itself keeps (document
      records, buckets, id map, clusters, alerts, bookkeeping) -- the figure to hold against the
      1,500 B/doc target;
    - ``after drain - after push``: the naive split; it undercounts the index because the daemons
      index concurrently with the push.

    A per-key-family breakdown (``MEMORY USAGE key SAMPLES 0``) shows where the bytes are, and the CPU
    per document from the push to the drain shows where the time went: the redis-server (``INFO cpu``),
    the daemons (``/proc/PID/stat``) and the push (its resource usage, start-up included).

datasketch (the streaming equivalent, and its best case)
    ``MinHashLSH(threshold=0.8, num_perm=128, storage_config={'type': 'redis', ...})``, each
    document shingled in Python (word 3-shingles, as ``scripts/bench_signatures.py`` does),
    ``MinHash.update_batch``, then ``lsh.query(m)`` and ``lsh.insert(id, m)``: one document at a
    time, as a stream consumer has to. And the insert-only batched session
    (``with lsh.insertion_session() as s: s.insert(id, m)``), which cannot find duplicates while it
    runs. Each on a fresh Redis. Both are slow, so they run on the first ``--peer-docs`` documents
    only: compare rates and bytes per document, not totals.

``--repeat R`` runs everything R times; times are medians, memory figures those of the median run.
The last line of output is one JSON object with every figure.

Examples::

    .venv/bin/python scripts/bench_stream.py --corpus debian
    .venv/bin/python scripts/bench_stream.py --corpus both --consumers 1,2 --repeat 3
    .venv/bin/python scripts/bench_stream.py --corpus python --verify signature --peer-docs 300
    .venv/bin/python scripts/bench_stream.py --corpus data/my.jsonl --quick
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Self

import redis

SCRIPTS = Path(__file__).resolve().parent
REPO = SCRIPTS.parent
for _p in (str(SCRIPTS), str(REPO)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

# the sibling scripts, importable once their directory is on sys.path (above)
import corpora  # noqa: E402
import quality  # noqa: E402
from bench_signatures import python_shingles  # noqa: E402
from quality import SetupError, group_state, server_cpu, start_redis, tail  # noqa: E402

STREAM, ALERTS, DEAD, GROUP = quality.STREAM, quality.ALERTS, quality.DEAD, quality.GROUP
THRESHOLD, NUM_PERM = 0.8, 128
PEER_DOCS = {"debian": 5000, "python": 500}
DEFAULT_PEER_DOCS = 1000  # any other JSONL file
TARGETS = {"debian_docs_per_s": 20_000, "python_mb_per_s": 30.0, "index_bytes_per_doc": 1_500}
POLL_S = 0.02


def log(msg: str) -> None:
    print(f"[bench_stream {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ----------------------------------------------------------------------------- corpus
class Corpus:
    """The documents of one corpus (first ``--docs``), as pushed and as the peers see them."""

    def __init__(self, name: str, path: Path, lines: list[str], workdir: Path) -> None:
        self.name = name
        self.source = path
        docs = [json.loads(line) for line in lines]
        self.ids = [str(d["id"]) for d in docs]
        self.texts = [str(d.get("text", "")) for d in docs]
        self.mb = sum(len(t.encode("utf-8")) for t in self.texts) / 1e6
        self.unique_ids = len(set(self.ids))
        with open(path, encoding="utf-8") as fh:
            whole = len(lines) == sum(1 for line in fh if line.strip())
        if whole:
            self.path = path
        else:  # a prefix of the corpus: push exactly these lines
            self.path = workdir / f"{name}-{len(lines)}.jsonl"
            self.path.write_text(
                "".join(line if line.endswith("\n") else line + "\n" for line in lines), encoding="utf-8"
            )

    def __len__(self) -> int:
        return len(self.ids)


def load_corpus(name: str, docs: int | None, workdir: Path) -> Corpus:
    ns = argparse.Namespace(corpus=name, max_docs=None, limit=None, corpus_seed=corpora.DEFAULT_SEED)
    path = quality.resolve_corpus(ns)  # builds data/debian.jsonl, data/python-max6000-...jsonl if missing
    lines: list[str] = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                lines.append(line)
                if docs is not None and len(lines) >= docs:
                    break
    label = name if name in ("debian", "python") else Path(name).stem
    return Corpus(label, path, lines, workdir)


# ----------------------------------------------------------------------------- redis helpers
def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) of a running process, from /proc (0.0 where there is no /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def used_memory(client: redis.Redis) -> int:
    return int(client.info("memory")["used_memory"])


class FreshRedis:
    """A new redis-server process for one measured run (cleaner than FLUSHALL, which keeps allocations)."""

    def __init__(self, exe: str, workdir: Path) -> None:
        self.exe, self.workdir = exe, workdir

    def __enter__(self) -> Self:
        self.dir = Path(tempfile.mkdtemp(prefix="redis-", dir=self.workdir))
        self.proc, self.port = start_redis(self.exe, self.dir)
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.client = redis.Redis.from_url(self.url)
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def key_family(key: str, prefix: str = "dedupd") -> str:
    """Group dedupd's keys: per-document records and bucket shards collapse to one family each."""
    for marker, fam in (
        (f"{prefix}:doc:", f"{prefix}:doc:*"),
        (f"{prefix}:b:", f"{prefix}:b:* (buckets)"),
        (f"{prefix}:hb:", f"{prefix}:hb:*"),
    ):
        if key.startswith(marker):
            return fam
    return key


def memory_breakdown(client: redis.Redis) -> dict[str, dict[str, int]]:
    """Bytes and key count per key family (MEMORY USAGE ... SAMPLES 0: every element counted)."""
    out: dict[str, dict[str, int]] = {}
    keys = [k.decode("utf-8", "replace") for k in client.scan_iter(count=2000)]
    for i in range(0, len(keys), 2000):
        chunk = keys[i : i + 2000]
        pipe = client.pipeline(transaction=False)
        for k in chunk:
            pipe.execute_command("MEMORY", "USAGE", k, "SAMPLES", "0")
        for k, used in zip(chunk, pipe.execute(), strict=True):
            fam = out.setdefault(key_family(k), {"bytes": 0, "keys": 0})
            fam["bytes"] += int(used or 0)
            fam["keys"] += 1
    return dict(sorted(out.items(), key=lambda kv: -kv[1]["bytes"]))


# ----------------------------------------------------------------------------- dedupd
def stop_daemons(daemons: list[tuple[subprocess.Popen[bytes], Path]], timeout: float) -> list[int | None]:
    for proc, _ in daemons:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    codes: list[int | None] = []
    for proc, logf in daemons:
        try:
            codes.append(proc.wait(timeout=timeout))
        except subprocess.TimeoutExpired:
            codes.append(None)
            log(f"dedupd serve pid {proc.pid} did not exit {timeout}s after SIGTERM:\n{tail(logf)}")
            proc.kill()
            proc.wait()
    return codes


NOTEWORTHY = ("WARNING", "ERROR", "Traceback", "claimed", "failed", "retrying")


def daemon_notes(logs: list[Path], limit: int = 8) -> list[str]:
    """Log lines of the daemons that say something went differently than plain streaming."""
    out: list[str] = []
    for logf in logs:
        try:
            lines = logf.read_text(errors="replace").splitlines()
        except OSError:
            continue
        hits = [line for line in lines if any(w in line for w in NOTEWORTHY)]
        out += [f"{logf.name}: {line[:300]}" for line in hits[:limit]]
        if len(hits) > limit:
            out.append(f"{logf.name}: ... {len(hits) - limit} more")
    return out


def run_dedupd(
    corpus: Corpus,
    server: FreshRedis,
    dedupd: str,
    consumers: int,
    verify: str,
    overrides: dict[str, str],
    workdir: Path,
    timeout: float,
) -> dict[str, Any]:
    client, url = server.client, server.url
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEDUPD_")}
    env.update(
        {"DEDUPD_REDIS_URL": url, "DEDUPD_DATA_DIR": str(workdir / "embedded"), "DEDUPD_VERIFY": verify}
    )
    env.update(overrides)
    daemons: list[tuple[subprocess.Popen[bytes], Path]] = []
    try:
        for k in range(consumers):
            logf = workdir / f"serve-{corpus.name}-c{consumers}-{verify}-{time.strftime('%H%M%S')}-{k}.log"
            daemons.append(quality.spawn_serve(dedupd, env, logf))
        deadline = time.monotonic() + 60
        while (state := group_state(client)) is None or state["consumers"] < consumers:
            for proc, logf in daemons:
                if proc.poll() is not None:
                    raise SetupError(f"dedupd serve exited with {proc.returncode} at start:\n{tail(logf)}")
            if time.monotonic() > deadline:
                raise SetupError(
                    f"{consumers} consumers did not join the group within 60s: {state}\n"
                    + tail(daemons[0][1])
                )
            time.sleep(0.05)
        time.sleep(0.2)  # let the daemons settle into their blocking read
        mem_before = used_memory(client)
        redis_cpu0 = server_cpu(client)
        daemon_cpu0 = sum(process_cpu(proc.pid) for proc, _ in daemons)
        children0 = resource.getrusage(resource.RUSAGE_CHILDREN)

        push_log = workdir / f"push-{corpus.name}.log"
        t0 = time.perf_counter()
        with open(push_log, "wb") as fh:
            push = subprocess.run(
                [dedupd, "push", "--format", "jsonl", str(corpus.path)],
                check=False,
                env=env,
                stdout=fh,
                stderr=subprocess.STDOUT,
            )
        push_s = time.perf_counter() - t0
        children1 = resource.getrusage(resource.RUSAGE_CHILDREN)  # the push only: the daemons still run
        push_cpu = (children1.ru_utime + children1.ru_stime) - (children0.ru_utime + children0.ru_stime)
        mem_after_push = used_memory(client)
        if push.returncode != 0:
            raise SetupError(f"dedupd push exited with {push.returncode}:\n{tail(push_log)}")
        quality.wait_drained(client, len(corpus), daemons, timeout, POLL_S)
        total_s = time.perf_counter() - t0
        mem_after_drain = used_memory(client)
        redis_cpu = server_cpu(client) - redis_cpu0
        daemon_cpu = sum(process_cpu(proc.pid) for proc, _ in daemons) - daemon_cpu0

        logs = [logf for _, logf in daemons]
        codes = stop_daemons(daemons, 60)
        daemons = []
        notes = daemon_notes(logs)
        mem_stopped = used_memory(client)
        stream_usage = int(client.execute_command("MEMORY", "USAGE", STREAM, "SAMPLES", "0") or 0)
        client.delete(STREAM)
        mem_no_stream = used_memory(client)
        breakdown = memory_breakdown(client)
        breakdown[STREAM + " (deleted after the drain)"] = {"bytes": stream_usage, "keys": 1}
        indexed = int(client.hlen("{dedupd:ids}:fwd"))
        alerts, dead_len = int(client.xlen(ALERTS)), int(client.exists(DEAD) and client.xlen(DEAD))
        dead_codes = (
            Counter(f.get(b"error", b"?").decode() for _, f in quality.read_stream(client, DEAD))
            if dead_len
            else Counter()
        )
        raw_meta = {
            k.decode(): v.decode("utf-8", "replace") for k, v in client.hgetall("dedupd:meta").items()
        }
        try:
            meta = json.loads(raw_meta.get("spec", "{}"))
        except ValueError:
            meta = raw_meta
        freed = mem_stopped - mem_no_stream
        per = max(1, indexed)
        return {
            "consumers": consumers,
            "verify": verify,
            "overrides": overrides,
            "docs": len(corpus),
            "indexed": indexed,
            "alerts": alerts,
            "dead_letters": dict(dead_codes),
            "seconds": total_s,
            "push_s": push_s,
            # CPU seconds from the push to the drain, per document: where the time went
            "cpu_us_per_doc": {
                "redis": redis_cpu / len(corpus) * 1e6,
                "daemons": daemon_cpu / len(corpus) * 1e6,
                "push": push_cpu / len(corpus) * 1e6,
            },
            "docs_per_s": len(corpus) / total_s,
            "mb_per_s": corpus.mb / total_s,
            "mem_before": mem_before,
            "mem_after_push": mem_after_push,
            "mem_after_drain": mem_after_drain,
            "mem_stopped": mem_stopped,
            "mem_without_stream": mem_no_stream,
            "input_stream_bytes": freed,
            "input_stream_memory_usage": stream_usage,
            "total_bytes_per_doc": (mem_after_drain - mem_before) / per,
            "index_bytes_per_doc": (mem_after_drain - mem_before - freed) / per,
            "drain_minus_push_bytes_per_doc": (mem_after_drain - mem_after_push) / per,
            "breakdown": breakdown,
            "index_meta": meta,
            "daemon_exit_codes": codes,
            "daemon_log_notes": notes,
        }
    finally:
        for proc, _ in daemons:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


# ----------------------------------------------------------------------------- datasketch
def run_datasketch(corpus: Corpus, server: FreshRedis, n: int, mode: str) -> dict[str, Any]:
    from datasketch import MinHash, MinHashLSH

    client, port = server.client, server.port
    ids, texts = corpus.ids[:n], corpus.texts[:n]
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    lsh = MinHashLSH(
        threshold=THRESHOLD,
        num_perm=NUM_PERM,
        storage_config={"type": "redis", "basename": b"bench", "redis": {"host": "127.0.0.1", "port": port}},
    )
    mem_before = used_memory(client)
    lsh_s = 0.0
    with_candidates = 0
    t0 = time.perf_counter()
    if mode == "query+insert":
        for doc_id, text in zip(ids, texts, strict=True):
            m = MinHash(num_perm=NUM_PERM)
            m.update_batch([s.encode("utf-8") for s in python_shingles(text)])
            t1 = time.perf_counter()
            if lsh.query(m):
                with_candidates += 1
            lsh.insert(doc_id, m)
            lsh_s += time.perf_counter() - t1
    else:
        with lsh.insertion_session() as session:
            for doc_id, text in zip(ids, texts, strict=True):
                m = MinHash(num_perm=NUM_PERM)
                m.update_batch([s.encode("utf-8") for s in python_shingles(text)])
                t1 = time.perf_counter()
                session.insert(doc_id, m)
                lsh_s += time.perf_counter() - t1
            t1 = time.perf_counter()
        lsh_s += time.perf_counter() - t1  # the final flush of the session's buffer
    secs = time.perf_counter() - t0
    mem_after = used_memory(client)
    return {
        "mode": mode,
        "docs": n,
        "mb": mb,
        "bands": lsh.b,
        "rows": lsh.r,
        "seconds": secs,
        "docs_per_s": n / secs,
        "mb_per_s": mb / secs,
        "lsh_seconds": lsh_s,
        "lsh_only_docs_per_s": n / lsh_s if lsh_s else None,
        "docs_with_candidates": with_candidates if mode == "query+insert" else None,
        "mem_before": mem_before,
        "mem_after": mem_after,
        "keys": int(client.dbsize()),
        "bytes_per_doc": (mem_after - mem_before) / max(1, n),
    }


# ----------------------------------------------------------------------------- aggregation
def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median time, with the median and spread of the times added."""
    ordered = sorted(runs, key=lambda r: r["seconds"])
    pick = dict(ordered[(len(ordered) - 1) // 2])
    pick["runs_seconds"] = [round(r["seconds"], 3) for r in runs]
    pick["seconds"] = statistics.median(r["seconds"] for r in runs)
    pick["docs_per_s"] = pick["docs"] / pick["seconds"]
    if "mb" in pick:
        pick["mb_per_s"] = pick["mb"] / pick["seconds"]
    return pick


def rounded(obj: Any) -> Any:
    if isinstance(obj, float):
        return round(obj, 3 if abs(obj) < 100 else 1)
    if isinstance(obj, dict):
        return {k: rounded(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [rounded(v) for v in obj]
    return obj


def human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return str(n)


def bench_corpus(
    name: str, args: argparse.Namespace, redis_exe: str, dedupd: str, overrides: dict[str, str], workdir: Path
) -> dict[str, Any]:
    corpus = load_corpus(name, args.docs, workdir)
    peer_n = args.peer_docs if args.peer_docs is not None else PEER_DOCS.get(corpus.name, DEFAULT_PEER_DOCS)
    peer_n = min(peer_n, len(corpus))
    log(
        f"corpus {corpus.name}: {len(corpus)} documents ({corpus.unique_ids} distinct ids), {corpus.mb:.1f} MB "
        f"from {corpus.source}; datasketch on the first {peer_n}"
    )
    runs = measure_runs(corpus, args, redis_exe, dedupd, overrides, workdir, peer_n)
    rows = {label: median_run(rs) for label, rs in runs.items()}
    print_table(corpus, args, overrides, peer_n, rows)
    print_details(rows)
    ratios = peer_ratios(rows)
    targets = check_targets(corpus, rows)
    return {
        "docs": len(corpus),
        "mb": corpus.mb,
        "source": str(corpus.source),
        "peer_docs": peer_n,
        "repeat": args.repeat,
        "overrides": overrides,
        "rows": rows,
        "ratios": ratios,
        "targets_met": targets,
    }


def measure_runs(
    corpus: Corpus,
    args: argparse.Namespace,
    redis_exe: str,
    dedupd: str,
    overrides: dict[str, str],
    workdir: Path,
    peer_n: int,
) -> dict[str, list[dict[str, Any]]]:
    """Every configuration of dedupd and every datasketch mode, ``--repeat`` times, each on a fresh
    redis-server: the runs by label."""
    configs = [(c, v) for c in args.consumers for v in args.verify]
    runs: dict[str, list[dict[str, Any]]] = {}
    peers = ["query+insert", "session"] if peer_n and not args.no_peers else []
    for rep in range(args.repeat):
        for c, v in configs:
            label = f"dedupd c={c} verify={v}"
            with FreshRedis(redis_exe, workdir) as server:
                r = run_dedupd(corpus, server, dedupd, c, v, overrides, workdir, args.timeout)
            log(
                f"  [{rep + 1}/{args.repeat}] {label}: {r['seconds']:.2f}s (push {r['push_s']:.2f}s), "
                f"{r['docs_per_s']:.0f} docs/s, {r['mb_per_s']:.2f} MB/s, index {r['index_bytes_per_doc']:.0f} B/doc, "
                f"{r['alerts']} alerts, exit {r['daemon_exit_codes']}"
            )
            for note in r["daemon_log_notes"]:
                log(f"    daemon log: {note}")
            runs.setdefault(label, []).append(r)
        for mode in peers:
            label = f"datasketch {mode}"
            with FreshRedis(redis_exe, workdir) as server:
                r = run_datasketch(corpus, server, peer_n, mode)
            log(
                f"  [{rep + 1}/{args.repeat}] {label} ({peer_n} docs, b={r['bands']} r={r['rows']}): "
                f"{r['seconds']:.2f}s, {r['docs_per_s']:.0f} docs/s, {r['bytes_per_doc']:.0f} B/doc"
            )
            runs.setdefault(label, []).append(r)
    return runs


def print_table(
    corpus: Corpus,
    args: argparse.Namespace,
    overrides: dict[str, str],
    peer_n: int,
    rows: dict[str, dict[str, Any]],
) -> None:
    """One line per configuration: documents, seconds, rates and bytes per document."""
    print(
        f"\n== {corpus.name}: {len(corpus)} docs, {corpus.mb:.1f} MB; word:3, num_perm {NUM_PERM}, "
        f"threshold {THRESHOLD}; medians of {args.repeat}; datasketch on the first {peer_n} docs "
        f"(compare rates, not totals)" + (f"; overrides {overrides}" if overrides else "")
    )
    print(
        f"  {'':34s} {'docs':>6s} {'seconds':>8s} {'docs/s':>9s} {'MB/s':>7s} {'B/doc total':>11s} "
        f"{'B/doc index':>11s} {'drain-push':>10s}"
    )
    for label, r in rows.items():
        if label.startswith("dedupd"):
            print(
                f"  {label:34s} {r['docs']:6d} {r['seconds']:8.2f} {r['docs_per_s']:9.0f} {r['mb_per_s']:7.2f} "
                f"{r['total_bytes_per_doc']:11.0f} {r['index_bytes_per_doc']:11.0f} "
                f"{r['drain_minus_push_bytes_per_doc']:10.0f}"
            )
        else:
            name = f"{label} (b={r['bands']} r={r['rows']})"
            print(
                f"  {name:34s} {r['docs']:6d} {r['seconds']:8.2f} "
                f"{r['docs_per_s']:9.0f} {r['mb_per_s']:7.2f} {r['bytes_per_doc']:11.0f} {r['bytes_per_doc']:11.0f} "
                f"{'':>10s}"
            )


def print_details(rows: dict[str, dict[str, Any]]) -> None:
    """dedupd's memory by key family, index and CPU; datasketch's Redis time and keys."""
    for label, r in rows.items():
        if label.startswith("dedupd"):
            parts = ", ".join(
                f"{fam} {human(v['bytes'])}/{v['keys']} keys" for fam, v in list(r["breakdown"].items())[:6]
            )
            print(
                f"  {label} memory by key: {parts}; input stream freed {human(r['input_stream_bytes'])} "
                f"(MEMORY USAGE {human(r['input_stream_memory_usage'])})"
            )
            print(
                f"  {label} index {r['index_meta'].get('bands', '?')}x{r['index_meta'].get('rows', '?')}, "
                f"{r['indexed']} indexed, {r['alerts']} alerts, dead letters {r['dead_letters'] or 0}, "
                f"push alone {r['push_s']:.2f}s, runs {r['runs_seconds']}"
            )
            cpu = r.get("cpu_us_per_doc")
            if cpu:
                print(
                    f"  {label} CPU per document, push to drain: redis-server {cpu['redis']:.0f} us, "
                    f"daemons {cpu['daemons']:.0f} us, push {cpu['push']:.0f} us"
                )
        else:
            extra = (
                f", {r['docs_with_candidates']} docs had candidates"
                if r["docs_with_candidates"] is not None
                else ""
            )
            print(
                f"  {label}: Redis calls alone {r['lsh_seconds']:.2f}s ({r['lsh_only_docs_per_s'] or 0:.0f} docs/s), "
                f"{r['keys']} keys{extra}, runs {r['runs_seconds']}"
            )


def peer_ratios(rows: dict[str, dict[str, Any]]) -> dict[str, float]:
    """dedupd's rate over each peer's, and each peer's index bytes per document over dedupd's (printed)."""
    ratios: dict[str, float] = {}
    for ours, r in rows.items():
        if not ours.startswith("dedupd"):
            continue
        for peer, p in rows.items():
            if peer.startswith("datasketch"):
                ratios[f"{ours} / {peer} docs/s"] = r["docs_per_s"] / p["docs_per_s"]
                ratios[f"{peer} / {ours} index B/doc"] = p["bytes_per_doc"] / max(
                    1e-9, r["index_bytes_per_doc"]
                )
    if ratios:
        print("  ratios:")
        for k, v in ratios.items():
            print(f"    {k:70s} {v:8.1f}x")
    return ratios


def check_targets(corpus: Corpus, rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Which of issue 3's targets each dedupd configuration meets (printed)."""
    targets: dict[str, Any] = {}
    for label, r in rows.items():
        if not label.startswith("dedupd"):
            continue
        t: dict[str, Any] = {
            "index_bytes_per_doc": r["index_bytes_per_doc"] <= TARGETS["index_bytes_per_doc"]
        }
        if corpus.name == "debian":
            t["docs_per_s"] = r["docs_per_s"] >= TARGETS["debian_docs_per_s"]
        if corpus.name == "python":
            t["mb_per_s"] = r["mb_per_s"] >= TARGETS["python_mb_per_s"]
        targets[label] = t
    print(
        f"  targets (issue 3: >= {TARGETS['debian_docs_per_s']} docs/s on debian, >= {TARGETS['python_mb_per_s']:g} "
        f"MB/s on python, <= {TARGETS['index_bytes_per_doc']} B/doc index; met = True):"
    )
    for label, t in targets.items():
        print(f"    {label:34s} " + "  ".join(f"{k}={v}" for k, v in t.items()))
    return targets


# ----------------------------------------------------------------------------- main
def git_commit(dedupd: str | None = None) -> str:
    """The commit the daemons run (with ``+dirty`` when dedupd/ has uncommitted changes): that of the git
    checkout holding the ``dedupd`` executable (``--dedupd``, e.g. another worktree's ``.venv/bin/dedupd``),
    this one's when it is None or in no checkout; 'unknown' when git cannot tell."""
    repo = _checkout_of(Path(dedupd)) if dedupd else None
    repo = repo or REPO
    try:
        head = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],
            check=False,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--", "dedupd"],
            check=False,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (head or "unknown") + ("+dirty" if dirty else "")


def _checkout_of(path: Path) -> Path | None:
    """The nearest directory above ``path`` holding a ``.git`` (a checkout, or a worktree's file), if any."""
    for parent in Path(os.path.abspath(path)).parents:
        if (parent / ".git").exists():
            return parent
    return None


def int_list(text: str) -> list[int]:
    out = [int(x) for x in text.split(",") if x.strip()]
    if not out or min(out) < 1:
        raise argparse.ArgumentTypeError("expects positive integers, e.g. 1 or 1,2")
    return out


def verify_list(text: str) -> list[str]:
    out = [x.strip() for x in text.split(",") if x.strip()]
    if not out or any(x not in ("exact", "signature") for x in out):
        raise argparse.ArgumentTypeError("expects exact, signature or exact,signature")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--corpus",
        default="debian",
        help='debian, python, both, or a JSONL file of {"id", "text"} lines (default %(default)s)',
    )
    ap.add_argument("--docs", type=int, default=None, help="first N documents for dedupd (default: all)")
    ap.add_argument(
        "--peer-docs",
        type=int,
        default=None,
        help=f"first N documents for datasketch (default {PEER_DOCS['debian']} debian, "
        f"{PEER_DOCS['python']} python, {DEFAULT_PEER_DOCS} other; 0 skips it)",
    )
    ap.add_argument(
        "--consumers",
        type=int_list,
        default=[1],
        metavar="N[,N...]",
        help="dedupd serve processes; a list gives one row each (default 1)",
    )
    ap.add_argument(
        "--verify",
        type=verify_list,
        default=["exact", "signature"],
        metavar="MODE[,MODE]",
        help="DEDUPD_VERIFY of the dedupd rows (default exact,signature: exact is dedupd's default)",
    )
    ap.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="DEDUPD_K=V",
        help="extra daemon setting for every dedupd row (repeatable)",
    )
    ap.add_argument("--repeat", type=int, default=1, help="runs of everything; medians reported (default 1)")
    ap.add_argument("--no-peers", action="store_true", help="skip datasketch")
    ap.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: 200 documents, datasketch on 50, one repeat (unless given explicitly)",
    )
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory (daemon and push logs)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds to wait for a drain")
    ap.add_argument("--dedupd", default=None, help="dedupd executable (default .venv/bin/dedupd, then PATH)")
    ap.add_argument("--redis-server", default=None, help="redis-server executable (default from PATH)")
    args = ap.parse_args(argv)
    if args.quick:
        args.docs = args.docs if args.docs is not None else 200
        args.peer_docs = args.peer_docs if args.peer_docs is not None else 50
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    names = ["debian", "python"] if args.corpus == "both" else [args.corpus]

    workdir = Path(tempfile.mkdtemp(prefix="dedupd-bench-stream-"))
    report: dict[str, Any] = {}
    code = 0
    try:
        overrides = quality.parse_env(args.env)
        dedupd = quality.find_dedupd(args.dedupd)
        redis_exe = args.redis_server or shutil.which("redis-server")
        if not redis_exe:
            raise SetupError(
                "redis-server is not installed (apt-get install redis-server) or pass --redis-server"
            )
        with FreshRedis(redis_exe, workdir) as server:
            version = server.client.info("server")["redis_version"]
        log(
            f"dedupd at commit {git_commit(args.dedupd)}; redis-server {version}, a fresh one on a free loopback port for every measured run "
            f"(--save '' --appendonly no); {os.cpu_count()} CPUs, "
            f"load average {os.getloadavg()[0]:.2f}"
        )
        report = {
            "commit": git_commit(args.dedupd),
            "redis_version": version,
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_average_start": os.getloadavg()[0],
            "targets": TARGETS,
            "corpora": {},
        }
        for name in names:
            label = name if name in ("debian", "python") else Path(name).stem
            report["corpora"][label] = bench_corpus(name, args, redis_exe, dedupd, overrides, workdir)
        report["load_average_end"] = os.getloadavg()[0]
    except SetupError as exc:
        log(f"ERROR: {exc}")
        report = {"ok": False, "error": str(exc).splitlines()[0]}
        code = 2
    finally:
        if code == 0 and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            log(f"logs kept in {workdir}")
    print(json.dumps(rounded(report)), flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
