"""A batch's record and bucket writes packed for one exchange with Redis (gateway.RedisGateway.prepare), and
what each write read, taken out of the replies of its bucket calls (lua.BUCKETS).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dedupd.index.buckets import BucketOps, DocWrite
from dedupd.index.protocol import NO_IDS, Packed
from dedupd.server.connection import ScriptPipeline

__all__ = ["PackedWrites", "bucket_reads", "new_documents"]


def new_documents(writes: Sequence[DocWrite]) -> Packed:
    """The integer ids of the new documents (no record before) that ``writes`` add to buckets.

    A later chunk of a batch's BUCKETS calls reads the buckets after the earlier chunks joined them: these
    are left out of its reads, as one call would have (a document sees the batch's documents before it
    through bounds.batch_predecessors). An updated document may have been in a bucket before the batch:
    it stays.
    """
    nums = [w.num for w in writes if w.adds_new]
    return np.array(nums, dtype=np.uint32) if nums else NO_IDS


def bucket_reads(packed: Sequence[bytes | None], ids: Packed) -> list[Packed | None]:
    """Each write's read from its ids packed as uint32 LE (None: its record had changed, nothing written),
    without ``ids``: one array and one membership test for all of them, each read a slice of it.

    >>> [None if r is None else r.tolist() for r in bucket_reads([b"", None, bytes([1, 0, 0, 0, 2, 0, 0, 0])], np.array([2], np.uint32))]
    [[], None, [1]]
    """
    sizes = np.array([len(p) // 4 if p else 0 for p in packed], dtype=np.int64)
    if not sizes.any():  # different documents: nothing read
        return [None if p is None else NO_IDS for p in packed]
    flat = np.frombuffer(b"".join(p for p in packed if p), dtype="<u4")
    if ids.size:
        keep = ~np.isin(flat, ids)
        if not keep.all():  # (a flood's later chunks: the batch's copies before them)
            owner = np.repeat(np.arange(sizes.size), sizes)
            sizes, flat = np.bincount(owner[keep], minlength=sizes.size), flat[keep]
    ends = np.cumsum(sizes).tolist()
    return [
        None if p is None else flat[end - n : end] if n else NO_IDS
        for p, n, end in zip(packed, sizes.tolist(), ends, strict=True)
    ]


@dataclass(frozen=True, slots=True)
class PackedWrites:
    """A batch's writes packed for the server (:meth:`RedisGateway.prepare`): the writes, and on a single
    Redis the bucket calls in one pipeline not yet sent, with per chunk its size, operations and rows, after
    ``lead`` calls whose replies are not the writes' (the touch of the documents written)."""

    writes: Sequence[DocWrite]
    pipe: ScriptPipeline | None
    spans: list[tuple[int, BucketOps | None, list[npt.NDArray[np.int64]]]]
    lead: int = 0
