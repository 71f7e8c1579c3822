"""The LSH index in Redis: stored spec, id mapping, document records and per-band buckets of integer ids.

Layout (see keys.py): ``meta`` holds the spec and generation; each document has a record ``doc:<gen>:<n>``,
one packed string (record.py: id, tail, unit count, last input entry id, source, and the raw signature with
the 32-bit shingle fingerprints, or a short document's 64-bit shingle hashes); each band bucket is a field
of a small Redis hash ``b:<gen>:{<band>.<shard mod 16>}:<shard>`` (the shard: the band hash's top bits; the field:
its low 32 bits) whose value is the packed uint32 ids of the documents in it. A batch is inserted and queried
in one script call (lua.BUCKETS): for each document, in order, its record is checked and written and it joins
each of its buckets, reading who is there, so a document sees every document inserted before it, including
earlier ones of the same batch and ones a concurrent consumer inserted a moment before.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from dedupd import lua
from dedupd.connection import ScriptPipeline
from dedupd.fingerprint import Fingerprinter
from dedupd.record import Record, decode_records
from dedupd.hashing import U64Array
from dedupd.keys import Keys
from dedupd.spec import IndexSpec

_SH_DTYPE = np.dtype("<u4")


_NO_BANDS = np.zeros(0, dtype=np.uint64)


@dataclass(slots=True)
class DocWrite:
    """The index writes for one document of a batch."""

    num: int
    # band hashes of the buckets to leave / to join (and read): position = band; 0 = leave that band alone
    remove: U64Array = field(default_factory=lambda: _NO_BANDS)
    add: U64Array = field(default_factory=lambda: _NO_BANDS)
    record: bytes | None = None  # packed record to store
    delete_id: str | None = None  # forget this document (delete op)
    expected: str | None = None  # the record's input entry id when read ('' = none); None = no check
    rejoin: bool = False  # already applied (a redelivery): read only the documents that joined before it

    @property
    def check_op(self) -> bytes:
        """The record op: write, delete, or check only."""
        return b"c" if self.record is not None else (b"x" if self.delete_id is not None else b"k")


class Index:
    """Redis operations on one index (one prefix)."""

    def __init__(self, client: Any, keys: Keys, spec: IndexSpec, generation: int, store_shingles: bool,
                 shadow: bool = False) -> None:
        self.client = client
        self.shadow = shadow  # a generation being built: it never forgets ids
        self.keys = keys
        self.spec = spec
        self.generation = generation
        self.store_shingles = store_shingles
        self.fingerprinter = Fingerprinter(spec, keep_shingles=store_shingles)
        self._resolve = client.register_script(lua.RESOLVE_IDS)
        self._forget = client.register_script(lua.FORGET_ID)
        self._buckets = client.register_script(lua.BUCKETS)
        self._cas = client.register_script(lua.RECORD_CAS)
        self._shift = np.uint64(64 - spec.shard_bits)
        self._key_cache: dict[tuple[int, int], str] = {}
        self._key_table: npt.NDArray[np.object_] | None = None
        self._cluster = hasattr(client, "get_node_from_key") or hasattr(client, "nodes_manager")
        self._slot_cache: dict[str, int] = {}  # Redis Cluster: bucket hash name -> slot

    @classmethod
    def open(cls, client: Any, keys: Keys, spec: IndexSpec, store_shingles: bool) -> Index:
        """Open the index under ``keys``, creating it with ``spec`` if there is none.

        Raises:
            ParameterMismatchError: when an index exists with another spec (names `dedupd rebuild`).
        """
        client.hsetnx(keys.meta, "spec", spec.to_json())
        client.hsetnx(keys.meta, "gen", 0)
        stored_spec, gen = client.hmget(keys.meta, ["spec", "gen"])
        spec.require_same(IndexSpec.from_json(stored_spec), keys.prefix)
        return cls(client, keys, spec, int(gen), store_shingles)

    @staticmethod
    def stored_spec(client: Any, keys: Keys) -> IndexSpec | None:
        raw = client.hget(keys.meta, "spec")
        return IndexSpec.from_json(raw) if raw else None

    # ----- ids -----
    def resolve_ids(self, requests: Sequence[tuple[str, bool]]) -> list[int]:
        """Integer ids for (doc_id, create) pairs: n existing, -n just created, 0 unknown."""
        if not requests:
            return []
        args: list[str] = []
        for doc_id, create in requests:
            args += ["a" if create else "g", doc_id]
        keys = [self.keys.id_forward, self.keys.id_seq]
        return [int(x) for x in self._resolve(keys=keys, args=args)]

    # ----- records -----
    def load_records(self, nums: Iterable[int]) -> dict[int, Record | None]:
        """Fetch document records in one pipelined exchange."""
        nums = list(dict.fromkeys(nums))
        if not nums:
            return {}
        names = [self.keys.doc(n, self.generation) for n in nums]
        if self._cluster:  # records live in many slots: one GET each, pipelined per node
            pipe = self.client.pipeline(transaction=False)
            for name in names:
                pipe.get(name)
            blobs = pipe.execute()
        else:  # one MGET per 1,000 records (a pipeline of GETs costs ~10 us of Python per record)
            pipe = self.client.pipeline(transaction=False)
            for i in range(0, len(names), 1000):
                pipe.mget(names[i : i + 1000])
            blobs = [b for part in pipe.execute() for b in part]
        return decode_records(nums, blobs, self.fingerprinter)

    # ----- writes -----
    def apply(self, writes: Sequence[DocWrite]) -> list[set[int] | None]:
        """Apply the writes of a batch: records and buckets of every document, in batch order.

        On a single Redis this is one script call, atomic: a document whose record changed since it was
        read (another consumer got there first) is left untouched. On a Redis Cluster the records are
        checked and written first (one script per record), then the buckets of the documents that passed.

        Returns:
            For each write, the integer ids found in the buckets it joined (itself excluded), or None
            when its record had changed (process that entry again).
        """
        if self._cluster:
            passed = self._check_records(writes)
            writes = [w if ok else DocWrite(w.num) for w, ok in zip(writes, passed, strict=True)]
        pipe = ScriptPipeline(self.client)
        groups = self._bucket_ops(writes, with_records=not self._cluster)
        for keys, args in groups:
            pipe.script(self._buckets, keys, args)
        replies = pipe.execute() if groups else []
        found: list[set[int] | None] = []
        for i, w in enumerate(writes):
            parts = [group[i] for group in replies]
            if b"!" in parts or (self._cluster and not passed[i]):
                found.append(None)
                continue
            packed = b"".join(parts)
            ids = set(np.frombuffer(packed, dtype="<u4").tolist()) if packed else set()
            ids.discard(w.num)
            found.append(ids)
        forget = [w for w, f in zip(writes, found, strict=True) if w.delete_id is not None and f is not None]
        if self.shadow:  # the id map is shared by the generations: only the serving one forgets ids
            forget = [w for w in forget if self._cluster]
        if forget:
            pipe = ScriptPipeline(self.client)
            for w in forget:
                if self._cluster:
                    pipe.pipe.delete(self.keys.doc(w.num, self.generation))
                if not self.shadow:
                    pipe.script(self._forget, [self.keys.id_forward], [w.delete_id, w.num])
            pipe.execute()
        return found

    def _check_records(self, writes: Sequence[DocWrite]) -> list[bool]:
        """Redis Cluster: check and write each record on its own (one slot per script)."""
        pipe = ScriptPipeline(self.client)
        checked = [w for w in writes if w.expected is not None]
        for w in checked:
            op = w.check_op if w.check_op != b"x" else b"k"  # deleted after its buckets are left
            pipe.script(self._cas, [self.keys.doc(w.num, self.generation)], [op, w.expected, w.record or b""])
        ok = iter(bool(x) for x in (pipe.execute() if checked else []))
        return [next(ok) if w.expected is not None else True for w in writes]

    def _bucket_ops(self, writes: Sequence[DocWrite], with_records: bool) -> list[tuple[list[str], list[bytes]]]:
        """Encode the changes as BUCKETS script calls: one in all (with the record checks and writes), or
        on a Redis Cluster one per slot (buckets only)."""
        n, width = len(writes), self.spec.bands
        # one row per write: the buckets to leave (0 = none), then the buckets to join; flattened row by row,
        # the kept cells are the ops in the script's order
        table = np.zeros((n, 2 * width), dtype=np.uint64)
        keep = np.zeros((n, 2 * width), dtype=bool)
        ops: list[bytes] = []
        checks: list[DocWrite] = []
        for i, w in enumerate(writes):
            if with_records and w.expected is not None:
                ops.append(w.check_op)
                checks.append(w)
            n_r = n_a = 0
            if w.remove.size:
                table[i, : w.remove.size] = w.remove
                keep[i, : w.remove.size] = w.remove != 0
                n_r = int(np.count_nonzero(keep[i, :width]))
            if w.add.size:
                table[i, width : width + w.add.size] = w.add
                keep[i, width : width + w.add.size] = True
                n_a = w.add.size
            ops.append(b"r" * n_r + (b"j" if w.rejoin else b"a") * n_a + b"d")
        flat = keep.ravel()
        if not flat.any() and not checks:
            return []
        hashes = table.ravel()[flat]
        band = np.tile(np.arange(2 * width, dtype=np.int64) % width, n)[flat]
        docs = np.repeat(np.arange(n, dtype=np.int64), 2 * width)[flat]
        ids = np.fromiter((w.num for w in writes), dtype=np.uint32, count=n)[docs]
        shard = (hashes >> self._shift).astype(np.int64) if self.spec.shard_bits else np.zeros_like(band)
        pair, inverse = np.unique((band << 21) | shard, return_inverse=True)
        # the field is the band hash's low 32 bits (the key already holds its top shard_bits): two
        # buckets of one hash share a field with probability ~entries/2**32, and then only add candidates
        fields = (hashes & np.uint64(0xFFFFFFFF)).astype("<u4")
        names = self._names(band_of=pair >> 21, shard_of=pair & ((1 << 21) - 1))
        if with_records:  # single Redis: bucket hash names go as one string and their ends, not as keys
            record_keys = [self.keys.doc(w.num, self.generation) for w in checks]
            ckidx = np.arange(1, 1 + len(checks), dtype="<u4").tobytes()
            blob = "".join(names)
            ends = np.zeros(len(names) + 1, dtype="<u4")
            np.cumsum([len(n) for n in names], out=ends[1:])
            args: list[bytes | str] = [b"".join(ops), (inverse + 1).astype("<u4").tobytes(), fields.tobytes(),
                                       ids.astype("<u4").tobytes(), ckidx, blob, ends.tobytes()]
            for w in checks:
                args += [w.expected or "", w.record or b""]
            return [(record_keys, args)]  # type: ignore[list-item]
        # Redis Cluster: one call per slot; each call still closes every document ('d' per write)
        cache = self._slot_cache
        for n in names:
            if n not in cache:
                cache[n] = int(self.client.keyslot(n))
        slots = np.array([cache[n] for n in names], dtype=np.int64)[inverse]
        out: list[tuple[list[str], list[bytes]]] = []
        for slot in np.unique(slots).tolist():
            sel = np.flatnonzero(slots == slot)
            used, local = np.unique(inverse[sel], return_inverse=True)
            op_codes = bytearray()
            prev = 0
            codes = b"".join(ops).replace(b"d", b"")
            for j, d in zip(sel.tolist(), docs[sel].tolist(), strict=True):
                op_codes += b"d" * (d - prev) + codes[j : j + 1]
                prev = d
            op_codes += b"d" * (len(writes) - prev)
            out.append(([names[u] for u in used.tolist()],
                        [bytes(op_codes), (local + 1).astype("<u4").tobytes(), fields[sel].tobytes(),
                         ids[sel].astype("<u4").tobytes(), b"", b"", b""]))
        return out

    def _names(self, band_of: npt.NDArray[np.int64], shard_of: npt.NDArray[np.int64]) -> list[str]:
        """Bucket hash key names (from a table made once when it is small enough, else a cache)."""
        per_band = 1 << self.spec.shard_bits
        if self._key_table is None and self.spec.bands * per_band <= 1 << 21:
            self._key_table = np.array([self.keys.buckets(self.generation, b, sh) for b in range(self.spec.bands)
                                        for sh in range(per_band)], dtype=object)
        if self._key_table is not None:
            return self._key_table[band_of * per_band + shard_of].tolist()  # type: ignore[no-any-return]
        out = []
        for b, sh in zip(band_of.tolist(), shard_of.tolist(), strict=True):
            key = self._key_cache.get((b, sh))
            if key is None:
                key = self._key_cache[(b, sh)] = self.keys.buckets(self.generation, b, sh)
            out.append(key)
        return out
