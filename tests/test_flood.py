"""Duplicate floods against a real redis-server: bounded buckets, candidates, unions and alerts, whatever the
size of a cluster, and the cluster still found after its oldest copies are deleted (retention by age) or its
newest one is."""

from __future__ import annotations

import random

import numpy as np
import pytest
import redis
from helpers import alerts, drain, make_daemon, push, text, variant
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dedupd.client import Client
from dedupd.index.keys import Keys
from dedupd.similarity.bounds import FRESH_PER_CALL, KEPT_PER_CLUSTER, NEWEST_KEPT

MAX_MATCHES = 5
BUCKET_MEMBERS = 8


def bucket_sizes(r: redis.Redis) -> list[int]:
    """Members of every bucket of the serving generation."""
    sizes = []
    for key in r.scan_iter(match=f"{Keys().prefix}:b:*", count=1000):
        sizes += [len(v) // 4 for v in r.hvals(key)]
    return sizes


def flood(r: redis.Redis, redis_url: str, n: int, seed: int = 7) -> tuple[str, list[str]]:
    rng = random.Random(seed)
    base = text(rng, 100)
    ids = [f"copy-{i}" for i in range(n)]
    push(r, [{"id": i, "text": variant(rng, base, 1)} for i in ids])  # pairwise Jaccard ~0.88
    daemon = make_daemon(
        redis_url, batch_size=64, max_matches=MAX_MATCHES, bucket_members=BUCKET_MEMBERS, max_candidates=16
    )
    drain(daemon)
    return base, ids


def test_a_flood_costs_bounded_alerts_and_buckets(r: redis.Redis, redis_url: str) -> None:
    _, ids = flood(r, redis_url, 400)
    got = alerts(r)
    assert {a["id"] for a in got} == set(ids[1:])  # every copy after the first is found
    assert {a["cluster"] for a in got} == {"copy-0"}  # one cluster, named by its oldest document
    # one earlier cluster each: at most max_matches (the old code listed every earlier copy: up to 399)
    assert max(len(a["matches"]) for a in got) <= MAX_MATCHES
    sizes = bucket_sizes(r)
    assert max(sizes) <= BUCKET_MEMBERS
    # the buckets shared by copies keep the newest few of the cluster, not every copy that reached them
    assert sum(sizes) < 400 * 25 * 0.75, sum(sizes)


def test_flood_bucket_memory_is_no_more_than_different_documents(r: redis.Redis, redis_url: str) -> None:
    flood(r, redis_url, 300)
    in_flood = sum(bucket_sizes(r))
    r.flushall()
    rng = random.Random(3)
    push(r, [{"id": f"other-{i}", "text": text(rng, 100)} for i in range(300)])
    drain(make_daemon(redis_url, batch_size=64))
    different = sum(bucket_sizes(r))
    assert in_flood <= different, (in_flood, different)


def test_the_cluster_is_found_after_its_oldest_copies_are_deleted(r: redis.Redis, redis_url: str) -> None:
    base, ids = flood(r, redis_url, 300)
    push(r, [{"id": i, "op": "delete"} for i in ids[:290]])  # retention by age: the oldest go first
    push(r, [{"id": "late", "text": base}])
    drain(make_daemon(redis_url, batch_size=64))
    late = [a for a in alerts(r) if a["id"] == "late"]
    assert late and {m[0] for m in late[0]["matches"]} <= set(ids[290:])


def test_the_cluster_is_found_after_its_newest_copy_is_deleted(r: redis.Redis, redis_url: str) -> None:
    base, ids = flood(r, redis_url, 200)
    push(r, [{"id": ids[-1], "op": "delete"}, {"id": "late", "text": base}])
    drain(make_daemon(redis_url, batch_size=64))
    late = [a for a in alerts(r) if a["id"] == "late"]
    assert late and ids[-1] not in {m[0] for m in late[0]["matches"]}


def test_two_clusters_joined_are_both_named_and_merged(r: redis.Redis, redis_url: str) -> None:
    """A document that joins two earlier clusters names the best match of each (a merge is visible), even
    when max_matches is 1; both clusters then have one name."""
    rng = random.Random(11)
    left, right = text(rng, 60), text(rng, 60)
    push(r, [{"id": f"l{i}", "text": variant(rng, left)} for i in range(30)])
    push(r, [{"id": f"r{i}", "text": variant(rng, right)} for i in range(30)])
    push(r, [{"id": "bridge", "text": left + " " + right}])
    push(r, [{"id": "after", "text": variant(rng, right)}])
    daemon = make_daemon(redis_url, batch_size=16, max_matches=1, threshold=0.3)
    drain(daemon)
    got = {a["id"]: a for a in alerts(r)}
    bridge = [m[0] for m in got["bridge"]["matches"]]
    assert len(bridge) == 2 and {bridge[0][0], bridge[1][0]} == {"l", "r"}
    assert got["after"]["cluster"] == got["bridge"]["cluster"] == "l0"


def test_a_query_names_what_an_alert_would(r: redis.Redis, redis_url: str) -> None:
    base, _ = flood(r, redis_url, 200)
    with Client.connect(redis_url) as c:
        c.settings = c.settings.model_copy(update={"max_matches": MAX_MATCHES})
        c._gateway = None
        verdict = c.query(base)
    assert verdict.duplicate and len(verdict.matches) <= MAX_MATCHES and verdict.cluster == "copy-0"


def test_union_is_once_per_distinct_root_and_reports_earlier_clusters(r: redis.Redis, redis_url: str) -> None:
    daemon = make_daemon(redis_url)
    gw = daemon.gateway
    r.hset(Keys().id_forward, mapping={f"d{n}": n for n in [*range(1, 10), *range(99, 1100), 5000]})

    def m(*nums: int) -> list[tuple[int, str]]:
        return [(n, f"d{n}") for n in nums]

    gw.union([(2, m(1)), (4, m(3))])  # clusters {1, 2} and {3, 4}
    [(root, before)] = gw.union([(9, m(2, 1, 4, 3, 2))]).clusters
    assert root == 1 and before == [1, 1, 3, 3, 1]
    assert gw.roots([1, 2, 3, 4, 9]) == [1, 1, 1, 1, 1]
    r.config_resetstat()
    many = list(range(100, 1100))
    gw.union([(n, m(99)) for n in many])  # a cluster of 1,001
    commands = r.info("commandstats")
    hset_before = commands.get("cmdstat_hset", {}).get("calls", 0)
    r.config_resetstat()
    gw.union([(5000, m(*many))])  # joins it through 1,000 matches of one root
    hsets = r.info("commandstats").get("cmdstat_hset", {}).get("calls", 0)
    # one union, not one per match (and the rings' links written at a call's end, an HSET per 1,000 nodes;
    # the cluster's representatives too, one HSET)
    assert hset_before == 1000 + 2 + 1 and hsets <= 2 + 1 + 1
    assert gw.roots([5000]) == [99]


def test_the_union_reads_the_names_of_the_roots_it_is_expected_to_leave(
    r: redis.Redis, redis_url: str
) -> None:
    """The names of the clusters an alert names are read in the unions' exchange (the roots the batch's unions
    are expected to leave); a root gone is ``#n``; what was not expected is read after, by cluster_names."""
    from dedupd.server.connection import ScriptPipeline

    push(r, [{"id": "R", "text": "alpha beta gamma delta"}, {"id": "Q", "text": "one two three four"}])
    drain(make_daemon(redis_url))
    daemon = make_daemon(redis_url)
    gw = daemon.gateway
    r.hset(Keys().id_forward, mapping={"d7": 7, "d8": 8})
    r.delete(gw.record_key(2))  # Q's record gone
    names = {7: "d7", 8: "d8"}
    unions = gw.union([(7, [(1, "R")]), (8, [(2, "Q")])], ScriptPipeline(gw.client), [1, 2])
    assert [root for root, _ in unions.clusters] == [1, 2]
    assert unions.names == {1: "R", 2: "#2"} and names == {7: "d7", 8: "d8"}  # (names is not written to)
    r.config_resetstat()
    assert gw.cluster_names([1, 2], {**names, **unions.names}) == ["R", "#2"]
    assert "cmdstat_get" not in r.info("commandstats")  # nothing left to read
    assert gw.cluster_names([1, 2, 7], {7: "d7"}) == ["R", "#2", "d7"]  # not expected: read now


def test_a_full_bucket_is_read_but_not_joined(r: redis.Redis, redis_url: str) -> None:
    rng = random.Random(5)
    same = text(rng, 80)
    push(r, [{"id": f"same-{i}", "text": same} for i in range(3 * BUCKET_MEMBERS)])
    daemon = make_daemon(redis_url, batch_size=1000, bucket_members=BUCKET_MEMBERS)
    drain(daemon)
    got = {a["id"]: a for a in alerts(r)}
    assert len(got) == 3 * BUCKET_MEMBERS - 1  # the refused ones still found the members
    # one batch: the first BUCKET_MEMBERS joined, the later ones were refused, then the newest evicted the
    # ones between them and the first: the cluster keeps its anchor and its NEWEST_KEPT newest per bucket
    sizes = bucket_sizes(r)
    assert sizes and max(sizes) == KEPT_PER_CLUSTER
    kept = {
        int(x)
        for key in r.scan_iter(match="dedupd:b:*")
        for v in r.hvals(key)
        for x in np.frombuffer(v, "<u4")
    }
    # the first (the anchor) and the newest two, refused by the full bucket
    assert kept == {1, 3 * BUCKET_MEMBERS - 1, 3 * BUCKET_MEMBERS}
    assert NEWEST_KEPT == 2


def _evicted_by_hand(
    bucket: list[int], known: set[int], held: list[int], newest: int, anchors: int, full: int
) -> list[int]:
    """What lua.EVICT leaves in one bucket: of the cluster's known members in it and the batch's documents
    that joined it (``held``), the ``newest`` newest and the ``anchors`` oldest stay, the others leave, and
    one refused (by a full bucket, or by one that took its new members of the call) takes a place that is
    free, the newest first."""
    ids = list(dict.fromkeys([m for m in bucket if m in known] + held))
    if len(ids) > newest + anchors:
        top = sorted(ids, reverse=True)[:newest]
        kept = top + sorted(set(ids) - set(top))[:anchors]
    else:
        kept = ids
    out = [m for m in bucket if m not in ids or m in kept]
    for m in kept:
        if m not in out and len(out) < full:
            out.append(m)
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.tuples(
            st.lists(st.integers(1, 12), unique=True, max_size=6),  # the bucket's members, in order
            st.sets(st.integers(1, 12)),  # the cluster's known members
            st.lists(st.integers(1, 12), unique=True, min_size=1, max_size=3),  # documents that joined it
        ),
        min_size=1,
        max_size=3,
    ),
    st.integers(0, 3),
    st.integers(0, 2),
)
def test_eviction_leaves_the_anchor_and_the_newest_of_the_cluster_in_each_bucket(
    r: redis.Redis,
    redis_url: str,
    cases: list[tuple[list[int], set[int], list[int]]],
    newest: int,
    anchors: int,
) -> None:
    """lua.EVICT against the by-hand rule, several buckets and clusters in one call (a real server), and its
    in-memory twin (index/memory_scripts.py) alike."""
    from dedupd.index import gateway as gateway_module
    from dedupd.index import memory_scripts
    from dedupd.index.buckets import Evictions
    from dedupd.server.connection import ScriptPipeline

    r.flushall()
    gw = make_daemon(redis_url).gateway
    full = 6
    name = "dedupd:b:test"
    rows: list[tuple[int, int, int]] = []  # (field, cluster, document)
    for i, (bucket, _, held) in enumerate(cases):
        if bucket:
            r.hset(name, i.to_bytes(4, "little"), np.array(bucket, dtype="<u4").tobytes())
        rows += [(i, i, h) for h in held]
    ev = Evictions(
        [name],
        np.zeros(len(rows), dtype=np.int64),
        np.array([f for f, _, _ in rows], dtype=np.uint32),
        np.array([c for _, c, _ in rows], dtype=np.int64),
        np.array([d for _, _, d in rows], dtype=np.int64),
        [np.array(sorted(known), dtype="<u4").tobytes() for _, known, _ in cases],
    )
    real = gateway_module.NEWEST_KEPT, gateway_module.ANCHORS_KEPT, gw.bounds.bucket_members
    gateway_module.NEWEST_KEPT, gateway_module.ANCHORS_KEPT = newest, anchors
    object.__setattr__(gw.bounds, "bucket_members", full)
    try:
        pipe = ScriptPipeline(gw.client)
        gw.evict(pipe, ev)
        left = pipe.execute()[0]
    finally:
        gateway_module.NEWEST_KEPT, gateway_module.ANCHORS_KEPT = real[:2]
        object.__setattr__(gw.bounds, "bucket_members", real[2])
    store = memory_scripts.MemoryStore(buckets={name: {i: list(c[0]) for i, c in enumerate(cases) if c[0]}})
    twin_left = memory_scripts.evict(store, ev, newest, anchors, full)
    expected_left = 0
    for i, (bucket, known, held) in enumerate(cases):
        expected = _evicted_by_hand(bucket, known, held, newest, anchors, full)
        got = r.hget(name, i.to_bytes(4, "little"))
        assert (np.frombuffer(got, "<u4").tolist() if got else []) == (expected if bucket else [])
        assert store.buckets[name].get(i, []) == (expected if bucket else [])
        expected_left += len(set(bucket) - set(expected)) if bucket else 0
    assert left == twin_left == expected_left


