#!/usr/bin/env python3
"""Measure dedupd's detection quality end to end, the way a user would, against an exact oracle.

What it does:

1. Builds (or reuses) a real corpus with ``scripts/corpora.py``: ``debian`` (package descriptions from
   the apt lists) or ``python`` (the installed Pythons' source files, capped by ``--max-docs``), or any
   JSONL FILE of ``{"id", "text"}`` lines.
2. Computes the truth with ``scripts/oracle.py``: every pair with exact Jaccard >= threshold on the
   package's own shingles (brute force, sparse doc x shingle product).
3. Starts a real ``redis-server`` on a free loopback port in a temporary directory
   (``--save '' --appendonly no``) and ``--consumers`` x ``dedupd serve`` with
   ``DEDUPD_REDIS_URL`` pointing at it, ``DEDUPD_SHINGLE=word:3``, ``DEDUPD_THRESHOLD=0.8`` and the
   defaults for everything else (inherited ``DEDUPD_*`` variables are dropped; ``--env K=V`` adds
   overrides, which the oracle follows for the shingle and the threshold).
4. Runs ``dedupd push --format jsonl FILE`` and waits until the consumer group ``dedupd`` on
   ``dedupd:docs`` holds every pushed entry, has lag 0 and nothing pending (``XINFO GROUPS``; when
   ``lag`` is unknown, the group's ``last-delivered-id`` is compared with the stream's last id).
5. Reads all of ``dedupd:alerts``; the found pairs are {alert id, each id in ``matches``}, unordered.
6. Prints precision, recall, counts, samples of false negatives and false positives with their
   exact Jaccard, the dead letters, throughput, and checks that every daemon exits 0 on SIGTERM.
   Beside pair precision and recall, cluster figures (``scripts/cluster_metrics.py``): the connected
   components of the alert graph (each alert's id joined to every id in its matches) against those of
   the truth graph, over all documents: co-membership precision and recall (pairs of documents in the
   same component in both / in the alert graph's, / in the truth's), and the share of the documents
   with at least one true duplicate that some alert names (as its id or in its matches).
   The last line of output is one JSON object with all the figures.

With ``--shuffle SEED`` the same corpus is pushed in another order: a fixed-seed permutation of its
documents (the lines of one id stay together and in their order, so that the last text of a repeated id is
still the one that counts), written to a temporary file removed after the run. The truth does not depend
on the order; bounded work must not either.

Exit status: 0 when recall >= --min-recall, precision >= --min-precision and every daemon exited 0
after SIGTERM; 1 otherwise; 2 when the run could not be set up.

Examples::

    .venv/bin/python scripts/quality.py --corpus debian
    .venv/bin/python scripts/quality.py --corpus python                 # 5460 docs, ~1 min
    .venv/bin/python scripts/quality.py --corpus python --max-docs 0    # all 28478 files, ~3.5 min
    .venv/bin/python scripts/quality.py --corpus debian --env DEDUPD_SEED=16 --env DEDUPD_BANDS=21 --env DEDUPD_ROWS=6
    .venv/bin/python scripts/quality.py --corpus python --consumers 2 --env DEDUPD_BATCH_SIZE=512
    .venv/bin/python scripts/quality.py --corpus data/my.jsonl --keep
    .venv/bin/python scripts/quality.py --corpus debian --shuffle 1        # the same documents, another order
    .venv/bin/python scripts/quality.py --corpus debian --redis-url redis://127.0.0.1:30000 --cluster
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import redis

SCRIPTS = Path(__file__).resolve().parent
REPO = SCRIPTS.parent
for p in (str(SCRIPTS), str(REPO)):
    if p not in sys.path:
        sys.path.insert(0, p)

import cluster_metrics  # noqa: E402
import corpora  # noqa: E402
import oracle  # noqa: E402

from dedupd.daemon.monitor import group_state as monitor_group_state  # noqa: E402
from dedupd.index.keys import Keys  # noqa: E402

STREAM = "dedupd:docs"
ALERTS = "dedupd:alerts"
DEAD = "dedupd:dead"
GROUP = "dedupd"
DEFAULT_PYTHON_MAX_DOCS = 6000


class SetupError(Exception):
    """The run could not be set up (exit status 2)."""


def log(msg: str) -> None:
    print(f"[quality {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ----------------------------------------------------------------------------- processes
def find_dedupd(explicit: str | None) -> str:
    for cand in (explicit, str(REPO / ".venv" / "bin" / "dedupd"), shutil.which("dedupd")):
        if cand and os.access(cand, os.X_OK):
            return cand
    raise SetupError("no dedupd executable: install the package (.venv/bin/dedupd) or pass --dedupd")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_redis(exe: str, workdir: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
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
            "--logfile",
            str(workdir / "redis.log"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = redis.Redis(port=port)
    deadline = time.monotonic() + 15
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise SetupError(
                    f"redis-server did not start on port {port} (see {workdir / 'redis.log'})"
                ) from None
            time.sleep(0.05)
    client.close()
    return proc, port


def connect_existing(url: str, cluster: bool) -> Any:
    """A client of an existing Redis (or Redis Cluster: every primary) at ``url``, flushed."""
    try:
        if cluster:
            import redis.cluster

            client: Any = redis.cluster.RedisCluster.from_url(url)
            client.flushall(target_nodes=redis.cluster.RedisCluster.PRIMARIES)
        else:
            client = redis.Redis.from_url(url)
            client.flushdb()
    except redis.RedisError as exc:
        raise SetupError(f"cannot use the Redis at {url}: {exc}") from None
    return client


def server_cpu(client: redis.Redis) -> float:
    """CPU seconds the redis-server has used (INFO cpu, user + system, main thread and others)."""
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def used_memory(client: Any) -> int:
    """INFO used_memory, summed over the primaries of a cluster."""
    import redis.cluster

    if isinstance(client, redis.cluster.RedisCluster):
        infos = client.info("memory", target_nodes=redis.cluster.RedisCluster.PRIMARIES)
        return sum(int(v["used_memory"]) for v in infos.values() if isinstance(v, dict))
    return int(client.info("memory")["used_memory"])


def tail(path: Path, n: int = 30) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(lines[-n:])


# ----------------------------------------------------------------------------- stream state
def group_state(client: redis.Redis) -> dict[str, Any] | None:
    """lag, pending, consumers, stream length and entries added, or None if the group does not exist yet."""
    return monitor_group_state(client, Keys())


def wait_drained(
    client: redis.Redis,
    expected: int,
    daemons: list[tuple[subprocess.Popen[bytes], Path]],
    timeout: float,
    poll: float,
    report: Callable[[dict[str, Any] | None], None] | None = None,
) -> None:
    """Wait until the group has read ``expected`` entries, has lag 0 and nothing pending.

    Raises:
        SetupError: when a daemon exits meanwhile (with its log's tail), or after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    last_report = time.monotonic()
    while True:
        state = group_state(client)
        if state and state["added"] >= expected and state["lag"] == 0 and state["pending"] == 0:
            return
        for proc, logf in daemons:
            if proc.poll() is not None:
                raise SetupError(f"dedupd serve died with {proc.returncode} while processing:\n{tail(logf)}")
        if time.monotonic() > deadline:
            raise SetupError(f"not drained {timeout}s after the push started: {state}")
        if report is not None and time.monotonic() - last_report > 15:
            report(state)
            last_report = time.monotonic()
        time.sleep(poll)


def read_stream(client: redis.Redis, key: str, page: int = 5000) -> list[tuple[bytes, dict[bytes, bytes]]]:
    out: list[tuple[bytes, dict[bytes, bytes]]] = []
    start = "-"
    while True:
        chunk = client.xrange(key, min=start, max="+", count=page)
        if not chunk:
            return out
        out.extend(chunk)
        last = chunk[-1][0].decode()
        ms, seq = last.split("-")
        start = f"{ms}-{int(seq) + 1}"
        if len(chunk) < page:
            return out


# ----------------------------------------------------------------------------- analysis
def distinct_set_pairs(pairs: list[tuple[int, int]], sets: list[Any]) -> int:
    """How many different (set, set) combinations the pairs are: identical documents count once."""
    key = {k: hash(sets[k].tobytes()) for pair in pairs for k in pair}
    return len({tuple(sorted((key[i], key[j]))) for i, j in pairs})


def summarize_misses(
    fn_pairs: list[tuple[int, int]],
    truth_j: dict[tuple[int, int], tuple[int, int]],
    sets: list[Any],
    threshold: str,
) -> dict[str, Any]:
    """False negatives bucketed by exact Jaccard, and how many distinct set pairs they are."""
    t = oracle.threshold_fraction(threshold)
    edges = [float(t), 0.85, 0.9, 0.95, 1.0]
    buckets: Counter[str] = Counter()
    for p in fn_pairs:
        inter, union = truth_j[p]
        if inter * t.denominator == union * t.numerator:
            buckets[f"={float(t):g}"] += 1
            continue
        jac = inter / union
        for lo, hi in pairwise(edges):
            if lo <= jac < hi:
                buckets[f"[{lo:g},{hi:g})"] += 1
                break
        else:
            buckets["=1"] += 1
    return {
        "by_jaccard": dict(sorted(buckets.items())),
        "distinct_set_pairs": distinct_set_pairs(fn_pairs, sets),
    }


# ----------------------------------------------------------------------------- main
def parse_env(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.startswith("DEDUPD_"):
            raise SetupError(f"--env expects DEDUPD_NAME=VALUE, got {item!r}")
        out[key] = value
    return out


def resolve_corpus(args: argparse.Namespace) -> Path:
    if args.corpus in ("debian", "python"):
        max_docs = args.max_docs
        if args.corpus == "python" and max_docs is None:
            max_docs = DEFAULT_PYTHON_MAX_DOCS
        if max_docs == 0:
            max_docs = None
        return corpora.ensure(args.corpus, max_docs=max_docs, limit=args.limit, seed=args.corpus_seed)
    path = Path(args.corpus)
    if not path.is_file():
        raise SetupError(f"--corpus is neither debian, python nor an existing file: {args.corpus}")
    return path


def line_id(line: str) -> str | None:
    """The id of a JSONL corpus line, or None when it has none (not a JSON object with an id)."""
    try:
        doc = json.loads(line)
    except json.JSONDecodeError:
        return None
    return str(doc["id"]) if isinstance(doc, dict) and "id" in doc else None


def shuffled_copy(path: Path, seed: int) -> Path:
    """A temporary copy of a JSONL corpus with its documents in a fixed-seed random order: the lines of one id
    together, in their order (a line without an id is a document of its own), blank lines left out. The
    caller removes the file."""
    groups: dict[object, list[str]] = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f):
            if line.strip():
                key = line_id(line)
                groups.setdefault(("line", n) if key is None else key, []).append(line.rstrip("\n") + "\n")
    order = list(groups.values())
    random.Random(seed).shuffle(order)
    fd, name = tempfile.mkstemp(prefix="dedupd-quality-shuffled-", suffix=".jsonl")
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.writelines(line for lines in order for line in lines)
    return Path(name)


Daemons = list[tuple[subprocess.Popen[bytes], Path]]
Pair = tuple[int, int]


@dataclass
class Truth:
    """The corpus and the oracle's pairs."""

    corpus_path: Path
    ids: list[str]
    n_lines: int  # non-blank lines of the corpus file (a repeated id is one document)
    text_mb: float
    sets: list[Any]  # each document's sorted distinct shingle hashes
    pairs: dict[Pair, tuple[int, int]]  # (i, j) -> (intersection, union), for every pair with J >= threshold
    oracle_s: float

    @property
    def pos(self) -> dict[str, int]:
        return {doc_id: i for i, doc_id in enumerate(self.ids)}


@dataclass
class Found:
    """What the alerts say."""

    pairs: dict[Pair, float]  # (i, j) -> reported similarity
    anomalies: Counter[str]
    verify_modes: Counter[str]
    named: set[int]  # the documents some alert names, as its id or in its matches


@dataclass
class Comparison:
    """Found pairs against the truth."""

    tp: int
    fp_pairs: list[Pair]
    fn_pairs: list[Pair]
    precision: float
    recall: float
    sim_err: float  # max |reported - exact| over the true positives


def daemon_env(args: argparse.Namespace, overrides: dict[str, str]) -> dict[str, str]:
    """The daemons' environment: this one without its DEDUPD_* variables, the shingle and threshold, and
    the --env overrides."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEDUPD_")}
    env.update({"DEDUPD_SHINGLE": args.shingle, "DEDUPD_THRESHOLD": str(args.threshold)})
    env.update(overrides)
    return env


def compute_truth(args: argparse.Namespace, shingle: str, threshold: str) -> Truth:
    """Read (or build) the corpus and compute every pair with exact J >= threshold."""
    corpus_path = resolve_corpus(args)
    ids, texts = oracle.read_jsonl(corpus_path)
    with open(corpus_path, encoding="utf-8") as f:
        n_lines = sum(1 for line in f if line.strip())
    text_mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    log(
        f"corpus {corpus_path}: {len(ids)} documents, {text_mb:.1f} MB of text"
        + (f" ({n_lines - len(ids)} repeated ids: the last text counts)" if n_lines != len(ids) else "")
    )
    t0 = time.perf_counter()
    sets = oracle.shingle_sets(texts, shingle)
    truth = oracle.similar_pairs(sets, threshold)
    oracle_s = time.perf_counter() - t0
    truth_j = {
        (int(i), int(j)): (int(a), int(u))
        for i, j, a, u in zip(truth.i, truth.j, truth.inter, truth.union, strict=True)
    }
    log(
        f"oracle ({shingle}, J >= {threshold}): {len(truth_j)} true pairs among "
        f"{sum(1 for s in sets if len(s))} non-empty shingle sets, {oracle_s:.1f}s"
    )
    return Truth(corpus_path, ids, n_lines, text_mb, sets, truth_j, oracle_s)


def start_servers(
    args: argparse.Namespace, env: dict[str, str], redis_exe: str, workdir: Path
) -> tuple[Any, str, subprocess.Popen[bytes] | None]:
    """The Redis to use (an existing one, flushed, or a new redis-server in ``workdir``): its client, its
    URL and the server process we started (None for an existing one). Points ``env`` at it."""
    redis_proc: subprocess.Popen[bytes] | None = None
    if args.redis_url:
        url = args.redis_url
        client = connect_existing(url, args.cluster)
        log(f"existing {'Redis Cluster' if args.cluster else 'Redis'} at {url}: flushed")
        if args.cluster:
            env["DEDUPD_REDIS_CLUSTER"] = "1"
    else:
        redis_proc, port = start_redis(redis_exe, workdir)
        url = f"redis://127.0.0.1:{port}/0"
        client = redis.Redis.from_url(url)
        log(f"redis-server on {url} (dir {workdir})")
    env["DEDUPD_REDIS_URL"] = url
    env.setdefault("DEDUPD_DATA_DIR", str(workdir / "embedded"))
    shown_env = {k: v for k, v in env.items() if k.startswith("DEDUPD_") and k != "DEDUPD_DATA_DIR"}
    log("daemon environment: " + " ".join(f"{k}={v}" for k, v in sorted(shown_env.items())))
    return client, url, redis_proc


def spawn_serve(dedupd: str, env: dict[str, str], logf: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """One ``dedupd serve`` logging to ``logf``, in its own session (a signal to this script's process group
    does not reach it)."""
    with open(logf, "wb") as fh:
        proc = subprocess.Popen(
            [dedupd, "serve"], env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True
        )
    return proc, logf


def start_daemons(
    args: argparse.Namespace, dedupd: str, env: dict[str, str], workdir: Path, client: Any, daemons: Daemons
) -> dict[str, Any]:
    """Start ``--consumers`` x ``dedupd serve`` (appended to ``daemons`` as they start) and wait for the
    consumer group; returns its state then."""
    for k in range(args.consumers):
        daemons.append(spawn_serve(dedupd, env, workdir / f"serve-{k}.log"))
    deadline = time.monotonic() + 60
    while (state := group_state(client)) is None or state["consumers"] < 1:
        for proc, logf in daemons:
            if proc.poll() is not None:
                raise SetupError(f"dedupd serve exited with {proc.returncode} at start:\n{tail(logf)}")
        if time.monotonic() > deadline:
            raise SetupError("the consumer group did not appear within 60s:\n" + tail(daemons[0][1]))
        time.sleep(0.1)
    log(f"{args.consumers} x dedupd serve up; pushing")
    return state


def push_and_drain(
    args: argparse.Namespace,
    dedupd: str,
    env: dict[str, str],
    workdir: Path,
    truth: Truth,
    client: Any,
    daemons: Daemons,
    push_path: Path,
) -> tuple[float, float]:
    """``dedupd push`` the corpus (``push_path``: its file, or a shuffled copy of it) and wait until the group
    has processed it: (push seconds, seconds from the start of the push to drained)."""
    t_push = time.perf_counter()
    push_log = workdir / "push.log"
    with open(push_log, "wb") as fh:
        push = subprocess.run(
            [dedupd, "push", "--format", "jsonl", str(push_path)],
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
        )
    push_s = time.perf_counter() - t_push
    if push.returncode != 0:
        raise SetupError(f"dedupd push exited with {push.returncode}:\n{tail(push_log)}")
    log(f"pushed in {push_s:.1f}s; waiting for lag 0 and nothing pending")
    wait_drained(
        client,
        truth.n_lines,
        daemons,
        args.timeout,
        0.1,
        report=lambda state: log(f"  {state}, alerts so far {client.xlen(ALERTS)}"),
    )
    return push_s, time.perf_counter() - t_push


def found_pairs(raw_alerts: list[tuple[bytes, dict[bytes, bytes]]], pos: dict[str, int]) -> Found:
    """The pairs the alerts report (unordered: (i, j) with i < j), and what is wrong with the alerts."""
    found: dict[Pair, float] = {}
    anomalies: Counter[str] = Counter()
    alerts_per_id: Counter[str] = Counter()
    verify_modes: Counter[str] = Counter()
    named: set[int] = set()
    for _entry_id, fields in raw_alerts:
        f = {k.decode(): v.decode("utf-8", "replace") for k, v in fields.items()}
        a = f.get("id")
        if a is None or "matches" not in f:
            anomalies["alert without id or matches"] += 1
            continue
        alerts_per_id[a] += 1
        verify_modes[f.get("verify", "?")] += 1
        matches = json.loads(f["matches"])
        named.update(pos[x] for x in [a, *(m[0] for m in matches)] if x in pos)
        if not matches:
            anomalies["alert with empty matches"] += 1
        elif f.get("duplicate_of") != matches[0][0]:
            anomalies["duplicate_of is not the first match"] += 1
        for m_id, sim in matches:
            if m_id == a:
                anomalies["document matched with itself"] += 1
                continue
            if a not in pos or m_id not in pos:
                anomalies["id not in the corpus"] += 1
                continue
            i, j = sorted((pos[a], pos[m_id]))
            found[(i, j)] = float(sim)
    twice = sum(1 for c in alerts_per_id.values() if c > 1)
    if twice:
        anomalies["documents alerted more than once"] = twice
    return Found(found, anomalies, verify_modes, named)


def compare(found: dict[Pair, float], truth_j: dict[Pair, tuple[int, int]]) -> Comparison:
    """Precision, recall and the similarity error of the found pairs."""
    tp = len(found.keys() & truth_j.keys())
    sim_err = max(
        (abs(found[p] - truth_j[p][0] / truth_j[p][1]) for p in found.keys() & truth_j.keys()),
        default=0.0,
    )
    return Comparison(
        tp=tp,
        fp_pairs=sorted(found.keys() - truth_j.keys()),
        fn_pairs=sorted(truth_j.keys() - found.keys()),
        precision=tp / len(found) if found else 1.0,
        recall=tp / len(truth_j) if truth_j else 1.0,
        sim_err=sim_err,
    )


@dataclass
class Clusters:
    """The components of the alert graph against those of the truth graph, over all documents."""

    co: cluster_metrics.CoMembership
    named: cluster_metrics.NamedShare
    found_sizes: list[int]  # components with two documents or more, largest first
    truth_sizes: list[int]


def compare_clusters(n_docs: int, found: Found, truth_j: dict[Pair, tuple[int, int]]) -> Clusters:
    """Co-membership precision and recall of the alert graph's components (each alert's id joined to every
    id of its matches) against the exact-truth graph's, and the share of documents with a true duplicate
    that some alert names."""
    found_labels = cluster_metrics.component_labels(range(n_docs), found.pairs)
    truth_labels = cluster_metrics.component_labels(range(n_docs), truth_j)
    return Clusters(
        co=cluster_metrics.comembership(found_labels, truth_labels),
        named=cluster_metrics.named_share(truth_j, found.named),
        found_sizes=[s for s in cluster_metrics.component_sizes(found_labels) if s > 1],
        truth_sizes=[s for s in cluster_metrics.component_sizes(truth_labels) if s > 1],
    )


def print_clusters(clusters: Clusters) -> None:
    """The cluster figures, printed right after pair precision and recall."""
    co, named = clusters.co, clusters.named
    print(
        f"cluster precision {co.precision:.5f}   (co-membership: {co.together_both} of the "
        f"{co.together_found} pairs together in an alert component are together in a true one)"
    )
    print(
        f"cluster recall    {co.recall:.5f}   ({co.together_both} of the {co.together_truth} pairs together "
        f"in a true component)"
    )
    for name, sizes in (("alert graph", clusters.found_sizes), ("truth graph", clusters.truth_sizes)):
        print(
            f"components        {name}: {len(sizes)} with 2+ documents ({sum(sizes)} documents), "
            f"largest {sizes[0] if sizes else 0}"
        )
    print(
        f"docs named        {named.share:.5f}   ({named.named} of the {named.with_true_duplicate} documents "
        f"with a true duplicate are named by some alert)"
    )


def print_summary(
    args: argparse.Namespace,
    truth: Truth,
    found: Found,
    cmp: Comparison,
    n_alerts: int,
    dead_codes: Counter[str],
    settings: tuple[str, str, dict[str, str]],
    timing: tuple[float, float],
    used_mem: int,
    clusters: Clusters,
) -> None:
    """The figures of the run, for people."""
    shingle, threshold, overrides = settings
    push_s, total_s = timing
    ids, text_mb = truth.ids, truth.text_mb
    print()
    print(
        f"corpus            {truth.corpus_path}  ({len(ids)} docs, {text_mb:.1f} MB)"
        + (f", shuffled with seed {args.shuffle}" if args.shuffle is not None else ", in its own order")
    )
    print(
        f"settings          {shingle}, threshold {threshold}, consumers {args.consumers}, "
        f"verify {dict(found.verify_modes) or '-'}" + (f", overrides {overrides}" if overrides else "")
    )
    print(f"true pairs        {len(truth.pairs)}   (exact J >= {threshold})")
    print(f"found pairs       {len(found.pairs)}   from {n_alerts} alerts")
    print(f"true positives    {cmp.tp}")
    print(f"false positives   {len(cmp.fp_pairs)}")
    print(f"false negatives   {len(cmp.fn_pairs)}")
    print(f"precision         {cmp.precision:.5f}")
    print(f"recall            {cmp.recall:.5f}")
    print_clusters(clusters)
    print(f"similarity error  max |reported - exact| over true positives = {cmp.sim_err:.5f}")
    print(f"dead letters      {sum(dead_codes.values())} {dict(dead_codes) if dead_codes else ''}")
    print(
        f"throughput        {len(ids) / total_s:.0f} docs/s, {text_mb / total_s:.2f} MB/s "
        f"({total_s:.1f}s push-to-drained, push alone {push_s:.1f}s)"
    )
    print(
        f"redis memory      {used_mem / 1e6:.1f} MB used ({used_mem / max(1, len(ids)):.0f} B per document)"
    )
    if found.anomalies:
        print(f"anomalies         {dict(found.anomalies)}")


def show_pairs(
    title: str,
    pairs: list[Pair],
    reported: bool,
    n_show: int,
    truth: Truth,
    found: dict[Pair, float],
    dead_ids: set[str],
) -> None:
    """The first ``n_show`` pairs with their exact Jaccard (and the reported similarity)."""
    if not pairs:
        return
    sets, ids = truth.sets, truth.ids
    print(f"\n{title} ({len(pairs)}; showing {min(n_show, len(pairs))}):")
    for i, j in pairs[:n_show]:
        inter = len(set(sets[i].tolist()) & set(sets[j].tolist()))
        union = len(sets[i]) + len(sets[j]) - inter
        extra = f"  reported {found[(i, j)]:.4f}" if reported else ""
        deadmark = "  [dead-lettered]" if ids[i] in dead_ids or ids[j] in dead_ids else ""
        print(
            f"  J={inter}/{union}={inter / max(1, union):.4f}{extra}  |A|={len(sets[i])} "
            f"|B|={len(sets[j])}{deadmark}\n    {ids[i]!r}\n    {ids[j]!r}"
        )


def write_pair_files(
    args: argparse.Namespace, truth: Truth, found: dict[Pair, float], cmp: Comparison
) -> None:
    """--pairs: the found pairs; --dump: the false negatives and positives."""
    ids = truth.ids
    if args.pairs:
        args.pairs.write_text("".join(f"{json.dumps(sorted((ids[i], ids[j])))}\n" for i, j in sorted(found)))
        log(f"{len(found)} found pairs written to {args.pairs}")
    if args.dump:
        dump = {
            "false_negatives": [
                [ids[i], ids[j], truth.pairs[(i, j)][0], truth.pairs[(i, j)][1]] for i, j in cmp.fn_pairs
            ],
            "false_positives": [[ids[i], ids[j], found[(i, j)]] for i, j in cmp.fp_pairs],
        }
        args.dump.write_text(json.dumps(dump, indent=1))
        log(f"false negatives/positives written to {args.dump}")


def stop_daemons(daemons: Daemons, stop_timeout: float) -> list[int | None]:
    """SIGTERM every daemon and wait for it (None: killed after ``stop_timeout`` seconds); their exit codes."""
    codes: list[int | None] = []
    for proc, _ in daemons:
        proc.send_signal(signal.SIGTERM)
    for proc, logf in daemons:
        try:
            codes.append(proc.wait(timeout=stop_timeout))
        except subprocess.TimeoutExpired:
            codes.append(None)
            log(f"dedupd serve pid {proc.pid} did not exit {stop_timeout}s after SIGTERM:\n{tail(logf)}")
            proc.kill()
            proc.wait()
    return codes


def clean_up(
    args: argparse.Namespace,
    daemons: Daemons,
    client: Any,
    redis_proc: subprocess.Popen[bytes] | None,
    workdir: Path,
    url: str,
) -> None:
    """Kill what still runs, stop the redis-server we started (unless --keep), remove the work directory."""
    for proc, _ in daemons:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    client.close()
    if redis_proc is None:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    elif args.keep:
        log(f"--keep: redis-server still running on {url} (pid {redis_proc.pid}); logs in {workdir}")
    else:
        redis_proc.terminate()
        try:
            redis_proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            redis_proc.kill()
            redis_proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)


def run(args: argparse.Namespace) -> int:
    overrides = parse_env(args.env)
    env = daemon_env(args, overrides)
    shingle, threshold = env["DEDUPD_SHINGLE"], env["DEDUPD_THRESHOLD"]
    dedupd = find_dedupd(args.dedupd)
    redis_exe = args.redis_server or shutil.which("redis-server")
    if not redis_exe:
        raise SetupError(
            "redis-server is not installed (apt-get install redis-server) or pass --redis-server"
        )

    # --- corpus and truth
    truth = compute_truth(args, shingle, threshold)
    ids = truth.ids

    # --- servers
    workdir = Path(tempfile.mkdtemp(prefix="dedupd-quality-"))
    client, url, redis_proc = start_servers(args, env, redis_exe, workdir)
    daemons: Daemons = []
    result: dict[str, Any] = {}
    push_path = truth.corpus_path
    try:
        if args.shuffle is not None:
            push_path = shuffled_copy(truth.corpus_path, args.shuffle)
            log(f"pushing the documents in the order of seed {args.shuffle} (a temporary copy: {push_path})")
        state = start_daemons(args, dedupd, env, workdir, client, daemons)

        # --- push and wait
        push_s, total_s = push_and_drain(args, dedupd, env, workdir, truth, client, daemons, push_path)
        state = group_state(client) or state
        log(
            f"drained: {state['added']} entries in {total_s:.1f}s from the start of the push "
            f"({len(ids) / total_s:.0f} docs/s, {truth.text_mb / total_s:.2f} MB/s)"
        )
        mem = {"used_memory": used_memory(client)}

        # --- alerts -> pairs
        raw_alerts = read_stream(client, ALERTS)
        dead = read_stream(client, DEAD)
        found = found_pairs(raw_alerts, truth.pos)

        # --- compare
        cmp = compare(found.pairs, truth.pairs)
        clusters = compare_clusters(len(ids), found, truth.pairs)
        dead_codes = Counter(f.get(b"error", b"?").decode() for _, f in dead)
        dead_ids = {f.get(b"id", b"").decode("utf-8", "replace") for _, f in dead}
        print_summary(
            args,
            truth,
            found,
            cmp,
            len(raw_alerts),
            dead_codes,
            (shingle, threshold, overrides),
            (push_s, total_s),
            mem["used_memory"],
            clusters,
        )
        show_pairs("false negatives", cmp.fn_pairs, False, args.show, truth, found.pairs, dead_ids)
        show_pairs("false positives", cmp.fp_pairs, True, args.show, truth, found.pairs, dead_ids)
        fn_dead = sum(1 for i, j in cmp.fn_pairs if ids[i] in dead_ids or ids[j] in dead_ids)
        fn_summary = summarize_misses(cmp.fn_pairs, truth.pairs, truth.sets, threshold)
        if cmp.fn_pairs:
            print(f"\nfalse negatives by exact J: {fn_summary['by_jaccard']}")
            print(
                f"false negatives collapse to {fn_summary['distinct_set_pairs']} distinct pairs of shingle sets "
                f"(documents with identical sets miss together); true pairs: "
                f"{distinct_set_pairs(list(truth.pairs), truth.sets)} distinct"
            )
        write_pair_files(args, truth, found.pairs, cmp)

        # --- stop the daemons
        print()
        codes = stop_daemons(daemons, args.stop_timeout)
        after = group_state(client) or {}
        clean_exit = all(c == 0 for c in codes)
        log(f"daemons exit codes after SIGTERM: {codes}; pending after stop: {after.get('pending')}")
        for (_proc, logf), c in zip(daemons, codes, strict=True):
            if c != 0:
                print(f"--- {logf} ---\n{tail(logf)}")

        ok = (
            cmp.recall >= args.min_recall
            and cmp.precision >= args.min_precision
            and clean_exit
            and after.get("pending") == 0
        )
        result = {
            "corpus": str(truth.corpus_path),
            "shuffle": args.shuffle,
            "docs": len(ids),
            "text_mb": round(truth.text_mb, 2),
            "shingle": shingle,
            "threshold": float(threshold),
            "consumers": args.consumers,
            "overrides": overrides,
            "verify": dict(found.verify_modes),
            "true_pairs": len(truth.pairs),
            "found_pairs": len(found.pairs),
            "tp": cmp.tp,
            "fp": len(cmp.fp_pairs),
            "fn": len(cmp.fn_pairs),
            "fn_involving_dead_letters": fn_dead,
            "fn_by_jaccard": fn_summary["by_jaccard"],
            "fn_distinct_set_pairs": fn_summary["distinct_set_pairs"],
            "precision": round(cmp.precision, 6),
            "recall": round(cmp.recall, 6),
            "cluster_precision": round(clusters.co.precision, 6),
            "cluster_recall": round(clusters.co.recall, 6),
            "pairs_together_both": clusters.co.together_both,
            "pairs_together_alerts": clusters.co.together_found,
            "pairs_together_truth": clusters.co.together_truth,
            "alert_components": len(clusters.found_sizes),
            "truth_components": len(clusters.truth_sizes),
            "largest_alert_component": clusters.found_sizes[0] if clusters.found_sizes else 0,
            "largest_truth_component": clusters.truth_sizes[0] if clusters.truth_sizes else 0,
            "docs_with_true_duplicate": clusters.named.with_true_duplicate,
            "docs_with_true_duplicate_named": clusters.named.named,
            "named_share": round(clusters.named.share, 6),
            "max_similarity_error": round(cmp.sim_err, 6),
            "alerts": len(raw_alerts),
            "dead_letters": dict(dead_codes),
            "anomalies": dict(found.anomalies),
            "docs_per_s": round(len(ids) / total_s, 1),
            "mb_per_s": round(truth.text_mb / total_s, 3),
            "push_to_drained_s": round(total_s, 2),
            "push_s": round(push_s, 2),
            "oracle_s": round(truth.oracle_s, 2),
            "redis_used_memory_mb": round(mem["used_memory"] / 1e6, 2),
            "daemon_exit_codes": codes,
            "pending_after_stop": after.get("pending"),
            "min_recall": args.min_recall,
            "min_precision": args.min_precision,
            "ok": ok,
        }
        verdict = "PASS" if ok else "FAIL"
        log(
            f"{verdict}: recall {cmp.recall:.4f} (min {args.min_recall}), precision {cmp.precision:.4f} "
            f"(min {args.min_precision}), daemons exited {codes}"
        )
    finally:
        if push_path != truth.corpus_path:
            push_path.unlink(missing_ok=True)
        clean_up(args, daemons, client, redis_proc, workdir, url)
    print(json.dumps(result), flush=True)
    return 0 if result["ok"] else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--corpus",
        default="debian",
        help='debian, python, or a JSONL file of {"id", "text"} lines (default %(default)s)',
    )
    ap.add_argument(
        "--max-docs",
        type=int,
        default=None,
        help=f"cap the built corpus with a fixed-seed sample; python defaults to "
        f"{DEFAULT_PYTHON_MAX_DOCS} (0 = the whole corpus), debian to all",
    )
    ap.add_argument("--limit", type=int, default=None, help="keep only the first N documents (smoke runs)")
    ap.add_argument(
        "--shuffle",
        type=int,
        default=None,
        metavar="SEED",
        help="push the documents in a fixed-seed random order (the lines of one id kept together, in "
        "order), from a temporary copy removed after; the truth is the same (default: the file's order)",
    )
    ap.add_argument(
        "--corpus-seed",
        type=int,
        default=corpora.DEFAULT_SEED,
        help="corpus sampling seed (the MinHash seed is the daemon's: --env DEDUPD_SEED=N)",
    )
    ap.add_argument(
        "--shingle", default="word:3", help="DEDUPD_SHINGLE for daemon and oracle (default %(default)s)"
    )
    ap.add_argument(
        "--threshold", default="0.8", help="DEDUPD_THRESHOLD for daemon and oracle (default %(default)s)"
    )
    ap.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="DEDUPD_K=V",
        help="extra daemon setting (repeatable), e.g. --env DEDUPD_NUM_PERM=256",
    )
    ap.add_argument("--consumers", type=int, default=1, help="dedupd serve processes (default %(default)s)")
    ap.add_argument(
        "--min-recall", type=float, default=0.99, help="fail below this recall (default %(default)s)"
    )
    ap.add_argument(
        "--min-precision", type=float, default=0.99, help="fail below this precision (default %(default)s)"
    )
    ap.add_argument("--timeout", type=float, default=1800, help="seconds to wait for the daemons to drain")
    ap.add_argument(
        "--stop-timeout", type=float, default=60, help="seconds a daemon gets to exit after SIGTERM"
    )
    ap.add_argument(
        "--show", type=int, default=5, help="false negatives/positives to print (default %(default)s)"
    )
    ap.add_argument(
        "--dump",
        type=Path,
        default=None,
        help="write every false negative/positive (ids, exact J or reported similarity) to this JSON file",
    )
    ap.add_argument(
        "--pairs",
        type=Path,
        default=None,
        help="write every found pair (two ids, sorted; one JSON array per line, sorted) to this file, "
        "e.g. to compare a Redis Cluster run with a single-Redis run",
    )
    ap.add_argument(
        "--keep",
        action="store_true",
        help="leave redis-server running and keep the temp dir (logs) for inspection",
    )
    ap.add_argument("--dedupd", default=None, help="dedupd executable (default .venv/bin/dedupd, then PATH)")
    ap.add_argument("--redis-server", default=None, help="redis-server executable (default from PATH)")
    ap.add_argument(
        "--redis-url",
        default=None,
        help="use this existing Redis instead of starting one (it is FLUSHED first: every primary "
        "with --cluster)",
    )
    ap.add_argument(
        "--cluster",
        action="store_true",
        help="--redis-url is a Redis Cluster node (sets DEDUPD_REDIS_CLUSTER=1 for the daemons); "
        "start one with scripts/cluster-up.sh",
    )
    args = ap.parse_args(argv)
    if args.cluster and not args.redis_url:
        ap.error("--cluster needs --redis-url (e.g. the URL scripts/cluster-up.sh prints)")
    if args.consumers < 1:
        ap.error("--consumers must be at least 1")
    try:
        return run(args)
    except SetupError as exc:
        log(f"ERROR: {exc}")
        print(json.dumps({"ok": False, "error": str(exc).splitlines()[0]}), flush=True)
        return 2


if __name__ == "__main__":
    sys.exit(main())
