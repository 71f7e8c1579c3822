"""The bucket writes of a batch and their two encodings as BUCKETS script calls (lua.BUCKETS).

A :class:`DocWrite` says what one document does to its record and its band buckets. On a single Redis the
whole batch is one call that checks and writes the records too (:class:`SingleEncoding`); on a Redis
Cluster the records live in other slots, so they are checked and written first (one RECORD_CAS each:
cluster_records.py) and the buckets go as one call per slot (:class:`ClusterEncoding`). Both build a call's
arguments with one builder, argv.Buckets (in the order scripts/buckets.lua names them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from dedupd.index import argv
from dedupd.index.lua import FULL_BIT, REFUSED_BIT, Op
from dedupd.similarity.bounds import thin
from dedupd.similarity.hashing import U64Array
from dedupd.similarity.lsh import column_bands, pad_rows

_NO_BANDS = np.zeros(0, dtype=np.uint64)
BucketCall = tuple[list[str], list[bytes | str], npt.NDArray[np.int64]]  # KEYS, ARGV, its BucketOps rows


@dataclass(slots=True)
class DocWrite:
    """The index writes for one document of a batch."""

    num: int
    # band hashes of the buckets to leave / to join (and read): position = band; 0 = leave that band alone
    remove: U64Array = field(default_factory=lambda: _NO_BANDS)
    add: U64Array = field(default_factory=lambda: _NO_BANDS)
    record: bytes | None = None  # packed record to store
    delete: bool = False  # delete the record (a delete op)
    expected: str | None = None  # the record's input entry id when read ('' = none); None = no check
    rejoin: bool = False  # already applied (a redelivery): read only the documents that joined before it

    @property
    def adds_new(self) -> bool:
        """Whether it adds a new document (no record before, not a redelivery) to buckets: a later chunk of
        the batch's bucket calls reads without it (packed_writes.new_documents, its in-memory twin's too)."""
        return self.expected == "" and bool(self.add.size) and not self.rejoin

    @property
    def check_op(self) -> Op:
        """The record op: write, delete, or check only."""
        if self.record is not None:
            return Op.CHECK_WRITE
        return Op.CHECK_DELETE if self.delete else Op.CHECK


@dataclass(frozen=True, slots=True)
class BucketOps:
    """A batch's bucket changes, flattened in the script's order (one row per change)."""

    codes: list[bytes]  # per write: its record op (if checked) and its bucket op codes, then END
    names: list[str]  # distinct bucket hash names
    name_of: npt.NDArray[np.int64]  # per change: index into names
    fields: npt.NDArray[np.uint32]  # per change: the bucket's field (the band hash's low 32 bits)
    ids: npt.NDArray[np.uint32]  # per change: the document's integer id
    docs: npt.NDArray[np.int64]  # per change: the index of its write


def bucket_ops(
    writes: Sequence[DocWrite],
    bands: int,
    shift: np.uint64,
    shard_bits: int,
    names_of: NamesOf,
    with_checks: bool,
) -> BucketOps | None:
    """Flatten the writes' bucket changes (leaves first, then joins, per document, in batch order).

    Returns None when there is nothing to send.
    """
    n = len(writes)
    # a write's removes and adds are rows of band hashes (0 = leave that band alone); a short document's
    # rows go on past the LSH bands with its shingle prefix (lsh.column_bands)
    width = max([bands, *(w.remove.size for w in writes), *(w.add.size for w in writes)])
    table = np.concatenate(
        [pad_rows([w.remove for w in writes], width), pad_rows([w.add for w in writes], width)], axis=1
    )
    keep = table != 0
    n_removes = keep[:, :width].sum(axis=1).tolist()
    n_adds = keep[:, width:].sum(axis=1).tolist()
    leave, join, rejoin, end = Op.LEAVE.value, Op.JOIN.value, Op.REJOIN.value, Op.END.value
    codes: list[bytes] = []
    for w, n_r, n_a in zip(writes, n_removes, n_adds, strict=True):
        if with_checks and w.expected is not None:
            codes.append(w.check_op.value)
        codes.append(leave * n_r + (rejoin if w.rejoin else join) * n_a + end)
    flat = keep.ravel()
    if not flat.any() and not (with_checks and any(w.expected is not None for w in writes)):
        return None
    hashes = table.ravel()[flat]
    one = column_bands(width, bands)
    band = np.tile(np.concatenate([one, one]), n)[flat]
    docs = np.repeat(np.arange(n, dtype=np.int64), 2 * width)[flat]
    ids = np.fromiter((w.num for w in writes), dtype=np.uint32, count=n)[docs]
    names, name_of, fields = bucket_keys(band, hashes, shift, shard_bits, names_of)
    return BucketOps(codes, names, name_of, fields, ids.astype("<u4"), docs)


@dataclass(frozen=True, slots=True)
class Hits:
    """The buckets a batch's writes joined that were there already (lua.BUCKETS), where a write may crowd
    its cluster (bounds.eviction_rows): per hit, its bucket (hash name and field), its write's index, and
    whether the bucket refused the document (it had taken its new members of the call: lua.EVICT puts the
    document in, or not, once the batch is verified), and whether it was full (the document is not in it:
    lua.DISPLACE puts a document kept out of most of its buckets in)."""

    names: list[str]  # distinct bucket hash names
    key: npt.NDArray[np.int64]  # per hit: index into names
    field: npt.NDArray[np.uint32]  # per hit: the bucket's field
    write: npt.NDArray[np.int64]  # per hit: the index of its write in the batch
    refused: npt.NDArray[np.bool_]  # per hit: the document is not in the bucket (yet)
    full: npt.NDArray[np.bool_]  # per hit: the bucket was full; the document is not in it

    def __getitem__(self, sel: npt.NDArray[np.int64]) -> Hits:
        """The hits ``sel`` (the same names)."""
        return Hits(
            self.names, self.key[sel], self.field[sel], self.write[sel], self.refused[sel], self.full[sel]
        )

    @staticmethod
    def of(ops: BucketOps, rows: npt.NDArray[np.int64], positions: bytes, first_write: int) -> Hits:
        """The hits one call reported: ``positions`` (uint32 LE, 1-based; the top bit set for a refused
        document, FULL_BIT for a full bucket) among the call's ops ``rows``; ``first_write`` is the batch index
        of the ops' first write."""
        raw = np.frombuffer(positions, dtype="<u4").astype(np.int64)
        at = rows[(raw & _POSITION) - 1]
        refused, full = (raw & REFUSED_BIT) != 0, (raw & FULL_BIT) != 0
        return Hits(ops.names, ops.name_of[at], ops.fields[at], ops.docs[at] + first_write, refused, full)

    @staticmethod
    def join(parts: Sequence[Hits]) -> Hits:
        """One batch's hits from its calls' (their names made one list)."""
        parts = [p for p in parts if p.key.size]
        if len(parts) == 1:
            return parts[0]
        index: dict[str, int] = {}
        keys = []
        for p in parts:  # only the names some hit uses (a call's ops name thousands of bucket hashes)
            used, inverse = np.unique(p.key, return_inverse=True)
            local = np.array(
                [index.setdefault(p.names[u], len(index)) for u in used.tolist()], dtype=np.int64
            )
            keys.append(local[inverse])
        return Hits(
            list(index),
            np.concatenate([np.zeros(0, np.int64), *keys]),
            np.concatenate([np.zeros(0, np.uint32), *(p.field for p in parts)]),
            np.concatenate([np.zeros(0, np.int64), *(p.write for p in parts)]),
            np.concatenate([np.zeros(0, np.bool_), *(p.refused for p in parts)]),
            np.concatenate([np.zeros(0, np.bool_), *(p.full for p in parts)]),
        )


