#!/usr/bin/env python3
"""Duplicate floods (issue 13): N near-copies of one text against N different texts, end to end.

Two corpora of the same size and the same text length, generated with a fixed seed:

flood
    N near-copies of one base text: the base is ``--words`` words drawn from a fixed vocabulary
    (``--vocab`` made-up lowercase words); each copy substitutes ``--edits`` words at distinct random
    positions with other vocabulary words. (The base text itself is not pushed.)
different
    N texts of ``--words`` random words each from the same vocabulary.

Each corpus runs on a fresh ``redis-server`` (``scripts/bench_stream.py``'s ``FreshRedis``), with
``SLOWLOG`` recording every command slower than ``--slowlog-us`` (default 10 ms) and keeping up to
``--slowlog-len`` entries. ``--consumers`` x ``dedupd serve`` (``DEDUPD_SHINGLE=--shingle``,
``DEDUPD_THRESHOLD=--threshold``, defaults otherwise, plus any ``--env``) join the group; then
``dedupd push --format jsonl FILE`` runs and the clock stops when the group ``dedupd`` has read every
entry, has lag 0 and nothing pending (``scripts/quality.py``'s harness helpers, as bench_stream uses them).

With ``--repeat R`` both runs are done R times, alternated (different, flood, different, ...): this VM's
speed drifts by 10-30 % within minutes, and one pair of runs can land on either side of a bound. The figures
and bounds are then those of each corpus's median run (``bench_stream.median_run``: its time the median of
the rounds' times), and each round's rates follow them.

Per run it reports:

- docs/s: N / seconds from the start of the push to drained (the push included);
- bytes per document: ``INFO used_memory`` after the drain minus the empty server's (before the
  daemons started), over N; the input stream is included (same size in both runs), and its own
  ``MEMORY USAGE`` is printed beside it;
- the number of alerts and the largest alert (sum of the lengths of its field names and values);
- the slowest command in SLOWLOG (milliseconds, command and first arguments), if any reached the threshold;
- each daemon's peak RSS (``VmHWM`` of ``/proc/PID/status``, read just before it is stopped);
- CPU per document of the redis-server and the daemons, from the push to the drain.

Then the ratios flood/different and one PASS/FAIL line per acceptance bound of issue 13:
flood rate >= 0.7x different; flood bytes/doc <= 1.2x different; largest flood alert <= 16 KB;
slowest command (either run) <= 50 ms; flood peak RSS <= 1.5x different. The exit status is 0 whatever
the bounds say (this is a measurement) unless ``--check`` is given: then 1 when a bound fails. 2 when
the run could not be set up. The last line of output is one JSON object with every figure.

Examples::

    .venv/bin/python scripts/bench_flood.py                      # N = 100,000 per corpus
    .venv/bin/python scripts/bench_flood.py -n 2000 --keep
    .venv/bin/python scripts/bench_flood.py --repeat 3                # median of three alternated rounds
    .venv/bin/python scripts/bench_flood.py -n 5000 --consumers 2 --edits 4 --check
    .venv/bin/python scripts/bench_flood.py -n 2000 --dedupd /other/checkout/.venv/bin/dedupd
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import string
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

SCRIPTS = Path(__file__).resolve().parent
REPO = SCRIPTS.parent
for _p in (str(SCRIPTS), str(REPO)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

# the sibling scripts' harness helpers, importable once their directory is on sys.path (above)
import quality  # noqa: E402
from bench_stream import (  # noqa: E402
    FreshRedis,
    daemon_notes,
    git_commit,
    human,
    median_run,
    process_cpu,
    rounded,
)
from quality import (  # noqa: E402
    ALERTS,
    SetupError,
    group_state,
    read_stream,
    server_cpu,
    spawn_serve,
    tail,
    used_memory,
    wait_drained,
)

POLL_S = 0.02
KINDS = ("different", "flood")
# issue 13's acceptance bounds
MIN_RATE_RATIO = 0.7  # flood docs/s >= 0.7 x different
MAX_BYTES_RATIO = 1.2  # flood bytes/doc <= 1.2 x different
MAX_ALERT_BYTES = 16 * 1024  # the largest alert
MAX_SLOWEST_MS = 50.0  # the slowest command in SLOWLOG
MAX_RSS_RATIO = 1.5  # flood peak RSS <= 1.5 x different


def log(msg: str) -> None:
    print(f"[bench_flood {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ----------------------------------------------------------------------------- corpora
def vocabulary(size: int, seed: int) -> list[str]:
    """``size`` distinct made-up lowercase words of 3 to 9 letters (fixed by ``seed``)."""
    rng = random.Random(seed)
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 9))))
    return sorted(words)


def flood_texts(n: int, words: int, edits: int, vocab: list[str], seed: int) -> tuple[list[str], str]:
    """``n`` near-copies of one base text of ``words`` words, each with ``edits`` substitutions at
    distinct positions (a substituted word always differs from the one it replaces); and the base."""
    rng = random.Random(seed)
    base = rng.choices(vocab, k=words)
    out: list[str] = []
    for _ in range(n):
        copy = list(base)
        for pos in rng.sample(range(words), min(edits, words)):
            new = rng.choice(vocab)
            while new == copy[pos]:
                new = rng.choice(vocab)
            copy[pos] = new
        out.append(" ".join(copy))
    return out, " ".join(base)


def different_texts(n: int, words: int, vocab: list[str], seed: int) -> list[str]:
    """``n`` texts of ``words`` random vocabulary words each."""
    rng = random.Random(seed + 1)
    return [" ".join(rng.choices(vocab, k=words)) for _ in range(n)]


def write_jsonl(path: Path, prefix: str, texts: list[str]) -> Path:
    """The texts as JSONL, ids ``PREFIX-0000001`` (same length in both corpora)."""
    with open(path, "w", encoding="utf-8") as fh:
        for i, text in enumerate(texts):
            fh.write(json.dumps({"id": f"{prefix}-{i:07d}", "text": text}) + "\n")
    return path


def word_shingles(text: str, k: int) -> set[tuple[str, ...]]:
    w = text.split()
    return {tuple(w[i : i + k]) for i in range(max(1, len(w) - k + 1))}


def jaccard(a: set[Any], b: set[Any]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def flood_shape(texts: list[str], base: str, shingle: str, threshold: float, seed: int) -> dict[str, Any]:
    """How similar the copies are (word shingles only): J of each copy to the base (min, median) and the
    share of a sample of copy pairs at or above the threshold -- to read the alert counts against."""
    kind, _, k = shingle.partition(":")
    if kind != "word" or not k.isdigit():
        return {}
    sets = [word_shingles(t, int(k)) for t in texts[:2000]]
    base_set = word_shingles(base, int(k))
    to_base = sorted(jaccard(s, base_set) for s in sets)
    rng = random.Random(seed + 2)
    pairs = [rng.sample(range(len(sets)), 2) for _ in range(2000)] if len(sets) > 1 else []
    above = sum(1 for i, j in pairs if jaccard(sets[i], sets[j]) >= threshold)
    return {
        "j_to_base_min": to_base[0],
        "j_to_base_median": to_base[len(to_base) // 2],
        "sampled_pairs_at_or_above_threshold": above / len(pairs) if pairs else None,
    }


# ----------------------------------------------------------------------------- measurements
def peak_rss_kb(pid: int) -> int | None:
    """VmHWM (peak resident set) of a running process in kB, from /proc (None where unavailable)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def largest_alert(client: redis.Redis) -> dict[str, Any]:
    """The number of alerts and the largest one: its bytes (field names + values), its document id, its
    largest fields (bytes of each value) and how many matches it lists."""
    out: dict[str, Any] = {"count": 0, "bytes": 0, "id": None, "fields": {}, "matches": None}
    biggest: dict[bytes, bytes] = {}
    for _sid, fields in read_stream(client, ALERTS):
        out["count"] += 1
        size = sum(len(k) + len(v) for k, v in fields.items())
        if size > out["bytes"]:
            out["bytes"], biggest = size, fields
    if biggest:
        out["id"] = biggest.get(b"id", b"?").decode("utf-8", "replace")
        sizes = sorted(((len(v), k.decode("utf-8", "replace")) for k, v in biggest.items()), reverse=True)
        out["fields"] = {k: n for n, k in sizes[:3]}
        with contextlib.suppress(ValueError):
            out["matches"] = len(json.loads(biggest.get(b"matches", b"[]")))
    return out


