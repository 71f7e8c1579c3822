"""SON: exact on chunks, in this process, on a process pool, and on a Dask LocalCluster."""

from __future__ import annotations

import pytest
from mining_oracle import brute_force, random_baskets

from dedupd.errors import ConfigError
from dedupd.mining.baskets import Baskets
from dedupd.mining.son import son


@pytest.mark.parametrize("chunks", [1, 3, 7])
@pytest.mark.parametrize("shuffle", [None, 0])
def test_equals_oracle_in_process(chunks: int, shuffle: int | None) -> None:
    lists = random_baskets(2, 300, 11, 7)
    b = Baskets.from_lists(lists)
    for min_count in (5, 30):
        r = son(b, min_count, chunks=chunks, workers=1, shuffle=shuffle)
        assert r.counts_by_names() == brute_force(lists, min_count)
        assert [p.number for p in r.passes] == [1, 2]


def test_process_pool_equals_in_process() -> None:
    b = Baskets.from_lists(random_baskets(4, 400, 12, 8))
    assert (
        son(b, 10, workers=2, chunks=4).counts_by_names() == son(b, 10, workers=1, chunks=4).counts_by_names()
    )


def test_dask_local_cluster_equals_local() -> None:
    """SON on a Dask LocalCluster (threads, one worker) gives the local result."""
    pytest.importorskip("distributed")
    b = Baskets.from_lists(random_baskets(6, 300, 10, 7))
    local = son(b, 8, workers=1, chunks=3)
    dask = son(b, 8, engine="dask", workers=1, chunks=3, processes=False)
    assert dask.counts_by_names() == local.counts_by_names()
    assert "engine dask" in dask.passes[0].detail


def test_scheduler_needs_dask_engine() -> None:
    with pytest.raises(ConfigError, match="--engine dask"):
        son(Baskets.from_lists([["a"]]), 1, scheduler="tcp://127.0.0.1:1")