@dataclass(frozen=True, slots=True)
class Evictions:
    """lua.EVICT's rows: per row a bucket (hash name and field), a cluster (index into ``members``) and a
    document of the batch in that bucket; each bucket's and cluster's rows together (bounds.eviction_rows)."""

    names: list[str]  # bucket hash names
    key: npt.NDArray[np.int64]  # per row: index into names
    field: npt.NDArray[np.uint32]
    cluster: npt.NDArray[np.int64]
    doc: npt.NDArray[np.int64]  # per row: the document's integer id
    members: list[bytes]  # per cluster: the integer ids known to be in it (uint32 LE)


@dataclass(frozen=True, slots=True)
class Placements:
    """lua.DISPLACE's rows: per row a bucket (hash name and field) that was full and kept the document out,
    the document, and whether it was kept out of most of its buckets (bounds.thin: on a Redis Cluster, only
    those rows go); one document's rows together."""

    names: list[str]  # bucket hash names
    key: npt.NDArray[np.int64]  # per row: index into names
    field: npt.NDArray[np.uint32]
    doc: npt.NDArray[np.int64]  # per row: the document's integer id
    thin: npt.NDArray[np.bool_]

    def __getitem__(self, sel: npt.NDArray[np.int64]) -> Placements:
        """The rows ``sel`` (the same names)."""
        return Placements(self.names, self.key[sel], self.field[sel], self.doc[sel], self.thin[sel])


def placements(hits: Hits, nums: npt.NDArray[np.int64], buckets: npt.NDArray[np.int64]) -> Placements:
    """The full buckets that kept the writes out, as lua.DISPLACE's rows: ``nums`` and ``buckets`` per write
    (of those ``hits.write`` indexes): its integer id (-1: none of its rows) and its number of band buckets
    (for bounds.thin)."""
    if not hits.full.any():
        return NO_PLACEMENTS
    mask = hits.full & (nums[hits.write] >= 0)
    sel = np.flatnonzero(mask)
    sel = sel[np.argsort(hits.write[sel], kind="stable")]  # (one document's rows together)
    lean = thin(hits.write, mask, buckets)[sel]
    return Placements(hits.names, hits.key[sel], hits.field[sel], nums[hits.write[sel]], lean)


