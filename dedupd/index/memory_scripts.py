"""The index's server-side scripts in Python on plain dicts and lists: twins of lua.BUCKETS, lua.EVICT,
lua.DISPLACE, lua.RESOLVE_IDS, lua.RELEASE_IDS, lua.EMIT_MANY/REPLY and the retention window's scripts, for
index/memory.py; the union-find's are in memory_unionfind.py (re-exported here).

A :class:`~dedupd.index.memory_store.MemoryStore` is what a Redis server of one index holds (each field
names the key of keys.py it stands for); each function does to it what one call of its script does to
Redis, step by step in the script's order (the same reads, the same edge cases), so that a batch's decisions
come out the same without a server. What the scripts do for speed only (lua.BUCKETS's table of bucket
values read in the call) is left out: it never changes what they answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dedupd.index.buckets import BucketOps, DocWrite, Evictions, Placements
from dedupd.index.lua import FULL_BIT, REFUSED_BIT, Op
from dedupd.index.memory_store import MemoryStore, stream_id
from dedupd.index.memory_unionfind import (
    Representatives,
    UnionFind,
    cluster_page,
    find_roots,
    forget_ids,
    representatives,
    union_roots,
    walk,
)
from dedupd.index.record import record_entry_id

_JOIN, _REJOIN, _LEAVE, _END = (op.value[0] for op in (Op.JOIN, Op.REJOIN, Op.LEAVE, Op.END))
_WRITE, _DELETE = Op.CHECK_WRITE.value[0], Op.CHECK_DELETE.value[0]

__all__ = [  # (the union-find's twins and the store: where memory.py and the tests have found them)
    "BucketsCall",
    "MemoryStore",
    "cluster_page",
    "displace",
    "emit",
    "encode",
    "evict",
    "expire_claim",
    "expire_finish",
    "expire_note",
    "find_roots",
    "forget_ids",
    "release_ids",
    "representatives",
    "resolve_ids",
    "touch",
    "union_roots",
]


def _entry_of(blob: bytes | None) -> str:
    """lua.ENTRY_OF: a stored record's input entry id, '' when there is none."""
    return "" if blob is None else record_entry_id(blob)