def slowest_command(client: redis.Redis, max_len: int) -> dict[str, Any]:
    """The slowest SLOWLOG entry (duration in ms, the command and its first arguments) and how many
    entries there are; ``slowest`` is None when no command reached the threshold."""
    entries = client.slowlog_get(max_len)
    out: dict[str, Any] = {"entries": len(entries), "slowest": None}
    if entries:
        top = max(entries, key=lambda e: int(e["duration"]))
        cmd = top["command"]
        text = cmd.decode("utf-8", "replace") if isinstance(cmd, bytes) else str(cmd)
        out["slowest"] = {"ms": int(top["duration"]) / 1000, "command": text[:160]}
        out["total_ms"] = sum(int(e["duration"]) for e in entries) / 1000
    return out


def configure_slowlog(client: redis.Redis, slower_than_us: int, max_len: int) -> None:
    client.config_set("slowlog-log-slower-than", slower_than_us)
    client.config_set("slowlog-max-len", max_len)
    client.slowlog_reset()


def start_all(
    dedupd: str, env: dict[str, str], consumers: int, workdir: Path, kind: str, client: redis.Redis
) -> list[tuple[Any, Path]]:
    """``consumers`` x ``dedupd serve``, once all of them have joined the consumer group."""
    daemons = [spawn_serve(dedupd, env, workdir / f"serve-{kind}-{k}.log") for k in range(consumers)]
    deadline = time.monotonic() + 60
    while (state := group_state(client)) is None or state["consumers"] < consumers:
        for proc, logf in daemons:
            if proc.poll() is not None:
                quality.stop_daemons(daemons, 10)
                raise SetupError(f"dedupd serve exited with {proc.returncode} at start:\n{tail(logf)}")
        if time.monotonic() > deadline:
            quality.stop_daemons(daemons, 10)
            raise SetupError(f"{consumers} consumers did not join within 60s: {state}\n{tail(daemons[0][1])}")
        time.sleep(0.05)
    time.sleep(0.2)  # let them settle into their blocking read
    return daemons


