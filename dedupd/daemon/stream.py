"""A daemon's side of the input stream: reading (with the in-flight registry), recovering, claiming,
acknowledging and trimming, in the consumer group ``keys.GROUP``.

New entries are read by a script (lua.READ: XREADGROUP bounded in bytes, every entry larger than
``max_entry_bytes`` cut short, so a daemon never holds more than ``batch_max_bytes`` of entries whatever the
input) and recorded at once as in flight for their document, and
acknowledged by a script that removes them again (lua.ACK). When a batch decides, :meth:`ConsumerStream.inflight`
returns its documents' in-flight entries after checking, atomically, that the registry holds every pending
entry of the group (else it is rebuilt from them: entries another consumer read a moment ago and has not yet
recorded, or read by another client). The planner lets an entry wait while an older entry of its document is
in flight (per-document order). Recovered entries (own pending
ones after a restart or a Redis error, idle ones claimed from other consumers with ``XAUTOCLAIM ... JUSTID``,
which does not count a delivery) are read from the consumer's own pending list from a cursor.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import redis

from dedupd.daemon.entries import CUT_FIELD
from dedupd.index import argv, lua
from dedupd.index.docstate import sid
from dedupd.index.keys import GROUP, Keys, entry_doc
from dedupd.server.connection import RedisClient

log = logging.getLogger("dedupd.stream")  # (named as before the layers: log lines and filters show it)

RawEntry = tuple[str, dict[bytes, bytes]]
RECONCILE_LIMIT = 10_000  # pending entries a reconciliation of the in-flight registry looks at
# a read finds nothing: it asks again after these waits (a blocking XREADGROUP would hand over an entry whole)
_POLL_S = (0.002, 0.005, 0.01, 0.02, 0.05)


def as_text(raw: Any) -> str:
    """A reply field (bytes from our clients) as text."""
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def ensure_group(client: RedisClient, keys: Keys, group: str = GROUP, start: str = "0") -> bool:
    """Create the consumer group (from ``start``: the beginning of the stream by default, so nothing pushed
    earlier is missed). Returns True when it was created now."""
    try:
        client.xgroup_create(keys.docs, group, id=start, mkstream=True)
        return True
    except redis.ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise
        return False


def trim_floor(client: RedisClient, stream: str) -> tuple[int, int] | None:
    """The lowest entry id that some consumer group of ``stream`` still needs, or None (no group).

    Entries below it have been delivered to every group (id <= its last-delivered-id) and are not
    pending in any, i.e. every group has acknowledged them; ``XTRIM MINID`` at this id loses nothing.
    A rebuild's replay is a group of its own, so its unread entries are kept too.
    """
    try:
        groups = client.xinfo_groups(stream)
    except redis.ResponseError as exc:
        if "no such key" in str(exc).lower():  # no stream (a restart without persistence took it)
            return None
        raise
    floor: tuple[int, int] | None = None
    for g in groups:
        ms, seq = sid(as_text(g["last-delivered-id"]))
        need = (ms, seq + 1)
        if int(g["pending"]):
            oldest = client.xpending(stream, g["name"])["min"]
            if oldest is not None:
                need = min(need, sid(as_text(oldest)))
        floor = need if floor is None else min(floor, need)
    return floor


def entries_of(raw: Any) -> list[RawEntry]:
    """Entries as a script returns them (id, flat field list) or as redis-py parses them (id, dict)."""
    out: list[RawEntry] = []
    for entry_id, fields in raw or []:
        if fields is None:  # deleted from the stream while pending
            continue
        if isinstance(fields, list):
            fields = dict(zip(fields[::2], fields[1::2], strict=True))
        out.append((as_text(entry_id), dict(fields)))
    return out


class ConsumerStream:
    """One consumer's operations on the input stream."""

    def __init__(
        self,
        client: RedisClient,
        keys: Keys,
        consumer: str,
        max_id_bytes: int,
        max_entry_bytes: int = 10_000_000,
        keep_bytes: int = 65_536,
    ) -> None:
        self.client = client
        self.keys = keys
        self.consumer = consumer
        self.max_id_bytes = max_id_bytes
        self.max_entry_bytes = max_entry_bytes
        self.keep_bytes = min(keep_bytes, max_entry_bytes)  # what an entry cut short keeps
        self._read = client.register_script(lua.READ)
        self._ack = client.register_script(lua.ACK)
        self._lookup = client.register_script(lua.LOOKUP_INFLIGHT)
        self._prune = client.register_script(lua.PRUNE_INFLIGHT)

    @property
    def _stream_keys(self) -> list[str]:
        return [self.keys.docs, self.keys.inflight, self.keys.inflight_count]

    def doc_field(self, fields: dict[bytes, bytes]) -> bytes:
        """The document id under which an entry is recorded in flight (b'' when it has no acceptable id)."""
        return entry_doc(fields, self.max_id_bytes)

    def _bounded(self, mode: str, start: str, count: int, budget: int) -> Any:
        args = argv.read(
            GROUP,
            self.consumer,
            mode,
            start,
            count,
            budget,
            self.max_entry_bytes,
            self.keep_bytes,
            self.max_id_bytes,
            CUT_FIELD,
        )
        return self._read(keys=self._stream_keys, args=args)

    def read_new(self, count: int, block_ms: int, budget: int | None = None) -> list[RawEntry]:
        """Up to ``count`` new entries and ``budget`` bytes (each entry counted at most ``max_entry_bytes``:
        a larger one comes cut short), waiting up to ``block_ms`` for the first; recorded as in flight."""
        budget = budget if budget is not None else count * self.max_entry_bytes
        deadline = time.monotonic() + block_ms / 1000
        polls = 0
        while True:
            entries = entries_of(self._bounded("new", "", count, budget))
            left = deadline - time.monotonic()
            if entries or left <= 0 or budget < self.max_entry_bytes:
                return entries
            time.sleep(min(_POLL_S[min(polls, len(_POLL_S) - 1)], left))
            polls += 1

    def read_own(self, after: str, count: int, again: bool = False) -> tuple[list[RawEntry], list[str]]:
        """Own pending entries after ``after`` (one delivery more each, unless read ``again`` after a server
        error: their delivery counts stay as they were; a large one cut short), and the ids of pending entries
        that were deleted from the stream meanwhile."""
        raw = self._bounded("again" if again else "own", after, count, 0)
        gone = [as_text(entry_id) for entry_id, fields in raw if fields is None]
        return entries_of(raw), gone

    def claim(self, entry_id: str) -> tuple[list[RawEntry], bool]:
        """Claim one pending entry (one delivery more; a large one cut short): the entry (none when it was
        acknowledged meanwhile), and whether it was claimed but is deleted from the stream."""
        raw = self._bounded("claim", entry_id, 1, 0)
        entries = entries_of(raw)
        return entries, bool(raw) and not entries

    def autoclaim(self, idle_ms: int, cursor: str, count: int) -> tuple[list[str], str]:
        """Take over entries idle for ``idle_ms`` without counting a delivery; returns them and the next cursor."""
        claimed = [
            as_text(x)
            for x in self.client.xautoclaim(
                self.keys.docs, GROUP, self.consumer, idle_ms, cursor, count=count, justid=True
            )
        ]
        if len(claimed) < count:
            return claimed, "0-0"
        return claimed, claimed[-1]

    def touch(self, entry_ids: list[str]) -> None:
        """Reset the idle time of entries this consumer holds (deferred ones), so nobody claims them."""
        if entry_ids:
            self.client.xclaim(self.keys.docs, GROUP, self.consumer, 0, list[Any](entry_ids), justid=True)

    def ack(self, entries: list[RawEntry]) -> None:
        """Acknowledge entries and take them out of the in-flight registry, atomically."""
        if not entries:
            return
        args = argv.ack(GROUP, [(entry_id, self.doc_field(fields)) for entry_id, fields in entries])
        self._ack(keys=self._stream_keys, args=args)

    def inflight(self, doc_ids: list[str]) -> list[tuple[str, ...]]:
        """Each document's in-flight entries, with every entry delivered so far accounted for."""
        args = argv.lookup_inflight(GROUP, self.max_id_bytes, RECONCILE_LIMIT, doc_ids)
        found = self._lookup(keys=self._stream_keys, args=args)
        return [tuple(as_text(v).split()) if v else () for v in found]

    def prune(self, blockers: list[tuple[str, str]]) -> int:
        """Remove the in-flight records of (entry id, document id) pairs no longer pending; how many went."""
        if not blockers:
            return 0
        return int(self._prune(keys=self._stream_keys, args=argv.prune_inflight(GROUP, blockers)))

    def reconcile(self) -> None:
        """Bring the in-flight registry in step with the group's pending entries (when nothing is read)."""
        self.inflight([])

    def delivery_counts(self, entry_ids: list[str]) -> dict[str, int]:
        """How many times each of these pending entries was delivered."""
        lo, hi = min(entry_ids, key=sid), max(entry_ids, key=sid)
        pending = self.client.xpending_range(
            self.keys.docs, GROUP, min=lo, max=hi, count=len(entry_ids) * 4 + 16
        )
        wanted = set(entry_ids)
        out: dict[str, int] = {}
        for p in pending:
            mid = as_text(p["message_id"])
            if mid in wanted:
                out[mid] = int(p["times_delivered"])
        return out

    def trim(self, retention_s: int) -> None:
        """Trim acknowledged input older than ``retention_s`` (never below what a group still needs)."""
        floor = trim_floor(self.client, self.keys.docs)
        if floor is None:
            return
        minid = min(floor, (int(time.time() * 1000) - retention_s * 1000, 0))
        if minid[0] > 0:
            self.client.xtrim(self.keys.docs, minid=f"{minid[0]}-{minid[1]}", approximate=True)
