"""The consumer daemon: a small run() loop around one iteration (read or claim a batch, process, ack).

The first SIGTERM/SIGINT stops reading; the batch in hand is finished, acknowledged, and run() returns
0. A second signal exits at once (status 130, through SystemExit so that exit handlers run). Redis errors
are retried with capped exponential backoff; entries of a failed batch stay pending and are read again
(own pending entries first, then other consumers' idle ones claimed with ``XAUTOCLAIM ... JUSTID``, which
does not count a delivery, and read one at a time), and an entry delivered more than ``max_deliveries``
times goes to the dead-letter stream: an entry that crashes the daemon is then the only one whose delivery
count grows, not the neighbours of its batch.

Per-document order: an entry whose document has an older entry in flight (held by another consumer, or
not yet claimed from a dead one) is *deferred*: kept in memory, unacknowledged, and retried each iteration
until the older one is applied (see planner.py). A daemon holding ``batch_size`` deferred entries reads
nothing new until some are done. During a rebuild's switch the daemons pause (see generations.py).

Overlap (``overlap_batches``, on by default): a batch's second half (verification, unions, alerts, evictions,
its acknowledgement; processor.py's ``finish``) runs in a second thread (worker_thread.py) while the main thread reads,
fingerprints and indexes the next batch (``start``), whose records and buckets are written once the batch in
hand's evictions are (and its unions, when the next batch deletes documents). At most one batch is in that
second half; a batch sharing a document with it, a claimed or recovered entry, waiting entries, a rebuild's
switch or pause, and a stop all wait for it first. Off with ``wait_replicas`` (WAIT covers one connection's
writes) and on a Redis Cluster. With a retention window the expiry step after a batch runs in a third thread
(daemon/expiry.py: Steps) beside the next batch's start, and is accounted for before the next step
(daemon/housekeeping.py: the chores between batches, and when each runs).

Bounded memory: the entries a daemon holds (a read, and the deferred ones) are at most ``batch_max_bytes``
(stream.py reads bounded in bytes; an entry larger than ``max_entry_bytes`` arrives cut short and is
dead-lettered). On a clean exit the daemon leaves the consumer group when it holds no pending entry; the
output streams' redelivery markers (``:seen``) are pruned by age on a timer, not only when written.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from types import FrameType

import redis

from dedupd.daemon.batch import BatchResult, RawEntry, Started
from dedupd.daemon.dead_letters import dead_letter
from dedupd.daemon.deferred import Deferred
from dedupd.daemon.entries import PROCESSING_FAILED, entry_bytes
from dedupd.daemon.handoff import Handoff
from dedupd.daemon.housekeeping import Housekeeping
from dedupd.daemon.metrics import Metrics
from dedupd.daemon.processor import Processor
from dedupd.daemon.redelivery import Redelivery
from dedupd.daemon.stream import ConsumerStream, ensure_group
from dedupd.daemon.upkeep import Every, summary_line, tune_gc
from dedupd.daemon.worker_thread import Worker
from dedupd.index.docstate import sid
from dedupd.index.gateway import RedisGateway, open_spec
from dedupd.index.generations import Generations
from dedupd.index.keys import GROUP, Heartbeat, Keys
from dedupd.server.connection import (
    RETRYABLE,
    RedisClient,
    connect,
    is_transient,
    not_the_entry,
    retry_transient,
    wait_for_replicas,
)
from dedupd.server.eviction import ServerMemory, first_refusal, refuse_eviction
from dedupd.settings import Settings
from dedupd.similarity.spec import IndexSpec

log = logging.getLogger("dedupd.daemon")  # (named as before the layers: log lines and filters show it)

_MAX_BACKOFF_S = 5.0
_POLL_S = 0.1  # how often the meta hash (generation, pause) is read
_RECONCILE_S = 2.0  # while entries wait and nothing is read: how often the in-flight registry is reconciled
_DEFERRED_BLOCK_MS = 50


@dataclass(frozen=True, slots=True)
class InHand:
    """A batch being finished by the worker: its entries, their document ids, its outcome, whether its
    evictions are written, whether its unions are, when it started and its size in bytes."""

    batch: list[RawEntry]
    docs: frozenset[bytes]
    future: Future[BatchResult]
    handoff: Handoff  # set as the next batch may write (daemon/handoff.py)
    started: float
    size: int


class Daemon:
    """One consumer of the group."""

    def __init__(self, settings: Settings, client: RedisClient | None = None) -> None:
        self.settings = settings
        self.keys = Keys(settings.prefix)
        self.consumer = settings.consumer_name()
        self.client: RedisClient = client if client is not None else connect(settings, retry_for_s=60)
        # an evicting server would lose the index's keys in silence: refuse before writing anything
        retry_transient(lambda: refuse_eviction(self.client), settings, 60)
        self._evicting: str | None = None  # what the server's policy said when last read (see _watch_memory)
        self.generations = Generations(self.client, self.keys)
        # the server can turn BUSY (another client's script) or away right after the first PING
        spec, gen = retry_transient(
            lambda: open_spec(self.client, self.keys, settings.index_spec(), settings.serving_spec),
            settings,
            60,
        )
        self.stream = ConsumerStream(
            self.client,
            self.keys,
            self.consumer,
            settings.max_id_bytes,
            settings.max_entry_bytes,
            settings.dead_letter_max_bytes,
        )
        self._serve(spec, gen)
        self.stopping = threading.Event()
        self._signals = 0
        self.redelivery = Redelivery(self.stream, settings)  # (our own pending entries first: a restart)
        self.deferred = Deferred()
        self.in_hand: InHand | None = None  # the batch the worker finishes (overlap)
        self._worker = Worker(f"dedupd-finish-{self.consumer}")
        self.paused_for: int | None = None
        self.poll, self.beat = Every(_POLL_S), Every(max(1.0, settings.heartbeat_ttl_s / 3))
        self.touch, self.reconcile = Every(settings.claim_idle_ms / 3000), Every(_RECONCILE_S)
        self.totals = {"processed": 0, "alerts": 0, "dead": 0, "batches": 0, "expired": 0}
        self.rebuilding = False  # a rebuild runs: the expiry waits for it
        self.metrics = Metrics()
        self.housekeeping = Housekeeping(
            self.client,
            self.keys,
            settings,
            self.stream,
            self.metrics,
            self.totals,
            self.consumer,
            self._exit_if_asked,
        )
        retry_transient(lambda: ensure_group(self.client, self.keys), settings, 60)

    def _serve(self, spec: IndexSpec, gen: int) -> None:
        self.gateway = RedisGateway(
            self.client,
            self.keys,
            spec,
            gen,
            tombstone_ttl_s=self.settings.tombstone_ttl_s,
            bounds=self.settings.bounds(),
        )
        self.processor = Processor(self.gateway, self.settings, inflight=self.stream.inflight)

    @property
    def overlaps(self) -> bool:
        """Whether :meth:`run` finishes a batch while it starts the next (see the module docstring)."""
        s = self.settings
        return s.overlap_batches and not s.wait_replicas and not self.gateway.cluster

    # ----- lifecycle -----
    def install_signal_handlers(self) -> None:
        """First SIGTERM/SIGINT: drain and stop. Second: exit at once."""
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signals += 1
        if self._signals > 1:
            log.warning("second signal: exiting now")
            raise SystemExit(130)  # code it interrupts may wrap it (numba: SystemError): see _exit_if_asked
        log.info("signal %s: finishing the current batch, then exiting", signal.Signals(signum).name)
        self.stopping.set()

    def _exit_if_asked(self) -> None:
        """A second signal's SystemExit may reach us wrapped in another exception: exit as it asked."""
        if self._signals > 1:
            raise SystemExit(130)

    def run(self) -> int:
        """Serve until stopped; returns the exit status."""
        spec = self.gateway.spec
        log.info(
            "consumer %s serving %s (group %s) on %s; %s, num_perm=%d, bands=%d x rows=%d, threshold=%.2f, "
            "verify=%s",
            self.consumer,
            self.keys.docs,
            GROUP,
            self.settings.redacted_url(),
            spec.shingle,
            spec.num_perm,
            spec.bands,
            spec.rows,
            spec.threshold,
            spec.verify,
        )
        if spec.bands * spec.rows < spec.num_perm:
            log.info(
                "banding uses %d of %d signature positions; all %d are used to verify candidates",
                spec.bands * spec.rows,
                spec.num_perm,
                spec.num_perm,
            )
        started = time.monotonic()
        self.processor.warm_up()
        log.info("compiled kernels loaded in %.2fs", time.monotonic() - started)
        tune_gc()
        self.metrics.serve(self.settings.metrics_host, self.settings.metrics_port)
        delay, since = 0.1, 0.0
        while not self.stopping.is_set():
            try:
                self.iteration(overlap=self.overlaps)
            except Exception as exc:
                self._exit_if_asked()
                if not is_transient(exc):
                    raise
                if not since:
                    since = time.monotonic()
                    log.warning(
                        "Redis error (%s); retrying in %.1fs, backing off up to %.0fs (said once until it "
                        "answers)",
                        exc,
                        delay,
                        _MAX_BACKOFF_S,
                    )
                else:
                    log.debug("Redis error (%s); retrying in %.1fs", exc, delay)
                self._recover_after_error(exc)
                self.stopping.wait(delay)
                delay = min(delay * 2, _MAX_BACKOFF_S)
                continue
            if since:
                log.info("Redis answers again after %.1fs; going on", time.monotonic() - since)
            delay, since = 0.1, 0.0
        self._drain()
        self._farewell()
        self.metrics.close()
        log.info("stopped: %s", summary_line(self.totals))
        return 0

    def _drain(self) -> None:
        """Finish the batch in hand, if any; a Redis error leaves its entries pending (done again later).
        Then the expiry step in the background (a Redis error leaves its claim: taken over once it lapses)."""
        self._unless_transient(
            self.settle, "the last batch could not be finished (%s); its entries stay pending"
        )
        self._unless_transient(
            self.settle_expiry, "the last expiry step could not be finished (%s); its claim lapses"
        )

    def _unless_transient(self, action: Callable[[], object], warning: str) -> None:
        """Run ``action`` on the way out: a transient Redis state is logged (``warning``, with the error) and
        let go; any other error is raised."""
        try:
            action()
        except Exception as exc:
            self._exit_if_asked()
            if not is_transient(exc):
                raise
            log.warning(warning, exc)

    def _recover_after_error(self, exc: BaseException) -> None:
        """After a Redis error: read our own pending entries again; recreate a lost consumer group."""
        for settle, what in ((self.settle, "the batch in hand"), (self.settle_expiry, "the expiry step")):
            try:  # the batch in hand first: its entries are read again with ours unless it ends now
                settle()
            except Exception as again:
                self._exit_if_asked()
                if not not_the_entry(again):
                    raise
                log.debug("%s failed too (%s)", what, again)
        self.redelivery.recover()
        self.processor.gateway.forget_roots()  # (a server restarted without its data gives ids out again)
        if "NOGROUP" not in str(exc):
            return
        try:
            if ensure_group(self.client, self.keys):
                log.warning(
                    "the consumer group %r of %s was missing (Redis restarted without persistence?): "
                    "recreated it from the start of the stream; history before the restart is gone",
                    GROUP,
                    self.keys.docs,
                )
        except Exception as again:  # the server is still away: the next iteration tells
            log.debug("recreating the consumer group failed (%s)", again)

    def _farewell(self) -> None:
        """A clean exit: drop the heartbeat, and leave the group unless entries are still pending for us
        (deferred ones: another consumer claims them after claim_idle_ms, or we read them on a restart).
        Best effort: with the server away or in a passing state (BUSY, LOADING, ...) the daemon leaves
        without it (the heartbeat expires; `dedupd stats` lists the consumer as stale later)."""
        self._unless_transient(
            self._leave, "Redis did not answer the farewell (%s); exiting without leaving the group"
        )

    def _leave(self) -> None:
        with contextlib.suppress(*RETRYABLE):
            self.client.delete(self.keys.heartbeat(self.consumer))
            if self.settings.docs_retention_s is not None:  # what this consumer acknowledged last goes too
                self.stream.trim(self.settings.docs_retention_s)
            try:
                if not self.client.xpending_range(
                    self.keys.docs, GROUP, "-", "+", 1, consumername=self.consumer
                ):
                    self.client.xgroup_delconsumer(self.keys.docs, GROUP, self.consumer)
            except redis.ResponseError as exc:  # e.g. an ACL user without +xgroup|delconsumer
                log.warning(
                    "could not leave the consumer group (%s); `dedupd stats` will list it as stale", exc
                )

    # ----- one iteration -----
    def iteration(self, overlap: bool = False) -> BatchResult | None:
        """Follow the generations, heartbeat, then read or claim one batch (with the deferred entries) and
        process it. Returns None when there was nothing to do.

        With ``overlap``, a batch read new is started here and finished by the worker while the next call
        starts the next one (see the module docstring); a call returns what the batch it saw finished did (an
        empty result when none finished), and the call that reads nothing finishes the batch in hand."""
        if self.poll.due():
            self._follow()
        if self.beat.due():
            self._heartbeat()
        memory = self.metrics.refresh_group(self.client, self.keys)
        if memory is not None:
            self._watch_memory(memory)
        self.housekeeping.log_progress(len(self.deferred))
        if self.paused_for is not None:
            self.stopping.wait(0.05)
            return None
        self._tend_deferred()
        batch, deliveries = self._next_batch()
        overlapping = bool(overlap and batch and deliveries is None and not self.deferred)
        overlapping = overlapping and not self._shares_documents(batch)
        settled = None if overlapping else self.settle()  # its waiting entries join this batch
        if self.deferred:
            batch = sorted(
                [*self.deferred.values(), *(e for e in batch if e[0] not in self.deferred)],
                key=lambda e: sid(e[0]),
            )
        if overlapping:
            result = self._overlap(batch)
        elif batch:
            result = self.handle(batch, deliveries)
        else:
            result = settled
        self.housekeeping.after(self.gateway, result, overlap, self._expiry_held)
        if overlapping and result is None:
            return BatchResult()
        return result if result is None or result.ack or result.processed or result.dead else None

    def _expire(self, background: bool = False) -> None:
        """One step of the retention window's expiry (housekeeping.py), unless :attr:`_expiry_held`."""
        self.housekeeping.expire(self.gateway, background, self._expiry_held)

    @property
    def _expiry_held(self) -> bool:
        """Whether expiry waits: a rebuild runs, or a switch pauses the daemons."""
        return self.rebuilding or self.paused_for is not None

    def settle_expiry(self) -> None:
        """Wait for the expiry step in the background, if any, and account for it."""
        self.housekeeping.settle_expiry()

    def _watch_memory(self, servers: list[ServerMemory]) -> None:
        """One warning when the server's eviction policy turns evicting while serving (the daemon goes on:
        `dedupd check` reports it unhealthy), and one line when it is noeviction again."""
        evicting = first_refusal(servers)
        if evicting != self._evicting:
            if evicting is not None:
                log.warning("%s (changed while serving)", evicting)
            else:
                log.info("the Redis server no longer reports an evicting maxmemory-policy")
        self._evicting = evicting

    def _shares_documents(self, batch: list[RawEntry]) -> bool:
        """Whether the batch has an entry of a document of the batch in hand."""
        if self.in_hand is None:
            return False
        return any((doc := self.stream.doc_field(fields)) and doc in self.in_hand.docs for _, fields in batch)

    def _overlap(self, batch: list[RawEntry]) -> BatchResult | None:
        """Start a batch (processor.start), settle the one in hand, and hand this one to the worker to
        finish and acknowledge; returns what the settled one did."""
        started = time.monotonic()
        try:
            first = self.processor.start(batch, None, self.in_hand.handoff if self.in_hand else None)
        except Exception as exc:
            self._exit_if_asked()
            if not not_the_entry(exc):
                self.settle()  # before its entries are done again one by one
            return self._book(batch, self._failed(batch, None), started)
        settled = self.settle()
        if not first.single:
            # its later runs are indexed in finish(): in this thread, not beside the next batch
            return self._book(batch, self._finish(first, batch), started)
        handoff = Handoff()
        processor = self.processor  # the generation the batch started on, whatever comes next
        job = self._worker.submit(lambda: self._finish_and_ack(processor, first, batch, handoff))
        docs = frozenset(doc for _, fields in batch if (doc := self.stream.doc_field(fields)))
        held = sum(entry_bytes(f) for _, f in batch)
        self.in_hand = InHand(batch, docs, job, handoff, started, held)
        return settled

    def _finish_and_ack(
        self,
        processor: Processor,
        first: Started,
        batch: list[RawEntry],
        handoff: Handoff,
    ) -> BatchResult:
        """The worker's job: finish the batch and acknowledge it."""
        try:
            result = processor.finish(first, handoff)
        finally:
            handoff.release()
        self._ack(batch, result)
        return result

    def settle(self) -> BatchResult | None:
        """Wait for the batch in hand (if any) to be finished and account for it; a batch whose finishing
        failed on its entries is done again entry by entry. Returns what it did."""
        hand, self.in_hand = self.in_hand, None
        if hand is None:
            return None
        try:
            return self._book(hand.batch, hand.future.result(), hand.started, acked=True)
        except Exception:
            return self._book(hand.batch, self._failed(hand.batch, None), hand.started)

    def handle(self, batch: list[RawEntry], deliveries: dict[str, int] | None) -> BatchResult:
        """Process and acknowledge one batch; a batch that fails is retried entry by entry."""
        started = time.monotonic()
        try:
            result = self.processor.process(batch, deliveries)
        except Exception:
            result = self._failed(batch, deliveries)
        return self._book(batch, result, started)

    def _finish(self, first: Started, batch: list[RawEntry]) -> BatchResult:
        """processor.finish, in this thread; a batch that fails is retried entry by entry."""
        try:
            return self.processor.finish(first)
        except Exception:
            return self._failed(batch, None)

    def _failed(self, batch: list[RawEntry], deliveries: dict[str, int] | None) -> BatchResult:
        """Called in an ``except`` block when a batch failed: a Redis error (or a second signal) goes up and
        the batch stays pending; anything else is taken as its entries' fault, and the batch is done again
        entry by entry."""
        self._exit_if_asked()
        exc = sys.exc_info()[1]
        if exc is None or not_the_entry(exc):
            raise  # the exception being handled
        log.exception("batch of %d entries failed; retrying them one by one", len(batch))
        return self._one_by_one(batch, deliveries)

    def _ack(self, batch: list[RawEntry], result: BatchResult) -> None:
        raw = dict(batch)
        self.stream.ack([(entry_id, raw[entry_id]) for entry_id in result.ack])

    def _book(
        self, batch: list[RawEntry], result: BatchResult, started: float, acked: bool = False
    ) -> BatchResult:
        """Keep the batch's waiting entries, acknowledge the others (unless ``acked``), count."""
        self.deferred.keep(batch, result.deferred)
        if not acked:
            if self.settings.wait_replicas and result.ack:
                wait_for_replicas(self.client, self.settings.wait_replicas, self.settings.wait_timeout_ms)
            self._ack(batch, result)
        for name, value in (
            ("processed", result.processed),
            ("alerts", len(result.alerts)),
            ("dead", result.dead),
            ("batches", 1),
        ):
            self.totals[name] += value
        self.metrics.observe_batch(
            time.monotonic() - started, len(batch), result.processed, len(result.alerts), result.dead
        )
        return result

    def _one_by_one(self, batch: list[RawEntry], deliveries: dict[str, int] | None) -> BatchResult:
        result = BatchResult()
        for raw in batch:
            try:
                result.add(self.processor.process([raw], deliveries))
            except Exception as exc:
                self._exit_if_asked()
                if not_the_entry(exc):
                    raise
                log.exception("entry %s failed", raw[0])
                if (deliveries or {}).get(raw[0], 1) >= self.settings.max_deliveries:
                    failed = f"{type(exc).__name__}: {exc}"
                    dead_letter(self.gateway, self.settings, [(raw, PROCESSING_FAILED, failed)])
                    result.ack.append(raw[0])
                    result.dead += 1
                # else left pending: claimed again after claim_idle_ms
        return result

    def _tend_deferred(self) -> None:
        """Keep deferred entries from being claimed (reset their idle time); while they wait and nothing new
        is read, keep the in-flight registry in step with the pending entries (a read does it otherwise)."""
        if not self.deferred:
            return
        if self.touch.due():
            self.stream.touch(list(self.deferred))
        if self.reconcile.due():
            self.stream.reconcile()
            self._prune_blockers()

    def _prune_blockers(self) -> None:
        """Entries that wait: drop the in-flight records holding them back that are no longer pending (an
        entry deleted from the stream is acknowledged without its document, so its record stays)."""
        blockers = self.deferred.blockers(self.stream)
        if blockers and self.stream.prune(blockers):
            log.warning(
                "in-flight records of entries no longer pending were removed (deleted from the stream?)"
            )

    def _follow(self) -> None:
        """Follow a rebuild: switch to a new serving generation, and pause while a switch asks for it (the
        batch in hand is finished first, on the generation it started on)."""
        poll = self.generations.poll()
        if poll.rebuilding and not self.rebuilding:
            self.settle_expiry()  # (no step runs beside a rebuild that this daemon knows of)
        self.rebuilding = poll.rebuilding
        switching = poll.spec is not None and poll.gen != self.gateway.generation
        if switching or poll.paused_for != self.paused_for:
            self.settle()
            self.settle_expiry()  # (a step runs on the generation it began on: it ends before a switch)
        if poll.spec is not None and poll.gen != self.gateway.generation:
            log.info(
                "the index was rebuilt (generation %d: %s, bands=%d x rows=%d, threshold %.2f); following it",
                poll.gen,
                poll.spec.shingle,
                poll.spec.bands,
                poll.spec.rows,
                poll.spec.threshold,
            )
            self._serve(poll.spec, poll.gen)
            self.beat.now()
        self.gateway.holds_ids = self.rebuilding  # (the generation served now)
        if poll.paused_for != self.paused_for:
            if poll.paused_for is not None:
                log.info("a rebuild is switching to generation %d: pausing", poll.paused_for)
            else:
                log.info("resuming")
            self.paused_for = poll.paused_for
            self.beat.now()
            self._heartbeat()

    def _next_batch(self) -> tuple[list[RawEntry], dict[str, int] | None]:
        """The next batch: an entry read again (ours pending, or claimed), else new entries as room allows;
        with the delivery counts of an entry read again."""
        s = self.settings
        again = self.redelivery.next(self.deferred)
        if again:
            return again, self.stream.delivery_counts([again[0][0]])
        room = s.batch_max_bytes - self.held_bytes()
        if len(self.deferred) >= s.batch_size or room < s.max_entry_bytes:
            if self.in_hand is None:  # else no wait: the batch in hand is settled now, and makes room
                self.stopping.wait(_DEFERRED_BLOCK_MS / 1000)
            return [], None
        block = min(s.block_ms, _DEFERRED_BLOCK_MS) if self.deferred else s.block_ms
        return self.stream.read_new(s.batch_size, block, room), None

    def _bound_outputs(self) -> None:
        """Trim the output streams to their byte bounds (housekeeping.py)."""
        self.housekeeping.bound_outputs()

    def held_bytes(self) -> int:
        """The size of the entries this daemon holds: the deferred ones and the batch in hand."""
        waiting = self.deferred.held_bytes()
        return waiting + (self.in_hand.size if self.in_hand is not None else 0)

    def _heartbeat(self) -> None:
        beat = Heartbeat(
            pid=os.getpid(),
            time=time.time(),
            gen=self.gateway.generation,
            paused=self.paused_for,
            deferred=len(self.deferred),
            **self.totals,
        )
        self.client.set(self.keys.heartbeat(self.consumer), beat.to_json(), ex=self.settings.heartbeat_ttl_s)
