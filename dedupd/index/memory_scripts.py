"""The index's server-side scripts in Python on plain dicts and lists: twins of lua.BUCKETS, lua.EVICT, lua.DISPLACE,
lua.RESOLVE_IDS, lua.RELEASE_IDS,
lua.EMIT_MANY/REPLY and unionfind.UNION_ROOTS/FIND_ROOTS/FORGET_IDS/CLUSTER_PAGE, for
index/memory.py.

:class:`MemoryStore` is what a Redis server of one index holds (each field names the key of keys.py it stands
for); each function does to it what one call of its script does to Redis, step by step in the script's order
(the same reads, the same edge cases), so that a batch's decisions come out the same without a server. What
the scripts do for speed only (lua.BUCKETS's table of bucket values read in the call, the union-find's view
of its parent hash) is left out: it never changes what they answer.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dedupd.index.buckets import BucketOps, DocWrite, Evictions, Placements
from dedupd.index.lua import FULL_BIT, REFUSED_BIT, Op
from dedupd.index.record import record_entry_id

_JOIN, _REJOIN, _LEAVE, _END = (op.value[0] for op in (Op.JOIN, Op.REJOIN, Op.LEAVE, Op.END))
_WRITE, _DELETE = Op.CHECK_WRITE.value[0], Op.CHECK_DELETE.value[0]
_SID = re.compile(r"(\d+)-(\d+)")


@dataclass(slots=True)
class MemoryStore:
    """What the Redis server of one index (one prefix) holds, as plain values; shared by the gateways of its
    generations and consumers as the server is."""

    records: dict[str, bytes] = field(default_factory=dict)  # Keys.doc -> packed record (record.py)
    buckets: dict[str, dict[int, list[int]]] = field(default_factory=dict)  # Keys.buckets -> field -> ids
    ids: dict[str, int] = field(default_factory=dict)  # Keys.id_forward
    seq: int = 0  # Keys.id_seq
    tombstones: dict[str, str] = field(default_factory=dict)  # Keys.tombstones: '<entry id> <n>'
    tombstone_expiry: dict[str, int] = field(default_factory=dict)  # Keys.tombstone_expiry (ms)
    parent: dict[int, int] = field(default_factory=dict)  # Keys.uf_parent
    children: dict[int, int] = field(default_factory=dict)  # Keys.uf_children
    gone: dict[int, str] = field(default_factory=dict)  # Keys.uf_gone: '1', or '=' + an expired root's id
    floor: int = 0  # Keys.uf_floor (unionfind.SET_FLOOR of a new index)
    ring: dict[int, tuple[int, int]] = field(default_factory=dict)  # Keys.uf_ring: (next, prev)
    ring_floor: int = 0  # Keys.uf_ring_floor (unionfind.SET_FLOOR of a new index)
    reps: dict[int, list[list[int]]] = field(default_factory=dict)  # Keys.uf_reps: root -> [id, count] each
    deficits: dict[str, dict[int, int]] = field(default_factory=dict)  # Keys.deficits -> id -> its deficit
    streams: dict[str, list[dict[bytes, bytes]]] = field(default_factory=dict)  # entries as XRANGE reads them
    seen: dict[str, dict[str, int]] = field(default_factory=dict)  # Keys.seen(stream): marker -> ms
    counters: dict[str, int] = field(default_factory=dict)  # Keys.counters
    touched: dict[int, int] = field(default_factory=dict)  # Keys.touched: n -> ms
    expiring: dict[int, int] = field(default_factory=dict)  # Keys.expiring: n -> when the claim lapses (ms)
    expiring_ids: dict[int, str] = field(default_factory=dict)  # Keys.expiring_ids
    expired: int = 0  # Keys.expired_count


def _sid(s: str) -> tuple[int, int]:
    """lua.STREAM_ID's sid: 'ms-seq' (or a tombstone 'ms-seq n') as numbers, (0, 0) when it is none."""
    m = _SID.match(s)
    return (int(m[1]), int(m[2])) if m else (0, 0)


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
        if n is None and create and (tomb == "" or _sid(entry) > _sid(tomb)):
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


# ----- unionfind.py -----
def find_roots(store: MemoryStore, nums: Sequence[int]) -> list[int]:
    """unionfind.FIND_ROOTS: the root of each (read only)."""
    return [_walk(store.parent, n)[0] for n in nums]


def _walk(parent: dict[int, int], x: int) -> tuple[int, list[int]]:
    root, path = x, []
    for _ in range(100000):
        p = parent.get(root, root)
        if p == root:
            break
        path.append(root)
        root = p
    return root, path


