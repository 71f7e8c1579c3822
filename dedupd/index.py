"""The LSH index in Redis: stored spec, id mapping, document records and per-band sets of integer ids.

Layout (see keys.py): ``meta`` holds the spec and generation; each document has a record hash
``doc:<n>`` (id, signature as packed uint32, shingle set as packed uint64 when verification is exact,
tail and unit count for appends, last input entry id, source); each band bucket is a set of integer ids
``b:<gen>:<band>:<hash>`` (an intset). A batch is inserted and queried in one pipelined exchange:
for each document, in order, SADD then SMEMBERS on each of its band keys, so a document sees every
document inserted before it, including earlier ones of the same batch and ones a concurrent consumer
inserted a moment before.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from dedupd import lua
from dedupd.errors import ConfigError
from dedupd.fingerprint import Fingerprint, Fingerprinter
from dedupd.hashing import U64Array
from dedupd.keys import Keys
from dedupd.minhash import SIG_DTYPE
from dedupd.spec import IndexSpec

_SH_DTYPE = np.dtype("<u8")


@dataclass(frozen=True, slots=True, eq=False)
class Record:
    """A stored document."""

    num: int
    doc_id: str
    fingerprint: Fingerprint
    entry_id: str
    source: str | None = None


@dataclass(slots=True)
class DocWrite:
    """The index writes for one document of a batch."""

    num: int
    remove: list[str] = field(default_factory=list)  # band keys to leave
    add: list[str] = field(default_factory=list)  # band keys to join (and read)
    record: dict[str, bytes | str] | None = None  # record to store
    delete_id: str | None = None  # forget this document (delete op)


def encode_record(doc_id: str, fp: Fingerprint, entry_id: str, source: str | None, shingles: bool) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "id": doc_id,
        "sig": fp.raw.astype(SIG_DTYPE, copy=False).tobytes(),
        "tail": fp.tail,
        "n": fp.n_units,
        "in": entry_id,
        "src": source or "",
    }
    if shingles:
        rec["sh"] = fp.shingles.astype(_SH_DTYPE, copy=False).tobytes()
    return rec


def decode_records(nums: Sequence[int], replies: Sequence[Sequence[bytes | None]], fingerprinter: Fingerprinter
                   ) -> dict[int, Record | None]:
    """Decode HMGET id sig tail n in src sh replies (signatures densified together)."""
    num_perm = fingerprinter.spec.num_perm
    out: dict[int, Record | None] = {}
    present: list[tuple[int, Sequence[bytes | None], npt.NDArray[np.uint32]]] = []
    for num, raw in zip(nums, replies, strict=True):
        if raw[0] is None or raw[1] is None:
            out[num] = None
            continue
        signature = np.frombuffer(raw[1], dtype=SIG_DTYPE)
        if signature.shape[0] != num_perm:
            raise ConfigError(f"document record {num} has a signature of {signature.shape[0]} values, the "
                              f"index {num_perm}: the index is inconsistent; run `dedupd rebuild`")
        present.append((num, raw, signature))
    if not present:
        return out
    dense = fingerprinter.minhasher.densify(np.stack([p[2] for p in present]))
    for (num, raw, signature), sig in zip(present, dense, strict=True):
        doc_id, _, tail, n, entry_id, src, sh = raw
        shingles: U64Array = (np.frombuffer(sh, dtype=_SH_DTYPE).astype(np.uint64) if sh
                              else np.zeros(0, np.uint64))
        fp = Fingerprint(shingles, sig, (tail or b"").decode(), int(n or 0), signature)
        out[num] = Record(num, doc_id.decode(), fp, (entry_id or b"").decode(),  # type: ignore[union-attr]
                          (src or b"").decode() or None)
    return out


_FIELDS = ("id", "sig", "tail", "n", "in", "src", "sh")


class Index:
    """Redis operations on one index (one prefix)."""

    def __init__(self, client: Any, keys: Keys, spec: IndexSpec, generation: int, store_shingles: bool) -> None:
        self.client = client
        self.keys = keys
        self.spec = spec
        self.generation = generation
        self.store_shingles = store_shingles
        self.fingerprinter = Fingerprinter(spec)
        self._resolve = client.register_script(lua.RESOLVE_IDS)
        self._forget = client.register_script(lua.FORGET_ID)

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
        keys = [self.keys.id_forward, self.keys.id_reverse, self.keys.id_seq]
        return [int(x) for x in self._resolve(keys=keys, args=args)]

    # ----- records -----
    def load_records(self, nums: Iterable[int], with_shingles: bool = True) -> dict[int, Record | None]:
        """Fetch document records in one pipelined exchange."""
        nums = list(dict.fromkeys(nums))
        if not nums:
            return {}
        fields = list(_FIELDS) if with_shingles else list(_FIELDS[:-1])
        pipe = self.client.pipeline(transaction=False)
        for n in nums:
            pipe.hmget(self.keys.doc(n), fields)
        replies = pipe.execute()
        if not with_shingles:
            replies = [[*raw, None] for raw in replies]
        return decode_records(nums, replies, self.fingerprinter)

    def band_keys(self, band_hashes: U64Array) -> list[str]:
        """Key names of one document's band buckets."""
        return [self.keys.band(self.generation, b, int(h)) for b, h in enumerate(band_hashes.tolist())]

    # ----- writes -----
    def apply(self, writes: Sequence[DocWrite]) -> list[set[int]]:
        """Apply the writes in order in one pipelined exchange.

        Returns:
            For each write, the integer ids found in the buckets it joined (itself excluded).
        """
        pipe = self.client.pipeline(transaction=False)
        reads: list[int] = []  # per write: how many SMEMBERS replies follow
        for w in writes:
            for key in w.remove:
                pipe.srem(key, w.num)
            if w.record is not None:
                pipe.hset(self.keys.doc(w.num), mapping=w.record)
            for key in w.add:
                pipe.sadd(key, w.num)
                pipe.smembers(key)
            if w.delete_id is not None:
                pipe.delete(self.keys.doc(w.num))
                self._forget(keys=[self.keys.id_forward], args=[w.delete_id, w.num], client=pipe)
            reads.append(len(w.add))
        replies = pipe.execute()
        # walk the replies: only SMEMBERS replies are sets
        found: list[set[int]] = []
        sets = iter(r for r in replies if isinstance(r, set))
        for w, count in zip(writes, reads, strict=True):
            got: set[int] = set()
            for _ in range(count):
                got.update(int(x) for x in next(sets))
            got.discard(w.num)
            found.append(got)
        return found
