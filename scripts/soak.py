#!/usr/bin/env python3
"""Soak test: many documents with known duplicates pushed through several `dedupd serve` consumers while
faults are injected, then checked: nothing lost, nothing doubled, every expected duplicate alerted, every
malformed entry dead-lettered once with its code, every daemon alive and exiting 0 on SIGTERM.

Faults (``--faults``, default ``all``; or a comma-separated subset of these, or ``none``):

- ``kill``: ``--kills`` times, a random consumer is killed with SIGKILL and restarted, under the same name
  (it re-reads its own pending entries) or a new one (the others claim the dead one's entries);
- ``aof``: Redis is shut down and restarted once from its append-only file (``--fsync``, default always);
- ``wipe``: Redis is killed and restarted once without its data, as a server without persistence restarts:
  the input stream, the index, the alerts, the dead letters and the consumer group are gone. The producer
  pushes in two phases around it: the first ``--wipe-at`` of the pairs, then (after the wipe) the others.
  The wipe comes once ``--wipe-when`` of the first phase is processed: the producer then stops the daemons
  (SIGSTOP), pushes the rest of the first phase and the wipe takes it unprocessed, whatever the daemons'
  speed; they go on (SIGCONT) with Redis restarted. The entries pushed before the wipe are counted apart as
  *wiped* and not checked; everything pushed after it is. The other faults come at shares of the documents
  that can be processed (those the wipe takes unprocessed left out).
  The daemons must recreate the consumer group and say so in their log (``history before the restart
  is gone``);
- ``busy``: another client runs a Lua script that spins ``--busy-s`` (1.5) seconds with
  ``busy-reply-threshold`` (``lua-time-limit``) at 100 ms, so every other client gets BUSY meanwhile;
- ``full``: the server's ``maxmemory`` is set below its used memory (noeviction: every write is refused
  with OOM) for ``--full-s`` (10) seconds, then lifted;
- ``long``: another client's Lua script spins ``--long-s`` (35) seconds, longer than ten of the daemons'
  backoff steps (0.1 s doubling to 5 s: about 31 s), so every other client gets BUSY that long;
  neither may dead-letter an entry (a server state never counts against one);
- ``malformed``: ``--malformed`` (3,000) malformed entries of several kinds, each built deterministically
  from the seed: wide (thousands of fields, no id), binary (invalid UTF-8 in the text, the id or the source),
  deep JSON (thousands of nested brackets in ``items`` or ``meta``), bad ids (too long, empty), an unknown
  ``op``, no text, a query with a bad ``reply_to``, and ``--huge`` (5) huge ones (a junk field or a text of
  ``--huge-mb`` MB, a text between ``max_doc_bytes`` and ``max_entry_bytes``). Each must be in
  ``dedupd:dead`` exactly once with its error code. ``--odd`` (120) odd but valid entries go with them (a
  wide entry with an id and a text, a binary field dedupd does not read, an id of exactly ``max_id_bytes``,
  a text of nested brackets, ``op`` " UPSERT ", a nested ``meta`` object): they must be indexed, not
  dead-lettered.

Alerts and dead letters are collected while it runs (XREAD), so that what the wipe takes is still counted.
Wiped documents that the end finds indexed anyway (a batch a daemon had in hand at the wipe can be
written into the empty server as its client reconnects) are counted apart too, not as a failure.
The ``--bad`` entries (``items`` that is no JSON, as the first soak had) are always mixed in.

Definitions (for the entries pushed after the wipe; all of them without the wipe fault):
lost = a valid document whose stored record is not the one its last entry wrote; doubled = alerts beyond
one per input entry or per document; missing = an expected pair (``p<i>a`` / ``p<i>b``) no alert names.

It prints a progress line for each fault as it happens (and a status line every ``--status-s``), then a
one-line summary and a JSON line with every figure, and exits 1 when any check fails.

    .venv/bin/python scripts/soak.py --docs 200000 --consumers 3 --seed 1            # every fault
    .venv/bin/python scripts/soak.py --docs 200000 --faults kill,aof                # the first soak
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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from dedupd.daemon.entries import (
    BAD_JSON,
    BAD_REPLY_TO,
    BAD_UTF8,
    ID_TOO_LONG,
    MISSING_ID,
    MISSING_TEXT,
    TOO_LARGE,
    UNKNOWN_OP,
)
from dedupd.daemon.monitor import group_state
from dedupd.index.gateway import RedisGateway
from dedupd.index.keys import Keys
from dedupd.settings import Settings, load_settings

VOCAB = [f"w{i}" for i in range(5000)]
ODD_VOCAB = [f"odd{i}" for i in range(5000)]  # the odd valid entries' words: no pair shares a shingle
FAULTS = ("kill", "aof", "wipe", "busy", "full", "long", "malformed")
MB = 1_000_000
WIPED_LOG = "history before the restart is gone"  # what a daemon logs when it recreates the group
SPIN = (  # a script that spins ARGV[1] microseconds
    "local t = redis.call('TIME') while true do local n = redis.call('TIME') "
    "if (n[1] - t[1]) * 1000000 + (n[2] - t[2]) > tonumber(ARGV[1]) then break end end return 1"
)

Fields = dict[str, str | bytes]


@dataclass
class Item:
    """One entry to push: a valid document (``code`` None: it must be indexed) or a malformed entry (it
    must be dead-lettered with ``code``). A malformed or odd entry's fields are built when it is pushed."""

    label: str  # the document id of a valid entry; ``<kind>#<n>`` of a malformed one
    kind: str  # "pair", "bad", or a kind of MALFORMED / ODD
    code: str | None
    fields: Fields | None = None
    build: Callable[[], Fields] | None = None

    def materialise(self) -> Fields:
        if self.fields is not None:
            return self.fields
        assert self.build is not None
        return self.build()


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


