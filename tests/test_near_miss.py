"""The near miss and the clusters' representatives (index/near_miss.py, _uf_reps.lua) against a real
redis-server: a star's base and a crowd's victim, gone from every bucket, are still found; a deleted
representative is never named; the extra work per document is bounded by the settings."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
import redis
from helpers import alerts, drain, make_daemon, push, star, text

from dedupd.index.gateway import RedisGateway, open_spec
from dedupd.index.keys import Keys
from dedupd.index.matching import Verification
from dedupd.index.memory import MemoryGateway
from dedupd.index.near_miss import near_misses
from dedupd.index.protocol import Gateway
from dedupd.settings import load_settings
from dedupd.similarity.matches import Found

T = 0.8  # the default threshold


def shingles(t: str) -> set[tuple[str, ...]]:
    w = t.lower().split()
    return {tuple(w[i : i + 3]) for i in range(len(w) - 2)}


def jaccard(a: str, b: str) -> float:
    """Exact Jaccard of two texts' word 3-gram sets (the default shingle), by hand."""
    x, y = shingles(a), shingles(b)
    return len(x & y) / len(x | y)


def named(r: redis.Redis) -> dict[str, set[str]]:
    """By alerting document, the documents its alert names."""
    return {a["id"]: {m[0] for m in a["matches"]} for a in alerts(r)}


def reps_of(r: redis.Redis) -> dict[int, list[int]]:
    """Every cluster's representatives (Keys.uf_reps), most matched first."""
    packed = r.hgetall(Keys().uf_reps)
    return {int(k): np.frombuffer(v, "<u4")[0::2].tolist() for k, v in packed.items()}


def test_a_shuffled_star_names_its_base_after_the_base_left_the_buckets(
    r: redis.Redis, redis_url: str
) -> None:
    """Ten variants before the base (each a cluster of its own, mutually below the threshold), the base (a
    hub: it merges them), twenty after, two a batch: every variant after the base names it, though its
    variants crowd it out of every bucket they share with it."""
    rng = random.Random(31)
    base = text(rng, 80)
    variants = star(rng, base, 30)
    assert all(jaccard(v, base) >= T for v in variants)
    assert max(jaccard(a, b) for i, a in enumerate(variants) for b in variants[i + 1 :]) < T
    docs = [{"id": f"pre{i:02}", "text": v} for i, v in enumerate(variants[:10])]
    docs.append({"id": "base", "text": base})
    docs += [{"id": f"post{i:02}", "text": v} for i, v in enumerate(variants[10:])]
    push(r, docs)
    drain(make_daemon(redis_url, batch_size=2))
    got = named(r)
    missed = [d["id"] for d in docs[11:] if "base" not in got.get(d["id"], set())]
    assert missed == []
    assert {a["cluster"] for a in alerts(r) if a["id"].startswith("post")} == {"pre00"}


def crowd(rng: random.Random, victim: str, n: int) -> tuple[list[str], str]:
    """``n`` near-copies of ``victim`` (two adjacent words of their own each, away from the later one's
    edits) and the later one (two words of its own, apart): the copies at about 0.87 to the victim and 0.71
    to the later one, the later one at about 0.81 to the victim."""
    words = victim.split()
    later = list(words)
    later[10], later[40] = "later0", "later1"
    copies = []
    for i in range(n):
        at = rng.choice([p for p in range(2, len(words) - 3) if abs(p - 10) > 4 and abs(p - 40) > 4])
        mine = list(words)
        mine[at], mine[at + 1] = f"copy{i}a", f"copy{i}b"
        copies.append(" ".join(mine))
    return copies, " ".join(later)


def test_a_crowd_of_near_copies_does_not_hide_its_victim(r: redis.Redis, redis_url: str) -> None:
    """Crowd attack (a) of issue 28, three victims: 30 near-copies of each victim V push V out of every
    bucket; a later V' at >= 0.8 to V (and below it to every copy) is alerted naming V, and so is every
    copy."""
    rng = random.Random(32)
    docs: list[dict[str, Any]] = []
    later: list[dict[str, Any]] = []
    for k in range(3):
        victim = text(rng, 60)
        copies, late = crowd(rng, victim, 30)
        assert jaccard(late, victim) >= T and all(jaccard(c, victim) >= T for c in copies)
        assert all(2 * T - 1 <= jaccard(c, late) < T for c in copies)
        docs.append({"id": f"victim{k}", "text": victim})
        docs += [{"id": f"copy{k}-{i:02}", "text": c} for i, c in enumerate(copies)]
        later.append({"id": f"later{k}", "text": late})
    push(r, docs + later)
    drain(make_daemon(redis_url, batch_size=4))
    got = named(r)
    assert [d["id"] for d in later if f"victim{d['id'][-1]}" not in got.get(d["id"], set())] == []
    assert [d["id"] for d in docs if d["id"].startswith("copy") and d["id"] not in got] == []


