"""Every Redis key and every name dedupd's processes share, built in one place under the configurable prefix.

Document ids never appear in key names: each id is mapped to a small integer first, so an id
cannot break a key name whatever it contains. Keys that a script touches together share a hash
tag (``{...}``) so that they live in one Redis Cluster slot. The consumer group names, the fields of
the meta hash, the heartbeat schema and the input entry's document id field live here too: daemons,
``dedupd rebuild``, ``stats`` and ``check`` read what the others write.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

GROUP = "dedupd"  # the consumer group of the daemons on the input stream
REBUILD_GROUP = "dedupd-rebuild"  # the group through which `dedupd rebuild` replays the input stream
# a field of the in-flight hash that no document id can be (not UTF-8; see scripts/_registry.lua)
INFLIGHT_SENTINEL = b"\xff\xfededupd"
DOC_FIELD = b"id"  # the field of an input entry that names its document (scripts/_registry.lua, read.lua)


def entry_doc(fields: dict[bytes, bytes], max_id_bytes: int) -> bytes:
    """The document id of an input entry (its field map): the value of :data:`DOC_FIELD` when it is 1 to
    ``max_id_bytes`` bytes long, else b'' (no acceptable id). The in-flight registry's scripts apply the same
    rule (doc_of in scripts/_registry.lua); entries.parse_entry refuses an entry without one.

    >>> entry_doc({b"id": b"42", b"text": b"hi"}, 8), entry_doc({b"id": b"123456789"}, 8), entry_doc({}, 8)
    (b'42', b'', b'')
    """
    doc = fields.get(DOC_FIELD, b"")
    return doc if id_fits(len(doc), max_id_bytes) else b""


def id_fits(size: int, max_id_bytes: int) -> bool:
    """Whether a document id of ``size`` bytes (UTF-8) has a length the daemon accepts: 1 to
    ``max_id_bytes`` (entries.check_id says why not, to producers and in dead letters alike).

    >>> id_fits(2, 8), id_fits(0, 8), id_fits(9, 8)
    (True, False, False)
    """
    return 0 < size <= max_id_bytes


class Meta(StrEnum):
    """Fields of the meta hash (:attr:`Keys.meta`)."""

    SPEC = "spec"  # the serving generation's IndexSpec (JSON)
    GEN = "gen"  # the serving generation's number
    NEXT_SPEC = "next_spec"  # an unfinished rebuild's target spec (JSON)
    NEXT_GEN = "next_gen"  # and the generation it builds
    NEXT_MODE = "next_mode"  # how it fills it: "signatures", "stream" or "file"
    NEXT_CUT = "next_cut"  # where its replay of the input stream began (the daemons' group floor at begin)
    LAST_GEN = "last_gen"  # the highest generation number ever given out (numbers are never reused)
    # the alerts a rebuild that lowered the threshold owes the pairs of the documents indexed before its
    # switch (`dedupd rebuild --alert-existing`; JSON: generations.OwedAlerts), until they are written
    OWED_ALERTS = "owed_alerts"


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """What a daemon says of itself in its liveness key (JSON), read by ``check``, ``stats`` and rebuilds."""

    pid: int
    time: float  # seconds since the epoch
    gen: int  # the generation it serves
    paused: int | None  # the generation a rebuild's switch paused it for, or None
    processed: int = 0
    alerts: int = 0
    dead: int = 0
    batches: int = 0
    deferred: int = 0  # entries waiting for an older entry of their document
    expired: int = 0  # documents it expired (a retention window)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, raw: str | bytes) -> Heartbeat:
        data: dict[str, Any] = json.loads(raw)
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known.setdefault("gen", -1)
        known.setdefault("paused", None)
        known.setdefault("pid", 0)
        known.setdefault("time", 0.0)
        return cls(**known)


@dataclass(frozen=True, slots=True)
class Keys:
    """Key names for one prefix."""

    prefix: str = "dedupd"

    # --- streams (public contract) ---
    @property
    def docs(self) -> str:
        """Input stream producers XADD to."""
        return f"{self.prefix}:docs"

    @property
    def alerts(self) -> str:
        """Duplicate alerts stream."""
        return f"{self.prefix}:alerts"

    @property
    def dead(self) -> str:
        """Dead-letter stream."""
        return f"{self.prefix}:dead"

    @property
    def baskets(self) -> str:
        """Baskets for the mining module, one entry per processed document."""
        return f"{self.prefix}:baskets"

    @property
    def inflight(self) -> str:
        """Hash in the input stream's slot: document id -> the ids of its entries delivered to the group and
        not yet acknowledged (space-separated; the field '' holds entries without an acceptable id). An entry
        waits while an older one of its document is in flight and not yet applied (per-document order)."""
        return f"{{{self.docs}}}:inflight"

    @property
    def inflight_count(self) -> str:
        """String in the input stream's slot: how many entries :attr:`inflight` holds (compared with the
        group's pending count: when they differ, the registry is rebuilt from the pending entries)."""
        return f"{{{self.docs}}}:inflight:n"

    def reply(self, name: str) -> str:
        """A query's reply stream (``name`` is checked: ``[A-Za-z0-9_-]{1,64}``)."""
        return f"{self.prefix}:reply:{name}"

    def seen(self, stream: str) -> str:
        """Sorted set of input entry ids already emitted to ``stream`` (same slot as the stream)."""
        return f"{{{stream}}}:seen"

    # --- index metadata ---
    @property
    def meta(self) -> str:
        """Hash: the parameters the index was built with, and its generation."""
        return f"{self.prefix}:meta"

    @property
    def rebuild_lease(self) -> str:
        """String in the meta hash's slot: the running rebuild's token (expires unless renewed)."""
        return f"{{{self.meta}}}:rebuild"

    @property
    def pause(self) -> str:
        """String in the meta hash's slot: while it exists, daemons finish their batch and wait (a rebuild's
        switch); it expires by itself if the rebuild dies."""
        return f"{{{self.meta}}}:pause"

    # --- id bookkeeping (one slot) ---
    @property
    def _ids_tag(self) -> str:
        return f"{{{self.prefix}:ids}}"

    @property
    def id_forward(self) -> str:
        """Hash: document id -> integer id."""
        return f"{self._ids_tag}:fwd"

    @property
    def id_seq(self) -> str:
        """Counter for integer ids."""
        return f"{self._ids_tag}:seq"

    @property
    def tombstones(self) -> str:
        """Hash: document id -> the input entry id of the delete that removed it (its version)."""
        return f"{self._ids_tag}:tomb"

    @property
    def tombstone_expiry(self) -> str:
        """Sorted set: document id -> when its tombstone expires (ms since the epoch)."""
        return f"{self._ids_tag}:tombx"

    @property
    def touched(self) -> str:
        """Sorted set, with a retention window only: integer id -> when its document was last touched (the
        Redis server's time in ms; retention.py). A document being expired is not in it."""
        return f"{self._ids_tag}:touch"

    @property
    def expiring(self) -> str:
        """Sorted set: integer id of a document a daemon is expiring -> when its claim lapses (ms; another
        daemon then takes it over). Entries of that document wait meanwhile."""
        return f"{self._ids_tag}:exp"

    @property
    def expiring_ids(self) -> str:
        """Hash: integer id of a document being expired -> its document id (read from its record before the
        record is deleted: a daemon taking the claim over forgets the id without it)."""
        return f"{self._ids_tag}:expid"

    @property
    def expired_count(self) -> str:
        """String: how many documents the retention window expired, counted by expire_finish.lua in the call
        that forgets them (exact through crashes and lost replies; `dedupd stats` shows it)."""
        return f"{self._ids_tag}:expired"

    @property
    def uf_parent(self) -> str:
        """Hash: integer id -> parent integer id (union-find of duplicate clusters; a root has no entry)."""
        return f"{self._ids_tag}:uf"

    @property
    def uf_children(self) -> str:
        """Hash: integer id -> how many union-find nodes have it as their parent (only when some do)."""
        return f"{self._ids_tag}:ufn"

    @property
    def uf_gone(self) -> str:
        """Hash: integer id of a deleted or expired document whose union-find node stays because others still
        point to it (a tombstone node) -> ``1``, or for an expired root ``'=' + its document id`` (its cluster's
        name: record.cluster_name). It goes with its last child."""
        return f"{self._ids_tag}:ufd"

    @property
    def uf_floor(self) -> str:
        """String: the highest integer id whose union-find children were not counted (ids given out before
        the counts existed, by an earlier version of dedupd); their nodes are never removed."""
        return f"{self._ids_tag}:uf0"

    @property
    def uf_ring(self) -> str:
        """Hash: integer id -> ``'<next> <prev>'``, its neighbours in the ring of its cluster's union-find
        nodes (unionfind.py: a cluster's members, listed a page at a time); a node alone has no entry."""
        return f"{self._ids_tag}:ufr"

    @property
    def uf_reps(self) -> str:
        """Hash: cluster root -> its representatives, packed ``<I4I4`` (integer id, count) pairs, most matched
        first: at most ``representatives`` members, each counted when a later document's best match in the
        cluster was it (_uf_reps.lua); a cluster that no alert joined has none. Verified on a near miss
        (index/near_miss.py)."""
        return f"{self._ids_tag}:ufp"

    @property
    def uf_ring_floor(self) -> str:
        """String: the highest integer id given out before the rings were kept (an index made by an earlier
        version of dedupd); a cluster whose root is at most this may lack members in its ring."""
        return f"{self._ids_tag}:ufr0"

    # --- per document and per band ---
    def doc(self, num: int, generation: int = 0) -> str:
        """One document's packed record (see record.py) in one index generation."""
        return f"{self.prefix}:doc:{generation}:{num}"

    def leaving(self, num: int, generation: int = 0) -> str:
        """String in the slot of a document's record (its hash tag is the record's name), Redis Cluster
        only: the packed band hashes (uint64 LE, one row of ``bands`` per earlier version, 0 = none) of the
        buckets a record write left behind until its bucket writes are confirmed (gateway.apply)."""
        return f"{{{self.doc(num, generation)}}}:leave"

    def leaving_pattern_of(self, generation: int | str) -> str:
        """SCAN pattern matching the :meth:`leaving` keys of one generation (``"*"``: of every one)."""
        return f"{{{self.prefix}:doc:{generation}:*}}:leave"

    @property
    def doc_pattern(self) -> str:
        """SCAN pattern matching every document record of every generation."""
        return f"{self.prefix}:doc:*"

    def doc_pattern_of(self, generation: int) -> str:
        """SCAN pattern matching the document records of one generation."""
        return f"{self.prefix}:doc:{generation}:*"

    def buckets(self, generation: int, band: int, shard: int) -> str:
        """Hash of band buckets: field = low 32 bits of the band hash, value = packed uint32 ids.

        The hash tag spreads one band over 16 Redis Cluster slots, so a batch needs few script calls.
        """
        return f"{self.prefix}:b:{generation}:{{{band}.{shard & 15}}}:{shard:x}"

    def deficits(self, generation: int | str) -> str:
        """Hash of one generation (single Redis): integer id (uint32 LE) -> its deficit, how many of its band
        buckets it is not in because they were full or it gave up its place there (lua.DISPLACE); absent: none.
        With ``'*'``: the SCAN pattern of every generation's."""
        return f"{self.prefix}:def:{generation}"

    def band_pattern(self, generation: int) -> str:
        """SCAN pattern matching every bucket hash of one generation."""
        return f"{self.prefix}:b:{generation}:*"

    @property
    def band_pattern_all(self) -> str:
        """SCAN pattern matching every bucket hash of every generation."""
        return f"{self.prefix}:b:*"

    # --- daemon bookkeeping ---
    def heartbeat(self, consumer: str) -> str:
        """Liveness key of one consumer (expires unless refreshed)."""
        return f"{self.prefix}:hb:{consumer}"

    @property
    def heartbeat_pattern(self) -> str:
        return f"{self.prefix}:hb:*"

    @property
    def counters(self) -> str:
        """Hash of running totals (documents, alerts, dead letters)."""
        return f"{self.prefix}:counters"

    @property
    def mined(self) -> str:
        """Latest mining result (JSON) for other consumers."""
        return f"{self.prefix}:mined"
