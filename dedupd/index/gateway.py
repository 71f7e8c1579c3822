"""The Redis gateway of one index generation: every exchange the batch pipeline has with Redis.

Layout (see keys.py): each document has a record ``doc:<gen>:<n>``, one packed string (record.py: id,
tail, unit count, the input entry id that last changed it — its version —, source, and the raw signature
with the 32-bit shingle fingerprints, or a short document's 64-bit shingle hashes); each band bucket is a
field of a small Redis hash ``b:<gen>:{<band>.<shard mod 16>}:<shard>`` (the shard: the band hash's top
bits; the field: its low 32 bits) whose value is the packed uint32 ids of the documents in it. A batch is
inserted and queried in one script call (lua.BUCKETS; buckets.py encodes it): for each document, in order,
its record is checked and written and it joins each of its buckets, reading who is there, so a document
sees every document inserted before it, including earlier ones of the same batch and ones a concurrent
consumer inserted a moment before.

Ids, tombstones and the union-find of clusters (unionfind.py) are shared by the generations; only the
serving generation's gateway forgets ids, leaves tombstones and removes deleted documents' union-find nodes.

Beside it: opening.py opens an index (its spec and generation), packed_writes.py packs a batch's writes
and takes its reads out of the replies, window_calls.py holds the retention window's calls (a base class).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, cast

import numpy as np
import numpy.typing as npt
from redis.cluster import RedisCluster

from dedupd.index import argv, lua, protocol, unionfind
from dedupd.index.buckets import (
    BucketOps,
    ClusterEncoding,
    DocWrite,
    Evictions,
    Hits,
    Placements,
    SingleEncoding,
    bucket_keys,
    bucket_ops,
)
from dedupd.index.cluster_page import ClusterPage, PageReply, checked_args, page_of, page_steps
from dedupd.index.cluster_records import ClusterRecords
from dedupd.index.docstate import DocState, states_of
from dedupd.index.keys import Keys
from dedupd.index.known_roots import KnownRoots
from dedupd.index.opening import open_spec
from dedupd.index.packed_writes import PackedWrites, bucket_reads, new_documents
from dedupd.index.protocol import APPLY_CHUNK, NO_IDS, Applied, Emitted, Exchange, Packed, RecordsRead, Unions
from dedupd.index.record import Record, cluster_name, decode_records
from dedupd.index.record_cache import DecodedRecords
from dedupd.index.window_calls import WindowCalls
from dedupd.server.connection import RedisClient, ScriptPipeline, is_cluster
from dedupd.similarity.bounds import ANCHORS_KEPT, FRESH_PER_CALL, NEWEST_KEPT, Bounds
from dedupd.similarity.fingerprint import Fingerprinter
from dedupd.similarity.hashing import U64Array
from dedupd.similarity.lsh import column_bands
from dedupd.similarity.spec import IndexSpec

RING_STEPS_PER_CALL = 8192  # ring steps of one REPRESENTATIVES call at most (about 2 ms of Redis)

__all__ = ["APPLY_CHUNK", "NO_IDS", "Emitted", "Packed", "PackedWrites", "RedisGateway", "open_spec"]


class RedisGateway(WindowCalls):
    """Redis operations on one generation of one index (one prefix): the :class:`~dedupd.index.protocol.Gateway`
    on Redis (the retention window's calls in its base, window_calls.WindowCalls)."""

    def __init__(
        self,
        client: RedisClient,
        keys: Keys,
        spec: IndexSpec,
        generation: int,
        serving: bool = True,
        tombstone_ttl_s: int = 7 * 86400,
        bounds: Bounds | None = None,
    ) -> None:
        self.client = client
        self.bounds = bounds or Bounds()
        self.keys = keys
        self.spec = spec
        self.generation = generation
        self.serving = serving  # a generation being built by a rebuild never forgets ids nor emits
        self.holds_ids = False  # a rebuild runs: refused documents' ids stay (release)
        self.tombstone_ttl_s = tombstone_ttl_s
        self.fingerprinter = Fingerprinter(spec, keep_shingles=spec.store_shingles)
        self.cluster = is_cluster(client)
        self.encoding = ClusterEncoding(self._keyslot) if self.cluster else SingleEncoding()
        reg = client.register_script
        self._resolve, self._forget = reg(lua.RESOLVE_IDS), reg(unionfind.FORGET_IDS)
        self._release = reg(lua.RELEASE_IDS)
        self._buckets, self._versions = reg(lua.BUCKETS), reg(lua.VERSIONS)
        self.records = ClusterRecords(client, keys, generation)  # used on a Redis Cluster
        self._emit, self._union = reg(lua.EMIT_MANY), reg(unionfind.UNION_ROOTS)
        self._union_live = reg(unionfind.UNION_LIVE)
        self._reply, self._roots, self._evict = reg(lua.REPLY), reg(unionfind.FIND_ROOTS), reg(lua.EVICT)
        self._displace = reg(lua.DISPLACE)
        self._page, self._reps = reg(unionfind.CLUSTER_PAGE), reg(unionfind.REPRESENTATIVES)
        self._touch, self._claim = reg(lua.TOUCH), reg(lua.EXPIRE_CLAIM)
        self._note, self._finish = reg(lua.EXPIRE_NOTE), reg(lua.EXPIRE_FINISH)
        self._uf = [keys.uf_parent, keys.uf_children, keys.uf_gone, keys.uf_floor, keys.uf_ring]
        self._shift = np.uint64(64 - spec.shard_bits)
        # The caches below are shared by the daemon's two threads (the main thread indexes a batch while the
        # worker thread verifies and finishes the one before). The bucket names (_key_table, _key_cache) take
        # no lock: they are only ever added to, each addition one store, and two threads making one name make
        # the same. The decoded records and the known roots take their own locks.
        self._key_table: npt.NDArray[np.object_] | None = None
        self._key_cache: dict[tuple[int, int], str] = {}
        self._decoded = DecodedRecords()
        self._known = KnownRoots()  # cluster roots seen a moment ago (a flood's batch needs no lookup)

    @classmethod
    def open(
        cls,
        client: RedisClient,
        keys: Keys,
        spec: IndexSpec,
        tombstone_ttl_s: int = 7 * 86400,
        bounds: Bounds | None = None,
    ) -> RedisGateway:
        """The serving generation's gateway (see :func:`open_spec`, which may raise)."""
        spec, gen = open_spec(client, keys, spec)
        return cls(client, keys, spec, gen, tombstone_ttl_s=tombstone_ttl_s, bounds=bounds)

    def nums_of(self, doc_ids: Sequence[str]) -> list[int]:
        """The integer id of each document id (0 = unknown); creates none."""
        if not doc_ids:
            return []
        return [int(n) if n else 0 for n in self.client.hmget(self.keys.id_forward, list(doc_ids))]

    def _keyslot(self, name: str) -> int:
        return int(cast(RedisCluster, self.client).keyslot(name))

    def record_key(self, num: int) -> str:
        return self.keys.doc(num, self.generation)

    # ----- reading the state of a run's documents -----
    def states(
        self, requests: Sequence[tuple[str, bool, str]], flights: Sequence[tuple[str, ...]] | None = None
    ) -> list[DocState]:
        """The stored state of each (doc id, create, entry id): its integer id (created for ``create``
        unless a newer delete's tombstone says no), record and tombstone; ``flights`` are the documents'
        in-flight entries (from the consumer's stream)."""
        if not requests:
            return []
        k = self.keys
        keys = [k.id_forward, k.id_seq, k.tombstones, k.expiring]
        resolved: Any = self._resolve(keys=keys, args=argv.resolve_ids(requests))
        # (integer id, tombstone, being expired) each
        triples = list(zip(resolved[0::3], resolved[1::3], resolved[2::3], strict=True))
        return states_of(requests, triples, self.load_records, flights)

    def load_records(self, nums: Iterable[int]) -> dict[int, Record | None]:
        """Fetch document records in one pipelined exchange."""
        return self.read_records(nums).records

    def load_leaving(self, nums: Sequence[int]) -> dict[int, Record | None]:
        """The records of documents about to leave, in one exchange, not kept in the decode cache."""
        wanted = list(dict.fromkeys(nums))
        return decode_records(wanted, self._stored(wanted), self.fingerprinter) if wanted else {}

    def read_records(
        self, nums: Iterable[int], ahead: Sequence[int] = (), held: Mapping[int, bytes | None] | None = None
    ) -> RecordsRead:
        """Fetch document records in one pipelined exchange; an id ``held`` (stored bytes read a moment ago,
        as one read with the others would be) is taken from it instead of read again, and the ids ``ahead``
        are read in the same exchange (not decoded) when some record must be read. Returns the records and
        the stored bytes of every id this exchange read."""
        return RecordsRead(*self._decoded.read(nums, ahead, held, self._stored, self.fingerprinter))

    def _stored(self, wanted: list[int]) -> list[bytes | None]:
        """The stored records of ``wanted`` (None when missing), in one pipelined exchange."""
        names = [self.record_key(n) for n in wanted]
        pipe = self.client.pipeline(transaction=False)
        if self.cluster:  # records live in many slots: one GET each, pipelined per node
            for name in names:
                pipe.get(name)
            blobs = pipe.execute()
        else:  # one MGET per 1,000 records (a pipeline of GETs costs ~10 us of Python per record)
            for i in range(0, len(names), 1000):
                pipe.mget(names[i : i + 1000])
            blobs = [b for part in pipe.execute() for b in part]
        return blobs

    def remember(self, num: int, blob: bytes, record: Record) -> None:
        """Keep a record just written as read (record_cache.DecodedRecords.remember)."""
        self._decoded.remember(num, blob, record)

    def versions(self, nums: Sequence[int]) -> dict[int, str]:
        """Each record's version (its input entry id; '' when there is no record), without the records."""
        pipe = ScriptPipeline(self.client)
        step = 1 if self.cluster else 1000
        for i in range(0, len(nums), step):
            pipe.script(self._versions, [self.record_key(n) for n in nums[i : i + step]], [])
        found = [v for part in (pipe.execute() if nums else []) for v in part]
        return {n: v.decode() if isinstance(v, bytes) else str(v) for n, v in zip(nums, found, strict=True)}

    # ----- writing -----
    def exchange(self) -> ScriptPipeline:
        """A new, empty exchange: one pipelined round trip."""
        return ScriptPipeline(self.client)

    def prepare(self, writes: Sequence[DocWrite]) -> PackedWrites:
        """Pack the writes of a batch (nothing is sent): on a single Redis, the touch of the documents written
        (:meth:`_touch_written`) then the bucket calls with their record checks, in chunks of APPLY_CHUNK
        documents, in one pipeline; on a Redis Cluster the records are checked first when applied, so nothing
        is packed before."""
        if self.cluster:
            return PackedWrites(writes, None, [])
        pipe = ScriptPipeline(self.client)
        return self._pack(writes, pipe, self._touch_written(pipe, writes))

    def _pack(self, writes: Sequence[DocWrite], pipe: ScriptPipeline, lead: int = 0) -> PackedWrites:
        """The bucket calls of ``writes`` (with their record checks on a single Redis) in ``pipe``, after its
        ``lead`` calls."""
        full = self.bounds.bucket_members
        # a serving bucket takes FRESH_PER_CALL new members a call, the others once the batch is verified
        # (lua.EVICT); a generation being built (no EVICT) takes every member up to ``full``
        fresh = FRESH_PER_CALL if self.serving else 0
        spans: list[tuple[int, BucketOps | None, list[npt.NDArray[np.int64]]]] = []  # per chunk
        for lo in range(0, len(writes), APPLY_CHUNK):  # one script call's run time bounded by a chunk's
            part = writes[lo : lo + APPLY_CHUNK]
            ops = bucket_ops(
                part,
                self.spec.bands,
                self._shift,
                self.spec.shard_bits,
                self._names,
                self.encoding.with_checks,
            )
            calls = self.encoding.calls(ops, part, self.record_key, full, fresh) if ops is not None else []
            for keys, args, _ in calls:
                pipe.script(self._buckets, keys, args)
            spans.append((len(part), ops, [rows for _, _, rows in calls]))
        return PackedWrites(writes, pipe, spans, lead)

    def apply(self, prepared: protocol.Prepared) -> Applied:
        """Send prepared writes: records and buckets of every document, in batch order.

        On a single Redis this is one script call per chunk, atomic: a document whose record changed since it
        was read (another consumer got there first) is left untouched. On a Redis Cluster the records are
        checked and written first (one script per record), then the buckets of the documents that passed,
        then the records are settled (cluster_records.py: a retry leaves the buckets a write left behind).

        Returns:
            For each write, the integer ids found in the buckets it joined (one per shared bucket, possibly
            itself: see bounds.ranked_flat), or None when its record had changed (process that entry again);
            and the buckets the writes joined that were there already (their writes' indices into the writes).
        """
        packed = cast(PackedWrites, prepared)
        if packed.pipe is not None:
            return self._bucket_replies(packed)
        writes = packed.writes
        touch = ScriptPipeline(self.client)  # (its own exchange: the records live in other slots)
        if self._touch_written(touch, writes):
            touch.execute()
        left = self.records.check(writes)
        sent, at = self.records.with_leftovers(writes, left)
        found, hits = self._bucket_replies(self._pack(sent, ScriptPipeline(self.client)))
        out = [found[i] if rows is not None else None for i, rows in zip(at, left, strict=True)]
        self.records.settle(writes, left, [f is not None for f in out])
        of_sent = np.full(len(sent), -1, dtype=np.int64)
        of_sent[at] = np.arange(len(at))
        write = of_sent[hits.write]  # a leave-only write of leftovers joins nothing: no hit is one
        return out, Hits(hits.names, hits.key, hits.field, write, hits.refused, hits.full)

    def _bucket_replies(self, prepared: PackedWrites) -> Applied:
        """Send the packed bucket calls; per write what it read, None when its record had changed; and the
        buckets joined that were there already."""
        assert prepared.pipe is not None
        writes, pipe = prepared.writes, prepared.pipe
        replies = iter(pipe.execute() if len(pipe) else [])
        for _ in range(prepared.lead):
            next(replies)
        found: list[Packed | None] = []
        hits: list[Hits] = []
        at = 0
        for size, ops, call_rows in prepared.spans:
            groups = [next(replies) for _ in call_rows]
            chunk: list[bytes | None] = []
            for j in range(size):
                parts = [group[j] for group in groups]
                chunk.append(None if b"!" in parts else b"".join(parts))
            if ops is not None:
                hits += [
                    Hits.of(ops, rows, group[size], at) for rows, group in zip(call_rows, groups, strict=True)
                ]
            found += bucket_reads(chunk, new_documents(writes[:at]))
            at += size
        return found, Hits.join(hits)

    def evict(self, exchange: Exchange, ev: Evictions) -> None:
        """Queue lua.EVICT for the rows of ``ev`` (one call, or one per slot on a Redis Cluster)."""
        for sel, used, local in self._per_slot(ev.names, ev.key):
            clusters, group = np.unique(ev.cluster[sel], return_inverse=True)
            args = argv.evict(
                (local + 1).astype("<u4").tobytes(),
                ev.field[sel].astype("<u4").tobytes(),
                (group + 1).astype("<u4").tobytes(),
                ev.doc[sel].astype("<u4").tobytes(),
                NEWEST_KEPT,
                ANCHORS_KEPT,
                self.bounds.bucket_members,
                (ev.members[c] for c in clusters.tolist()),
            )
            cast(ScriptPipeline, exchange).script(self._evict, [ev.names[u] for u in used.tolist()], args)

    def displace(self, exchange: Exchange, pl: Placements) -> None:
        """Queue lua.DISPLACE for the rows of ``pl``: one call with the deficits hash on a single Redis; on a
        Redis Cluster, one per slot with the rows of the documents kept out of most of their buckets only."""
        if self.cluster:
            pl = pl[np.flatnonzero(pl.thin)]
        deficits = [] if self.cluster else [self.keys.deficits(self.generation)]
        for sel, used, local in self._per_slot(pl.names, pl.key):
            args = argv.displace(
                (local + 1).astype("<u4").tobytes(),
                pl.field[sel].astype("<u4").tobytes(),
                pl.doc[sel].astype("<u4").tobytes(),
                self.bounds.bucket_members,
                bool(deficits),
            )
            keys = [*(pl.names[u] for u in used.tolist()), *deficits]
            cast(ScriptPipeline, exchange).script(self._displace, keys, args)

    def _per_slot(
        self, names: list[str], key: npt.NDArray[np.int64]
    ) -> Iterator[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]]:
        """The rows (``key``: each row's index into ``names``) of one script call each: all of them on a single
        Redis, those of one slot on a Redis Cluster; per call its rows, the names it uses (indexes into
        ``names``) and each row's index into those, for KEYS."""
        if not key.size:
            return
        named, inverse = np.unique(key, return_inverse=True)  # the names rows use (of a chunk's thousands)
        slot_of = [self._keyslot(names[k]) for k in named.tolist()] if self.cluster else [0] * named.size
        slots = np.array(slot_of, dtype=np.int64)[inverse]
        for slot in np.unique(slots).tolist():
            sel = np.flatnonzero(slots == slot)
            used, local = np.unique(key[sel], return_inverse=True)
            yield sel, used, local.astype(np.int64)

    def forget(self, deleted: Sequence[tuple[str, int, str]]) -> None:
        """Deleted documents (doc id, integer id or 0, the delete's entry id): forget their ids, remove their
        union-find nodes (those still linking other documents stay until their last child goes) and leave
        tombstones, in one script call (serving generation only: a rebuild's generation shares the ids)."""
        if not deleted or not self.serving:
            return
        args = argv.forget_ids(int(time.time() * 1000), self.tombstone_ttl_s * 1000, deleted)
        keys = [*self._uf, self.keys.id_forward, self.keys.tombstones, self.keys.tombstone_expiry]
        pipe = ScriptPipeline(self.client)
        pipe.script(self._forget, [*keys, self.keys.uf_reps, self.keys.touched], args)
        pipe.execute()
        self._drop_deficits([n for _, n, _ in deleted])
        self._known.forget(num for _, num, _ in deleted)  # (a node removed is its own root again)

    def release(self, refused: Sequence[tuple[str, int]]) -> None:
        """Ids resolved for documents then refused before anything of them was written (doc id, integer id):
        forgotten while they still map to it (scripts/release_ids.lua; serving generation only, as
        :meth:`forget`). None while a rebuild runs (``holds_ids``): its replay of the same entry may write the
        document under the new generation's parameters with the id it was given."""
        if refused and self.serving and not self.holds_ids:
            self._release(keys=[self.keys.id_forward], args=argv.release_ids(refused))

    def peek(self, bands: Sequence[U64Array]) -> list[Packed]:
        """The integer ids in the buckets of each band-hash row (one per shared bucket), read only: a query
        joins nothing."""
        rows = [np.asarray(b, dtype=np.uint64) for b in bands]
        flat = np.concatenate(rows) if rows else np.zeros(0, dtype=np.uint64)
        band = (
            np.concatenate([column_bands(r.size, self.spec.bands) for r in rows])
            if rows
            else np.zeros(0, np.int64)
        )
        names, name_of, fields = bucket_keys(band, flat, self._shift, self.spec.shard_bits, self._names)
        pipe = self.client.pipeline(transaction=False)
        for at, f in zip(name_of.tolist(), fields, strict=True):
            pipe.hget(names[at], f.tobytes())
        found = iter(pipe.execute() if flat.size else [])
        out: list[Packed] = []
        for r in rows:
            packed = b"".join(next(found) or b"" for _ in range(r.size))
            out.append(np.frombuffer(packed, dtype="<u4") if packed else NO_IDS)
        return out

    def roots(self, nums: Sequence[int], fresh: bool = False) -> list[int]:
        """The root of each document's cluster (read only). Unless ``fresh``, the ids whose roots this process
        saw a moment ago are answered from them (known_roots.py: a view that can be finer than Redis's, never
        coarser); the others are looked up, in one call."""
        if not nums:
            return []
        if fresh:
            return self._find_roots(nums)
        return self._known.roots(nums, self._find_roots)

    def representatives(self, roots: Sequence[int], ring: int = 0) -> list[protocol.ClusterReps]:
        """The representatives of the clusters of ``roots`` (roots as this process knows them: one merged
        since is followed to its root now), in one exchange (unionfind.REPRESENTATIVES): per root, the root
        now, its representatives, most matched first (none for a cluster no alert joined), whether it has a
        ring, the first ``ring`` nodes of its ring after the root, the most recently joined first, and
        whether they are all of them. The roots are sent in calls of at most ``RING_STEPS_PER_CALL`` ring
        steps (a call of a few milliseconds however many clusters a batch nearly matched), pipelined."""
        if not roots:
            return []
        keys = [self.keys.uf_parent, self.keys.uf_reps, self.keys.uf_ring]
        per = max(1, RING_STEPS_PER_CALL // max(ring, 1))
        if len(roots) <= per:
            return unionfind.representatives_replies(self._reps(keys=keys, args=[ring, *roots]))
        pipe = self.exchange()
        for at in range(0, len(roots), per):
            pipe.script(self._reps, keys, [ring, *roots[at : at + per]])
        return [x for reply in pipe.execute() for x in unionfind.representatives_replies(reply)]

    def _find_roots(self, nums: Sequence[int]) -> list[int]:
        """The roots, from the union-find in Redis (unionfind.FIND_ROOTS); kept as known."""
        found = [int(x) for x in self._roots(keys=[self.keys.uf_parent], args=argv.find_roots(nums))]
        self._known.learn_found(nums, found)
        return found

    def created(self, nums: Sequence[int]) -> None:
        """Documents a batch has just created and written (new integer ids, given out by this process, not
        deletes): each is its own root until unions take it in (no lookup needed for them)."""
        self._known.created(nums)

    def forget_roots(self) -> None:
        """Forget every root known (after a server error: a server restarted without its data gives the
        integer ids out again)."""
        self._known.clear()

    def reply(
        self, exchange: Exchange, name: str, maxlen: int, ttl_s: int, entries: Sequence[Emitted]
    ) -> None:
        """Queue the verdicts of one reply stream: once per query entry, bounded, expiring when idle."""
        if not entries:
            return
        stream = self.keys.reply(name)
        args = argv.reply(int(time.time() * 1000), maxlen, ttl_s * 1000, entries)
        cast(ScriptPipeline, exchange).script(self._reply, [stream, self.keys.seen(stream)], args)

    # ----- outputs -----
    def emit(
        self, exchange: Exchange, stream: str, retention: int, ttl_s: int, entries: Sequence[Emitted]
    ) -> None:
        """Queue one call appending each (input entry id, field/value list) to ``stream`` once per entry id."""
        if not entries:
            return
        args = argv.emit_many(int(time.time() * 1000), retention, ttl_s * 1000, entries)
        cast(ScriptPipeline, exchange).script(self._emit, [stream, self.keys.seen(stream)], args)

    def union(
        self,
        groups: Sequence[tuple[int, Sequence[tuple[int, str]]]],
        exchange: Exchange | None = None,
        unnamed: Iterable[int] = (),
    ) -> Unions:
        """Union each document with its matches, (integer id, document id) each (union-find in Redis, one
        union per distinct cluster root; a match deleted meanwhile and gone from the union-find joins nothing).
        With ``exchange``, after what it holds, in the same round trip; the records of the ``unnamed`` roots
        are read in it too (before the unions) for their names (:meth:`cluster_names`).

        Returns:
            Per group, the root of the document's cluster after it, and the root each match had before
            (before the document joined: its earlier cluster); the names read.
        """
        args = argv.union_roots(self.bounds.representatives, groups)
        keys = [*self._uf, self.keys.id_forward, self.keys.uf_reps]
        names: dict[int, str] = {}
        if exchange is None:
            reply: list[Any] = self._union(keys=keys, args=args)
        else:
            pipe = cast(ScriptPipeline, exchange)
            wanted = list(dict.fromkeys(unnamed))
            first = len(pipe)
            for n in wanted:
                pipe.get(self.record_key(n))
            pipe.script(self._union, keys, args)
            replies = pipe.execute()
            reply = replies[-1]
            names = self._named(wanted, replies[first:-1])
        out, done = unionfind.union_replies(groups, reply)
        self._known.learn_unions(done)
        return Unions(out, names)

    def union_live(
        self, exchange: Exchange, groups: Sequence[tuple[int, str, Sequence[tuple[int, str]]]]
    ) -> None:
        """Queue the unions of documents no daemon is processing, each with its document id (unionfind.UNION_LIVE:
        a group whose id no longer maps to its document, deleted meanwhile, is skipped); its reply is read with
        unionfind.live_replies."""
        if groups:
            keys = [*self._uf, self.keys.id_forward, self.keys.uf_reps]
            args = argv.union_live(self.bounds.representatives, groups)
            cast(ScriptPipeline, exchange).script(self._union_live, keys, args)

    def cluster_page(self, doc_id: str, cursor: str | None = None, limit: int = 100) -> ClusterPage:
        """A page of the members of ``doc_id``'s cluster (cluster_page.py): one script call in the ids' slot
        (unionfind.CLUSTER_PAGE), then the members' and the root's records, in one pipelined exchange.

        Raises:
            ConfigError: a bad limit or cursor. NotIndexedError: the document is not in the index.
            CursorError: the cluster changed under the cursor.
        """
        at = checked_args(limit, cursor)
        keys = [*self._uf, self.keys.uf_ring_floor, self.keys.id_seq, self.keys.id_forward]
        reply = PageReply.of(self._page(keys=keys, args=[doc_id, at, limit, page_steps(limit)]))
        wanted = list(dict.fromkeys([*reply.nums, reply.root])) if reply.state == 1 else []
        stored = dict(zip(wanted, self._stored(wanted) if wanted else [], strict=True))
        name = self._named([reply.root], [stored[reply.root]])[reply.root] if wanted else ""
        return page_of(doc_id, cursor is None, reply, stored, name)

    def cluster_names(self, roots: Sequence[int], known: Mapping[int, str]) -> list[str]:
        """A cluster is named by its root (oldest) document's id (from ``known``, else read); when that
        document expired, by the id its node kept; ``#n`` when it was deleted."""
        missing = [n for n in dict.fromkeys(roots) if n not in known]
        read: dict[int, str] = {}
        if missing:
            pipe = self.client.pipeline(transaction=False)
            for n in missing:
                pipe.get(self.record_key(n))
            read = self._named(missing, pipe.execute())
        return [known[n] if n in known else read[n] for n in roots]

    def _named(self, roots: Sequence[int], records: Sequence[bytes | None]) -> dict[int, str]:
        """The names of clusters by their roots' stored ``records``; those of roots without one (expired or
        deleted) from their gone-node entries, in one more exchange (record.cluster_name)."""
        lost = [n for n, blob in zip(roots, records, strict=True) if blob is None]
        gone = dict(zip(lost, self.client.hmget(self.keys.uf_gone, lost), strict=True)) if lost else {}
        return {n: cluster_name(n, blob, gone.get(n)) for n, blob in zip(roots, records, strict=True)}

    def count(self, counts: Mapping[str, int]) -> None:
        """Add to the index's counters (``keys.counters``), in one round trip; zeros are left out."""
        if any(counts.values()):
            pipe = self.client.pipeline(transaction=False)
            for name, n in counts.items():
                if n:
                    pipe.hincrby(self.keys.counters, name, n)
            pipe.execute()

    # ----- key names -----
    def _names(self, band_of: npt.NDArray[np.int64], shard_of: npt.NDArray[np.int64]) -> list[str]:
        """Bucket hash key names (from a table made once when it is small enough, else a cache)."""
        per_band = 1 << self.spec.shard_bits
        if self._key_table is None and (self.spec.bands + 1) * per_band <= 1 << 21:
            self._key_table = np.array(
                [
                    self.keys.buckets(self.generation, b, sh)
                    for b in range(self.spec.bands + 1)  # and the short documents' shingle prefixes
                    for sh in range(per_band)
                ],
                dtype=object,
            )
        if self._key_table is not None:
            return self._key_table[band_of * per_band + shard_of].tolist()  # type: ignore[no-any-return]
        out = []
        for b, sh in zip(band_of.tolist(), shard_of.tolist(), strict=True):
            key = self._key_cache.get((b, sh))
            if key is None:
                key = self._key_cache[(b, sh)] = self.keys.buckets(self.generation, b, sh)
            out.append(key)
        return out
