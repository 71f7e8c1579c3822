"""A batch as data: the values that move through its stages, from the raw entries read to what it did.

A batch is validated into runs of distinct documents (:class:`Started`); each run is planned, fingerprinted
and indexed (:class:`Run`, daemon/indexing.py), verified (daemon/selection.py), and its outputs written
(daemon/outputs.py); the batch ends as a :class:`BatchResult`. Each stage is a function from one of these
values to the next; none writes into its arguments.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from dedupd.daemon.alert import Alert
from dedupd.daemon.entries import Entry
from dedupd.daemon.planner import Action, Step
from dedupd.index.buckets import NO_HITS, Hits
from dedupd.index.protocol import Packed
from dedupd.similarity.fingerprint import Fingerprint
from dedupd.similarity.hashing import U64Array

RawEntry = tuple[str, dict[bytes, bytes]]  # a stream entry as read: its id and fields
DeadLetter = tuple[RawEntry, str, str]  # the entry, its error code, the detail


@dataclass(slots=True)
class BatchResult:
    """What a batch did."""

    ack: list[str] = field(default_factory=list)
    deferred: list[str] = field(
        default_factory=list
    )  # entry ids waiting for an older entry of their document
    processed: int = 0
    alerts: list[Alert] = field(default_factory=list)
    dead: int = 0
    queries: int = 0

    def add(self, other: BatchResult) -> None:
        self.ack += other.ack
        self.deferred += other.deferred
        self.processed += other.processed
        self.alerts += other.alerts
        self.dead += other.dead
        self.queries += other.queries


@dataclass(slots=True)
class Run:
    """One run of entries with distinct document ids, planned, fingerprinted and indexed: per step (in the
    entries' order) the document after it, its band hashes and its bucket reads; the buckets its writes joined
    that were there already; and the records written."""

    steps: list[Step]
    new: list[Fingerprint | None]  # per step: the document after it (None: a delete, or nothing to do)
    bands: list[U64Array]  # per step: the band hashes of the document after it
    found: list[Packed | None] = field(default_factory=list)  # per step: its bucket reads, None = retry
    refused: dict[int, str] = field(default_factory=dict)  # by step: why its document was not stored
    hits: Hits = NO_HITS  # the buckets joined that were there already (``write``: the step's index)
    # records stored, to remember: integer id, stored bytes, step index, fingerprint
    written: list[tuple[int, bytes, int, Fingerprint]] = field(default_factory=list)

    @property
    def done(self) -> list[int]:
        """The steps whose outcome is final: not deferred, not refused, and written unless another consumer
        changed their document first (those are done again)."""
        return [
            i
            for i, (s, f) in enumerate(zip(self.steps, self.found, strict=True))
            if s.action is not Action.DEFER and (f is not None or not s.writes) and i not in self.refused
        ]

    @property
    def retry(self) -> list[Entry]:
        """The entries to do again: their document changed under a concurrent update (nothing was written)."""
        return [s.entry for s, f in zip(self.steps, self.found, strict=True) if s.writes and f is None]


@dataclass(frozen=True, slots=True)
class Started:
    """A batch after :meth:`Processor.start`: its entries, those to dead-letter, its runs of distinct documents
    (in parts of at most ``batch_max_bytes``), and the first one's first attempt (indexed already)."""

    raw: Sequence[RawEntry]
    dead: list[DeadLetter]
    parts: list[list[Entry]]
    first: Run | None

    @property
    def single(self) -> bool:
        """Whether the batch is one run: :meth:`Processor.finish` then indexes nothing more."""
        return len(self.parts) <= 1