# ----- lua.BUCKETS -----
class BucketsCall:
    """One lua.BUCKETS call on a single Redis (records checked in it): :meth:`run` answers what the script
    returns, per write its read (None for '!') and the hits' positions (1-based among the bucket ops, the top
    bit for a refused JOIN, FULL_BIT for a JOIN of a full bucket)."""

    def __init__(self, store: MemoryStore, full: int, crowd: int, fresh: int) -> None:
        self.store, self.full, self.crowd, self.fresh = store, full, crowd, fresh
        self.before: dict[tuple[str, int], int] = {}  # bucket -> members it had before this call
        self.hits: list[int] = []

    def run(
        self, ops: BucketOps, writes: Sequence[DocWrite], record_key: Callable[[int], str]
    ) -> tuple[list[list[int] | None], list[int]]:
        checks = [w for w in writes if w.expected is not None]
        out: list[list[int] | None] = []
        acc: list[int] = []
        j = c = 0
        skip = False
        for op in b"".join(ops.codes):
            if op in (_JOIN, _REJOIN, _LEAVE):
                j += 1
                if not skip:
                    key, at = ops.names[int(ops.name_of[j - 1])], int(ops.fields[j - 1])
                    num = int(ops.ids[j - 1])
                    if op == _LEAVE:
                        self._leave(key, at, num)
                    else:
                        acc += self._join(key, at, num, op == _JOIN, j)
            elif op == _END:
                out.append(None if skip else acc)
                acc, skip = [], False
            else:
                w = checks[c]
                c += 1
                skip = not self._check(op, record_key(w.num), w.expected or "", w.record or b"")
        return out, self.hits

    def _check(self, op: int, key: str, expected: str, record: bytes) -> bool:
        """A CHECK* op: False when the record changed since it was read (nothing of the document is written)."""
        records = self.store.records
        if _entry_of(records.get(key)) != expected:
            return False
        if op == _WRITE:
            records[key] = record
        elif op == _DELETE:
            records.pop(key, None)
        return True

    def _join(self, key: str, at: int, num: int, join: bool, j: int) -> list[int]:
        """A JOIN (``join``) or REJOIN op, the ``j``-th bucket op: what it reads."""
        bucket = self.store.buckets.setdefault(key, {})
        v = bucket.get(at)
        if v is None:  # HSETNX made the bucket: nothing read, no hit
            bucket[at] = [num]
            return []
        pos = v.index(num) if num in v else None
        old = self.before.setdefault((key, at), len(v))
        refused = (
            pos is None and join and len(v) < self.full and self.fresh > 0 and len(v) - old >= self.fresh
        )
        if refused:
            self.hits.append(j + REFUSED_BIT)
        elif (
            pos is None and len(v) >= self.full
        ):  # full: not joined (lua.DISPLACE may put it in; a redelivery too)
            self.hits.append(j + FULL_BIT)
        elif len(v) >= self.crowd:
            self.hits.append(j)
        if (
            pos is not None
        ):  # already in it: JOIN reads the others, REJOIN only the ones that joined before it
            return v[:pos] + v[pos + 1 :] if join else v[:pos]
        if join:  # the members it had before this call
            read = v[:old]
            if len(v) < self.full and not refused:
                v.append(num)
            return read
        read = [m for m in v if m < num]  # REJOIN of a document no longer in it: only the older ids
        if len(v) < self.full:
            v.append(num)
        return read

    def _leave(self, key: str, at: int, num: int) -> None:
        bucket = self.store.buckets.get(key)
        v = bucket.get(at) if bucket is not None else None
        if bucket is None or v is None or num not in v:
            return
        pos = v.index(num)
        rest = v[:pos] + v[pos + 1 :]
        if rest:
            bucket[at] = rest
        else:
            del bucket[at]
            if not bucket:  # (Redis deletes an empty hash)
                del self.store.buckets[key]
        old = self.before.get((key, at))
        if old is not None and pos < old:  # (a bucket no JOIN read yet: the JOIN takes its length then)
            self.before[(key, at)] = old - 1


# ----- lua.EVICT -----
def evict(store: MemoryStore, ev: Evictions, newest: int, anchors: int, full: int) -> int:
    """One lua.EVICT call with the rows of ``ev`` (in order); how many members left."""
    groups: list[tuple[str, int, int, list[int]]] = []  # (bucket hash, field, cluster, held) runs of rows
    for k, f, g, d in zip(
        ev.key.tolist(), ev.field.tolist(), ev.cluster.tolist(), ev.doc.tolist(), strict=True
    ):
        name = ev.names[k]
        if not groups or groups[-1][:3] != (name, f, g):
            groups.append((name, f, g, []))
        groups[-1][3].append(d)
    sets = [set(np.frombuffer(m, dtype="<u4").tolist()) for m in ev.members]
    return sum(_settle(store, name, f, sets[g], held, newest, anchors, full) for name, f, g, held in groups)


def _settle(
    store: MemoryStore,
    key: str,
    at: int,
    members: set[int],
    held: list[int],
    newest: int,
    anchors: int,
    full: int,
) -> int:
    """lua.EVICT's settle of one bucket and cluster; how many left."""
    v = store.buckets.get(key, {}).get(at)
    if v is None:
        return 0
    known: list[int] = []
    seen: set[int] = set()
    for m in [*(m for m in v if m in members), *held]:
        if m not in seen:
            known.append(m)
            seen.add(m)
    order = known  # what stays, in the order a refused one is put in: newest first, then the anchors
    if len(known) > newest + anchors:
        top = sorted(known, reverse=True)[:newest]
        order = top + sorted(set(known) - set(top))[:anchors]
    kept = set(order)
    out = [m for m in v if m not in seen or m in kept]
    left = len(v) - len(out)
    present = set(out)
    for m in order:
        if m not in present and len(out) < full:
            out.append(m)
    if out != v:
        store.buckets[key][at] = out
    return left