# ----- malformed and odd-but-valid entries: kind -> (dead-letter code, builder) -----
@dataclass(frozen=True)
class Limits:
    """The daemons' input bounds, and the size of the huge entries."""

    max_id_bytes: int
    max_doc_bytes: int
    max_entry_bytes: int
    huge_bytes: int

    @classmethod
    def of(cls, settings: Settings, huge_mb: float) -> Limits:
        huge = max(int(huge_mb * MB), settings.max_entry_bytes + 1)
        return cls(settings.max_id_bytes, settings.max_doc_bytes, settings.max_entry_bytes, huge)


def _words(rng: random.Random, n: int, vocab: list[str] = VOCAB) -> str:
    return " ".join(rng.choice(vocab) for _ in range(n))


def _wide(rng: random.Random, k: int, lim: Limits) -> Fields:
    return {f"f{i}": f"v{rng.randrange(10**6)}" for i in range(2000 + rng.randrange(4000))}


def _huge_field(rng: random.Random, k: int, lim: Limits) -> Fields:
    return {"id": f"huge-field{k}", "text": _words(rng, 50), "junk": rng.randbytes(lim.huge_bytes)}


def _huge_text(rng: random.Random, k: int, lim: Limits) -> Fields:
    line = _words(rng, 1000) + "\n"
    return {"id": f"huge-text{k}", "text": line * (lim.huge_bytes // len(line) + 1)}


def _huge_doc(rng: random.Random, k: int, lim: Limits) -> Fields:
    """A text over max_doc_bytes in an entry under max_entry_bytes (or over both when they are close)."""
    size = (lim.max_doc_bytes + lim.max_entry_bytes) // 2
    if size - lim.max_doc_bytes < 100:
        size = lim.huge_bytes
    line = _words(rng, 1000) + "\n"
    return {"id": f"huge-doc{k}", "text": (line * (size // len(line) + 1))[:size]}


def _binary_text(rng: random.Random, k: int, lim: Limits) -> Fields:
    return {"id": f"bin-text{k}", "text": _words(rng, 20).encode() + b" \xff\xfe" + rng.randbytes(40)}


def _binary_id(rng: random.Random, k: int, lim: Limits) -> Fields:
    return {"id": f"bin-id{k}".encode() + b"\xc3\x28" + rng.randbytes(8), "text": _words(rng, 40)}


def _binary_source(rng: random.Random, k: int, lim: Limits) -> Fields:
    return {"id": f"bin-source{k}", "text": _words(rng, 40), "source": b"feed-\x80" + rng.randbytes(6)}


def _deep_items(rng: random.Random, k: int, lim: Limits) -> Fields:
    depth = rng.randrange(2000, 50_000)
    return {"id": f"deep-items{k}", "text": _words(rng, 40), "items": "[" * depth + "]" * depth}


def _deep_meta(rng: random.Random, k: int, lim: Limits) -> Fields:
    """Nested arrays (no object) or objects never closed: bad JSON whatever the parser's depth limit."""
    depth = rng.randrange(2000, 12_000)
    meta = "[" * depth + "]" * depth if k % 2 else '{"a":' * depth + "1"
    return {"id": f"deep-meta{k}", "text": _words(rng, 40), "meta": meta}


def _id_too_long(rng: random.Random, k: int, lim: Limits) -> Fields:
    return {"id": f"long{k}-" + "L" * (lim.max_id_bytes + rng.randrange(1, 2000)), "text": _words(rng, 40)}


def _id_empty(rng: random.Random, k: int, lim: Limits) -> Fields:
    return {"id": "", "text": _words(rng, 40)}


def _unknown_op(rng: random.Random, k: int, lim: Limits) -> Fields:
    op = rng.choice(["merge", "explode", "upsertx", "del ete", "x" * 40, "UPSERT;DROP"])
    return {"id": f"op{k}", "text": _words(rng, 40), "op": op}


def _missing_text(rng: random.Random, k: int, lim: Limits) -> Fields:
    return {"id": f"no-text{k}", "op": rng.choice(["upsert", "append"])}


def _bad_reply_to(rng: random.Random, k: int, lim: Limits) -> Fields:
    return {"id": f"query{k}", "op": "query", "text": _words(rng, 40), "reply_to": "no spaces here!"}


Builder = Callable[[random.Random, int, Limits], Fields]
MALFORMED: dict[str, tuple[str, Builder]] = {
    "wide": (MISSING_ID, _wide),
    "binary_text": (BAD_UTF8, _binary_text),
    "binary_id": (BAD_UTF8, _binary_id),
    "binary_source": (BAD_UTF8, _binary_source),
    "deep_items": (BAD_JSON, _deep_items),
    "deep_meta": (BAD_JSON, _deep_meta),
    "id_too_long": (ID_TOO_LONG, _id_too_long),
    "id_empty": (MISSING_ID, _id_empty),
    "unknown_op": (UNKNOWN_OP, _unknown_op),
    "missing_text": (MISSING_TEXT, _missing_text),
    "bad_reply_to": (BAD_REPLY_TO, _bad_reply_to),
}
HUGE: dict[str, tuple[str, Builder]] = {
    "huge_field": (TOO_LARGE, _huge_field),
    "huge_text": (TOO_LARGE, _huge_text),
    "huge_doc": (TOO_LARGE, _huge_doc),
}


def _odd_wide(rng: random.Random, k: int, lim: Limits) -> Fields:
    extra: Fields = {f"x{i}": f"{rng.randrange(10**6)}" for i in range(3000)}
    return {"id": f"odd-wide{k}", "text": _words(rng, 60, ODD_VOCAB), **extra}


def _odd_binary_field(rng: random.Random, k: int, lim: Limits) -> Fields:
    return {"id": f"odd-blob{k}", "text": _words(rng, 60, ODD_VOCAB), "blob": b"\xff\xfe" + rng.randbytes(64)}


def _odd_id_max(rng: random.Random, k: int, lim: Limits) -> Fields:
    head = f"odd-idmax{k}-"
    room = lim.max_id_bytes - len(head)
    return {"id": head + "x" * (room % 2) + "é" * (room // 2), "text": _words(rng, 60, ODD_VOCAB)}


def _odd_deep_text(rng: random.Random, k: int, lim: Limits) -> Fields:
    depth = rng.randrange(1000, 5000)
    return {
        "id": f"odd-brackets{k}",
        "text": "[" * depth + " " + _words(rng, 60, ODD_VOCAB) + " " + "]" * depth,
    }


def _odd_op(rng: random.Random, k: int, lim: Limits) -> Fields:
    return {"id": f"odd-op{k}", "op": " UPSERT ", "text": _words(rng, 60, ODD_VOCAB)}


def _odd_meta(rng: random.Random, k: int, lim: Limits) -> Fields:
    meta = '{"a":' * 50 + "[1, 2]" + "}" * 50
    return {"id": f"odd-meta{k}", "text": _words(rng, 60, ODD_VOCAB), "meta": meta, "items": '["x", "y"]'}


ODD: dict[str, Builder] = {
    "odd_wide": _odd_wide,
    "odd_binary_field": _odd_binary_field,
    "odd_id_max": _odd_id_max,
    "odd_deep_text": _odd_deep_text,
    "odd_op": _odd_op,
    "odd_meta": _odd_meta,
}


def _builder(fn: Builder, seed: int, kind: str, k: int, lim: Limits) -> Callable[[], Fields]:
    return lambda: fn(random.Random(f"{seed}:{kind}:{k}"), k, lim)


def adversarial(n_malformed: int, n_huge: int, n_odd: int, seed: int, lim: Limits) -> list[Item]:
    """The malformed entries (each kind in turn), the huge ones and the odd valid ones, built when pushed."""
    items: list[Item] = []
    kinds = list(MALFORMED)
    for k in range(n_malformed):
        kind = kinds[k % len(kinds)]
        code, fn = MALFORMED[kind]
        items.append(Item(f"{kind}#{k}", kind, code, build=_builder(fn, seed, kind, k, lim)))
    huge = list(HUGE)
    for k in range(n_huge):
        kind = huge[k % len(huge)]
        code, fn = HUGE[kind]
        items.append(Item(f"{kind}#{k}", kind, code, build=_builder(fn, seed, kind, k, lim)))
    odd = list(ODD)
    for k in range(n_odd):
        kind = odd[k % len(odd)]
        build = _builder(ODD[kind], seed, kind, k, lim)
        items.append(Item(str(build()["id"]), kind, None, build=build))
    return items


def held_items(first: list[Item], mark: float) -> int:
    """How many items of the first phase ``first`` come after the one that brings its valid documents to
    ``mark`` (the wipe's share): pushed while the daemons are held, they are unprocessed at the wipe. 0
    when none is left.

    >>> held_items([Item("a", "pair", None), Item("x", "bad", "bad_json"), Item("b", "pair", None)], 1)
    2
    """
    valid = 0
    for i, item in enumerate(first):
        valid += item.code is None
        if valid >= mark:
            return len(first) - i - 1
    return 0


def interleave(items: list[Item], extra: list[Item], start: int, seed: int) -> list[Item]:
    """``extra`` inserted at random places of ``items`` at or after position ``start``."""
    rng = random.Random(seed)
    at = sorted(rng.randrange(start, len(items) + 1) for _ in extra)
    rng.shuffle(extra)
    out: list[Item] = []
    j = 0
    for i, item in enumerate(items):
        while j < len(at) and at[j] == i:
            out.append(extra[j])
            j += 1
        out.append(item)
    out.extend(extra[j:])
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def quick_client(port: int) -> redis.Redis:
    """A client that fails at once when Redis is away (no reconnection retries) and never waits long."""
    return redis.Redis(port=port, retry=Retry(NoBackoff(), 0), socket_timeout=10, socket_connect_timeout=2)


class Collector(threading.Thread):
    """Reads the alerts and dead-letter streams as they grow (XREAD), so that a wipe does not take them
    from the count. ``lock`` is held by a wipe: cursors go back to the start of the new, empty streams."""

    def __init__(self, port: int, keys: Keys) -> None:
        super().__init__(daemon=True)
        self.client = quick_client(port)
        self.keys = keys
        self.lock = threading.Lock()
        self.cursors = {keys.alerts: "0-0", keys.dead: "0-0"}
        self.got: dict[str, list[dict[str, str]]] = {keys.alerts: [], keys.dead: []}
        self.stop = threading.Event()

    def poll(self, block_ms: int | None) -> int | None:
        """Read what is new; how many entries (None: Redis did not answer)."""
        with self.lock:
            try:
                reply = self.client.xread(self.cursors, count=2000, block=block_ms)  # type: ignore[arg-type]
            except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
                return None
            n = 0
            for stream, entries in reply or []:
                name = stream.decode()
                for entry_id, fields in entries:
                    kept = {
                        k.decode(): v.decode(errors="replace")
                        for k, v in fields.items()
                        if k in (b"id", b"matches", b"input", b"error", b"detail")
                    }
                    self.got[name].append(kept)
                    self.cursors[name] = entry_id.decode()
                    n += 1
            return n

    def run(self) -> None:
        while not self.stop.is_set():
            if self.poll(100) is None:
                time.sleep(0.1)

    def restart_from_scratch(self) -> None:
        """Called with ``lock`` held, after a wipe."""
        self.cursors = dict.fromkeys(self.cursors, "0-0")

    def finish(self) -> None:
        """Stop the thread and read what is left."""
        self.stop.set()
        self.join(timeout=30)
        while (n := self.poll(None)) is None or n > 0:
            if n is None:
                time.sleep(0.2)


@dataclass
class Pushed:
    """What the producer pushed: input entry id -> (item index, epoch: 0 before the wipe, 1 after)."""

    entries: dict[str, tuple[int, int]] = field(default_factory=dict)
    upto: int = 0  # items pushed


class Soak:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.faults = set(args.faults)
        self.rng = random.Random(args.seed)  # the first soak's schedule: kills and the AOF restart
        self.rng_new = random.Random(args.seed + 1_000_003)  # the other faults' schedule
        self.work = Path(args.workdir or tempfile.mkdtemp(prefix="dedupd-soak-"))
        self.work.mkdir(parents=True, exist_ok=True)
        self.port = args.port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.watcher = quick_client(self.port)  # the soak's own reads while it runs
        self.redis_proc: subprocess.Popen[bytes] | None = None
        self.consumers: dict[int, tuple[str, subprocess.Popen[bytes]]] = {}
        self.names_used = 0
        self.push_lock = threading.Lock()
        self.pushed = Pushed()
        self.pushed_all = threading.Event()
        self.at_gate = threading.Event()  # the producer waits for the wipe
        self.wiped = threading.Event()
        self.epoch = 0
        self.keys = Keys()
        self.log: list[str] = []
        self.events_done: list[dict[str, Any]] = []
        self.unexpected_exits: list[str] = []
        self.processed_before_wipe = 0
        self.valid_before_wipe = 0  # valid documents pushed before the wipe
        self.wipe_unprocessed = 0  # of which not yet processed when it came
        self.held = 0  # items pushed while the daemons are held (the rest of the first phase): 0 = none
        self.wipe_mark = 1.0  # valid documents processed when the wipe comes
        self.frozen = False  # the daemons are stopped (SIGSTOP) until the wipe
        self.started = time.monotonic()
        self.collector: Collector | None = None

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
        client = quick_client(self.port)
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
        """SHUTDOWN (the AOF flushed and fsynced) and start again from the AOF."""
        with self.push_lock:  # no producer pipeline is cut in half (that would be the producer's duplicate)
            t = time.monotonic()
            with contextlib.suppress(redis.ConnectionError):  # no client retries: they would wait seconds
                redis.Redis(port=self.port, retry=Retry(NoBackoff(), 0)).shutdown()
            assert self.redis_proc is not None
            self.redis_proc.wait(timeout=120)
            time.sleep(1.0)
            self.start_redis()
            self.note("aof", f"Redis restarted from its AOF (down {time.monotonic() - t:.1f}s)")

    def wipe_redis(self) -> None:
        """Kill Redis and start it without its data: everything it held is gone, the consumer group too."""
        assert self.collector is not None
        with self.push_lock, self.collector.lock:
            t = time.monotonic()
            done = max(self.processed(), 0)
            self.processed_before_wipe += done
            self.wipe_unprocessed = self.valid_before_wipe - done
            assert self.redis_proc is not None
            self.redis_proc.kill()
            self.redis_proc.wait(timeout=60)
            shutil.rmtree(self.work / "appendonlydir", ignore_errors=True)
            (self.work / "dump.rdb").unlink(missing_ok=True)
            time.sleep(1.0)
            self.start_redis()
            self.collector.restart_from_scratch()
            self.release_daemons()
            self.epoch = 1
            wiped = self.pushed.upto
            self.note(
                "wipe",
                f"Redis killed and restarted WITHOUT its data (down {time.monotonic() - t:.1f}s): "
                f"the {wiped} entries pushed so far are counted as wiped ({self.wipe_unprocessed} of their "
                f"{self.valid_before_wipe} valid documents not processed yet)",
            )
        self.wiped.set()

    def busy_script(self, seconds: float | None = None, fault: str = "busy") -> None:
        """Another client runs a script of ``seconds`` (busy_s); with the threshold at 100 ms others get BUSY."""
        seconds = self.args.busy_s if seconds is None else seconds
        with self.push_lock:  # the producer is no subject of this test: it waits
            client = redis.Redis(port=self.port, socket_timeout=seconds + 30)
            try:
                name = "busy-reply-threshold"
                old = client.config_get(name).get(name)
            except redis.ResponseError:  # Redis < 7
                name = "lua-time-limit"
                old = client.config_get(name).get(name)
            client.config_set(name, 100)
            t = time.monotonic()
            client.eval(SPIN, 0, int(seconds * 1_000_000))
            took = time.monotonic() - t
            client.config_set(name, old)
            client.close()
        self.note(fault, f"a Lua script of another client spun {took:.2f}s ({name} 100 ms: BUSY for others)")

    def long_state(self) -> None:
        """A server state longer than ten backoff steps: BUSY for long_s seconds."""
        self.busy_script(self.args.long_s, "long")

    def full_server(self) -> None:
        """The server full for full_s seconds: maxmemory below its used memory (noeviction: writes get OOM)."""
        with self.push_lock:  # the producer is no subject of this test: it waits
            client = redis.Redis(port=self.port, socket_timeout=30)
            old = client.config_get("maxmemory").get("maxmemory", "0")
            used = int(client.info("memory")["used_memory"])
            client.config_set("maxmemory", max(1 << 20, used * 9 // 10))
            t = time.monotonic()
            time.sleep(self.args.full_s)
            client.config_set("maxmemory", old)
            took = time.monotonic() - t
            client.close()
        self.note(
            "full", f"maxmemory {used * 9 // 10:,} B below the {used:,} B used for {took:.1f}s (OOM), lifted"
        )

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
            # a daemon restarted while Redis restarts waits for it, as the systemd units' do (by default
            # `dedupd serve` fails at once, with one line, when Redis cannot be reached as it starts)
            proc = subprocess.Popen(
                [sys.executable, "-m", "dedupd", "serve", "--wait-for-redis", "60"],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=err,
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
        self.note("kill", f"kill -9 {name}, restarted as {new}")

    def note(self, what: str, text: str) -> None:
        at = time.monotonic() - self.started
        done = self.progress()
        line = f"[{time.strftime('%H:%M:%S')} +{at:.1f}s] processed~{done}: {text}"
        self.log.append(line)
        self.events_done.append({"fault": what, "at_s": round(at, 1), "processed": done, "what": text})
        print(line, file=sys.stderr, flush=True)

    def processed(self) -> int:
        try:
            return int(self.watcher.hget(self.keys.counters, "processed") or 0)
        except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
            return -1

    def progress(self) -> int:
        """Valid documents processed so far (the counters a wipe took included)."""
        return self.processed_before_wipe + max(self.processed(), 0)

    # ----- producer -----
    def produce(self, items: list[Item], gate: int | None) -> None:
        """Push in chunks (each a transaction: all or nothing); at ``gate`` wait for the wipe."""
        client = redis.Redis(port=self.port)
        chunk = 1000
        start = 0
        hold = gate - self.held if gate is not None and self.held else None
        while start < len(items):
            end = min(start + chunk, len(items))
            for cut in (hold, gate):
                if cut is not None and start < cut < end:
                    end = cut
            if start == hold and not self.wiped.is_set():
                self.hold_daemons()
            if gate is not None and start == gate and not self.wiped.is_set():
                self.at_gate.set()
                self.wiped.wait()
            if not self.frozen:
                self.wait_for_room(client)
            part = items[start:end]
            while True:
                with self.push_lock:
                    try:
                        pipe = client.pipeline(transaction=True)
                        for item in part:
                            pipe.xadd(self.keys.docs, item.materialise())  # type: ignore[arg-type]
                        ids = pipe.execute()
                        for offset, e in enumerate(ids):
                            self.pushed.entries[e.decode()] = (start + offset, self.epoch)
                        self.pushed.upto = end
                        break
                    except redis.ConnectionError:
                        pass
                time.sleep(0.2)
            start = end
        self.pushed_all.set()

    def hold_daemons(self) -> None:
        """Once the wipe's share of the first phase is processed, stop the daemons (SIGSTOP) until the wipe,
        so that the rest of the first phase is pushed and still unprocessed when Redis loses it, however fast
        the daemons are (the watcher reacts in tens of milliseconds: time enough for them to finish it)."""
        while self.progress() < self.wipe_mark and not self.wiped.is_set():
            time.sleep(0.01)
        with self.push_lock:
            for _, proc in self.consumers.values():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGSTOP)
            self.frozen = True

    def release_daemons(self) -> None:
        """Let the daemons stopped by :meth:`hold_daemons` go on (SIGCONT)."""
        if self.frozen:
            for _, proc in self.consumers.values():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGCONT)
            self.frozen = False

    def wait_for_room(self, client: redis.Redis) -> None:
        """Backpressure: at most max_lag unread entries."""
        while True:
            try:
                state = group_state(client, self.keys)
                if state is None or state["lag"] is None or state["lag"] <= self.args.max_lag:
                    return
            except redis.ConnectionError:
                pass
            time.sleep(0.05)

    # ----- run -----
    def schedule(self, n_valid: int, valid_before_wipe: int) -> list[tuple[float, str]]:
        """(valid documents processed, fault) in order, of ``n_valid`` that can be processed. The first
        soak's draws come first, unchanged."""
        a = self.args
        marks = sorted(self.rng.uniform(0.05, 0.95) for _ in range(a.kills))
        aof = self.rng.uniform(0.35, 0.65)
        events = [(m * n_valid, "kill") for m in marks] if "kill" in self.faults else []
        if "aof" in self.faults:
            events.append((aof * n_valid, "aof"))
        if "wipe" in self.faults:  # while part of the first phase is still in flight
            events.append((self.wipe_mark, "wipe"))
        busy = self.rng_new.uniform(0.7, 0.85)
        if "busy" in self.faults:
            events.append((busy * n_valid, "busy"))
        full, long = self.rng_new.uniform(0.2, 0.3), self.rng_new.uniform(0.55, 0.65)  # (after busy's draw)
        if "full" in self.faults:
            events.append((full * n_valid, "full"))
        if "long" in self.faults:
            events.append((long * n_valid, "long"))
        events.sort()
        return events

    def run(self) -> int:
        a = self.args
        docs, expected = corpus(a.docs, a.seed, a.bad)
        items = [
            Item(d["id"], "bad" if d["id"].startswith("bad") else "pair", None, fields=dict(d)) for d in docs
        ]
        for item in items:
            if item.kind == "bad":
                item.code, item.label = BAD_JSON, f"bad#{item.label}"
        gate = None
        if "wipe" in self.faults:
            first = int(a.wipe_at * (a.docs // 2))
            gate = next(i for i, it in enumerate(items) if it.label == f"p{first}a")
        if "malformed" in self.faults:
            lim = Limits.of(load_settings(redis_url=self.url), a.huge_mb)
            extra = adversarial(a.malformed, a.huge, a.odd, a.seed, lim)
            items = interleave(items, extra, gate or 0, a.seed + 14)
        n_valid = sum(1 for it in items if it.code is None)
        valid_before = self.valid_before_wipe = sum(1 for it in items[: gate or 0] if it.code is None)
        self.wipe_mark = max(1.0, a.wipe_when * valid_before)
        self.held = held_items(items[: gate or 0], self.wipe_mark)
        print(
            f"soak: {len(items)} entries ({n_valid} valid documents, {len(expected)} duplicate pairs, "
            f"{len(items) - n_valid} malformed), {a.consumers} consumers, faults {','.join(a.faults) or 'none'}; "
            f"redis on port {self.port}, files in {self.work}",
            file=sys.stderr,
            flush=True,
        )
        self.started = time.monotonic()
        self.start_redis()
        self.collector = Collector(self.port, self.keys)
        self.collector.start()
        for i in range(a.consumers):
            self.start_consumer(i, f"c{i}")
        producer = threading.Thread(target=self.produce, args=(items, gate), daemon=True)
        producer.start()
        held_valid = (
            sum(1 for it in items[(gate or 0) - self.held : gate or 0] if it.code is None) if self.held else 0
        )
        events = self.schedule(n_valid - held_valid, valid_before)  # the held ones go with the wipe
        self.note("start", f"schedule: {[(what, int(m)) for m, what in events]}")
        drained = self.drive(events, len(items))
        elapsed = time.monotonic() - self.started
        alive = [name for name, proc in self.consumers.values() if proc.poll() is None]
        codes = []
        for _name, proc in self.consumers.values():
            proc.send_signal(signal.SIGTERM)
            codes.append(proc.wait(timeout=120))
        self.collector.finish()
        return self.report(items, expected, gate, elapsed, drained, alive, codes)

    def drive(self, events: list[tuple[float, str]], n_items: int) -> bool:
        """Inject the faults when their time comes, watch the daemons, until everything is processed."""
        a = self.args
        deadline = time.monotonic() + a.timeout
        next_status = time.monotonic() + a.status_s
        actions = {"kill": self.kill_one, "aof": self.restart_redis, "wipe": self.wipe_redis}
        actions["busy"] = self.busy_script
        actions["full"], actions["long"] = self.full_server, self.long_state
        while True:
            done = self.progress()
            if time.monotonic() > next_status:  # so that a stuck run says where it is
                next_status += a.status_s
                self.status(n_items)
            while events and done >= events[0][0]:
                if events[0][1] == "wipe" and not self.at_gate.is_set():
                    break
                actions[events.pop(0)[1]]()
            self.watch_daemons()
            if self.pushed_all.is_set() and not events and self.drained():
                return True
            if time.monotonic() > deadline:
                print(f"soak: not drained after {a.timeout:.0f}s", file=sys.stderr)
                return False
            time.sleep(0.05)

    def drained(self) -> bool:
        try:
            state = group_state(self.watcher, self.keys)
        except (redis.ConnectionError, redis.TimeoutError):
            return False
        return state is not None and state["lag"] == 0 and state["pending"] == 0

    def watch_daemons(self) -> None:
        """A daemon that exits by itself is a failure: counted, restarted so that the run goes on."""
        for slot, (name, proc) in list(self.consumers.items()):
            if proc.poll() is not None:
                self.unexpected_exits.append(f"{name}:{proc.returncode}")
                self.note("exit", f"consumer {name} exited with {proc.returncode} (a failure); restarting it")
                self.start_consumer(slot, name)

    def status(self, n_items: int) -> None:
        try:
            state = group_state(self.watcher, self.keys)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            state = {"error": str(exc)}
        assert self.collector is not None
        got = self.collector.got
        print(
            f"[{time.strftime('%H:%M:%S')} +{time.monotonic() - self.started:.0f}s] status: pushed "
            f"{self.pushed.upto}/{n_items}, processed~{self.progress()}, group {state}, alerts read "
            f"{len(got[self.keys.alerts])}, dead letters read {len(got[self.keys.dead])}",
            file=sys.stderr,
            flush=True,
        )

    # ----- checks -----
    def report(
        self,
        items: list[Item],
        expected: set[frozenset[str]],
        gate: int | None,
        elapsed: float,
        drained: bool,
        alive: list[str],
        codes: list[int],
    ) -> int:
        a = self.args
        assert self.collector is not None
        client = redis.Redis(port=self.port)
        after = {i for i, epoch in self.pushed.entries.values() if epoch == 1 or gate is None}
        wiped = {i for i, epoch in self.pushed.entries.values() if epoch == 0 and gate is not None}
        index_of = {e: i for e, (i, _) in self.pushed.entries.items()}
        last_entry = {items[i].label: e for e, i in index_of.items() if items[i].code is None}
        checked = [items[i].label for i in sorted(after) if items[i].code is None]
        lost, present = self.lost(client, checked, last_entry)
        resurrected = len(self.indexed(client, [items[i].label for i in wiped if items[i].code is None]))
        alerts = self.collector.got[self.keys.alerts]
        alerts_after = [x for x in alerts if index_of.get(x["input"]) in after]
        doubled = doubled_count(alerts_after)
        doubled_wiped = doubled_count([x for x in alerts if index_of.get(x["input"]) in wiped])
        found = {frozenset((x["id"], m[0])) for x in alerts for m in json.loads(x["matches"])}
        labels_after = {items[i].label for i in after}
        expected_after = {p for p in expected if p <= labels_after}
        missing = expected_after - found
        unexpected = found - expected
        dead = self.check_dead(items, index_of, after)
        dead["dead_in_stream"] = self.dead_in_stream(client, items, index_of, after)
        logs = {p.name: p.read_text(errors="replace") for p in self.work.glob("*.log")}
        tracebacks = sum(text.count("Traceback") for text in logs.values())
        regrouped = sum(text.count(WIPED_LOG) for text in logs.values())
        busy_seen = sum(1 for text in logs.values() if "BUSY" in text)
        oom_seen = sum(1 for text in logs.values() if "used memory > 'maxmemory'" in text)
        for pair in sorted(missing, key=sorted)[:10]:
            print(f"missing: {' ~ '.join(sorted(pair))}")
        figures: dict[str, Any] = {
            "documents": sum(1 for it in items if it.kind == "pair"),
            "entries": len(items),
            "valid_checked": len(checked),
            "consumers": a.consumers,
            "faults": a.faults,
            "seed": a.seed,
            "duration_s": round(elapsed, 1),
            "drained": drained,
            "lost": lost,
            "doubled": doubled,
            "missing_alerts": len(missing),
            "expected_pairs_checked": len(expected_after),
            "unexpected_pairs": len(unexpected),
            "alerts_read": len(alerts),
            "wiped_entries": len(wiped),
            "wiped_documents": sum(1 for i in wiped if items[i].code is None),
            "wiped_unprocessed_at_wipe": self.wipe_unprocessed,
            "wiped_documents_indexed_after_all": resurrected,
            "wiped_doubled": doubled_wiped,
            "indexed_checked": present,
            **dead,
            "kills": sum(1 for e in self.events_done if e["fault"] == "kill"),
            "aof_restarts": sum(1 for e in self.events_done if e["fault"] == "aof"),
            "wipes": sum(1 for e in self.events_done if e["fault"] == "wipe"),
            "busy_scripts": sum(1 for e in self.events_done if e["fault"] == "busy"),
            "daemons_logging_busy": busy_seen,
            "full_servers": sum(1 for e in self.events_done if e["fault"] == "full"),
            "daemons_logging_oom": oom_seen,
            "long_states": sum(1 for e in self.events_done if e["fault"] == "long"),
            "group_recreated_logged": regrouped,
            "unexpected_exits": self.unexpected_exits,
            "alive_at_end": len(alive),
            "daemons_at_end": len(codes),
            "exit_codes": codes,
            "tracebacks": tracebacks,
            "docs_stream_length": int(client.xlen(self.keys.docs)),
            "events": self.events_done,
        }
        failed = self.failures(figures)
        figures["failed"] = failed
        figures["ok"] = not failed
        print(
            f"lost={lost} doubled_alerts={doubled} missing_alerts={len(missing)} "
            f"dead_letters={dead['dead_found']} (expected {dead['dead_expected']})"
        )
        print(summary(figures))
        print(json.dumps(figures))
        if not a.keep:
            with contextlib.suppress(redis.ConnectionError):
                client.shutdown(nosave=True)
            shutil.rmtree(self.work, ignore_errors=True)
        return 0 if not failed else 1

    def indexed(self, client: redis.Redis, ids: list[str]) -> dict[str, str]:
        """Document id -> the input entry id its stored record was written by, for those indexed."""
        settings = load_settings(redis_url=self.url)
        index = RedisGateway.open(client, self.keys, settings.index_spec())
        out: dict[str, str] = {}
        for start in range(0, len(ids), 5000):
            part = ids[start : start + 5000]
            nums = index.nums_of(part)
            records = index.load_records([n for n in nums if n > 0])
            for doc, num in zip(part, nums, strict=True):
                rec = records.get(num) if num > 0 else None
                if rec is not None and rec.doc_id == doc:
                    out[doc] = rec.entry_id
        return out

    def lost(self, client: redis.Redis, ids: list[str], last_entry: dict[str, str]) -> tuple[int, int]:
        """How many of these documents are not stored as their last entry wrote them; how many are."""
        stored = self.indexed(client, ids)
        good = sum(1 for doc in ids if stored.get(doc) == last_entry[doc])
        return len(ids) - good, good

    def check_dead(self, items: list[Item], index_of: dict[str, int], after: set[int]) -> dict[str, Any]:
        """Every malformed entry pushed after the wipe in the dead letters once, with its code; nothing else."""
        assert self.collector is not None
        letters = Counter[int]()
        wrong: list[str] = []
        unexpected: list[str] = []
        for letter in self.collector.got[self.keys.dead]:
            i = index_of.get(letter.get("input", ""))
            if i is None or items[i].code is None:
                unexpected.append(f"{letter.get('input')}:{letter.get('error')}")
                continue
            letters[i] += 1
            if letter.get("error") != items[i].code or not letter.get("detail"):
                wrong.append(f"{items[i].label}:{letter.get('error')}")
        malformed = [i for i in sorted(after) if items[i].code is not None]
        by_kind: dict[str, list[int]] = {}
        for i in malformed:
            by_kind.setdefault(items[i].kind, [0, 0])
            by_kind[items[i].kind][0] += 1
            by_kind[items[i].kind][1] += letters[i] == 1
        return {
            "dead_expected": len(malformed),
            "dead_found": sum(1 for i in malformed if letters[i] == 1),
            "dead_missing": sum(1 for i in malformed if letters[i] == 0),
            "dead_twice": sum(1 for i in malformed if letters[i] > 1),
            "dead_wrong_code": wrong[:20],
            "dead_unexpected": unexpected[:20],
            "dead_by_kind": {k: f"{v[1]}/{v[0]}" for k, v in sorted(by_kind.items())},
            "odd_valid_checked": sum(1 for i in after if items[i].kind in ODD),
        }

    def dead_in_stream(
        self, client: redis.Redis, items: list[Item], index_of: dict[str, int], after: set[int]
    ) -> int:
        """How many of the malformed entries pushed after the wipe the dedupd:dead stream holds now."""
        inputs: set[str] = set()
        cursor = "-"
        while True:
            page = client.xrange(self.keys.dead, cursor, "+", count=500)
            inputs.update(f.get(b"input", b"").decode() for _, f in page)
            if len(page) < 500:
                break
            cursor = "(" + page[-1][0].decode()
        return sum(1 for e in inputs if index_of.get(e) in after and items[index_of[e]].code is not None)

    def failures(self, f: dict[str, Any]) -> list[str]:
        checks = {
            "drained": f["drained"],
            "lost": f["lost"] == 0,
            "doubled": f["doubled"] == 0,
            "missing_alerts": f["missing_alerts"] == 0,
            "unexpected_pairs": f["unexpected_pairs"] == 0,
            "dead_letters": f["dead_found"] == f["dead_expected"]
            and not f["dead_twice"]
            and not f["dead_wrong_code"]
            and not f["dead_unexpected"]
            and f["dead_in_stream"] == f["dead_expected"],
            "daemons_alive": not f["unexpected_exits"] and f["alive_at_end"] == f["daemons_at_end"],
            "exit_0": all(c == 0 for c in f["exit_codes"]),
            "tracebacks": f["tracebacks"] == 0,
        }
        if "wipe" in self.faults:
            checks["wipe_done"] = f["wipes"] == 1
            checks["group_recreated_logged"] = f["group_recreated_logged"] > 0
        if "aof" in self.faults:
            checks["aof_done"] = f["aof_restarts"] == 1
        if "busy" in self.faults:
            checks["busy_done"] = f["busy_scripts"] == 1
            checks["busy_seen"] = f["daemons_logging_busy"] > 0
        if "full" in self.faults:  # (whether a daemon met the full server depends on its backlog then)
            checks["full_done"] = f["full_servers"] == 1
        if "long" in self.faults:
            checks["long_done"] = f["long_states"] == 1
        return [name for name, ok in checks.items() if not ok]


def doubled_count(alerts: list[dict[str, str]]) -> int:
    """Alerts beyond one per input entry, or beyond one per document (whichever is more)."""
    per_doc = Counter(x["id"] for x in alerts)
    per_input = Counter(x["input"] for x in alerts)
    return max(sum(c - 1 for c in per_doc.values()), sum(c - 1 for c in per_input.values()))


def summary(f: dict[str, Any]) -> str:
    faults = []
    if f["kills"]:
        faults.append(f"consumers killed -9 x{f['kills']}")
    if f["aof_restarts"]:
        faults.append("Redis restarted with AOF")
    if f["wipes"]:
        faults.append("restarted without persistence")
    if f["busy_scripts"]:
        faults.append(f"busy script from another client ({f['daemons_logging_busy']} daemons saw BUSY)")
    if f["full_servers"]:
        faults.append(f"server full (OOM) for a while ({f['daemons_logging_oom']} daemons saw it)")
    if f["long_states"]:
        faults.append("a BUSY server for longer than ten backoff steps")
    faults.append(f"{f['dead_expected']} malformed entries")
    verdict = "OK" if f["ok"] else f"FAILED ({', '.join(f['failed'])})"
    return (
        f"soak {verdict}: {f['documents']:,} documents, {'; '.join(faults)}: lost {f['lost']}, doubled "
        f"{f['doubled']}, missing alerts {f['missing_alerts']} of {f['expected_pairs_checked']:,} pairs, "
        f"malformed in dedupd:dead {f['dead_found']}/{f['dead_expected']} (twice {f['dead_twice']}, "
        f"unexpected dead {len(f['dead_unexpected'])}), odd-but-valid checked {f['odd_valid_checked']}, wiped "
        f"{f['wiped_documents']:,} documents ({f['wiped_entries']:,} entries), "
        f"daemons alive {f['alive_at_end']}/{f['daemons_at_end']} exit codes {sorted(set(f['exit_codes']))}, "
        f"{f['duration_s']:.0f}s"
    )


def faults_arg(text: str) -> list[str]:
    if text == "all":
        return list(FAULTS)
    if text == "none":
        return []
    chosen = [x.strip() for x in text.split(",") if x.strip()]
    unknown = sorted(set(chosen) - set(FAULTS))
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown fault(s) {unknown}: choose from all, none, {', '.join(FAULTS)}"
        )
    return [x for x in FAULTS if x in chosen]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--docs", type=int, default=200_000, help="documents (pairs of near-duplicates; default 200000)"
    )
    p.add_argument("--consumers", type=int, default=3, help="dedupd serve processes (default 3)")
    p.add_argument(
        "--seed", type=int, default=1, help="seed of the corpus, the malformed entries and the schedule"
    )
    p.add_argument(
        "--faults",
        type=faults_arg,
        default=list(FAULTS),
        help=f"all (default), none, or a comma-separated subset of {', '.join(FAULTS)}",
    )
    p.add_argument("--kills", type=int, default=6, help="kill -9 of a random consumer, at random moments")
    p.add_argument(
        "--bad", type=int, default=50, help="bad entries (bad_json) mixed in, as in the first soak"
    )
    p.add_argument("--malformed", type=int, default=3000, help="malformed entries (fault malformed)")
    p.add_argument("--huge", type=int, default=5, help="huge malformed entries (fault malformed)")
    p.add_argument("--huge-mb", type=float, default=20, help="size of a huge entry's field, MB")
    p.add_argument("--odd", type=int, default=120, help="odd but valid entries (fault malformed)")
    p.add_argument("--wipe-at", type=float, default=0.15, help="share of the pairs pushed before the wipe")
    p.add_argument(
        "--wipe-when",
        type=float,
        default=0.7,
        help="the wipe comes once this share of the first phase's documents is processed (default 0.7)",
    )
    p.add_argument("--busy-s", type=float, default=1.5, help="how long the busy script spins")
    p.add_argument("--full-s", type=float, default=10, help="how long the server is full (fault full)")
    p.add_argument("--long-s", type=float, default=35, help="how long the long BUSY state lasts (fault long)")
    p.add_argument("--batch-size", type=int, default=500)
    p.add_argument("--max-lag", type=int, default=20_000, help="producer backpressure (unread entries)")
    p.add_argument("--fsync", choices=["always", "everysec"], default="always", help="Redis appendfsync")
    p.add_argument("--port", type=int, default=0, help="Redis port (default: a free one)")
    p.add_argument("--workdir", help="Redis data and consumer logs (default: a temporary directory)")
    p.add_argument("--keep", action="store_true", help="keep Redis running and the files when done")
    p.add_argument("--timeout", type=float, default=3600, help="give up after this many seconds")
    p.add_argument("--status-s", type=float, default=30, help="a status line every this many seconds")
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