class UnionFind:
    """unionfind._WRITES: the union-find as one script call changes it (children counted as it goes)."""

    def __init__(self, store: MemoryStore) -> None:
        self.s = store
        self.added: dict[int, int] = {}  # children counted by this call, not yet in store.children
        self.ring: dict[int, list[int]] = {}  # ring links this call read or changed, not yet in store.ring

    def up(self, x: int) -> int:
        return self.s.parent.get(x, x)

    def counted(self, x: int) -> bool:
        return x > self.s.floor

    def has_children(self, n: int) -> bool:
        return n in self.added or n in self.s.children

    def flush_children(self) -> None:
        for p, d in self.added.items():
            self.s.children[p] = self.s.children.get(p, 0) + d
        self.added = {}

    def lost_child(self, p: int) -> None:
        """p lost a child: a deleted document's node left without children goes, its parent loses one, ..."""
        s = self.s
        while self.counted(p):
            left = s.children.get(p, 0) + self.added.pop(p, 0) - 1
            if left > 0:
                s.children[p] = left
                return
            s.children.pop(p, None)
            if s.gone.pop(p, None) is None:  # a live document's node: it stays
                return
            q = self.up(p)
            self.ring_leave(p)
            if q == p:
                return
            del s.parent[p]
            p = q

    def set_parent(self, x: int, p: int) -> None:
        old = self.up(x)
        if old == p:
            return
        self.s.parent[x] = p
        if self.counted(p):
            self.added[p] = self.added.get(p, 0) + 1
        if old != x:
            self.lost_child(old)

    def find(self, x: int) -> int:
        root, path = _walk(self.s.parent, x)
        for node in reversed(path[:-1]):
            self.set_parent(node, root)
        return root

    def forget_node(self, n: int, name: str | None = None) -> None:
        """A deleted (or, with its ``name``, expired) document's node; a root that stays keeps the name."""
        if not self.counted(n):
            return
        if self.has_children(n):
            self.s.gone[n] = f"={name}" if name is not None and self.up(n) == n else "1"
            return
        p = self.up(n)
        self.ring_leave(n)
        if p == n:
            return
        del self.s.parent[n]
        self.lost_child(p)

    def links(self, x: int) -> list[int]:
        """x's next and previous node in its ring ([x, x] when it is alone), as this call has them."""
        if x not in self.ring:
            self.ring[x] = list(self.s.ring.get(x, (x, x)))
        return self.ring[x]

    def ring_join(self, a: int, b: int) -> None:
        """Join the rings of a and b (_uf_ring.lua's ring_join)."""
        an, bn = self.links(a)[0], self.links(b)[0]
        self.links(a)[0], self.links(bn)[1], self.links(b)[0], self.links(an)[1] = bn, a, an, b

    def ring_leave(self, x: int) -> None:
        """Take x out of its ring."""
        n, p = self.links(x)
        if n != x:
            self.links(p)[0], self.links(n)[1], self.links(x)[:] = n, p, [x, x]

    def flush_ring(self) -> None:
        for x, (n, p) in self.ring.items():
            if n == x:
                self.s.ring.pop(x, None)
            else:
                self.s.ring[x] = (n, p)
        self.ring = {}

    def vanished(self, m: int, doc_id: str) -> bool:
        """A match deleted meanwhile, its node gone or never there: it joins nothing."""
        s = self.s
        return self.up(m) == m and self.counted(m) and s.ids.get(doc_id) != m and not self.has_children(m)


class Representatives:
    """_uf_reps.lua: the clusters' representatives as one script call changes them (written at its end)."""

    def __init__(self, store: MemoryStore, cap: int) -> None:
        self.s = store
        self.cap = cap
        self.view: dict[int, list[list[int]]] = {}

    def of(self, r: int) -> list[list[int]]:
        if r not in self.view:
            self.view[r] = [list(e) for e in self.s.reps.get(r, [])]
        return self.view[r]

    @staticmethod
    def rise(lst: list[list[int]], i: int) -> None:
        while i > 0 and lst[i - 1][1] < lst[i][1]:
            lst[i - 1], lst[i] = lst[i], lst[i - 1]
            i -= 1

    def count(self, r: int, m: int) -> None:
        if self.cap < 1:
            return
        lst = self.of(r)
        for i, e in enumerate(lst):
            if e[0] == m:
                e[1] += 1
                self.rise(lst, i)
                return
        del lst[self.cap :]
        if len(lst) < self.cap:
            lst.append([m, 1])
        else:
            lst[-1] = [m, lst[-1][1] + 1]
        self.rise(lst, len(lst) - 1)

    def merge(self, a: int, b: int) -> None:
        lb = self.of(b)
        if not lb:
            return
        la = self.of(a)
        for e in lb:
            la.append(e)
            self.rise(la, len(la) - 1)
        del la[self.cap :]
        self.view[b] = []

    def drop(self, r: int, m: int) -> None:
        lst = self.of(r)
        for i, e in enumerate(lst):
            if e[0] == m:
                del lst[i]
                return

    def flush(self) -> None:
        for r, lst in self.view.items():
            if lst:
                self.s.reps[r] = lst
            else:
                self.s.reps.pop(r, None)
        self.view = {}