def test_a_deleted_representative_is_never_named(r: redis.Redis, redis_url: str) -> None:
    """A star's base, its most matched member, is deleted: it leaves its cluster's representatives at once,
    and no later variant names it (its cluster is still found through the other members)."""
    rng = random.Random(33)
    base = text(rng, 80)
    variants = star(rng, base, 24)
    push(
        r,
        [{"id": "base", "text": base}] + [{"id": f"v{i:02}", "text": v} for i, v in enumerate(variants[:16])],
    )
    daemon = make_daemon(redis_url, batch_size=2)
    drain(daemon)
    num = int(r.hget(Keys().id_forward, "base") or 0)
    assert reps_of(r)[num][0] == num  # the base: the most matched
    push(r, [{"id": "base", "op": "delete"}])
    drain(daemon)
    assert all(num not in reps for reps in reps_of(r).values())
    before = len(alerts(r))
    push(r, [{"id": f"w{i:02}", "text": v} for i, v in enumerate(variants[16:])])
    drain(daemon)
    assert all("base" not in {m[0] for m in a["matches"]} for a in alerts(r)[before:])


@pytest.fixture(params=["memory", "redis"])
def gateway(request: pytest.FixtureRequest) -> Gateway:
    """A serving gateway of an empty index (near_miss_clusters 4, representatives 8), in memory or on Redis."""
    settings = load_settings(representatives=8, near_miss_clusters=4)
    spec, bounds = settings.index_spec(), settings.bounds()
    if request.param == "memory":
        return MemoryGateway(Keys(), spec, bounds=bounds)
    client = redis.Redis.from_url(request.getfixturevalue("redis_url"))
    request.addfinalizer(client.close)
    spec, gen = open_spec(client, Keys(), spec)
    return RedisGateway(client, Keys(), spec, gen, bounds=bounds)


def store_reps(gw: Gateway, root: int, members: list[int]) -> None:
    """Give a cluster root representatives, the first most matched (as _uf_reps.lua stores them)."""
    counts = list(range(len(members), 0, -1))
    if isinstance(gw, MemoryGateway):
        gw.store.reps[root] = [[m, c] for m, c in zip(members, counts, strict=True)]
    else:
        packed = np.array([x for pair in zip(members, counts, strict=True) for x in pair], "<u4").tobytes()
        assert isinstance(gw, RedisGateway)
        gw.client.hset(gw.keys.uf_reps, str(root), packed)


def test_a_near_miss_verifies_at_most_clusters_times_representatives(gateway: Gateway) -> None:
    """A document that nearly matched six clusters, each with ten representatives listed (more than the
    setting keeps) and no ring: it verifies the first eight and the root of the four nearest, and none of
    the cluster it matched, of a cluster without representatives, nor of the others; what it verified
    already is not verified again."""
    gw = gateway
    fp = gw.fingerprinter.compute(["the document nearly matching them all"])[0]
    roots = [100 * c for c in range(1, 8)]  # 100 .. 700: root c's members are 100c + 1 ..
    for root in roots:
        store_reps(gw, root, [root + i for i in range(1, 11)])
    near = {
        root + 1: 0.61 + 0.02 * c for c, root in enumerate(roots[:6])
    }  # 601 the nearest, 101 the farthest
    near[702] = 0.79  # the nearest of all, but of the cluster it matched (through 701)
    near[801] = 0.78  # near, but a cluster without representatives (one of the batch's): it takes no place
    got = Verification(
        matches={1: [Found("d701", 0.9, 701)]},
        candidates={1: {*near, 602, 701}},
        roots={n: n - n % 100 for n in [*near, 602, 701] if n != 801},
        near={1: near},
    )
    found = near_misses(gw, {1: ("doc", fp)}, got, {1: 1})
    assert found.matches == {}  # (no record: nothing to match)
    nearest = {root + i for root in (300, 400, 500, 600) for i in range(9)}
    assert found.candidates == {1: nearest - {301, 401, 501, 601, 602}}
    assert len(nearest) == gw.bounds.near_miss_clusters * (gw.bounds.representatives + 1)


def store_ring(gw: Gateway, root: int, members: list[int]) -> None:
    """Make ``root`` and ``members`` one cluster (each member's parent the root) whose ring runs root,
    members..., root (the order the walk follows; test_the_walk_meets_the_most_recently_joined_first builds
    rings with real unions)."""
    nodes = [root, *members]
    links = {x: (nodes[(i + 1) % len(nodes)], nodes[i - 1]) for i, x in enumerate(nodes)}
    if isinstance(gw, MemoryGateway):
        gw.store.parent.update({m: root for m in members})
        gw.store.ring.update(links)
    else:
        assert isinstance(gw, RedisGateway)
        gw.client.hset(gw.keys.uf_parent, mapping={str(m): str(root) for m in members})
        gw.client.hset(gw.keys.uf_ring, mapping={str(x): f"{n} {p}" for x, (n, p) in links.items()})


