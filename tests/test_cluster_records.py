"""Redis Cluster, a real local one (scripts/cluster-up.sh): a batch done again after its records were written and
its bucket writes failed leaves the previous versions' buckets too (cluster_records.py); deleted documents leave
nothing in the union-find (unionfind.py)."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import redis
import redis.cluster
from helpers import FailOnce, drain, push, text
from test_cluster import Cluster, _running_cluster

from dedupd.daemon.loop import Daemon
from dedupd.index.keys import Keys
from dedupd.settings import load_settings

pytestmark = pytest.mark.slow
K = Keys()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from _running_cluster(tmp_path_factory, "records")


def memberships(client: Any, gen: int) -> Counter[int]:
    out: Counter[int] = Counter()
    for key in client.scan_iter(match=K.band_pattern(gen), count=1000):
        for value in client.hvals(key):
            out.update(np.frombuffer(value, dtype="<u4").tolist())
    return out


def test_a_retry_after_the_record_write_leaves_the_old_buckets(cluster: Cluster) -> None:
    cluster.flush()
    client = cluster.client()
    settings = load_settings(redis_url=cluster.url, redis_cluster=True, block_ms=50)
    daemon = Daemon(settings, client=client)
    gw = daemon.gateway
    rng = random.Random(66)
    v1, v2, v3 = text(rng), text(rng), text(rng)
    push(client, [{"id": "doc", "text": v1}])
    drain(daemon)
    num, bands = int(client.hget(K.id_forward, "doc")), gw.spec.bands
    assert memberships(client, gw.generation)[num] == bands
    # the bucket step of v2 fails after its record was written; the entry is done again
    gw._buckets = FailOnce(gw._buckets)  # type: ignore[method-assign]
    [entry] = push(client, [{"id": "doc", "text": v2}])
    with pytest.raises(redis.ConnectionError):
        drain(daemon)
    record = gw.load_records([num])[num]
    assert record is not None and record.entry_id == entry
    daemon._recover_after_error(redis.ConnectionError("down"))
    drain(daemon)
    assert memberships(client, gw.generation)[num] == bands
    assert not client.exists(K.leaving(num, gw.generation))
    # v3's bucket step fails, and its entry is given up (acknowledged as a dead letter is): v4 leaves v3's too
    gw._buckets = FailOnce(gw._buckets)  # type: ignore[method-assign]
    [entry] = push(client, [{"id": "doc", "text": v3}])
    with pytest.raises(redis.ConnectionError):
        drain(daemon)
    daemon.stream.ack([(entry, {b"id": b"doc"})])
    v4 = text(rng)
    push(client, [{"id": "doc", "text": v4}])
    drain(daemon)
    assert memberships(client, gw.generation)[num] == bands
    push(client, [{"id": "twin", "text": v4}])  # a cluster of two in the union-find
    drain(daemon)
    assert client.hlen(K.uf_parent) == 1
    push(client, [{"id": "doc", "op": "delete"}, {"id": "twin", "op": "delete"}])
    drain(daemon)
    assert memberships(client, gw.generation)[num] == 0
    assert not client.exists(gw.record_key(num), K.leaving(num, gw.generation))
    assert not client.exists(K.uf_parent, K.uf_children, K.uf_gone, K.id_forward)
    client.close()