# ----- lua.DISPLACE -----
class _Deficits:
    """lua.DISPLACE's view of the deficits hash ``name``: each member's read once, written back at the end."""

    def __init__(self, store: MemoryStore, name: str) -> None:
        self.store, self.name = store, name
        self.value: dict[int, int] = {}
        self.changed: set[int] = set()

    def of(self, m: int) -> int:
        if m not in self.value:
            self.value[m] = self.store.deficits.get(self.name, {}).get(m, 0)
        return self.value[m]

    def add(self, m: int, by: int) -> None:
        self.value[m] = self.of(m) + by
        self.changed.add(m)

    def flush(self) -> None:
        held = self.store.deficits.setdefault(self.name, {})
        for m in self.changed:
            if self.value[m] > 0:
                held[m] = self.value[m]
            else:
                held.pop(m, None)
        if not held:
            del self.store.deficits[self.name]


def displace(store: MemoryStore, pl: Placements, full: int, deficits: str) -> int:
    """One lua.DISPLACE call on a single Redis (with the deficits hash ``deficits``) with the rows of ``pl``
    (in order); how many members gave up their place."""
    d = _Deficits(store, deficits)
    rows = [
        (pl.names[k], at, doc)
        for k, at, doc in zip(pl.key.tolist(), pl.field.tolist(), pl.doc.tolist(), strict=True)
    ]
    kept_out: dict[int, int] = {}
    for key, at, doc in rows:  # a document's deficit is at least the rows it is kept out of (a redelivery:
        v = store.buckets.get(key, {}).get(at)  # the same rows again, not counted twice)
        kept_out[doc] = kept_out.get(doc, 0) + (v is not None and len(v) >= full and doc not in v)
    for doc, k in kept_out.items():
        if k > d.of(doc):
            d.add(doc, k - d.of(doc))
    placed: set[tuple[str, int, int]] = set()
    n = 0
    for key, at, doc in rows:
        bucket = store.buckets.setdefault(key, {})
        v = bucket.get(at)
        if v is None:
            bucket[at] = [doc]
        elif doc not in v:
            fell = len(v) >= full
            if len(v) == full and (give := _give_up(v, key, at, doc, d, placed)) is not None:
                d.add(v.pop(give), 1)
                n += 1
            if len(v) < full:
                v.append(doc)
                placed.add((key, at, doc))
                if fell:
                    d.add(doc, -1)
    d.flush()
    return n


def _give_up(
    v: list[int], key: str, at: int, doc: int, d: _Deficits, placed: set[tuple[str, int, int]]
) -> int | None:
    """The position of the member of a full bucket with the smallest deficit, 2 or more below ``doc``'s (ties:
    the first from a position picked by the two ids); never one this call put in."""
    start = ((doc % 65521) * 65519 + at % 65521) % len(v)
    give, low = None, d.of(doc) - 1
    for i in range(len(v)):
        p = (start + i) % len(v)
        if (key, at, v[p]) not in placed and d.of(v[p]) < low:
            give, low = p, d.of(v[p])
    return give


# ----- lua.RESOLVE_IDS, lua.RELEASE_IDS, lua.EMIT_MANY / lua.REPLY -----
def resolve_ids(store: MemoryStore, requests: Sequence[tuple[str, bool, str]]) -> list[tuple[int, str, int]]:
    """Per (doc id, create, entry id): n (existing), -n (newly assigned), 0 (unknown); its tombstone; 1 when
    its document is being expired (nothing assigned). Nothing is touched."""
    out = []
    for doc_id, create, entry in requests:
        n = store.ids.get(doc_id)
        tomb = store.tombstones.get(doc_id, "")
        waits = int(n is not None and n in store.expiring)
        if n is None and create and (tomb == "" or stream_id(entry) > stream_id(tomb)):
            store.seq += 1
            store.ids[doc_id] = store.seq
            n = -store.seq
        out.append((n or 0, tomb, waits))
    return out


