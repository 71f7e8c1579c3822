"""One batch of input entries, through its stages: validate, plan, fingerprint, index, verify, write.

The stages are functions from one plain value to the next (daemon/batch.py holds the values):
:meth:`Processor.start` validates the entries (dead letters aside) into runs of distinct documents and indexes
the first run (daemon/indexing.py: plan, fingerprint, index); :meth:`Processor.finish` verifies each run
(daemon/selection.py), writes its outputs (daemon/outputs.py: evictions, unions, alerts, baskets, replies),
indexes and finishes the other runs, dead-letters and counts. The gateway (index/protocol.py) does every
exchange with the index.

Every write is idempotent or guarded, so a redelivered entry changes nothing and emits nothing new: bucket
joins and leaves are idempotent, a record remembers the input entry that last changed it (its version), and
alerts, baskets and dead letters are emitted once per input entry id. The caller acknowledges the returned
entry ids only after :meth:`Processor.process` returns, i.e. after all writes; entries that must wait for
an older entry of their document come back in ``deferred``, neither written nor acknowledged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import numpy as np

from dedupd.daemon.batch import BatchResult, DeadLetter, RawEntry, Run, Started
from dedupd.daemon.dead_letters import dead_letter
from dedupd.daemon.entries import DOC_TOO_LARGE, MAX_DELIVERIES, Entry, parse_entry
from dedupd.daemon.handoff import Handoff
from dedupd.daemon.indexing import fingerprint, index, plan_run
from dedupd.daemon.outputs import write_outputs
from dedupd.daemon.planner import Action, byte_runs, unique_runs
from dedupd.daemon.selection import verify_run
from dedupd.errors import DedupdError, InputError
from dedupd.index.protocol import Gateway
from dedupd.index.record import Record
from dedupd.settings import Settings
from dedupd.similarity.verify import jaccard_pairs

log = logging.getLogger("dedupd.processor")  # (named as before the layers: log lines and filters show it)

InFlight = Callable[[list[str]], list[tuple[str, ...]]]  # document ids -> their in-flight entry ids
_MAX_ATTEMPTS = 8


class ConcurrentUpdateError(DedupdError):
    """Documents kept changing under concurrent updates (the batch is retried later)."""


class Processor:
    """Processes batches against one index generation.

    Args:
        gateway: the index generation's gateway.
        settings: the daemon's settings.
        inflight: the documents' entries in flight, from the consumer stream (the daemons: an entry waits for
            older ones of its document); None where entries are replayed in order (a rebuild).
    """

    def __init__(self, gateway: Gateway, settings: Settings, inflight: InFlight | None = None) -> None:
        self.gateway = gateway
        self.settings = settings
        self.inflight = inflight
        self.spec = gateway.spec

    @property
    def emits(self) -> bool:
        """Whether outputs are written (not for a generation a rebuild builds)."""
        return self.gateway.serving

    def warm_up(self) -> None:
        """Load the compiled kernels (numba: from the on-disk cache, or compiled on a first run) before
        the first batch, so that the first entries do not wait for them."""
        fps = self.gateway.fingerprinter.compute(["warm the kernels up", "wärm them ûp"])
        jaccard_pairs([fps[0].shingles, fps[1].shingles], np.zeros(1, np.int64), np.ones(1, np.int64))

    # ----- entry point -----
    def process(self, raw: Sequence[RawEntry], deliveries: dict[str, int] | None = None) -> BatchResult:
        """Process raw entries; returns the entry ids to acknowledge, the deferred ones, and what happened."""
        return self.finish(self.start(raw, deliveries))

    def start(
        self, raw: Sequence[RawEntry], deliveries: dict[str, int] | None = None, after: Handoff | None = None
    ) -> Started:
        """The first half of :meth:`process`: validate the entries, then plan, fingerprint and index (records
        and buckets written) the batch's first run of distinct documents. With ``after`` (the batch in hand's
        hand-off), the writes wait for it (daemon/handoff.py)."""
        dead, valid = self._validate(raw, deliveries or {})
        # a later run of a deferred entry's document is deferred by the planner; a run is fingerprinted in
        # parts of at most batch_max_bytes of (normalised) text
        parts = [part for run in unique_runs(valid) for part in byte_runs(run, self.settings.batch_max_bytes)]
        return Started(raw, dead, parts, self._index(parts[0], after) if parts else None)

    def finish(self, started: Started, handoff: Handoff | None = None) -> BatchResult:
        """The second half of :meth:`process`: verify and write the outputs of the first run, process the
        other runs, dead-letter, count; returns what the batch did (nothing of it is acknowledged here).
        ``handoff`` is set as the next batch may go (after the first run's evictions, then its unions)."""
        result = BatchResult()
        raw, dead = started.raw, list(started.dead)
        fields_of = dict(raw)
        for at, part in enumerate(started.parts):
            first = at == 0
            refused = self._process_run(
                part, result, started.first if first else None, handoff if first else None
            )
            dead += [((e, fields_of[e]), DOC_TOO_LARGE, detail) for e, detail in refused]
        if dead and self.emits:
            dead_letter(self.gateway, self.settings, dead)
            result.dead = len(dead)
        if self.emits:
            self._count(result)
        deferred = set(result.deferred)
        result.ack = [entry_id for entry_id, _ in raw if entry_id not in deferred]
        return result

    # ----- stages -----
    def _validate(
        self, raw: Sequence[RawEntry], deliveries: dict[str, int]
    ) -> tuple[list[DeadLetter], list[Entry]]:
        """The entries to dead-letter (delivered too often, or invalid) and the valid ones, parsed."""
        s = self.settings
        dead: list[DeadLetter] = []
        valid: list[Entry] = []
        for entry_id, fields in raw:
            count = deliveries.get(entry_id, 1)
            if count > s.max_deliveries:
                detail = f"delivered {count} times (max_deliveries={s.max_deliveries})"
                dead.append(((entry_id, fields), MAX_DELIVERIES, detail))
                continue
            try:
                valid.append(
                    parse_entry(
                        entry_id,
                        fields,
                        s.max_doc_bytes,
                        s.max_id_bytes,
                        s.max_entry_bytes,
                        s.max_normalized_bytes,
                    )
                )
            except InputError as exc:
                dead.append(((entry_id, fields), exc.code, exc.detail))
        return dead, valid

    def _index(self, entries: Sequence[Entry], after: Handoff | None = None) -> Run:
        """Plan, fingerprint and index a run (daemon/indexing.py)."""
        gw = self.gateway
        flights = self.inflight([e.doc_id for e in entries]) if self.inflight is not None else None
        planned = plan_run(gw, entries, flights)
        return index(gw, fingerprint(gw, planned, self.settings.max_stored_bytes), after)

    def _process_run(
        self,
        entries: Sequence[Entry],
        result: BatchResult,
        indexed: Run | None = None,
        handoff: Handoff | None = None,
    ) -> list[tuple[str, str]]:
        """Verify and write the outputs of a run (``indexed``: its first attempt, indexed already), then
        process again the entries whose documents another consumer changed first; returns the (entry id,
        detail) of the entries whose document would have grown beyond max_stored_bytes (not written: to be
        dead-lettered)."""
        refused: list[tuple[str, str]] = []
        for attempt in range(1, _MAX_ATTEMPTS + 1):
            if not entries:
                return refused
            run = indexed if indexed is not None and attempt == 1 else self._index(entries)
            result.deferred += [s.entry.entry_id for s in run.steps if s.action is Action.DEFER]
            refused += [(run.steps[i].entry.entry_id, detail) for i, detail in run.refused.items()]
            done = run.done
            if self.emits:
                written = write_outputs(
                    self.gateway,
                    self.settings,
                    run,
                    done,
                    verify_run(self.gateway, run),
                    handoff if attempt == 1 else None,
                )
                result.alerts += written.alerts
                result.queries += written.queries
            self._remember(run)  # (after the next batch was let go)
            result.processed += sum(1 for i in done if run.steps[i].action is not Action.QUERY)
            entries = run.retry
            if entries:  # another consumer changed these documents first: nothing of ours was written
                log.info(
                    "%d documents changed under a concurrent update (attempt %d); processing them again",
                    len(entries),
                    attempt,
                )
        if entries:
            raise ConcurrentUpdateError(f"{len(entries)} documents kept changing under concurrent updates")
        return refused

    def _remember(self, run: Run) -> None:
        """Keep the records the run wrote as read (a later batch verifies against them)."""
        for num, blob, i, fp in run.written:
            e = run.steps[i].entry
            self.gateway.remember(num, blob, Record(num, e.doc_id, fp, e.entry_id, e.source))

    def _count(self, result: BatchResult) -> None:
        """Add what the batch did to the counters, once its writes are all done: a batch that fails on the way
        (a busy or restarting server) and is done again counts once, not once per attempt."""
        self.gateway.count(
            {
                "processed": result.processed,
                "alerts": len(result.alerts),
                "dead": result.dead,
                "queries": result.queries,
            }
        )
