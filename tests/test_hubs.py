"""A hub, near many earlier clusters, names the best match of each and merges them (issue 28, part C):
``max_clusters`` distinct clusters verified and named beside ``max_candidates`` and ``max_matches``, and a
document of a batch whose matches span two or more clusters looks as deep into its batch as one without a
match (real redis-server, the daemon in process)."""

from __future__ import annotations

import json
import random
from fractions import Fraction
from typing import Any

import pytest
import redis
from helpers import alerts, drain, load_script, make_daemon, push

from dedupd.client import Client
from dedupd.index.keys import Keys

T = Fraction(4, 5)  # the default threshold, 0.8
SPOKES = 100


shapes = load_script("family_shapes")


def hub(spokes: int, seed: int, id_bytes: int = 0) -> list[dict[str, str]]:
    """``spokes`` spokes (a common stem, each with words of its own at the end: every two below 0.8), then
    the hub (0.8 or more to each), as documents; ids padded to ``id_bytes`` when given."""
    texts = [t for _, t in shapes.hub(random.Random(seed), T, spokes + 1)]
    assert not shapes.claim_breaks("hub", shapes.shingle_sets(texts), T)  # the premise, by brute force
    docs = [{"id": f"spoke{i:03}".ljust(id_bytes, "x"), "text": t} for i, t in enumerate(texts[1:])]
    return [*docs, {"id": "hub", "text": texts[0]}]


def named(alert: dict[str, Any]) -> set[str]:
    return {m[0] for m in alert["matches"]}


@pytest.mark.parametrize(("batch_size", "bucket_members"), [(1, 64), (256, 32)])
def test_a_hub_names_every_spoke_and_merges_them(
    r: redis.Redis, redis_url: str, batch_size: int, bucket_members: int
) -> None:
    """100 spokes, each its own cluster, then the hub. Across batches (one document a batch) the hub read
    the spokes in its buckets and verified 64 (max_candidates): 64 of 100 named. In one batch it saw the
    nearest spoke of each band, matched some, and (having matched) looked no deeper: 3 named. Now it
    verifies the best of each of up to max_clusters (128) clusters, and a document whose matches span two
    clusters looks max_clusters deep into its batch: its alert names all 100, and its union merges them
    into one cluster. (Across batches with buckets of 32, a third of the spokes share each of the hub's
    bands: the buckets are full before the last spokes come, and the hub reads 94 of them: README, what
    can still be missed. Buckets of 64 hold them all.)"""
    docs = hub(SPOKES, seed=7)
    push(r, docs)
    drain(make_daemon(redis_url, batch_size=batch_size, bucket_members=bucket_members))
    got = {a["id"]: a for a in alerts(r)}
    assert set(got) == {"hub"}, sorted(got)[:5]  # the spokes are no duplicates of one another
    spokes = {d["id"] for d in docs[:-1]}
    assert named(got["hub"]) == spokes, f"{len(named(got['hub']))} of {SPOKES} named"
    with Client.connect(redis_url) as client:
        page = client.cluster("hub", limit=1000)
    assert set(page.members) == spokes | {"hub"} and page.cluster == got["hub"]["cluster"] == "spoke000"


def test_an_alert_names_at_most_max_matches_plus_max_clusters(r: redis.Redis, redis_url: str) -> None:
    """With max_clusters at its least (64) and ids of 256 bytes, a hub of 100 spokes names at most 10 + 64
    of them (README: an alert is at most (max_matches + max_clusters) x (id bytes + 14) bytes of matches),
    and its union still merges all 100."""
    docs = hub(SPOKES, seed=7, id_bytes=256)
    assert all(len(d["id"].encode()) == 256 for d in docs[:-1])
    push(r, docs)
    drain(make_daemon(redis_url, batch_size=1, max_clusters=64, bucket_members=64))
    [alert] = alerts(r)
    assert 64 <= len(alert["matches"]) <= 10 + 64
    raw = r.xrange(Keys().alerts)[0][1]
    assert len(raw[b"matches"]) <= (10 + 64) * (256 + 14)
    assert len(json.dumps(alert["matches"])) == len(raw[b"matches"])
    with Client.connect(redis_url) as client:
        page = client.cluster(docs[-1]["id"], limit=1000)
    assert len(page.members) == SPOKES + 1


def test_a_hub_near_more_clusters_than_an_alert_names_merges_them_all(r: redis.Redis, redis_url: str) -> None:
    """300 spokes, each its own cluster, then the hub, one document a batch, buckets of 256 (they hold every
    spoke). The hub verifies the best candidate of each of up to candidate_clusters (1024) clusters: its
    alert names max_clusters (128) of them, one per cluster, and its union merges all 300. (Before
    candidate_clusters it verified max_clusters + max_candidates, 192 at most, and merged no more: the
    Debian long descriptions at 0.5 lost a -dev/-doc/-prof triple of a Haskell library this way, its
    cluster ranked behind 128 others in a document's reads.)"""
    spokes = 300
    docs = hub(spokes, seed=11)
    push(r, docs)
    drain(make_daemon(redis_url, batch_size=1, bucket_members=256))
    [alert] = alerts(r)
    assert alert["id"] == "hub" and len(named(alert)) == 128  # (one per cluster: max_clusters)
    with Client.connect(redis_url) as client:
        page = client.cluster("hub", limit=1000)
    assert len(page.members) == spokes + 1, f"{len(page.members) - 1} of {spokes} spokes merged"


def test_max_clusters_below_64_is_refused(r: redis.Redis, redis_url: str) -> None:
    """The setting is validated: under 64 it says so in one line and names the setting."""
    from dedupd.errors import ConfigError

    with pytest.raises(ConfigError, match=r"max_clusters.*greater than or equal to 64"):
        make_daemon(redis_url, max_clusters=10)