def release_ids(store: MemoryStore, refused: Sequence[tuple[str, int]]) -> int:
    """lua.RELEASE_IDS: forget each (doc id, n) while the id still maps to n; how many were forgotten."""
    released = 0
    for doc_id, n in refused:
        if store.ids.get(doc_id) == n:
            del store.ids[doc_id]
            released += 1
    return released


def encode(value: Any) -> bytes:
    """A script argument as redis-py sends it (and a stream stores it)."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return repr(value).encode()
    raise TypeError(f"cannot send {value!r}")


def emit(
    store: MemoryStore, stream: str, seen_key: str, now: int, ttl_ms: int, entries: Sequence[Any]
) -> int:
    """Append each (marker, field/value list) once per marker; markers older than ``ttl_ms`` expire."""
    seen = store.seen.setdefault(seen_key, {})
    n = 0
    for marker, pairs in entries:
        if marker not in seen:
            raw = [encode(x) for x in pairs]
            store.streams.setdefault(stream, []).append(dict(zip(raw[::2], raw[1::2], strict=True)))
            seen[marker] = now
            n += 1
    for m in [m for m, t in seen.items() if t <= now - ttl_ms]:
        del seen[m]
    return n


# ----- the retention window (retention.py) -----
def touch(store: MemoryStore, nums: Sequence[int], clock: Callable[[], int], written: bool = False) -> int:
    """scripts/touch.lua: the documents get the server's time (never an earlier one): those with a touch time
    (mode 'n'), or with ``written`` (mode 'w') every one not being expired."""
    now = clock()
    for n in nums:
        if (n in store.touched if not written else n not in store.expiring) and store.touched.get(
            n, -1
        ) < now:
            store.touched[n] = now
    return now


def expire_claim(
    store: MemoryStore, now: int, age_s: int | None, count: int | None, limit: int, lease_ms: int
) -> list[Any]:
    """scripts/expire_claim.lua: [now, deadline, backlog, oldest, n, noted id, ...]."""
    deadline = now + lease_ms
    out: list[Any] = [now, deadline, 0, ""]
    lapsed = sorted((t, str(n), n) for n, t in store.expiring.items() if t <= now)[:limit]  # (Redis's order)
    for _, _, n in lapsed:
        store.expiring[n] = deadline
        out += [n, store.expiring_ids.get(n, "")]
    due = 0
    if age_s:
        due = sum(1 for t in store.touched.values() if t <= now - age_s * 1000)
    if count:
        due = max(due, len(store.touched) - count)
    take = max(0, min(due, limit - len(lapsed)))
    for _, _, n in sorted((t, str(n), n) for n, t in store.touched.items())[:take]:
        del store.touched[n]
        store.expiring[n] = deadline
        out += [n, ""]
    out[2] = due - take
    out[3] = str(min(store.touched.values())) if store.touched else ""
    return out


def expire_note(store: MemoryStore, deadline: int, notes: Sequence[tuple[int, str]]) -> int:
    """scripts/expire_note.lua: the ids of documents still claimed with ``deadline``."""
    noted = 0
    for n, doc_id in notes:
        if store.expiring.get(n) == deadline:
            store.expiring_ids[n] = doc_id
            noted += 1
    return noted


def expire_finish(store: MemoryStore, deadline: int, done: Sequence[tuple[int, str, str]], now: int) -> int:
    """scripts/expire_finish.lua: per (n, doc id, outcome) still claimed with ``deadline``: 'x' forgets the
    id, node and representatives (no tombstone), 'k' goes back to the touch set; the claim ends. Counts the
    documents expired."""
    uf = UnionFind(store)
    reps = Representatives(store, 0)
    expired = 0
    for n, doc_id, what in done:
        if store.expiring.get(n) != deadline:
            continue
        if what == "x":
            if store.ids.get(doc_id) == n:
                del store.ids[doc_id]
                reps.drop(walk(store.parent, n)[0], n)
                uf.forget_node(n, doc_id)
            expired += 1
        elif what == "k":
            store.touched.setdefault(n, now)
        del store.expiring[n]
        store.expiring_ids.pop(n, None)
    uf.flush_children()
    uf.flush_ring()
    reps.flush()
    store.expired += expired
    return expired