def test_a_batch_over_one_bucket_call_reads_what_one_call_would(r: redis.Redis, redis_url: str) -> None:
    """A batch's BUCKETS calls come in chunks of APPLY_CHUNK documents; a later chunk must not read the
    copies an earlier chunk of the same batch put in the buckets (up to bucket_members of them per bucket:
    the old code verified ~50 candidates per copy in a flood, against ~16 in the first chunk)."""
    from dedupd.index import gateway, matching

    rng = random.Random(11)
    base = text(rng, 100)
    n = 3 * gateway.APPLY_CHUNK
    push(r, [{"id": f"copy-{i}", "text": variant(rng, base, 1)} for i in range(n)])
    daemon = make_daemon(redis_url, batch_size=n, max_candidates=1000)
    counts: dict[int, set[int]] = {}
    real = matching.ranked_flat

    def counting(reads):  # type: ignore[no-untyped-def]
        keys, who, ids = real(reads)
        for at, n in zip(who.tolist(), ids.tolist(), strict=True):
            counts.setdefault(keys[at], set()).add(n)
        return keys, who, ids

    matching.ranked_flat = counting  # type: ignore[assignment]
    try:
        drain(daemon)
    finally:
        matching.ranked_flat = real  # type: ignore[assignment]
    assert len(counts) == n - 1
    # one batch: what a document reads is the nearest earlier copy per band (bounds.batch_predecessors)
    assert max(len(ids) for ids in counts.values()) <= 25, sorted(len(ids) for ids in counts.values())[-10:]
    assert len(alerts(r)) == n - 1


