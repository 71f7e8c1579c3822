"""Gateway reads: what each write of a batch's bucket calls read, without the batch's new documents
(packed_writes.bucket_reads: the same ids, in the same order, as taking them out of each read one by one; None for a
write whose record had changed); records read ahead (load_records' stash)."""

from __future__ import annotations

import random

import numpy as np
import redis
from helpers import drain, make_daemon, push, text
from hypothesis import given
from hypothesis import strategies as st

from dedupd.index.packed_writes import bucket_reads

read = st.one_of(st.none(), st.lists(st.integers(1, 12), max_size=8))


@given(st.lists(read, max_size=8), st.sets(st.integers(1, 12), max_size=6))
def test_reads_lose_exactly_the_batchs_new_documents(reads: list[list[int] | None], new: set[int]) -> None:
    packed = [None if r is None else np.array(r, dtype="<u4").tobytes() for r in reads]
    ids = np.array(sorted(new), dtype=np.uint32)
    got = bucket_reads(packed, ids)
    assert len(got) == len(reads)
    for before, after in zip(reads, got, strict=True):
        if before is None:
            assert after is None
            continue
        assert after is not None and after.dtype == np.uint32
        assert after.tolist() == [n for n in before if n not in new]


def test_records_read_ahead_are_taken_from_the_stash_not_read_again(r: redis.Redis, redis_url: str) -> None:
    """load_records keeps what it reads in the stash, with the records ``ahead`` read in the same exchange
    (the next candidates of a cluster none of whose picked ones matched: verified without another
    exchange); a later call takes them from it, as they were when read, and reads the others."""
    daemon = make_daemon(redis_url)
    rng = random.Random(5)
    push(r, [{"id": f"d{i}", "text": text(rng, 30)} for i in range(5)])
    drain(daemon)
    gw = daemon.gateway
    a, b, c, d, e = gw.nums_of([f"d{i}" for i in range(5)])
    read = gw.read_records([a], [b, c, a], {})
    first, stash = read.records, dict(read.stored)
    assert list(first) == [a] and first[a] is not None and first[a].doc_id == "d0"
    assert set(stash) == {a, b, c}  # (a read once)
    r.delete(gw.record_key(a), gw.record_key(b))  # changed since: a read is what its exchange saw
    read = gw.read_records([a, b, d], (e,), stash)
    second = read.records
    assert [second[n].doc_id for n in (a, b, d)] == ["d0", "d1", "d3"]  # type: ignore[union-attr]
    assert set(read.stored) == {d, e}  # d read now, e ahead with it
    stash.update(read.stored)
    assert gw.load_records([a, b]) == {a: None, b: None}  # without the stash: read again
    only = gw.read_records([c], [e + 1], stash)  # all of it in the stash: nothing read, nothing read ahead
    assert only.records[c] is not None and only.records[c].doc_id == "d2" and only.stored == {}