@pytest.mark.parametrize("steps", [8192, 7])
def test_a_near_miss_walks_its_clusters_members_from_the_root(
    gateway: Gateway, steps: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """REPRESENTATIVES lists, per id asked about, the first ``ring`` nodes of its cluster's ring after the
    root (the root is the cluster's oldest, and a near miss verifies it too), whichever member is asked
    about; all of them when the ring is shorter, and then says the walk was whole; none for a document alone
    (and says it has no ring). The same split over several
    calls (a call walks at most RING_STEPS_PER_CALL steps)."""
    import dedupd.index.gateway as gateway_module

    monkeypatch.setattr(gateway_module, "RING_STEPS_PER_CALL", steps)
    gw = gateway
    store_ring(gw, 1000, list(range(1001, 1020)))
    store_ring(gw, 2000, [2001, 2002])
    got = gw.representatives([1000, 1005, 2002, 3000], 8)
    assert [tuple(c) for c in got] == [
        (1000, [], True, list(range(1001, 1009)), False),
        (1000, [], True, list(range(1001, 1009)), False),
        (2000, [], True, [2001, 2002], True),
        (3000, [], False, [], False),
    ]
    assert [tuple(c) for c in gw.representatives([1019], 50)] == [
        (1000, [], True, list(range(1001, 1020)), True)
    ]
    assert [tuple(c) for c in gw.representatives([1019], 19)] == [
        (1000, [], True, list(range(1001, 1020)), True)
    ]
    assert [tuple(c) for c in gw.representatives([1019], 18)] == [
        (1000, [], True, list(range(1001, 1019)), False)
    ]
    assert [tuple(c) for c in gw.representatives([1019], 0)] == [(1000, [], True, [], False)]


def test_a_near_miss_verifies_the_members_its_walk_meets(gateway: Gateway) -> None:
    """A cluster of 30 members with one representative: a document that nearly matched it verifies the
    representative, the root and the first near_miss_members (1024) members of its ring, all of them here;
    the members it verified already are not verified again."""
    gw = gateway
    fp = gw.fingerprinter.compute(["the document nearly matching the cluster"])[0]
    store_ring(gw, 100, list(range(101, 130)))
    store_reps(gw, 100, [117])
    got = Verification(
        candidates={1: {105, 106}}, roots={105: 100, 106: 100}, near={1: {105: 0.7, 106: 0.65}}
    )
    found = near_misses(gw, {1: ("doc", fp)}, got, {1: 1})
    assert found.candidates == {1: set(range(100, 130)) - {105, 106}}


def test_the_walk_meets_the_most_recently_joined_first(gateway: Gateway) -> None:
    """Documents 2 to 7 join document 1's cluster one union at a time, then the cluster of 8 and 9 joins it:
    a walk of the ring from the root meets the most recently joined first (a union puts the joining ring
    right after the root), and no further than asked."""
    gw = gateway
    if isinstance(gw, MemoryGateway):
        gw.store.ids["d1"] = 1
        gw.store.ids["d8"] = 8
    else:
        assert isinstance(gw, RedisGateway)
        gw.client.hset(gw.keys.id_forward, mapping={"d1": 1, "d8": 8})
    for n in range(2, 8):
        gw.union([(n, [(1, "d1")])])
    gw.union([(9, [(8, "d8")])])
    gw.union([(8, [(1, "d1")])])
    [c] = gw.representatives([5], 3)
    assert (c.root, c.ring, c.walked) == (1, True, [9, 8, 7])  # (the ring 8 -> 9 -> 8, spliced in)
    [c] = gw.representatives([5], 100)
    assert c.walked == [9, 8, 7, 6, 5, 4, 3, 2]
    [c] = gw.representatives([5])
    assert (c.root, c.ring, c.walked) == (1, True, [])


def test_a_small_cluster_is_walked_in_the_first_call(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first call lists up to INLINE_WALK (8) nodes of every near-missed cluster's ring: a cluster of up to
    9 members is walked whole there, and only a larger chosen one is walked again, near_miss_members deep
    (one more call). Both clusters' members are verified either way."""
    gw = gateway
    fp = gw.fingerprinter.compute(["the document nearly matching two clusters"])[0]
    store_ring(gw, 100, list(range(101, 105)))  # 5 members: whole in the first call
    store_ring(gw, 200, list(range(201, 221)))  # 21 members: walked again
    store_reps(gw, 100, [101])
    store_reps(gw, 200, [201])
    calls: list[int] = []
    real = gw.representatives

    def counted(roots: list[int], ring: int = 0) -> Any:
        calls.append(ring)
        return real(roots, ring)

    monkeypatch.setattr(gw, "representatives", counted)
    got = Verification(
        candidates={1: {102, 202}}, roots={102: 100, 202: 200}, near={1: {102: 0.7, 202: 0.65}}
    )
    found = near_misses(gw, {1: ("doc", fp)}, got, {1: 1})
    assert found.candidates == {1: (set(range(100, 105)) | set(range(200, 221))) - {102, 202}}
    assert calls == [8, gw.bounds.near_miss_members]