def _shingles(t: str) -> set[tuple[str, ...]]:
    w = t.split()
    return {tuple(w[i : i + 3]) for i in range(len(w) - 2)}


def _jaccard(a: str, b: str) -> float:
    x, y = _shingles(a), _shingles(b)
    return len(x & y) / len(x | y)


def test_a_copy_finds_its_original_behind_nearer_copies_of_the_batch(r: redis.Redis, redis_url: str) -> None:
    """In one batch: 30 copies edited apart (under the threshold to the last one) make every bucket of the
    original, the original, 30 more such copies, then a light copy of the original. In each band the light
    copy shares, the nearest earlier document of the batch is an edited copy; a document that matched
    nothing looks further back (selection.look_further: the syndicated-stories test lost a story this way)."""
    rng = random.Random(21)
    base = text(rng, 60)

    def edited(n: int) -> str:
        words = base.split()
        for at in rng.sample(range(len(words)), n):
            words[at] = f"x{rng.randrange(10**9)}"
        return " ".join(words)

    before, after, copy = [edited(3) for _ in range(30)], [edited(3) for _ in range(30)], edited(1)
    assert _jaccard(copy, base) >= 0.8 > max(_jaccard(copy, t) for t in before + after)  # the premise
    docs = [{"id": f"before-{i}", "text": t} for i, t in enumerate(before)]
    docs.append({"id": "original", "text": base})
    docs += [{"id": f"after-{i}", "text": t} for i, t in enumerate(after)]
    docs.append({"id": "copy", "text": copy})
    push(r, docs)
    drain(make_daemon(redis_url, batch_size=64))
    got = {a["id"]: a for a in alerts(r)}
    assert got["copy"]["duplicate_of"] == "original", got.get("copy")


