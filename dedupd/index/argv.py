"""The arguments (ARGV) of the Lua scripts: one function per script (scripts/<name>.lua), its parameters in
the order the script's header names ``ARGV[1]``, ``ARGV[2]``, ... (and the rest, ``ARGV[i..]``, last).

Pure: no Redis. The keys (KEYS) are the callers' (keys.py names them); a script's header says which.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from dedupd.index.lua import Op
from dedupd.similarity.bounds import KEPT_PER_CLUSTER

Arg = bytes | str | int
Emitted = tuple[str, Sequence[Arg]]  # (marker: the input entry id, field/value list) of one output entry


# ----- streams and the in-flight registry (daemon/stream.py; ops/producer.py) -----
def read(
    group: str,
    consumer: str,
    mode: str,
    start: str,
    count: int,
    budget: int,
    max_entry: int,
    keep: int,
    max_id: int,
    cut_field: bytes,
) -> list[Arg]:
    """read.lua: ``mode`` 'new', 'own' or 'again' (after ``start``) or 'claim' (``start``), bounded in bytes.

    >>> read("g", "c", "new", "", 10, 1000, 100, 50, 8, b"cut")
    ['g', 'c', 'new', '', 10, 1000, 100, 50, 8, b'cut']
    """
    return [group, consumer, mode, start, count, budget, max_entry, keep, max_id, cut_field]


def lookup_inflight(group: str, max_id: int, limit: int, doc_ids: Iterable[str]) -> list[Arg]:
    """lookup_inflight.lua: the in-flight entries of ``doc_ids`` (the registry reconciled first)."""
    return [group, max_id, limit, *doc_ids]


def ack(group: str, pairs: Iterable[tuple[str, bytes | str]]) -> list[Arg]:
    """ack.lua: (entry id, its document id or '') pairs to acknowledge and take out of the registry.

    >>> ack("g", [("1-1", b"a"), ("1-2", b"")])
    ['g', '1-1', b'a', '1-2', b'']
    """
    return _pairs(group, pairs)


def prune_inflight(group: str, pairs: Iterable[tuple[str, bytes | str]]) -> list[Arg]:
    """prune_inflight.lua: (entry id, its document id) pairs whose records go unless still pending."""
    return _pairs(group, pairs)


def _pairs(group: str, pairs: Iterable[tuple[str, bytes | str]]) -> list[Arg]:
    out: list[Arg] = [group]
    for entry_id, doc in pairs:
        out += [entry_id, doc]
    return out


def xadd_many_entry(fields: dict[str, str]) -> list[str]:
    """xadd_many.lua's arguments for one entry (a call's are its entries', one after the other).

    >>> xadd_many_entry({"id": "a", "text": "hi"})
    ['2', 'id', 'a', 'text', 'hi']
    """
    out = [str(len(fields))]
    for kv in fields.items():
        out += kv
    return out


# ----- buckets, records, evictions (buckets.py, cluster_records.py, gateway.py) -----
@dataclass(frozen=True, slots=True, kw_only=True)
class Buckets:
    """buckets.lua's ARGV, by name, in the header's order. One builder for both encodings: a single Redis
    sends ``check_keys``, ``names``, ``ends`` and ``checks`` (records checked in the call, bucket hashes
    named in ARGV); a Redis Cluster leaves them empty (KEYS holds the bucket hashes of one slot)."""

    ops: bytes  # ARGV[1]: one Op code per op
    key_index: bytes  # ARGV[2]: per bucket op, its bucket hash index (uint32 LE, 1-based)
    fields: bytes  # ARGV[3]: per bucket op, the field (4 bytes)
    ids: bytes  # ARGV[4]: per bucket op, the document's integer id (4 bytes)
    check_keys: bytes = b""  # ARGV[5]: per CHECK* op, its record's index in KEYS (uint32 LE)
    names: str = ""  # ARGV[6]: the bucket hash names concatenated
    ends: bytes = b""  # ARGV[7]: 0 and the end of each name (uint32 LE); '': KEYS holds the bucket hashes
    full: int  # ARGV[8]: the most members a bucket takes
    crowd: int = KEPT_PER_CLUSTER  # ARGV[9]: a join of a bucket holding as many members is a hit
    fresh: int  # ARGV[10]: the most new members a bucket takes in one call (0: no such bound)
    checks: Sequence[tuple[str, bytes]] = ()  # ARGV[11..]: per CHECK* op, (expected entry id, new record)

    def argv(self) -> list[bytes | str]:
        """The arguments.

        >>> Buckets(ops=b"ad", key_index=b"k", fields=b"f", ids=b"i", full=8, fresh=2).argv()
        [b'ad', b'k', b'f', b'i', b'', '', b'', '8', '3', '2']
        """
        out: list[bytes | str] = [self.ops, self.key_index, self.fields, self.ids, self.check_keys]
        out += [self.names, self.ends, str(self.full), str(self.crowd), str(self.fresh)]
        for expected, record in self.checks:
            out += [expected, record]
        return out


def record_cas(op: Op, expected: str, record: bytes, leave: bytes) -> list[Arg]:
    """record_cas.lua: check the record is at ``expected`` ('' = none), then ``op`` (write ``record``,
    keeping the band hashes ``leave`` to leave; delete; or check only)."""
    return [op.value, expected, record, leave]


def record_settle(version: str, delete: bool) -> list[Arg]:
    """record_settle.lua: unless the record changed from ``version``, delete it (``delete``) and forget the
    buckets to leave.

    >>> record_settle("1-1", True), record_settle("1-1", False)
    (['1-1', '1'], ['1-1', ''])
    """
    return [version, "1" if delete else ""]


def evict(
    key_index: bytes,
    fields: bytes,
    groups: bytes,
    docs: bytes,
    newest: int,
    anchors: int,
    full: int,
    members: Iterable[bytes],
) -> list[Arg]:
    """evict.lua: per row its bucket hash (index into KEYS, uint32 LE, 1-based), field, cluster (index into
    ``members``, uint32 LE, 1-based) and document; the newest and the oldest members of a cluster a bucket
    keeps (bounds.NEWEST_KEPT, bounds.ANCHORS_KEPT), the most members a bucket takes, then each cluster's
    known members."""
    return [key_index, fields, groups, docs, str(newest), str(anchors), str(full), *members]


def displace(key_index: bytes, fields: bytes, docs: bytes, full: int, deficits: bool) -> list[Arg]:
    """displace.lua: per row its bucket hash (index into KEYS, uint32 LE, 1-based), field and document; the
    most members a bucket takes; whether the last key is the deficits hash (single Redis)."""
    return [key_index, fields, docs, str(full), "1" if deficits else ""]


# ----- ids and the union-find (gateway.py) -----
def resolve_ids(requests: Iterable[tuple[str, bool, str]]) -> list[Arg]:
    """resolve_ids.lua: per (document id, create, entry id) its mode ('a' get or assign, 'g' get only), id and
    entry id.

    >>> resolve_ids([("a", True, "1-1"), ("b", False, "1-2")])
    ['a', 'a', '1-1', 'g', 'b', '1-2']
    """
    out: list[Arg] = []
    for doc_id, create, entry_id in requests:
        out += ["a" if create else "g", doc_id, entry_id]
    return out


def find_roots(nums: Iterable[int]) -> list[Arg]:
    """find_roots.lua: integer ids."""
    return list(nums)


def union_roots(cap: int, groups: Iterable[tuple[int, Sequence[tuple[int, str]]]]) -> list[Arg]:
    """union_roots.lua: the most representatives a cluster keeps, then per group a document's integer id, how
    many matches, then each match's integer id and document id.

    >>> union_roots(8, [(5, [(1, "a"), (2, "b")]), (6, [])])
    [8, 5, 2, 1, 'a', 2, 'b', 6, 0]
    """
    out: list[Arg] = [cap]
    for num, matches in groups:
        out += [num, len(matches)]
        for match in matches:
            out += match
    return out


def union_live(cap: int, groups: Iterable[tuple[int, str, Sequence[tuple[int, str]]]]) -> list[Arg]:
    """union_live.lua: the most representatives a cluster keeps, then per group a document's integer id and
    document id, how many matches, then each match's integer id and document id.

    >>> union_live(8, [(5, "e", [(1, "a")]), (6, "f", [])])
    [8, 5, 'e', 1, 1, 'a', 6, 'f', 0]
    """
    out: list[Arg] = [cap]
    for num, doc_id, matches in groups:
        out += [num, doc_id, len(matches)]
        for match in matches:
            out += match
    return out


def release_ids(released: Iterable[tuple[str, int]]) -> list[Arg]:
    """release_ids.lua: per document refused before anything of it was written, its id and integer id.

    >>> release_ids([("a", 3), ("b", 4)])
    ['a', 3, 'b', 4]
    """
    out: list[Arg] = []
    for doc_id, num in released:
        out += [doc_id, num]
    return out


def forget_ids(now_ms: int, ttl_ms: int, deleted: Iterable[tuple[str, int, str]]) -> list[Arg]:
    """forget_ids.lua: the time, the tombstones' lifetime, then per deleted document its id, its integer id
    (0: none) and the delete's entry id."""
    out: list[Arg] = [now_ms, ttl_ms]
    for doc_id, num, entry_id in deleted:
        out += [doc_id, num, entry_id]
    return out


