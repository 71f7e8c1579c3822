"""What a later chunk of a batch's bucket calls read, without the batch's new documents (gateway._without):
the same ids, in the same order, as taking them out of each read one by one; a read with none of them is
left as it was."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from dedupd.gateway import _without

read = st.one_of(st.none(), st.lists(st.integers(1, 12), max_size=8))


@given(st.lists(read, max_size=8), st.sets(st.integers(1, 12), max_size=6))
def test_reads_lose_exactly_the_batchs_new_documents(reads: list[list[int] | None], new: set[int]) -> None:
    found = [None if r is None else np.array(r, dtype=np.uint32) for r in reads]
    ids = np.array(sorted(new), dtype=np.uint32)
    got = _without(found, ids)
    assert len(got) == len(found)
    for before, after in zip(found, got, strict=True):
        if before is None:
            assert after is None
            continue
        assert after is not None
        assert after.tolist() == [n for n in before.tolist() if n not in new]
        if not set(before.tolist()) & new:
            assert after is before
