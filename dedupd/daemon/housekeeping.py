"""A daemon's housekeeping between batches: when each periodic chore runs, and what it did.

After each iteration (:meth:`Housekeeping.after`), when due: a step of the retention window's expiry (after a
batch that processed entries, and on a timer while idle, so that an idle index still expires; never while a
rebuild runs or a switch pauses the daemons), in the background beside the next batch's start when batches
overlap, else here (daemon/expiry.py: Steps; what a step did is counted in the totals and the metrics before
the next one starts); the input stream's trim (``docs_retention_s``); the redelivery markers' pruning and the
output streams' byte bounds. And a progress line at INFO every ``PROGRESS_S`` seconds.

The pieces themselves (the clocks, the trims, the progress line's text) are in upkeep.py; this module is
one daemon's schedule of them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from dedupd.daemon.batch import BatchResult
from dedupd.daemon.expiry import STEP_LIMIT, Steps
from dedupd.daemon.metrics import Metrics
from dedupd.daemon.stream import ConsumerStream
from dedupd.daemon.upkeep import Every, bound_outputs, progress_line, prune_seen
from dedupd.index.keys import Keys
from dedupd.index.protocol import Gateway
from dedupd.index.retention import Expired
from dedupd.server.connection import RedisClient, not_the_entry
from dedupd.settings import Settings

log = logging.getLogger("dedupd.daemon")  # (named as before the layers: log lines and filters show it)

TRIM_EVERY_S = 0.2
PROGRESS_S = 10.0  # how often serve logs a progress line at INFO
EXPIRE_IDLE_S = 0.5  # with a retention window: how often an expiry step runs when no batch came


class Housekeeping:
    """One daemon's chores between batches (see the module docstring). ``totals`` are the daemon's (the
    steps' expired documents are added to them); ``exit_if_asked`` re-raises a second signal's exit that
    reached a step wrapped in another exception."""

    def __init__(
        self,
        client: RedisClient,
        keys: Keys,
        settings: Settings,
        stream: ConsumerStream,
        metrics: Metrics,
        totals: dict[str, int],
        consumer: str,
        exit_if_asked: Callable[[], None],
    ) -> None:
        self.client, self.keys, self.settings, self.stream = client, keys, settings, stream
        self.metrics, self.totals, self._exit_if_asked = metrics, totals, exit_if_asked
        self.trim, self.prune_seen = Every(TRIM_EVERY_S), Every(settings.seen_prune_s)
        self.expire_timer = Every(EXPIRE_IDLE_S)
        base = max(STEP_LIMIT, settings.batch_size)
        self.expiry = Steps(f"dedupd-expiry-{consumer}", base, settings.claim_idle_ms, stream.inflight)
        self.progress, self._reported = Every(PROGRESS_S), (time.monotonic(), 0)

    def after(self, gw: Gateway, result: BatchResult | None, overlap: bool, held: bool) -> None:
        """After an iteration that did ``result`` on ``gw``'s index: an expiry step (a retention window: after
        a batch, or on a timer while idle; in the background when batches overlap; none while ``held`` by a
        rebuild or a pause), the input stream's trim, the redelivery markers' pruning and the output streams'
        bounds, when due."""
        if gw.spec.windowed and ((result is not None and result.processed) or self.expire_timer.due()):
            self.expire(gw, overlap, held)
        if self.settings.docs_retention_s is not None and self.trim.due():
            self.stream.trim(self.settings.docs_retention_s)
        if self.prune_seen.due():
            prune_seen(self.client, self.keys, self.settings.seen_ttl_s)
            self.bound_outputs()

    def expire(self, gw: Gateway, background: bool = False, held: bool = False) -> None:
        """One step of the retention window's expiry on ``gw``'s index (the generation it starts on, whatever
        comes next), after the one before is accounted for, unless ``held`` (a rebuild runs or a switch
        pauses the daemons): here, or in the background (its outcome is accounted for before the next step,
        or when the daemon settles: :meth:`settle_expiry`)."""
        self.settle_expiry()
        if held:
            return
        if background:
            self.expiry.start(gw)
        else:
            self._account(lambda: self.expiry.run(gw))

    def settle_expiry(self) -> None:
        """Wait for the expiry step in the background, if any, and account for it."""
        self._account(self.expiry.settle)

    def _account(self, outcome: Callable[[], Expired | None]) -> None:
        """Count what a step did. A Redis error goes up (the loop retries); any other is logged, and the next
        step takes the claim over once it lapses."""
        try:
            done = outcome()
        except Exception as exc:
            self._exit_if_asked()
            if not_the_entry(exc):
                raise
            log.exception("an expiry step failed; its claim is taken over after claim_idle_ms")
            return
        if done is not None:
            self.totals["expired"] += done.expired
            self.metrics.observe_expiry(done.expired, done.backlog, done.oldest_age_s)

    def bound_outputs(self) -> None:
        """Trim the output streams to their byte bounds (upkeep.bound_outputs)."""
        bound_outputs(self.client, self.keys, self.settings)

    def log_progress(self, waiting: int) -> None:
        """One INFO line, when due: totals, the rate since the last line, the entries ``waiting`` (deferred),
        the group's lag."""
        if not self.progress.due():
            return
        now, done = time.monotonic(), self.totals["processed"]
        then, before = self._reported
        self._reported = (now, done)
        if done == before and not waiting:
            return  # idle: nothing new to say
        rate = (done - before) / max(now - then, 1e-9)
        log.info("%s", progress_line(self.client, self.keys, self.totals, rate, waiting))
