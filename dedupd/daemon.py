"""The consumer daemon: a small run() loop around one iteration (read or claim a batch, process, ack).

The first SIGTERM/SIGINT stops reading; the batch in hand is finished, acknowledged, and run() returns
0. A second signal exits at once (status 130). Redis errors are retried with capped exponential
backoff; entries of a failed batch stay pending and are read again (own pending entries first, then
other consumers' idle ones through XAUTOCLAIM), and an entry delivered more than ``max_deliveries``
times goes to the dead-letter stream.

Recovered entries (own pending ones after a restart or a Redis error, and idle ones claimed from other
consumers with ``XAUTOCLAIM ... JUSTID``, which does not count a delivery) are read and acknowledged one
at a time: an entry that crashes the daemon is then the only one whose delivery count grows, so it alone
reaches the dead-letter stream, not the neighbours of its batch. With ``docs_retention_s`` set, the
acknowledged history of the input stream is trimmed (``XTRIM MINID``), never below an entry that a
consumer group has not yet read or acknowledged.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from types import FrameType
from typing import Any

import redis

from dedupd.connection import RETRYABLE, connect
from dedupd.entries import PROCESSING_FAILED
from dedupd.index import Index
from dedupd.keys import Keys
from dedupd.metrics import Metrics
from dedupd.processor import BatchResult, Processor, RawEntry, stream_id_key
from dedupd.settings import Settings
from dedupd.spec import IndexSpec

log = logging.getLogger(__name__)

GROUP = "dedupd"
_MAX_BACKOFF_S = 5.0
_TRIM_EVERY_S = 0.2
# Errors that say nothing about the entries of a batch: never a reason to fail or dead-letter an entry.
_NOT_THE_ENTRY = (*RETRYABLE, redis.exceptions.NoPermissionError)


def _sid(raw: Any) -> tuple[int, int]:
    text = raw.decode() if isinstance(raw, bytes) else str(raw)
    return stream_id_key(text)


def trim_floor(client: Any, stream: str) -> tuple[int, int] | None:
    """The lowest entry id that some consumer group of ``stream`` still needs, or None (no group).

    Entries below it have been delivered to every group (id <= its last-delivered-id) and are not
    pending in any, i.e. every group has acknowledged them; ``XTRIM MINID`` at this id loses nothing.
    """
    floor: tuple[int, int] | None = None
    for g in client.xinfo_groups(stream):
        ms, seq = _sid(g["last-delivered-id"])
        need = (ms, seq + 1)
        if int(g["pending"]):
            oldest = client.xpending(stream, g["name"])["min"]
            if oldest is not None:
                need = min(need, _sid(oldest))
        floor = need if floor is None else min(floor, need)
    return floor


def ensure_group(client: Any, keys: Keys) -> None:
    """Create the consumer group (from the start of the stream, so nothing pushed earlier is missed)."""
    try:
        client.xgroup_create(keys.docs, GROUP, id="0", mkstream=True)
    except redis.ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise


def _decode_entries(entries: Any) -> list[RawEntry]:
    out: list[RawEntry] = []
    for entry_id, fields in entries or []:
        if fields is None:  # deleted from the stream while pending
            continue
        out.append((entry_id.decode() if isinstance(entry_id, bytes) else entry_id, dict(fields)))
    return out


def _next_cursor(claimed: list[Any], count: int) -> str:
    """Where the next XAUTOCLAIM scan starts: after the last claimed id, or from the start when all were seen."""
    if len(claimed) < count:
        return "0-0"
    ms, seq = _sid(claimed[-1])
    return f"{ms}-{seq}"


class Daemon:
    """One consumer of the group."""

    def __init__(self, settings: Settings, client: Any | None = None) -> None:
        self.settings = settings
        self.keys = Keys(settings.prefix)
        self.consumer = settings.consumer_name()
        self.client = client if client is not None else connect(settings, retry_for_s=60)
        spec = settings.index_spec()
        self.index = Index.open(self.client, self.keys, spec, store_shingles=settings.verify == "exact")
        self.processor = Processor(self.client, settings, self.index)
        self.shadow: Processor | None = None  # the next generation's, while a rebuild builds it
        self.stopping = threading.Event()
        self._signals = 0
        self._recover_own = True  # first read our own pending entries (a restart with the same name)
        self._last_claim = 0.0
        self._claim_cursor = "0-0"
        self._last_beat = 0.0
        self._last_trim = 0.0
        self.totals = {"processed": 0, "alerts": 0, "dead": 0, "batches": 0}
        self.metrics = Metrics()
        ensure_group(self.client, self.keys)

    # ----- lifecycle -----
    def install_signal_handlers(self) -> None:
        """First SIGTERM/SIGINT: drain and stop. Second: exit at once."""
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signals += 1
        if self._signals > 1:
            log.warning("second signal: exiting now")
            os._exit(130)
        log.info("signal %s: finishing the current batch, then exiting", signal.Signals(signum).name)
        self.stopping.set()

    def run(self) -> int:
        """Serve until stopped; returns the exit status."""
        spec = self.index.spec
        log.info("consumer %s serving %s (group %s) on %s; %s, num_perm=%d, bands=%d x rows=%d, threshold=%.2f, "
                 "verify=%s", self.consumer, self.keys.docs, GROUP, self.settings.redacted_url(), spec.shingle,
                 spec.num_perm, spec.bands, spec.rows, self.settings.threshold, self.settings.verify)
        if spec.bands * spec.rows < spec.num_perm:
            log.info("banding uses %d of %d signature positions; all %d are used to verify candidates",
                     spec.bands * spec.rows, spec.num_perm, spec.num_perm)
        started = time.monotonic()
        self.processor.warm_up()
        log.info("compiled kernels loaded in %.2fs", time.monotonic() - started)
        self.metrics.serve(self.settings.metrics_host, self.settings.metrics_port)
        delay = 0.1
        while not self.stopping.is_set():
            try:
                self.iteration()
                delay = 0.1
            except RETRYABLE as exc:
                log.warning("Redis error (%s); retrying in %.1fs", exc, delay)
                self._recover_own = True
                self.stopping.wait(delay)
                delay = min(delay * 2, _MAX_BACKOFF_S)
        self._farewell()
        self.metrics.close()
        log.info("stopped: %s", json.dumps(self.totals))
        return 0

    def _farewell(self) -> None:
        try:
            self.client.delete(self.keys.heartbeat(self.consumer))
        except RETRYABLE:
            pass

    # ----- one iteration -----
    def iteration(self) -> BatchResult | None:
        """Follow the index generations, heartbeat, then read or claim one batch and process it."""
        if self._sync_generation():
            self._last_beat = 0.0  # tell a waiting `dedupd rebuild` at once
        self._heartbeat()
        self.metrics.refresh_group(self.client, self.keys)
        batch, deliveries = self._next_batch()
        if not batch:
            self._trim()
            return None
        result = self.handle(batch, deliveries)
        self._trim()
        return result

    def handle(self, batch: list[RawEntry], deliveries: dict[str, int] | None) -> BatchResult:
        """Process and acknowledge one batch; a batch that fails is retried entry by entry."""
        started = time.monotonic()
        try:
            result = self._process(batch, deliveries)
        except _NOT_THE_ENTRY:
            raise
        except Exception:
            log.exception("batch of %d entries failed; retrying them one by one", len(batch))
            result = BatchResult()
            for raw in batch:
                try:
                    one = self._process([raw], deliveries)
                except _NOT_THE_ENTRY:
                    raise
                except Exception as exc:  # noqa: BLE001 - an entry must never stop the daemon
                    log.exception("entry %s failed", raw[0])
                    count = (deliveries or {}).get(raw[0], 1)
                    if count >= self.settings.max_deliveries:
                        self.processor.dead_letter([(raw, PROCESSING_FAILED, f"{type(exc).__name__}: {exc}")])
                        result.ack.append(raw[0])
                        result.dead += 1
                    continue  # left pending: claimed again after claim_idle_ms
                result.ack += one.ack
                result.processed += one.processed
                result.alerts += one.alerts
                result.dead += one.dead
        if result.ack:
            self.client.xack(self.keys.docs, GROUP, *result.ack)
        self.totals["processed"] += result.processed
        self.totals["alerts"] += len(result.alerts)
        self.totals["dead"] += result.dead
        self.totals["batches"] += 1
        self.metrics.observe_batch(time.monotonic() - started, len(batch), result.processed, len(result.alerts),
                                   result.dead)
        return result

    def _process(self, batch: list[RawEntry], deliveries: dict[str, int] | None) -> BatchResult:
        """The serving generation's processing, and during a rebuild the next generation's too."""
        result = self.processor.process(batch, deliveries)
        if self.shadow is not None:
            self.shadow.process(batch, deliveries)
        return result

    def _sync_generation(self) -> bool:
        """Follow a rebuild: write into the next generation too while one is built, switch when it is made
        current. Returns True when something changed."""
        spec_raw, gen_raw, next_raw, next_gen_raw = self.client.hmget(
            self.keys.meta, ["spec", "gen", "next_spec", "next_gen"])
        changed = False
        store = self.settings.verify == "exact"
        gen = int(gen_raw or 0)
        if spec_raw is not None and gen != self.index.generation:
            spec = IndexSpec.from_json(spec_raw)
            log.info("the index was rebuilt (generation %d: %s, bands=%d x rows=%d); following it", gen,
                     spec.shingle, spec.bands, spec.rows)
            self.index = Index(self.client, self.keys, spec, gen, store_shingles=store)
            self.processor = Processor(self.client, self.settings, self.index)
            changed = True
        want = int(next_gen_raw) if next_gen_raw is not None else None
        have = self.shadow.index.generation if self.shadow is not None else None
        if want != have:
            if want is None or next_raw is None:
                self.shadow = None
            else:
                nxt = IndexSpec.from_json(next_raw)
                log.info("a rebuild is building generation %d (%s, bands=%d x rows=%d): writing into it too",
                         want, nxt.shingle, nxt.bands, nxt.rows)
                shadow_index = Index(self.client, self.keys, nxt, want, store_shingles=store, shadow=True)
                self.shadow = Processor(self.client, self.settings, shadow_index, shadow=True)
            changed = True
        return changed

    def _next_batch(self) -> tuple[list[RawEntry], dict[str, int] | None]:
        s = self.settings
        if self._recover_own:
            recovered = self._recover_one()
            if recovered:
                return recovered, self._delivery_counts(recovered)
            self._recover_own = False
        now = time.monotonic()
        if now - self._last_claim >= s.claim_idle_ms / 2000:
            self._last_claim = now
            # JUSTID: take ownership without counting a delivery; _recover_one reads (and counts) them one by one
            claimed = self.client.xautoclaim(self.keys.docs, GROUP, self.consumer, s.claim_idle_ms,
                                             self._claim_cursor, count=s.batch_size, justid=True)
            self._claim_cursor = _next_cursor(claimed, s.batch_size)
            if claimed:
                log.info("claimed %d idle pending entries", len(claimed))
                self._recover_own = True
                recovered = self._recover_one()
                if recovered:
                    return recovered, self._delivery_counts(recovered)
                self._recover_own = False
        reply = self.client.xreadgroup(GROUP, self.consumer, {self.keys.docs: ">"}, count=s.batch_size,
                                       block=s.block_ms)
        return _decode_entries(reply[0][1] if reply else []), None

    def _recover_one(self) -> list[RawEntry]:
        """Read the oldest of our own pending entries (one delivery more), acknowledging deleted ones."""
        while True:
            reply = self.client.xreadgroup(GROUP, self.consumer, {self.keys.docs: "0"}, count=1)
            raw = reply[0][1] if reply else []
            if not raw:
                return []
            entries = _decode_entries(raw)
            if entries:
                return entries
            gone = raw[0][0]
            log.warning("pending entry %s was deleted from the stream; acknowledging it", "%d-%d" % _sid(gone))
            self.client.xack(self.keys.docs, GROUP, gone)

    def _trim(self) -> None:
        """Trim the acknowledged input history (``docs_retention_s``), at most every ``_TRIM_EVERY_S``."""
        retention = self.settings.docs_retention_s
        now = time.monotonic()
        if retention is None or now - self._last_trim < _TRIM_EVERY_S:
            return
        self._last_trim = now
        floor = trim_floor(self.client, self.keys.docs)
        if floor is None:
            return
        minid = min(floor, (int(time.time() * 1000) - retention * 1000, 0))
        if minid[0] > 0:
            self.client.xtrim(self.keys.docs, minid=f"{minid[0]}-{minid[1]}", approximate=True)

    def _delivery_counts(self, entries: list[RawEntry]) -> dict[str, int]:
        ids = [e[0] for e in entries]
        lo, hi = min(ids, key=stream_id_key), max(ids, key=stream_id_key)
        pending = self.client.xpending_range(self.keys.docs, GROUP, min=lo, max=hi, count=len(ids) * 4 + 16)
        wanted = set(ids)
        out: dict[str, int] = {}
        for p in pending:
            mid = p["message_id"].decode() if isinstance(p["message_id"], bytes) else p["message_id"]
            if mid in wanted:
                out[mid] = int(p["times_delivered"])
        return out

    def _heartbeat(self) -> None:
        now = time.monotonic()
        if now - self._last_beat < max(1.0, self.settings.heartbeat_ttl_s / 3):
            return
        self._last_beat = now
        beat = json.dumps({"pid": os.getpid(), "time": time.time(), "gen": self.index.generation,
                           "shadow": self.shadow.index.generation if self.shadow is not None else None,
                           **self.totals})
        self.client.set(self.keys.heartbeat(self.consumer), beat, ex=self.settings.heartbeat_ttl_s)