def run_one(
    kind: str,
    path: Path,
    n: int,
    args: argparse.Namespace,
    env0: dict[str, str],
    redis_exe: str,
    workdir: Path,
) -> dict[str, Any]:
    """One corpus through a fresh redis-server and ``--consumers`` daemons: its figures."""
    with FreshRedis(redis_exe, workdir) as server:
        client = server.client
        configure_slowlog(client, args.slowlog_us, args.slowlog_len)
        mem_empty = used_memory(client)
        env = dict(env0, DEDUPD_REDIS_URL=server.url, DEDUPD_DATA_DIR=str(workdir / "embedded"))
        daemons = start_all(args.dedupd, env, args.consumers, workdir, kind, client)
        try:
            redis_cpu0 = server_cpu(client)
            daemon_cpu0 = sum(process_cpu(p.pid) for p, _ in daemons)
            push_log = workdir / f"push-{kind}.log"
            t0 = time.perf_counter()
            with open(push_log, "wb") as fh:
                push = subprocess.run(
                    [args.dedupd, "push", "--format", "jsonl", str(path)],
                    check=False,
                    env=env,
                    stdout=fh,
                    stderr=subprocess.STDOUT,
                )
            push_s = time.perf_counter() - t0
            if push.returncode != 0:
                raise SetupError(f"dedupd push exited with {push.returncode}:\n{tail(push_log)}")
            wait_drained(
                client,
                n,
                daemons,
                args.timeout,
                POLL_S,
                report=lambda st: log(f"  {kind}: {st}, alerts so far {client.xlen(ALERTS)}"),
            )
            seconds = time.perf_counter() - t0
            mem_drained = used_memory(client)
            redis_cpu = server_cpu(client) - redis_cpu0
            daemon_cpu = sum(process_cpu(p.pid) for p, _ in daemons) - daemon_cpu0
            rss = [peak_rss_kb(p.pid) for p, _ in daemons]  # before they stop
            slow = slowest_command(client, args.slowlog_len)
            alerts = largest_alert(client)
            stream_bytes = int(client.execute_command("MEMORY", "USAGE", quality.STREAM, "SAMPLES", "0") or 0)
        finally:
            logs = [logf for _, logf in daemons]
            codes = quality.stop_daemons(daemons, 60)
    known_rss = [r for r in rss if r is not None]
    return {
        "docs": n,
        "seconds": seconds,
        "push_s": push_s,
        "docs_per_s": n / seconds,
        "bytes_per_doc": (mem_drained - mem_empty) / n,
        "input_stream_bytes_per_doc": stream_bytes / n,
        "mem_empty": mem_empty,
        "mem_drained": mem_drained,
        "alerts": alerts["count"],
        "largest_alert_bytes": alerts["bytes"],
        "largest_alert": {k: alerts[k] for k in ("id", "fields", "matches")},
        "slowlog": slow,
        "peak_rss_kb": max(known_rss) if known_rss else None,
        "peak_rss_kb_each": rss,
        "cpu_us_per_doc": {"redis": redis_cpu / n * 1e6, "daemons": daemon_cpu / n * 1e6},
        "daemon_exit_codes": codes,
        "daemon_log_notes": daemon_notes(logs),
    }


