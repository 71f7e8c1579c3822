"""The consumer daemon: a small run() loop around one iteration (read or claim a batch, process, ack).

The first SIGTERM/SIGINT stops reading; the batch in hand is finished, acknowledged, and run() returns
0. A second signal exits at once (status 130). Redis errors are retried with capped exponential
backoff; entries of a failed batch stay pending and are read again (own pending entries first, then
other consumers' idle ones through XAUTOCLAIM), and an entry delivered more than ``max_deliveries``
times goes to the dead-letter stream.
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


class Daemon:
    """One consumer of the group."""

    def __init__(self, settings: Settings, client: Any | None = None) -> None:
        self.settings = settings
        self.keys = Keys(settings.prefix)
        self.consumer = settings.consumer_name()
        self.client = client if client is not None else connect(settings, retry_for_s=60)
        spec = IndexSpec.from_settings(settings)
        self.index = Index.open(self.client, self.keys, spec, store_shingles=settings.verify == "exact")
        self.processor = Processor(self.client, settings, self.index)
        self.stopping = threading.Event()
        self._signals = 0
        self._recover_own = True  # first read our own pending entries (a restart with the same name)
        self._last_claim = 0.0
        self._claim_cursor = "0-0"
        self._last_beat = 0.0
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
        """Heartbeat, then read or claim one batch and process it. Returns what the batch did."""
        self._heartbeat()
        self.metrics.refresh_group(self.client, self.keys)
        batch, deliveries = self._next_batch()
        if not batch:
            return None
        return self.handle(batch, deliveries)

    def handle(self, batch: list[RawEntry], deliveries: dict[str, int] | None) -> BatchResult:
        """Process and acknowledge one batch; a batch that fails is retried entry by entry."""
        started = time.monotonic()
        try:
            result = self.processor.process(batch, deliveries)
        except RETRYABLE:
            raise
        except Exception:
            log.exception("batch of %d entries failed; retrying them one by one", len(batch))
            result = BatchResult()
            for raw in batch:
                try:
                    one = self.processor.process([raw], deliveries)
                except RETRYABLE:
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

    def _next_batch(self) -> tuple[list[RawEntry], dict[str, int] | None]:
        s = self.settings
        if self._recover_own:
            reply = self.client.xreadgroup(GROUP, self.consumer, {self.keys.docs: "0"}, count=s.batch_size)
            entries = _decode_entries(reply[0][1] if reply else [])
            if entries:
                return entries, self._delivery_counts(entries)
            self._recover_own = False
        now = time.monotonic()
        if now - self._last_claim >= s.claim_idle_ms / 2000:
            self._last_claim = now
            cursor, claimed, *_ = self.client.xautoclaim(
                self.keys.docs, GROUP, self.consumer, s.claim_idle_ms, self._claim_cursor, count=s.batch_size)
            self._claim_cursor = cursor.decode() if isinstance(cursor, bytes) else cursor
            entries = _decode_entries(claimed)
            if entries:
                log.info("claimed %d idle pending entries", len(entries))
                return entries, self._delivery_counts(entries)
        reply = self.client.xreadgroup(GROUP, self.consumer, {self.keys.docs: ">"}, count=s.batch_size,
                                       block=s.block_ms)
        return _decode_entries(reply[0][1] if reply else []), None

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
        beat = json.dumps({"pid": os.getpid(), "time": time.time(), **self.totals})
        self.client.set(self.keys.heartbeat(self.consumer), beat, ex=self.settings.heartbeat_ttl_s)