# ----- the retention window (retention.py, gateway.py) -----
TOUCH_WRITTEN, TOUCH_NAMED = "w", "n"  # touch.lua's modes


def touch(mode: str, nums: Iterable[int]) -> list[Arg]:
    """touch.lua: the mode (``TOUCH_WRITTEN``: documents about to be written; ``TOUCH_NAMED``: documents an
    alert named), then the integer ids, each once.

    >>> touch(TOUCH_WRITTEN, [3, 5, 3])
    ['w', 3, 5]
    """
    return [mode, *dict.fromkeys(nums)]


def expire_claim(age_s: int | None, count: int | None, limit: int, lease_ms: int) -> list[Arg]:
    """expire_claim.lua: the window by age (seconds, sent in ms; None: none) and by count (None: none), the
    most documents claimed, the claim's lease (ms).

    >>> expire_claim(60, None, 256, 30000)
    [60000, 0, 256, 30000]
    """
    return [(age_s or 0) * 1000, count or 0, limit, lease_ms]


def expire_note(deadline: int, notes: Iterable[tuple[int, str]]) -> list[Arg]:
    """expire_note.lua: the claim's deadline, then (integer id, document id) pairs.

    >>> expire_note(9, [(3, "a")])
    [9, 3, 'a']
    """
    out: list[Arg] = [deadline]
    for num, doc_id in notes:
        out += [num, doc_id]
    return out


