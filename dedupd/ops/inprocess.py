"""The engine of ``dedupd serve`` driven in process, on an index of its own: documents in, in order, and at
the end the final cluster of each (``dedupd dedup``).

Documents go straight to the daemon's processor (dedupd/daemon/processor.py), in batches, without the
input stream: document ``i`` (0-based, in the order given) is the upsert of the id ``str(i)`` by the entry
``0-(i+1)``, the way ``dedupd rebuild --from FILE`` replays a file. The batches overlap as the daemon's do
(daemon/loop.py, ``overlap_batches``): a batch is fingerprinted and indexed (``Processor.start``) while a
second thread verifies the batch before it and writes its unions and alerts (``Processor.finish``), and it
writes its buckets only once that batch's evictions are written (daemon/handoff.py), so every document
sees the documents before it as one batch at a time would show them. The processor finds the duplicates
inside a batch.

The clusters are read once every document is in (:meth:`InProcessEngine.clusters`): a later document can
merge two clusters (a hub near both), so whether a document is a duplicate is decided by the cluster it
ends in, not by whether it got an alert.

The index must be empty and unused by any daemon (a private server: dedupd/server/private.py): the
engine gives the documents ids of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import numpy as np
import numpy.typing as npt

from dedupd.daemon.batch import BatchResult, RawEntry, Started
from dedupd.daemon.handoff import Handoff
from dedupd.daemon.processor import Processor
from dedupd.daemon.stream import as_text
from dedupd.index.gateway import RedisGateway, open_spec
from dedupd.index.keys import Keys
from dedupd.server.connection import RedisClient
from dedupd.settings import Settings

I64Array = npt.NDArray[np.int64]
_LOOKUP = 10_000  # documents per lookup of ids or roots at the end


@dataclass(frozen=True, slots=True)
class Refused:
    """A document the engine did not take (the daemon would have dead-lettered its entry)."""

    index: int
    code: str
    detail: str


class InProcessEngine:
    """The daemon's processor on one empty index (see the module docstring); a context manager that waits
    for the last batch and stops its thread on the way out.

    Args:
        client: a client of the server holding the index (nothing else may use that index).
        settings: the similarity settings and bounds (those of ``dedupd serve``).
    """

    def __init__(self, client: RedisClient, settings: Settings) -> None:
        self.client = client
        self.settings = settings
        self.keys = Keys(settings.prefix)
        spec, gen = open_spec(client, self.keys, settings.index_spec())
        self.gateway = RedisGateway(client, self.keys, spec, gen, bounds=settings.bounds())
        self.processor = Processor(self.gateway, settings)
        self.processor.warm_up()
        self.added = 0  # documents given so far
        self.refused: list[Refused] = []
        self._dead_seen = "0-0"  # the last dead letter read
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="dedupd-finish")
        self._in_hand: tuple[Future[BatchResult], Handoff] | None = None  # the batch being finished

    def __enter__(self) -> InProcessEngine:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if kind is None:
                self.settle()
        finally:
            self._worker.shutdown(wait=True, cancel_futures=True)

    def add(self, texts: Sequence[str]) -> list[Refused]:
        """Start the next documents, in order, as one batch of the daemon, and finish the batch before them;
        returns the documents refused so far that were not returned yet."""
        first = self.added
        raw: list[RawEntry] = [
            (f"0-{first + k + 1}", {b"id": str(first + k).encode(), b"text": t.encode("utf-8")})
            for k, t in enumerate(texts)
        ]
        self.added += len(raw)
        try:
            started = self.processor.start(raw, None, self._in_hand[1] if self._in_hand else None)
        except BaseException:
            self.settle()  # (its error, if it has one, says more)
            raise
        refused = self.settle()
        if not started.single:  # its later runs are indexed in finish(): not beside the next batch
            return refused + self._refused(self.processor.finish(started))
        handoff = Handoff()
        self._in_hand = (self._worker.submit(self._finish, started, handoff), handoff)
        return refused

    def _finish(self, started: Started, handoff: Handoff) -> BatchResult:
        """The second thread's job: finish a batch, and let the next one go however that ends."""
        try:
            return self.processor.finish(started, handoff)
        finally:
            handoff.release()

    def settle(self) -> list[Refused]:
        """Wait until the batch in hand is finished; the documents it refused."""
        hand, self._in_hand = self._in_hand, None
        return [] if hand is None else self._refused(hand[0].result())

    def _refused(self, result: BatchResult) -> list[Refused]:
        refused = self._dead_letters() if result.dead else []
        self.refused += refused
        return refused

    def _dead_letters(self) -> list[Refused]:
        """The dead letters written since the last look, as the documents they refuse."""
        out = []
        letters: Any = self.client.xrange(self.keys.dead, min=f"({self._dead_seen}")
        for entry_id, fields in letters:
            self._dead_seen = as_text(entry_id)
            seq = as_text(fields.get(b"input", b"0-0")).partition("-")[2]
            code, detail = (as_text(fields.get(name, b"")) for name in (b"error", b"detail"))
            out.append(Refused(int(seq) - 1, code, detail))
        return out

    def clusters(self) -> I64Array:
        """Per document, the index of the first document of its final cluster (itself when it has no
        duplicate); -1 for a refused document.

        Read from the union-find once every document is in: the clusters as the last unions left them.
        """
        self.settle()
        n = self.added
        label = np.full(n, -1, dtype=np.int64)
        if not n:
            return label
        nums = np.zeros(n, dtype=np.int64)
        for lo in range(0, n, _LOOKUP):
            ids = [str(i) for i in range(lo, min(n, lo + _LOOKUP))]
            nums[lo : lo + len(ids)] = self.gateway.nums_of(ids)
        taken = np.flatnonzero(nums > 0)
        index_of = np.full(int(nums.max()) + 1, -1, dtype=np.int64)
        index_of[nums[taken]] = taken
        roots = np.zeros(taken.size, dtype=np.int64)
        for lo in range(0, taken.size, _LOOKUP):
            part = nums[taken[lo : lo + _LOOKUP]].tolist()
            roots[lo : lo + len(part)] = self.gateway.roots(part, fresh=True)
        root_index = index_of[roots]  # a root is a document of this run: no document is ever deleted
        # the first document of each cluster (the root is the oldest, but that is the union-find's business)
        first = np.full(n, n, dtype=np.int64)
        np.minimum.at(first, root_index, taken)
        label[taken] = first[root_index]
        label[[r.index for r in self.refused]] = -1  # (a document too large to store may have an id)
        return label