NO_PLACEMENTS = Placements(
    [], np.zeros(0, np.int64), np.zeros(0, np.uint32), np.zeros(0, np.int64), np.zeros(0, np.bool_)
)
NO_HITS = Hits(
    [],
    np.zeros(0, np.int64),
    np.zeros(0, np.uint32),
    np.zeros(0, np.int64),
    np.zeros(0, np.bool_),
    np.zeros(0, np.bool_),
)
_POSITION = FULL_BIT - 1  # a hit's position without the refused and full bits


NamesOf = Callable[[npt.NDArray[np.int64], npt.NDArray[np.int64]], list[str]]  # (bands, shards) -> key names


def bucket_keys(
    band: npt.NDArray[np.integer],
    hashes: U64Array,
    shift: np.uint64,
    shard_bits: int,
    names_of: NamesOf,
) -> tuple[list[str], npt.NDArray[np.int64], npt.NDArray[np.uint32]]:
    """Where the buckets of (band, band hash) pairs live: the distinct bucket hash names, each pair's index
    into them, and its field (uint32 LE).

    The hash's top ``shard_bits`` pick the bucket hash of its band; the field is the band hash's low 32
    bits (the key already holds the top bits): two buckets of one hash share a field with probability
    ~entries/2**32, and then only add candidates.
    """
    band = band.astype(np.int64)
    shard = (hashes >> shift).astype(np.int64) if shard_bits else np.zeros_like(band)
    pair, inverse = np.unique((band << 21) | shard, return_inverse=True)
    fields = (hashes & np.uint64(0xFFFFFFFF)).astype("<u4")
    return names_of(pair >> 21, pair & ((1 << 21) - 1)), inverse.astype(np.int64), fields


def _u32(values: npt.NDArray[np.integer] | Sequence[int]) -> bytes:
    return np.asarray(values, dtype="<u4").tobytes()


class SingleEncoding:
    """Single Redis: one call for the batch; records checked and written in it, bucket hash names sent as
    one string and their ends instead of thousands of KEYS."""

    with_checks = True

    def calls(
        self,
        ops: BucketOps,
        writes: Sequence[DocWrite],
        record_key: Callable[[int], str],
        full: int,
        fresh: int,
    ) -> list[BucketCall]:
        """The call of the batch; a bucket of ``full`` members takes no more, nor more than ``fresh`` new
        ones (0: no such bound)."""
        checks = [w for w in writes if w.expected is not None]
        ends = np.zeros(len(ops.names) + 1, dtype="<u4")
        np.cumsum([len(name) for name in ops.names], out=ends[1:])
        args = argv.Buckets(
            ops=b"".join(ops.codes),
            key_index=_u32(ops.name_of + 1),
            fields=ops.fields.tobytes(),
            ids=ops.ids.tobytes(),
            check_keys=_u32(np.arange(1, 1 + len(checks))),
            names="".join(ops.names),
            ends=ends.tobytes(),
            full=full,
            fresh=fresh,
            checks=[(w.expected or "", w.record or b"") for w in checks],
        )
        return [([record_key(w.num) for w in checks], args.argv(), np.arange(ops.docs.size, dtype=np.int64))]


class ClusterEncoding:
    """Redis Cluster: one call per slot of bucket hashes; each call still closes every document (END per
    write). The records are checked beforehand, one RECORD_CAS each (cluster_records.py)."""

    with_checks = False

    def __init__(self, keyslot: Callable[[str], int]) -> None:
        self._keyslot = keyslot
        self._slots: dict[str, int] = {}  # bucket hash name -> slot

    def calls(
        self,
        ops: BucketOps,
        writes: Sequence[DocWrite],
        record_key: Callable[[int], str],
        full: int,
        fresh: int,
    ) -> list[BucketCall]:
        """One call per slot; a bucket of ``full`` members takes no more, nor more than ``fresh`` new ones
        per call (0: no such bound)."""
        for name in ops.names:
            if name not in self._slots:
                self._slots[name] = self._keyslot(name)
        slots = np.array([self._slots[name] for name in ops.names], dtype=np.int64)[ops.name_of]
        codes = b"".join(ops.codes).replace(Op.END.value, b"")
        out: list[BucketCall] = []
        for slot in np.unique(slots).tolist():
            sel = np.flatnonzero(slots == slot)
            used, local = np.unique(ops.name_of[sel], return_inverse=True)
            op_codes = bytearray()
            prev = 0
            for j, d in zip(sel.tolist(), ops.docs[sel].tolist(), strict=True):
                op_codes += Op.END.value * (d - prev) + codes[j : j + 1]
                prev = d
            op_codes += Op.END.value * (len(writes) - prev)
            out.append(
                (
                    [ops.names[u] for u in used.tolist()],
                    argv.Buckets(
                        ops=bytes(op_codes),
                        key_index=_u32(local + 1),
                        fields=ops.fields[sel].tobytes(),
                        ids=ops.ids[sel].tobytes(),
                        full=full,
                        fresh=fresh,
                    ).argv(),
                    sel.astype(np.int64),
                )
            )
        return out