# ----------------------------------------------------------------------------- report
def bounds(runs: dict[str, dict[str, Any]]) -> list[tuple[str, bool | None, str]]:
    """Issue 13's bounds: (name, met -- None when it cannot be measured, the figures)."""
    f, d = runs["flood"], runs["different"]
    rate = f["docs_per_s"] / d["docs_per_s"]
    mem = f["bytes_per_doc"] / d["bytes_per_doc"] if d["bytes_per_doc"] > 0 else float("inf")
    slow_ms = max((r["slowlog"]["slowest"] or {}).get("ms", 0.0) for r in runs.values())
    rss: float | None = None
    if f["peak_rss_kb"] and d["peak_rss_kb"]:
        rss = f["peak_rss_kb"] / d["peak_rss_kb"]
    return [
        ("flood rate >= 0.7x different", rate >= MIN_RATE_RATIO, f"{rate:.3f}x"),
        ("flood bytes/doc <= 1.2x different", mem <= MAX_BYTES_RATIO, f"{mem:.3f}x"),
        (
            "largest flood alert <= 16 KB",
            f["largest_alert_bytes"] <= MAX_ALERT_BYTES,
            f"{f['largest_alert_bytes']} B",
        ),
        (
            "slowest command <= 50 ms",
            slow_ms <= MAX_SLOWEST_MS,
            f"{slow_ms:.1f} ms" if slow_ms else "none logged",
        ),
        (
            "flood peak RSS <= 1.5x different",
            None if rss is None else rss <= MAX_RSS_RATIO,
            "unknown" if rss is None else f"{rss:.3f}x",
        ),
    ]


