"""The entries a daemon holds back: each waits for an older entry of its document still in flight (held by
another consumer, or not yet claimed from a dead one), unacknowledged, and is tried again each iteration
until that one is applied (daemon/planner.py). Owned by the daemon's main thread."""

from __future__ import annotations

from collections.abc import Sequence

from dedupd.daemon.batch import RawEntry
from dedupd.daemon.entries import entry_bytes
from dedupd.daemon.stream import ConsumerStream
from dedupd.index.docstate import sid


class Deferred(dict[str, RawEntry]):
    """The entries waiting, by entry id, in the order they were first held back."""

    def keep(self, batch: Sequence[RawEntry], waiting: Sequence[str]) -> None:
        """After a batch: hold the entries of ``batch`` that wait (``waiting``), forget the others.

        >>> held = Deferred()
        >>> held.keep([("1-0", {}), ("2-0", {})], ["2-0"])
        >>> list(held)
        ['2-0']
        """
        wait = set(waiting)
        for entry_id, fields in batch:
            if entry_id in wait:
                self[entry_id] = (entry_id, fields)
            else:
                self.pop(entry_id, None)

    def held_bytes(self) -> int:
        """The size of the entries held (daemon/entries.py's ``entry_bytes``)."""
        return sum(entry_bytes(fields) for _, fields in self.values())

    def blockers(self, stream: ConsumerStream) -> list[tuple[str, str]]:
        """The in-flight records (entry id, document id) older than a waiting entry of their document that are
        not waiting themselves: those no longer pending hold it back for nothing (stream.prune drops them)."""
        docs: dict[str, str] = {}  # document id -> its oldest waiting entry
        for entry_id, fields in self.values():
            doc = stream.doc_field(fields).decode("utf-8", "replace")
            if doc and (doc not in docs or sid(entry_id) < sid(docs[doc])):
                docs[doc] = entry_id
        names = list(docs)
        flights = stream.inflight(names) if names else []
        return [
            (o, doc)
            for doc, flight in zip(names, flights, strict=True)
            for o in flight
            if sid(o) < sid(docs[doc]) and o not in self
        ]