def bucket_members(r: redis.Redis) -> dict[tuple[bytes, bytes], set[int]]:
    """Every bucket of the serving generation: its members."""
    out = {}
    for key in r.scan_iter(match=f"{Keys().prefix}:b:*", count=1000):
        for field, v in r.hgetall(key).items():
            out[(key, field)] = set(np.frombuffer(v, "<u4").tolist())
    return out


def test_a_bucket_takes_two_new_members_a_batch_and_the_others_once_verified(
    r: redis.Redis, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Near-copies that are no duplicates at the threshold (0.99) join one another's buckets in one batch:
    a bucket takes FRESH_PER_CALL of them in the batch's bucket call, the others are refused there and put
    in once the batch is verified (they alert nothing: each is a cluster of its own), so the buckets end
    as they would without the bound."""
    from dedupd.index import gateway as gateway_module

    rng = random.Random(17)
    words = text(rng, 80).split()
    docs = [{"id": "seed", "text": " ".join(words)}]
    for i in range(12):  # each edits its own position: pairwise Jaccard about 0.93, none at 0.99
        edited = list(words)
        edited[5 * i + 3] = f"edit{i}"
        docs.append({"id": f"near-{i}", "text": " ".join(edited)})
    ends = {}
    for fresh in (0, FRESH_PER_CALL):  # 0: no bound
        r.flushall()
        monkeypatch.setattr(gateway_module, "FRESH_PER_CALL", fresh)
        push(r, docs[:1])
        drain(make_daemon(redis_url, threshold=0.99, bands=16, rows=2))
        push(r, docs[1:])
        refused = []
        daemon = make_daemon(redis_url, threshold=0.99, bands=16, rows=2, batch_size=100)
        real = daemon.gateway.apply

        def spy(prepared, _real=real, _refused=refused):  # type: ignore[no-untyped-def]
            found, hits = _real(prepared)
            _refused.append(int(hits.refused.sum()))
            return found, hits

        daemon.gateway.apply = spy  # type: ignore[method-assign]
        drain(daemon)
        assert alerts(r) == []
        ends[fresh] = bucket_members(r)
        assert (sum(refused) > 20) == (fresh > 0), refused
    assert ends[FRESH_PER_CALL] == ends[0]
    assert max(len(m) for m in ends[0].values()) == 13  # the seed and the twelve