def union_roots(
    store: MemoryStore, cap: int, groups: Sequence[tuple[int, Sequence[tuple[int, str]]]]
) -> list[int]:
    """unionfind.UNION_ROOTS: per group the root after it, the root each match had before, the root n had;
    each match counted in the representatives of n's cluster after it (not one deleted)."""
    uf = UnionFind(store)
    reps = Representatives(store, cap)
    out: list[int] = []
    for n, matches in groups:
        was = uf.find(n)
        roots: list[int] = []
        done: set[int] = set()
        lost: set[int] = set()
        for j, (m, doc_id) in enumerate(matches):
            if uf.vanished(m, doc_id):
                roots.append(m)
                done.add(m)
                lost.add(j)
            else:
                roots.append(uf.find(m))
        for r in roots:
            if r not in done:
                done.add(r)
                a, b = uf.find(n), uf.find(r)
                if a != b:
                    uf.set_parent(max(a, b), min(a, b))
                    uf.ring_join(min(a, b), max(a, b))
                    reps.merge(min(a, b), max(a, b))
        root = uf.find(n)
        for j, (m, _) in enumerate(matches):
            if j not in lost and m not in store.gone:
                reps.count(root, m)
        out += [root, *roots, was]
    uf.flush_children()
    uf.flush_ring()
    reps.flush()
    return out


def representatives(store: MemoryStore, nums: Sequence[int]) -> list[tuple[int, list[int]]]:
    """unionfind.REPRESENTATIVES (read only), as unionfind.representatives_replies gives it."""
    out: list[tuple[int, list[int]]] = []
    for n in nums:
        root = _walk(store.parent, n)[0]
        out.append((root, [m for m, _ in store.reps.get(root, [])]))
    return out


def forget_ids(store: MemoryStore, deleted: Sequence[tuple[str, int, str]], now: int, ttl_ms: int) -> int:
    """unionfind.FORGET_IDS: forget each (doc id, n, delete's entry id), its node, leave its tombstone;
    expired tombstones go (at most 256). Returns how many expired."""
    uf = UnionFind(store)
    reps = Representatives(store, 0)
    for doc_id, n, entry in deleted:
        if n != 0 and store.ids.get(doc_id) == n:
            del store.ids[doc_id]
            store.touched.pop(n, None)
            reps.drop(_walk(store.parent, n)[0], n)
            uf.forget_node(n)
        tomb = store.tombstones.get(doc_id)
        if tomb is None or _sid(entry) > _sid(tomb):
            store.tombstones[doc_id] = f"{entry} {n}"
            store.tombstone_expiry[doc_id] = now + ttl_ms
    old = sorted((t, d) for d, t in store.tombstone_expiry.items() if t <= now)[:256]
    for _, doc_id in old:
        store.tombstones.pop(doc_id, None)
        del store.tombstone_expiry[doc_id]
    uf.flush_children()
    uf.flush_ring()
    reps.flush()
    return len(old)


def cluster_page(store: MemoryStore, doc_id: str, at: str, limit: int, steps: int) -> list[int]:
    """unionfind.CLUSTER_PAGE: [state, root, whole, next, members...] of one page (read only)."""
    start = store.ids.get(doc_id)
    if start is None:
        return [0, 0, 0, 0]
    root = _walk(store.parent, start)[0]
    out = [1, root, int(root > store.ring_floor), 0]
    first = not at
    if first:
        node = start
    else:
        node = int(at)
        if node == start or start not in store.ring or node not in store.ring:
            out[0] = 2
            return out
        if _walk(store.parent, node)[0] != root:
            out[0] = 2
            return out
    walked: list[int] = []
    for _ in range(steps):
        walked.append(node)
        if node not in store.gone:
            out.append(node)
        node = store.ring.get(node, (node, node))[0]
        if node == start:
            if first and not out[2] and _holds_all(store, root, walked):
                out[2] = 1
            return out
        if len(out) - 4 >= limit:
            break
    out[3] = node
    return out


def _holds_all(store: MemoryStore, root: int, nodes: list[int]) -> bool:
    """cluster_page.lua's holds_all: whether the whole ring walked (``nodes``) holds every member of the
    cluster of ``root``: it is the root's ring, and each of its nodes older than the rings is counted and has
    as many children as point at it from the ring."""
    if root not in nodes:
        return False
    kids: dict[int, int] = {}
    for x in nodes:
        p = store.parent.get(x, x)
        if p != x:
            kids[p] = kids.get(p, 0) + 1
    return all(
        x > store.floor and store.children.get(x, 0) == kids.get(x, 0) for x in nodes if x <= store.ring_floor
    )


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
                reps.drop(_walk(store.parent, n)[0], n)
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
