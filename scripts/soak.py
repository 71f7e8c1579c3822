#!/usr/bin/env python3
"""Soak test: many documents with known duplicates, several `dedupd serve` consumers killed with SIGKILL at
random moments (restarted under the same or a new name), and one Redis restart (AOF) along the way.

At the end it prints ``lost=N doubled_alerts=N missing_alerts=N dead_letters=N (expected M)`` and exits 1
unless nothing was lost, doubled or missed and the dead letters are exactly the bad entries it pushed.

    .venv/bin/python scripts/soak.py --docs 200000 --consumers 3 --seed 1
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import redis

from dedupd.gateway import Gateway
from dedupd.keys import Keys
from dedupd.monitor import group_state
from dedupd.settings import load_settings

VOCAB = [f"w{i}" for i in range(5000)]


def corpus(n_docs: int, seed: int, n_bad: int) -> tuple[list[dict[str, str]], set[frozenset[str]]]:
    """Pairs ``p<i>a`` / ``p<i>b`` (one word of 100 changed: Jaccard about 0.94), interleaved with bad entries."""
    rng = random.Random(seed)
    docs: list[dict[str, str]] = []
    expected: set[frozenset[str]] = set()
    bad_at = set(rng.sample(range(n_docs // 2), n_bad)) if n_bad else set()
    for i in range(n_docs // 2):
        words = [rng.choice(VOCAB) for _ in range(100)]
        docs.append({"id": f"p{i}a", "text": " ".join(words), "source": "soak"})
        words[rng.randrange(100)] = "edited"
        docs.append({"id": f"p{i}b", "text": " ".join(words)})
        expected.add(frozenset((f"p{i}a", f"p{i}b")))
        if i in bad_at:
            docs.append({"id": f"bad{i}", "text": "t", "items": "[not json"})
    return docs, expected


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Soak:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rng = random.Random(args.seed)
        self.work = Path(args.workdir or tempfile.mkdtemp(prefix="dedupd-soak-"))
        self.work.mkdir(parents=True, exist_ok=True)
        self.port = args.port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.redis_proc: subprocess.Popen[bytes] | None = None
        self.consumers: dict[int, tuple[str, subprocess.Popen[bytes]]] = {}
        self.names_used = 0
        self.push_lock = threading.Lock()
        self.inputs: dict[str, str] = {}  # input entry id -> document id
        self.pushed_all = threading.Event()
        self.keys = Keys()
        self.log: list[str] = []

    # ----- processes -----
    def start_redis(self) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            sys.exit("redis-server is not installed")
        self.redis_proc = subprocess.Popen(
            [
                exe,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.work),
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                self.args.fsync,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis(port=self.port)
        deadline = time.monotonic() + 120
        while True:
            try:
                client.ping()
                break
            except (redis.ConnectionError, redis.ResponseError):
                if time.monotonic() > deadline or self.redis_proc.poll() is not None:
                    sys.exit("redis-server did not start")
                time.sleep(0.05)

    def restart_redis(self) -> None:
        with self.push_lock:  # no producer pipeline is cut in half (that would be the producer's duplicate)
            t = time.monotonic()
            with contextlib.suppress(redis.ConnectionError):
                redis.Redis(port=self.port).shutdown()
            assert self.redis_proc is not None
            self.redis_proc.wait(timeout=120)
            time.sleep(1.0)
            self.start_redis()
            self.note(f"redis restarted (down {time.monotonic() - t:.1f}s)")

    def start_consumer(self, slot: int, name: str) -> None:
        env = {
            **os.environ,
            "DEDUPD_REDIS_URL": self.url,
            "DEDUPD_CONSUMER": name,
            "DEDUPD_BLOCK_MS": "200",
            "DEDUPD_BATCH_SIZE": str(self.args.batch_size),
            "DEDUPD_CLAIM_IDLE_MS": "2000",
            "DEDUPD_DOCS_RETENTION_S": "0",
            "DEDUPD_METRICS_PORT": "0",
            "DEDUPD_LOG_LEVEL": "WARNING",
        }
        with open(self.work / f"{name}.log", "ab") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "dedupd", "serve"], env=env, stdout=subprocess.DEVNULL, stderr=err
            )
        self.consumers[slot] = (name, proc)

    def kill_one(self) -> None:
        slot = self.rng.randrange(len(self.consumers))
        name, proc = self.consumers[slot]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        if self.rng.random() < 0.5:
            new = name  # restarted under the same name: re-reads its own pending entries
        else:
            self.names_used += 1
            new = f"c{slot}-r{self.names_used}"  # a new name: the others claim the dead one's entries
        self.start_consumer(slot, new)
        self.note(f"kill -9 {name}, restarted as {new}")

    def note(self, text: str) -> None:
        line = f"[{time.strftime('%H:%M:%S')}] processed~{self.processed()}: {text}"
        self.log.append(line)
        print(line, file=sys.stderr, flush=True)

    def processed(self) -> int:
        try:
            return int(redis.Redis(port=self.port).hget(self.keys.counters, "processed") or 0)
        except redis.ConnectionError:
            return -1

    # ----- producer -----
    def produce(self, docs: list[dict[str, str]]) -> None:
        client = redis.Redis(port=self.port)
        chunk = 1000
        for start in range(0, len(docs), chunk):
            while True:  # backpressure: at most max_lag unread entries
                try:
                    state = group_state(client, self.keys)
                    if state is None or state["lag"] is None or state["lag"] <= self.args.max_lag:
                        break
                except redis.ConnectionError:
                    pass
                time.sleep(0.05)
            part = docs[start : start + chunk]
            while True:
                with self.push_lock:
                    try:
                        pipe = client.pipeline(transaction=True)  # all or nothing
                        for d in part:
                            pipe.xadd(self.keys.docs, d)  # type: ignore[arg-type]
                        ids = pipe.execute()
                        break
                    except redis.ConnectionError:
                        pass
                time.sleep(0.2)
            for e, d in zip(ids, part, strict=True):
                self.inputs[e.decode()] = d["id"]
        self.pushed_all.set()

    # ----- run -----
    def run(self) -> int:
        a = self.args
        docs, expected = corpus(a.docs, a.seed, a.bad)
        n_docs = len(docs)
        print(
            f"soak: {n_docs} entries ({len(expected)} duplicate pairs, {a.bad} bad), {a.consumers} consumers, "
            f"{a.kills} kills, 1 Redis restart; redis on port {self.port}, files in {self.work}",
            file=sys.stderr,
        )
        started = time.monotonic()
        self.start_redis()
        for i in range(a.consumers):
            self.start_consumer(i, f"c{i}")
        producer = threading.Thread(target=self.produce, args=(docs,), daemon=True)
        producer.start()
        marks = sorted(self.rng.uniform(0.05, 0.95) for _ in range(a.kills))
        events = [(m, "kill") for m in marks] + [(self.rng.uniform(0.35, 0.65), "redis")]
        events.sort()
        deadline = time.monotonic() + a.timeout
        next_status = time.monotonic() + 30
        while True:
            done = self.processed()
            if time.monotonic() > next_status:  # so that a stuck run says where it is
                next_status += 30
                try:
                    state = group_state(redis.Redis(port=self.port), self.keys)
                except redis.ConnectionError as exc:
                    state = {"error": str(exc)}
                self.note(
                    f"status: group {state}, pushed all: {self.pushed_all.is_set()}, events left {events}"
                )
            while events and done >= events[0][0] * n_docs:
                _, what = events.pop(0)
                self.restart_redis() if what == "redis" else self.kill_one()
            for slot, (name, proc) in list(self.consumers.items()):
                if proc.poll() is not None:  # an unexpected exit is a failure, but keep going to report
                    self.note(f"consumer {name} exited with {proc.returncode}; restarting it")
                    self.start_consumer(slot, name)
            if self.pushed_all.is_set() and not events:
                state = group_state(redis.Redis(port=self.port), self.keys)
                if state is not None and state["lag"] == 0 and state["pending"] == 0:
                    break
            if time.monotonic() > deadline:
                print(f"soak: not drained after {a.timeout:.0f}s", file=sys.stderr)
                break
            time.sleep(0.2)
        elapsed = time.monotonic() - started
        codes = []
        for _name, proc in self.consumers.values():
            proc.send_signal(signal.SIGTERM)
            codes.append(proc.wait(timeout=120))
        return self.report(docs, expected, elapsed, codes)

    def report(
        self, docs: list[dict[str, str]], expected: set[frozenset[str]], elapsed: float, codes: list[int]
    ) -> int:
        a = self.args
        client = redis.Redis(port=self.port)
        good = [d for d in docs if not d["id"].startswith("bad")]
        last_entry = {doc: entry for entry, doc in self.inputs.items()}
        settings = load_settings(redis_url=self.url)
        index = Gateway.open(client, self.keys, settings.index_spec())
        lost = 0
        ids = [d["id"] for d in good]
        for start in range(0, len(ids), 5000):
            part = ids[start : start + 5000]
            nums = index.nums_of(part)
            records = index.load_records([n for n in nums if n > 0])
            for doc, num in zip(part, nums, strict=True):
                rec = records.get(num) if num > 0 else None
                if rec is None or rec.doc_id != doc or rec.entry_id != last_entry.get(doc):
                    lost += 1
        alerts = [{k.decode(): v.decode() for k, v in f.items()} for _, f in client.xrange(self.keys.alerts)]
        per_doc = Counter(x["id"] for x in alerts)
        per_input = Counter(x["input"] for x in alerts)
        doubled = max(sum(c - 1 for c in per_doc.values()), sum(c - 1 for c in per_input.values()))
        found = {frozenset((x["id"], m[0])) for x in alerts for m in json.loads(x["matches"])}
        missing = len(expected - found)
        unexpected = len(found - expected)
        dead = client.xlen(self.keys.dead)
        dead_codes = Counter(f[b"error"].decode() for _, f in client.xrange(self.keys.dead))
        tracebacks = sum((p).read_text(errors="replace").count("Traceback") for p in self.work.glob("*.log"))
        print(
            f"soak: {len(docs)} entries in {elapsed:.0f}s ({len(docs) / elapsed:.0f}/s), {len(alerts)} alerts, "
            f"unexpected pairs {unexpected}, dead-letter codes {dict(dead_codes)}, consumer exit codes {codes}, "
            f"tracebacks in logs {tracebacks}, docs stream length {client.xlen(self.keys.docs)}"
        )
        for pair in sorted(expected - found, key=sorted)[:10]:
            a_id, b_id = sorted(pair)
            entries = {doc: e for e, doc in self.inputs.items() if doc in pair}
            print(f"missing: {a_id} ~ {b_id} (input entries {entries})")
        print(
            f"lost={lost} doubled_alerts={doubled} missing_alerts={missing} dead_letters={dead} (expected {a.bad})"
        )
        if not a.keep:
            with contextlib.suppress(redis.ConnectionError):
                client.shutdown(nosave=True)
            shutil.rmtree(self.work, ignore_errors=True)
        ok = lost == 0 and doubled == 0 and missing == 0 and dead == a.bad and all(c == 0 for c in codes)
        return 0 if ok else 1


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--docs", type=int, default=200_000, help="documents (pairs of near-duplicates; default 200000)"
    )
    p.add_argument("--consumers", type=int, default=3, help="dedupd serve processes (default 3)")
    p.add_argument("--seed", type=int, default=1, help="seed of the corpus and of the kill schedule")
    p.add_argument("--kills", type=int, default=6, help="kill -9 of a random consumer, at random moments")
    p.add_argument(
        "--bad", type=int, default=50, help="bad entries (bad_json) mixed in: the expected dead letters"
    )
    p.add_argument("--batch-size", type=int, default=500)
    p.add_argument("--max-lag", type=int, default=20_000, help="producer backpressure (unread entries)")
    p.add_argument("--fsync", choices=["always", "everysec"], default="always", help="Redis appendfsync")
    p.add_argument("--port", type=int, default=0, help="Redis port (default: a free one)")
    p.add_argument("--workdir", help="Redis data and consumer logs (default: a temporary directory)")
    p.add_argument("--keep", action="store_true", help="keep Redis running and the files when done")
    p.add_argument("--timeout", type=float, default=3600, help="give up after this many seconds")
    args = p.parse_args()
    soak = Soak(args)
    try:
        sys.exit(soak.run())
    finally:
        for _, proc in soak.consumers.values():
            if proc.poll() is None:
                proc.kill()
        if soak.redis_proc is not None and soak.redis_proc.poll() is None and not args.keep:
            soak.redis_proc.kill()


if __name__ == "__main__":
    main()