def print_report(runs: dict[str, dict[str, Any]], args: argparse.Namespace) -> None:
    print(
        f"\n== {args.n} docs per corpus, {args.words} words each, flood copies with {args.edits} substitutions; "
        f"{args.shingle}, threshold {args.threshold}, {args.consumers} consumer(s)"
        + (f"; overrides {args.overrides}" if args.overrides else "")
    )
    print(
        f"  {'':10s} {'seconds':>8s} {'docs/s':>8s} {'B/doc':>7s} {'(stream)':>8s} {'alerts':>7s} "
        f"{'max alert':>9s} {'peak RSS':>9s} {'redis us/doc':>12s} {'daemons us/doc':>14s}  slowest command"
    )
    for kind in KINDS:
        r = runs[kind]
        slow = r["slowlog"]["slowest"]
        slow_text = (
            f"{slow['ms']:.1f} ms {slow['command']}" if slow else f"none >= {args.slowlog_us / 1000:g} ms"
        )
        if slow and r["slowlog"]["entries"] > 1:
            slow_text += f"  ({r['slowlog']['entries']} logged, {r['slowlog']['total_ms']:.0f} ms in all)"
        rss = f"{r['peak_rss_kb'] / 1024:.0f} MB" if r["peak_rss_kb"] else "?"
        print(
            f"  {kind:10s} {r['seconds']:8.2f} {r['docs_per_s']:8.0f} {r['bytes_per_doc']:7.0f} "
            f"{r['input_stream_bytes_per_doc']:8.0f} {r['alerts']:7d} {human(r['largest_alert_bytes']):>9s} "
            f"{rss:>9s} {r['cpu_us_per_doc']['redis']:12.0f} {r['cpu_us_per_doc']['daemons']:14.0f}  {slow_text}"
        )
    for kind in KINDS:
        big = runs[kind]["largest_alert"]
        if big["id"] is not None:
            fields = ", ".join(f"{k} {human(v)}" for k, v in big["fields"].items())
            print(
                f"  {kind} largest alert: id {big['id']}, {big['matches']} matches; largest values: {fields}"
            )
    f, d = runs["flood"], runs["different"]
    print(
        f"  flood/different: docs/s {f['docs_per_s'] / d['docs_per_s']:.3f}x, "
        f"B/doc {f['bytes_per_doc'] / max(1e-9, d['bytes_per_doc']):.3f}x, "
        f"peak RSS {(f['peak_rss_kb'] or 0) / max(1, d['peak_rss_kb'] or 0):.3f}x, "
        f"redis CPU/doc {f['cpu_us_per_doc']['redis'] / max(1e-9, d['cpu_us_per_doc']['redis']):.2f}x, "
        f"daemon CPU/doc {f['cpu_us_per_doc']['daemons'] / max(1e-9, d['cpu_us_per_doc']['daemons']):.2f}x"
    )


def print_rounds(every: dict[str, list[dict[str, Any]]]) -> None:
    """Each round's docs/s and rate (the figures above are of the median runs)."""
    for at, (d, f) in enumerate(zip(every["different"], every["flood"], strict=True), 1):
        print(
            f"  round {at}: different {d['docs_per_s']:.0f} docs/s, flood {f['docs_per_s']:.0f} docs/s, "
            f"{f['docs_per_s'] / d['docs_per_s']:.3f}x"
        )


# ----------------------------------------------------------------------------- main
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=100_000, help="documents per corpus (default %(default)s)")
    ap.add_argument("--words", type=int, default=100, help="words per text (default %(default)s)")
    ap.add_argument("--edits", type=int, default=2, help="substitutions per flood copy (default %(default)s)")
    ap.add_argument("--vocab", type=int, default=10_000, help="vocabulary size (default %(default)s)")
    ap.add_argument("--seed", type=int, default=13, help="seed of the generated texts (default %(default)s)")
    ap.add_argument("--shingle", default="word:3", help="DEDUPD_SHINGLE (default %(default)s)")
    ap.add_argument("--threshold", type=float, default=0.8, help="DEDUPD_THRESHOLD (default %(default)s)")
    ap.add_argument("--consumers", type=int, default=1, help="dedupd serve processes (default %(default)s)")
    ap.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="DEDUPD_K=V",
        help="extra daemon setting for both runs (repeatable)",
    )
    ap.add_argument(
        "--slowlog-us",
        type=int,
        default=10_000,
        help="SLOWLOG records commands at least this slow, in microseconds (default %(default)s)",
    )
    ap.add_argument(
        "--slowlog-len", type=int, default=100_000, help="SLOWLOG entries kept (default %(default)s)"
    )
    ap.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="rounds of both runs, alternated; the figures and bounds are of the median runs (default %(default)s)",
    )
    ap.add_argument("--timeout", type=float, default=3600, help="seconds to wait for a drain")
    ap.add_argument("--check", action="store_true", help="exit 1 when a bound fails")
    ap.add_argument(
        "--keep", action="store_true", help="keep the work directory (corpora, daemon and push logs)"
    )
    ap.add_argument("--dedupd", default=None, help="dedupd executable (default .venv/bin/dedupd, then PATH)")
    ap.add_argument("--redis-server", default=None, help="redis-server executable (default from PATH)")
    args = ap.parse_args(argv)
    if (
        args.n < 2
        or args.words < 1
        or args.edits < 0
        or args.consumers < 1
        or args.vocab < 2
        or args.repeat < 1
    ):
        ap.error("needs -n >= 2, --words >= 1, --edits >= 0, --consumers >= 1, --vocab >= 2, --repeat >= 1")
    return args


