"""The in-memory gateway of one index generation: :class:`MemoryGateway`, the twin of gateway.RedisGateway.

It implements the :class:`~dedupd.index.protocol.Gateway` protocol on plain dicts and lists
(memory_store.MemoryStore), so that a batch's stages run, and their decisions are tested, without a server.
Each method does what RedisGateway's does on a single Redis, with the script it calls replaced by its twin in
memory_scripts.py (the union-find's in memory_unionfind.py): records and buckets written in calls of
``APPLY_CHUNK`` documents (lua.BUCKETS), each later call's reads without the batch's new documents of the
calls before it; evictions (lua.EVICT); ids, tombstones and the union-find with its rings (lua.RESOLVE_IDS,
lua.RELEASE_IDS, unionfind.py); outputs once per input entry id (lua.EMIT_MANY, lua.REPLY). The caches
RedisGateway keeps in the process (record_cache.DecodedRecords, known_roots.KnownRoots) are kept the same
way, so that the same batches give the same answers.

An exchange queues closures and runs them, in order, on :meth:`MemoryExchange.execute`, as a pipeline
sends its commands. Not modelled: Redis Cluster (its record checks in separate calls, cluster_records.py),
the streams' approximate trimming (``MAXLEN ~``), the expiry of reply streams; stored records are kept as
RedisGateway stores them (record.py's packed bytes), decoded on reading.

Nothing here imports a Redis client (scripts/check_layers.py: FORBIDDEN).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import numpy.typing as npt

from dedupd.index import memory_scripts as scripts
from dedupd.index import memory_unionfind as uf_twin
from dedupd.index import unionfind
from dedupd.index.buckets import DocWrite, Evictions, Hits, Placements, bucket_keys, bucket_ops
from dedupd.index.cluster_page import ClusterPage, PageReply, checked_args, page_of, page_steps
from dedupd.index.docstate import DocState, states_of
from dedupd.index.keys import Keys
from dedupd.index.known_roots import KnownRoots
from dedupd.index.memory_store import MemoryStore
from dedupd.index.protocol import (
    APPLY_CHUNK,
    NO_IDS,
    Applied,
    ClusterReps,
    Emitted,
    Exchange,
    Packed,
    Prepared,
    RecordsRead,
    Unions,
)
from dedupd.index.record import Record, cluster_name, decode_records
from dedupd.index.record_cache import DecodedRecords
from dedupd.index.retention import Claim
from dedupd.similarity.bounds import ANCHORS_KEPT, FRESH_PER_CALL, KEPT_PER_CLUSTER, NEWEST_KEPT, Bounds
from dedupd.similarity.fingerprint import Fingerprinter
from dedupd.similarity.hashing import U64Array
from dedupd.similarity.lsh import column_bands
from dedupd.similarity.spec import IndexSpec

if TYPE_CHECKING:
    from dedupd.index.protocol import Gateway

__all__ = ["APPLY_CHUNK", "MemoryExchange", "MemoryGateway", "MemoryStore", "MemoryWrites"]


class MemoryExchange:
    """Calls queued to run together, in order (a pipeline's twin)."""

    def __init__(self) -> None:
        self._calls: list[Callable[[], Any]] = []

    def __len__(self) -> int:
        return len(self._calls)

    def queue(self, call: Callable[[], Any]) -> None:
        self._calls.append(call)

    def execute(self) -> list[Any]:
        """Run what is queued, in order; the replies."""
        calls, self._calls = self._calls, []
        return [call() for call in calls]


@dataclass(frozen=True, slots=True)
class MemoryWrites:
    """A batch's writes, ready to apply (:meth:`MemoryGateway.prepare`)."""

    writes: Sequence[DocWrite]


def _new_documents(writes: Sequence[DocWrite]) -> set[int]:
    """The integer ids of the new documents ``writes`` add to buckets (packed_writes.new_documents): a later
    BUCKETS call of the batch reads without them."""
    return {w.num for w in writes if w.adds_new}


def _packed(ids: Sequence[int]) -> Packed:
    return np.array(ids, dtype=np.uint32) if ids else NO_IDS


class MemoryGateway:
    """One generation of one index in memory: the :class:`~dedupd.index.protocol.Gateway` of a
    :class:`MemoryStore` (a new one unless given: gateways sharing one see each other's writes, as processes
    sharing a Redis do). ``clock`` gives the time in seconds (tombstone and marker expiry)."""

    def __init__(
        self,
        keys: Keys,
        spec: IndexSpec,
        generation: int = 0,
        serving: bool = True,
        tombstone_ttl_s: int = 7 * 86400,
        bounds: Bounds | None = None,
        store: MemoryStore | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store if store is not None else MemoryStore()
        self.bounds = bounds or Bounds()
        self.keys = keys
        self.spec = spec
        self.generation = generation
        self.serving = serving  # a generation being built by a rebuild never forgets ids nor emits
        self.holds_ids = False  # a rebuild runs: refused documents' ids stay (RedisGateway.release)
        self.tombstone_ttl_s = tombstone_ttl_s
        self.fingerprinter = Fingerprinter(spec, keep_shingles=spec.store_shingles)
        self._clock = clock
        self._shift = np.uint64(64 - spec.shard_bits)
        self._key_cache: dict[tuple[int, int], str] = {}
        self._decoded = DecodedRecords()
        self._known = KnownRoots()

    def record_key(self, num: int) -> str:
        return self.keys.doc(num, self.generation)

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def stream(self, name: str) -> list[dict[bytes, bytes]]:
        """The entries of a stream (``keys.alerts``, ``keys.reply(name)``, ...), as XRANGE reads them."""
        return self.store.streams.get(name, [])

    # ----- reading -----
    def states(
        self, requests: Sequence[tuple[str, bool, str]], flights: Sequence[tuple[str, ...]] | None = None
    ) -> list[DocState]:
        """The stored state of each (doc id, create, entry id): integer ids created for ``create`` (unless a
        newer delete's tombstone says no), records and tombstones (RedisGateway.states)."""
        if not requests:
            return []
        resolved = scripts.resolve_ids(self.store, requests)
        return states_of(requests, resolved, self.load_records, flights)

    def load_records(self, nums: Iterable[int]) -> dict[int, Record | None]:
        """The records of ``nums``."""
        return self.read_records(nums).records

    def load_leaving(self, nums: Sequence[int]) -> dict[int, Record | None]:
        """The records of documents about to leave, not kept in the decode cache (RedisGateway.load_leaving)."""
        wanted = list(dict.fromkeys(nums))
        blobs = [self.store.records.get(self.record_key(n)) for n in wanted]
        return decode_records(wanted, blobs, self.fingerprinter) if wanted else {}

    def read_records(
        self, nums: Iterable[int], ahead: Sequence[int] = (), held: Mapping[int, bytes | None] | None = None
    ) -> RecordsRead:
        """The records of ``nums`` (those ``held`` taken from it), with the stored bytes of every id read,
        ``ahead`` read too when some record must be read (RedisGateway.read_records)."""
        stored = self.store.records.get
        return RecordsRead(
            *self._decoded.read(
                nums, ahead, held, lambda read: [stored(self.record_key(n)) for n in read], self.fingerprinter
            )
        )

    def remember(self, num: int, blob: bytes, record: Record) -> None:
        """Keep a record just written as read (record_cache.DecodedRecords.remember)."""
        self._decoded.remember(num, blob, record)

    def peek(self, bands: Sequence[U64Array]) -> list[Packed]:
        """The integer ids in the buckets of each band-hash row (one per shared bucket), joining nothing."""
        rows = [np.asarray(b, dtype=np.uint64) for b in bands]
        if not rows:
            return []
        flat = np.concatenate(rows)
        band = np.concatenate([column_bands(r.size, self.spec.bands) for r in rows])
        names, name_of, fields = bucket_keys(band, flat, self._shift, self.spec.shard_bits, self._names)
        found = iter(
            self.store.buckets.get(names[at], {}).get(int(f), [])
            for at, f in zip(name_of.tolist(), fields.tolist(), strict=True)
        )
        return [_packed([m for _ in range(r.size) for m in next(found)]) for r in rows]

    def roots(self, nums: Sequence[int], fresh: bool = False) -> list[int]:
        """The root of each document's cluster; unless ``fresh``, from the roots seen a moment ago when known
        (RedisGateway.roots)."""
        if not nums:
            return []
        if fresh:
            return self._find_roots(nums)
        return self._known.roots(nums, self._find_roots)

    def representatives(self, roots: Sequence[int], ring: int = 0) -> list[ClusterReps]:
        """Per cluster root, the root now, its representatives, whether it has a ring, its first ``ring`` nodes
        and whether they are all of them (RedisGateway.representatives)."""
        return uf_twin.representatives(self.store, roots, ring)

    def _find_roots(self, nums: Sequence[int]) -> list[int]:
        found = uf_twin.find_roots(self.store, nums)
        self._known.learn_found(nums, found)
        return found

    def cluster_page(self, doc_id: str, cursor: str | None = None, limit: int = 100) -> ClusterPage:
        """A page of the members of ``doc_id``'s cluster (RedisGateway.cluster_page)."""
        at = checked_args(limit, cursor)
        reply = PageReply.of(uf_twin.cluster_page(self.store, doc_id, at, limit, page_steps(limit)))
        stored = {n: self.store.records.get(self.record_key(n)) for n in [*reply.nums, reply.root]}
        return page_of(doc_id, cursor is None, reply, stored, self._name(reply.root, stored[reply.root]))

    def cluster_names(self, roots: Sequence[int], known: Mapping[int, str]) -> list[str]:
        """Each cluster's name: its root document's id (from ``known``, else read; the id its node kept when
        it expired), ``#n`` when it was deleted."""
        read = {n: self._name(n, self.store.records.get(self.record_key(n))) for n in roots if n not in known}
        return [known[n] if n in known else read[n] for n in roots]

    def _name(self, root: int, record: bytes | None) -> str:
        """The name of the cluster of ``root`` (its stored ``record``, else its gone-node entry)."""
        return cluster_name(root, record, None if record else self.store.gone.get(root))

    # ----- writing -----
    def exchange(self) -> MemoryExchange:
        return MemoryExchange()

    def prepare(self, writes: Sequence[DocWrite]) -> MemoryWrites:
        """The writes of a batch (nothing is written)."""
        return MemoryWrites(writes)

    def apply(self, prepared: Prepared) -> Applied:
        """Apply prepared writes as RedisGateway does on a single Redis: the documents kept touched first (a
        retention window: scripts/touch.lua's twin), then one lua.BUCKETS call per
        ``APPLY_CHUNK`` writes, in order. Per write the ids read in the buckets it joined (None when its
        record had changed since it was read: nothing of it written); and the buckets joined that were there
        already."""
        writes = cast(MemoryWrites, prepared).writes
        if self.serving and self.spec.windowed:  # the documents kept, touched before they are written
            scripts.touch(self.store, [w.num for w in writes if not w.delete], self._now_ms, written=True)
        fresh = FRESH_PER_CALL if self.serving else 0
        found: list[Packed | None] = []
        hits: list[Hits] = []
        for lo in range(0, len(writes), APPLY_CHUNK):
            part = writes[lo : lo + APPLY_CHUNK]
            ops = bucket_ops(part, self.spec.bands, self._shift, self.spec.shard_bits, self._names, True)
            if ops is None:  # nothing to send: nothing read
                found += [NO_IDS] * len(part)
                continue
            call = scripts.BucketsCall(self.store, self.bounds.bucket_members, KEPT_PER_CLUSTER, fresh)
            reads, positions = call.run(ops, part, self.record_key)
            rows = np.arange(ops.docs.size, dtype=np.int64)
            hits.append(Hits.of(ops, rows, np.array(positions, dtype="<u4").tobytes(), lo))
            new = _new_documents(writes[:lo])
            found += [None if r is None else _packed([m for m in r if m not in new]) for r in reads]
        return found, Hits.join(hits)

    def forget(self, deleted: Sequence[tuple[str, int, str]]) -> None:
        """Deleted documents (doc id, integer id or 0, the delete's entry id): ids, union-find nodes,
        tombstones (serving generation only)."""
        if not deleted or not self.serving:
            return
        uf_twin.forget_ids(self.store, deleted, self._now_ms(), self.tombstone_ttl_s * 1000)
        self._drop_deficits([num for _, num, _ in deleted])
        self._known.forget(num for _, num, _ in deleted)

    def release(self, refused: Sequence[tuple[str, int]]) -> None:
        """Ids resolved for documents refused before anything of them was written (RedisGateway.release)."""
        if refused and self.serving and not self.holds_ids:
            scripts.release_ids(self.store, refused)

    def created(self, nums: Sequence[int]) -> None:
        """Documents a batch has just created: each its own root until unions take it in."""
        self._known.created(nums)

    def forget_roots(self) -> None:
        """Forget every root known."""
        self._known.clear()

    def evict(self, exchange: Exchange, ev: Evictions) -> None:
        """Queue lua.EVICT's twin for the rows of ``ev``."""
        if ev.key.size:
            full = self.bounds.bucket_members
            cast(MemoryExchange, exchange).queue(
                partial(scripts.evict, self.store, ev, NEWEST_KEPT, ANCHORS_KEPT, full)
            )

    def displace(self, exchange: Exchange, pl: Placements) -> None:
        """Queue lua.DISPLACE's twin for the rows of ``pl``."""
        if pl.key.size:
            full, deficits = self.bounds.bucket_members, self.keys.deficits(self.generation)
            cast(MemoryExchange, exchange).queue(partial(scripts.displace, self.store, pl, full, deficits))

    def union(
        self,
        groups: Sequence[tuple[int, Sequence[tuple[int, str]]]],
        exchange: Exchange | None = None,
        unnamed: Iterable[int] = (),
    ) -> Unions:
        """Union each document with its matches, after what ``exchange`` holds; the records of the
        ``unnamed`` roots read before the unions, for their names (RedisGateway.union)."""
        names: dict[int, str] = {}
        if exchange is None:
            reply = uf_twin.union_roots(self.store, self.bounds.representatives, groups)
        else:
            pipe = cast(MemoryExchange, exchange)
            wanted = list(dict.fromkeys(unnamed))
            first = len(pipe)
            for n in wanted:
                pipe.queue(partial(self.store.records.get, self.record_key(n)))
            pipe.queue(partial(uf_twin.union_roots, self.store, self.bounds.representatives, groups))
            replies = pipe.execute()
            reply = replies[-1]
            names = {n: self._name(n, blob) for n, blob in zip(wanted, replies[first:-1], strict=True)}
        out, done = unionfind.union_replies(groups, reply)
        self._known.learn_unions(done)
        return Unions(out, names)

    def emit(
        self, exchange: Exchange, stream: str, retention: int, ttl_s: int, entries: Sequence[Emitted]
    ) -> None:
        """Queue appending each (input entry id, field/value list) to ``stream`` once per entry id (no
        trimming to ``retention``)."""
        if entries:
            now, seen = self._now_ms(), self.keys.seen(stream)
            call = partial(scripts.emit, self.store, stream, seen, now, ttl_s * 1000, entries)
            cast(MemoryExchange, exchange).queue(call)

    def reply(
        self, exchange: Exchange, name: str, maxlen: int, ttl_s: int, entries: Sequence[Emitted]
    ) -> None:
        """Queue the verdicts of one reply stream, once per query entry (no trimming, no expiry)."""
        self.emit(exchange, self.keys.reply(name), maxlen, ttl_s, entries)

    def count(self, counts: Mapping[str, int]) -> None:
        """Add to the index's counters; zeros are left out."""
        for name, n in counts.items():
            if n:
                self.store.counters[name] = self.store.counters.get(name, 0) + n

    # ----- the retention window (retention.py) -----
    def touch(self, exchange: Exchange, nums: Sequence[int]) -> None:
        """Queue scripts/touch.lua's twin."""
        if nums:
            call = partial(scripts.touch, self.store, list(dict.fromkeys(nums)), self._now_ms)
            cast(MemoryExchange, exchange).queue(call)

    def claim_expiry(self, limit: int, lease_ms: int) -> Claim:
        """scripts/expire_claim.lua's twin."""
        spec = self.spec
        reply = scripts.expire_claim(
            self.store, self._now_ms(), spec.retention_s, spec.max_documents, limit, lease_ms
        )
        return Claim.of(reply)

    def note_expiry(self, deadline: int, notes: Sequence[tuple[int, str]]) -> None:
        """scripts/expire_note.lua's twin."""
        scripts.expire_note(self.store, deadline, notes)

    def finish_expiry(self, deadline: int, done: Sequence[tuple[int, str, str]]) -> int:
        """scripts/expire_finish.lua's twin."""
        expired = scripts.expire_finish(self.store, deadline, done, self._now_ms())
        self._drop_deficits([num for num, _, _ in done])
        self._known.forget(num for num, _, _ in done)
        return expired

    def _drop_deficits(self, nums: Sequence[int]) -> None:
        """Forget the deficits (lua.DISPLACE) of documents deleted or expired."""
        name = self.keys.deficits(self.generation)
        held = self.store.deficits.get(name, {})
        for n in nums:
            held.pop(n, None)
        if not held:
            self.store.deficits.pop(name, None)

    # ----- key names -----
    def _names(self, band_of: npt.NDArray[np.int64], shard_of: npt.NDArray[np.int64]) -> list[str]:
        """Bucket hash key names (Keys.buckets), cached."""
        out = []
        for b, sh in zip(band_of.tolist(), shard_of.tolist(), strict=True):
            key = self._key_cache.get((b, sh))
            if key is None:
                key = self._key_cache[(b, sh)] = self.keys.buckets(self.generation, b, sh)
            out.append(key)
        return out


if TYPE_CHECKING:
    _gateway: type[Gateway] = MemoryGateway  # mypy: a MemoryGateway is a Gateway
