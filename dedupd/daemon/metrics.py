"""Prometheus metrics of one daemon: documents, duplicates, dead letters, lag, pending, batch latency, size.

Each daemon serves its own registry on ``metrics_host:metrics_port`` (127.0.0.1:9464 by default;
``metrics_port = 0`` turns the endpoint off). Counters count what this process did since it started
(Prometheus sums them over the daemons); the lag, pending and memory headroom gauges are the consumer
group's and the server's, refreshed every few seconds, so every daemon reports the same value (take ``max``
over them, not ``sum``).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    start_http_server,
)

from dedupd.daemon.monitor import group_state
from dedupd.server.eviction import ServerMemory, read_memory, tightest

log = logging.getLogger("dedupd.metrics")  # (named as before the layers: log lines and filters show it)

GROUP_REFRESH_S = 5.0
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 10_000)
NO_LIMIT = -1  # the headroom gauge when the server has no maxmemory (0), or does not say


class Metrics:
    """The metrics of one daemon, in a registry of its own (several daemons can live in one process)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        r = self.registry
        self.processed = Counter(
            "dedupd_documents_processed",
            "Input entries processed (indexed, replaced, appended or deleted)",
            registry=r,
        )
        self.duplicates = Counter("dedupd_duplicates", "Duplicate alerts written", registry=r)
        self.dead_letters = Counter(
            "dedupd_dead_letters", "Entries sent to the dead-letter stream", registry=r
        )
        self.batches = Counter("dedupd_batches", "Batches processed", registry=r)
        self.lag = Gauge(
            "dedupd_consumer_lag", "Input entries not yet delivered to any consumer of the group", registry=r
        )
        self.pending = Gauge(
            "dedupd_pending_entries", "Entries delivered to the group but not yet acknowledged", registry=r
        )
        self.headroom = Gauge(
            "dedupd_redis_memory_headroom_bytes",
            "Bytes Redis can use before maxmemory (maxmemory - used_memory, 0 at or over it; the least over "
            "a cluster's primaries); -1 with no limit (maxmemory 0) or when INFO does not say",
            registry=r,
        )
        self.headroom.set(NO_LIMIT)
        self.batch_seconds = Histogram(
            "dedupd_batch_seconds",
            "Time to process and acknowledge one batch",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.batch_size = Histogram(
            "dedupd_batch_size", "Entries per batch", buckets=SIZE_BUCKETS, registry=r
        )
        # the retention window (index/retention.py): what this daemon expired, and the group-wide backlog and
        # oldest document as its last expiry step saw them (take max over the daemons)
        self.expired = Counter(
            "dedupd_documents_expired", "Documents expired by the retention window", registry=r
        )
        self.expiry_backlog = Gauge(
            "dedupd_expiry_backlog",
            "Documents past the retention window not yet expired (as this daemon's last step saw it)",
            registry=r,
        )
        self.oldest_age = Gauge(
            "dedupd_oldest_document_age_seconds",
            "Age of the least recently touched indexed document (retention window; -1 when none)",
            registry=r,
        )
        self.oldest_age.set(-1)
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._last_group = 0.0

    # ----- endpoint -----
    def serve(self, host: str, port: int) -> tuple[str, int] | None:
        """Start the HTTP endpoint (``/metrics``) in a background thread.

        Returns:
            The address it listens on, or None when ``port`` is 0 (off) or the port cannot be bound (then
            a warning is logged and the daemon goes on without metrics).
        """
        if port == 0:
            return None
        try:
            self._server, self._thread = start_http_server(port, addr=host, registry=self.registry)
        except OSError as exc:
            log.warning(
                "metrics endpoint not started: cannot listen on %s:%d (%s); give each daemon on this "
                "host its own metrics_port (DEDUPD_METRICS_PORT), or 0 to turn metrics off",
                host,
                port,
                exc,
            )
            return None
        address = self._server.server_address
        log.info("metrics on http://%s:%d/metrics", host, address[1])
        return host, int(address[1])

    def close(self) -> None:
        """Stop the endpoint, if it runs."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    # ----- observations -----
    def observe_batch(self, seconds: float, size: int, processed: int, alerts: int, dead: int) -> None:
        """Record one batch: its latency and size, and what it did."""
        self.batches.inc()
        self.batch_seconds.observe(seconds)
        self.batch_size.observe(size)
        self.processed.inc(processed)
        self.duplicates.inc(alerts)
        self.dead_letters.inc(dead)

    def observe_expiry(self, expired: int, backlog: int, oldest_age_s: float | None) -> None:
        """Record one expiry step: documents expired, the backlog left, the oldest document's age."""
        self.expired.inc(expired)
        self.expiry_backlog.set(backlog)
        self.oldest_age.set(-1 if oldest_age_s is None else oldest_age_s)

    def set_group(self, lag: int | None, pending: int) -> None:
        """Record the consumer group's lag (None: unknown, kept as it was) and pending count."""
        if lag is not None:
            self.lag.set(lag)
        self.pending.set(pending)

    def set_memory(self, servers: list[ServerMemory]) -> None:
        """Record the memory headroom (the least over a cluster's primaries; -1 with no limit or unknown)."""
        tight = tightest(servers)
        room = tight.headroom if tight is not None else None
        self.headroom.set(NO_LIMIT if room is None else room)

    def refresh_group(
        self, client: Any, keys: Any, every_s: float = GROUP_REFRESH_S
    ) -> list[ServerMemory] | None:
        """Read the group's lag and pending count and the server's memory at most every ``every_s`` seconds
        (XINFO GROUPS and STREAM, INFO memory). Returns the memory figures read, None when not due."""
        now = time.monotonic()
        if now - self._last_group < every_s:
            return None
        self._last_group = now
        state = group_state(client, keys)
        if state is not None:
            self.set_group(state["lag"], state["pending"])
        servers = read_memory(client)
        self.set_memory(servers)
        return servers
