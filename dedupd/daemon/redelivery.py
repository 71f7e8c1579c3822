"""The entries a daemon reads again before new ones: its own pending entries (after a restart under the same
name, or a server error) and other consumers' idle pending entries, claimed with ``XAUTOCLAIM ... JUSTID``
(which does not count a delivery) and read one at a time (one delivery more each): an entry that crashes the
daemon is then the only one whose delivery count grows, not the neighbours of its batch.

A server state (an error, BUSY, LOADING, a full server, a failover) never counts against an entry: after one,
this consumer's own pending entries are read again with their delivery counts left as they were, however long
the state lasts and however often the daemon backs off and tries again. Only a read after a restart (the
daemon died holding the entry) or a claim (another consumer died or hung holding it) counts one more."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Container

from dedupd.daemon.batch import RawEntry
from dedupd.daemon.stream import ConsumerStream
from dedupd.daemon.upkeep import Every
from dedupd.settings import Settings

log = logging.getLogger("dedupd.daemon")  # (named as before the layers: log lines and filters show it)


class Redelivery:
    """Where this consumer is in reading entries again (owned by the daemon's main thread)."""

    def __init__(self, stream: ConsumerStream, settings: Settings) -> None:
        self.stream = stream
        self.settings = settings
        self.recover_from: str | None = "0-0"  # read our own pending entries from here (None: done)
        self.again = False  # whether they are read again after a server error (their counts kept)
        self.claimed: deque[str] = deque()  # claimed entry ids, read one at a time
        self.cursor = "0-0"  # XAUTOCLAIM's
        self.claim = Every(settings.claim_idle_ms / 2000)

    def recover(self) -> None:
        """Read our own pending entries again from the start, their delivery counts kept (after a server
        error)."""
        self.recover_from, self.again = "0-0", True

    def next(self, waiting: Container[str]) -> list[RawEntry]:
        """The next entry to read again (one; none of ``waiting``), or nothing."""
        s = self.settings
        while True:
            if self.recover_from is not None and (got := self._recover_own(waiting)):
                return got
            if self.claimed and (got := self._claim_one()):
                return got
            if not self.claim.due():
                return []
            claimed, self.cursor = self.stream.autoclaim(s.claim_idle_ms, self.cursor, s.batch_size)
            claimed = [c for c in claimed if c not in waiting]
            if not claimed:
                return []
            log.info("claimed %d idle pending entries", len(claimed))
            self.claimed.extend(claimed)

    def _recover_own(self, waiting: Container[str]) -> list[RawEntry]:
        """The next of our own pending entries (one delivery more), acknowledging deleted ones."""
        while self.recover_from is not None:
            entries, gone = self.stream.read_own(self.recover_from, 1, self.again)
            for entry_id in gone:
                log.warning("pending entry %s was deleted from the stream; acknowledging it", entry_id)
            self.stream.ack([(entry_id, {}) for entry_id in gone])
            if entries:
                self.recover_from = entries[0][0]
                if entries[0][0] not in waiting:
                    return entries
            elif gone:
                self.recover_from = gone[-1]
            else:
                self.recover_from = None
        return []

    def _claim_one(self) -> list[RawEntry]:
        """Read the next claimed entry (one delivery more); empty when it was acknowledged meanwhile."""
        while self.claimed:
            entry_id = self.claimed.popleft()
            entries, deleted = self.stream.claim(entry_id)
            if entries:
                return entries
            if (
                deleted
            ):  # claimed, but deleted from the stream meanwhile (Redis 6.2 returns it without fields)
                log.warning("claimed entry %s was deleted from the stream; acknowledging it", entry_id)
                self.stream.ack([(entry_id, {})])
        return []