def expire_finish(deadline: int, done: Iterable[tuple[int, str, str]]) -> list[Arg]:
    """expire_finish.lua: the claim's deadline, then (integer id, document id, outcome) triples.

    >>> expire_finish(9, [(3, "a", "x"), (4, "", "-")])
    [9, 3, 'a', 'x', 4, '', '-']
    """
    out: list[Arg] = [deadline]
    for num, doc_id, outcome in done:
        out += [num, doc_id, outcome]
    return out


# ----- outputs (gateway.py) -----
def emit_many(now_ms: int, maxlen: int, ttl_ms: int, entries: Iterable[Emitted]) -> list[Arg]:
    """emit_many.lua and reply.lua: the time, the stream's cap, how long markers (and a reply stream) live,
    then per entry its marker, its field count and its field/value pairs.

    >>> emit_many(7, 100, 60, [("1-1", ["id", "a"])])
    [7, 100, 60, '1-1', 1, 'id', 'a']
    """
    out: list[Arg] = [now_ms, maxlen, ttl_ms]
    for marker, pairs in entries:
        out += [marker, len(pairs) // 2, *pairs]
    return out


reply = emit_many  # reply.lua takes emit_many.lua's arguments


# ----- generations (generations.py) -----
def rebuild_begin(token: str, lease_ms: int, target: str, mode: str, cut: str) -> list[Arg]:
    """rebuild_begin.lua: the rebuild's token and lease, its target spec (JSON), mode and cut."""
    return [token, lease_ms, target, mode, cut]


def rebuild_renew(token: str, lease_ms: int) -> list[Arg]:
    """rebuild_renew.lua."""
    return [token, lease_ms]


def rebuild_pause(token: str, pause_ms: int, gen: int) -> list[Arg]:
    """rebuild_pause.lua: pause the daemons for ``pause_ms`` for the switch to generation ``gen``."""
    return [token, pause_ms, gen]


def rebuild_switch(token: str) -> list[Arg]:
    """rebuild_switch.lua."""
    return [token]