def measure(args: argparse.Namespace, redis_exe: str, workdir: Path) -> dict[str, Any]:
    """Generate both corpora, run each, print the figures and the bounds: the JSON report."""
    vocab = vocabulary(args.vocab, args.seed)
    flood, base = flood_texts(args.n, args.words, args.edits, vocab, args.seed)
    paths = {
        "different": write_jsonl(
            workdir / "different.jsonl", "other", different_texts(args.n, args.words, vocab, args.seed)
        ),
        "flood": write_jsonl(workdir / "flood.jsonl", "flood", flood),
    }
    shape = flood_shape(flood, base, args.shingle, args.threshold, args.seed)
    if shape:
        log(
            f"flood copies: J to the base text min {shape['j_to_base_min']:.3f}, median "
            f"{shape['j_to_base_median']:.3f}; {shape['sampled_pairs_at_or_above_threshold']:.1%} of sampled copy "
            f"pairs at or above {args.threshold}"
        )
        if shape["j_to_base_median"] < args.threshold:
            log(
                f"WARNING: most copies are below the threshold {args.threshold} even to the base text: "
                "fewer --edits or more --words make a flood"
            )
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEDUPD_")}
    env.update({"DEDUPD_SHINGLE": args.shingle, "DEDUPD_THRESHOLD": str(args.threshold)})
    env.update(args.overrides)
    every: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
    for round_ in range(1, args.repeat + 1):  # alternated: a machine slower for a while slows both alike
        for kind in KINDS:
            r = run_one(kind, paths[kind], args.n, args, env, redis_exe, workdir)
            log(
                f"{kind}{f' (round {round_})' if args.repeat > 1 else ''}: {r['seconds']:.2f}s (push "
                f"{r['push_s']:.2f}s), {r['docs_per_s']:.0f} docs/s, {r['alerts']} alerts, daemons exited "
                f"{r['daemon_exit_codes']}"
            )
            for note in r["daemon_log_notes"]:
                log(f"  daemon log: {note}")
            every[kind].append(r)
    runs = {kind: median_run(every[kind]) for kind in KINDS}
    print_report(runs, args)
    if args.repeat > 1:
        print_rounds(every)
    checks = bounds(runs)
    print("  bounds (issue 13):")
    for name, met, figure in checks:
        verdict = "PASS" if met else ("FAIL" if met is not None else "UNKNOWN")
        print(f"    {verdict:7s} {name:36s} {figure}")
    return {
        "commit": git_commit(args.dedupd),
        "settings": {
            k: getattr(args, k)
            for k in (
                "n",
                "words",
                "edits",
                "vocab",
                "seed",
                "shingle",
                "threshold",
                "consumers",
                "overrides",
            )
        },
        "flood_shape": shape,
        "runs": runs,
        "rounds": {kind: [r["docs_per_s"] for r in every[kind]] for kind in KINDS},
        "bounds": {name: {"met": met, "figure": figure} for name, met, figure in checks},
        "all_met": all(met for _, met, _ in checks),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="dedupd-bench-flood-"))
    report: dict[str, Any] = {}
    code = 0
    try:
        args.overrides = quality.parse_env(args.env)
        args.dedupd = quality.find_dedupd(args.dedupd)
        redis_exe = args.redis_server or shutil.which("redis-server")
        if not redis_exe:
            raise SetupError(
                "redis-server is not installed (apt-get install redis-server) or pass --redis-server"
            )
        log(
            f"dedupd at commit {git_commit(args.dedupd)} ({args.dedupd}); {os.cpu_count()} CPUs, "
            f"load average {os.getloadavg()[0]:.2f}; work dir {workdir}"
        )
        report = measure(args, redis_exe, workdir)
        if args.check and not report["all_met"]:
            code = 1
    except SetupError as exc:
        log(f"ERROR: {exc}")
        report = {"ok": False, "error": str(exc).splitlines()[0]}
        code = 2
    finally:
        if code != 2 and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            log(f"logs kept in {workdir}")
    print(json.dumps(rounded(report)), flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
