"""The union-find of clusters against a real redis-server: a deleted document's node goes (one that still links
others stays, marked, until its last child goes), the clusters and names of the remaining documents are what
they would be had nothing been removed, and Redis holds nothing of clusters whose documents are all deleted."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable

import pytest
import redis
from helpers import FailOnce, alerts, drain, make_daemon, push, text, variant

from dedupd.index.gateway import RedisGateway
from dedupd.index.keys import Keys

K = Keys()


def ids_slot(r: redis.Redis) -> dict[bytes, dict[bytes, bytes]]:
    """Every hash of the ids slot but the tombstones (which expire after tombstone_ttl_s): the id map and the
    union-find."""
    out = {}
    for key in r.scan_iter(match="{dedupd:ids}:*"):
        if key != K.tombstones.encode() and r.type(key) == b"hash":
            out[key] = r.hgetall(key)
    return out


def num_of(r: redis.Redis, doc_id: str) -> int:
    return int(r.hget(K.id_forward, doc_id) or 0)


def clusters(rng: random.Random, names: str, copies: int) -> list[dict[str, str]]:
    """``copies`` near-copies of one text per letter of ``names`` (ids a0, a1, ..., b0, ...), interleaved."""
    bases = {c: text(rng, 60) for c in names}
    return [{"id": f"{c}{i}", "text": variant(rng, bases[c], 1)} for i in range(copies) for c in names]


def test_deleting_every_document_of_clusters_leaves_nothing_of_them(r: redis.Redis, redis_url: str) -> None:
    """The id map and the union-find hold what they held before the clusters came, after they are deleted
    (a delete redelivered, and one whose union-find step failed once, included)."""
    rng = random.Random(1)
    daemon = make_daemon(redis_url, batch_size=16)
    push(r, [{**d, "id": f"other-{d['id']}"} for d in clusters(rng, "xy", 2)])
    drain(daemon)
    before = ids_slot(r)
    docs = clusters(rng, "abcde", 8)
    docs.append({"id": "bridge", "text": docs[0]["text"] + " " + docs[1]["text"]})  # joins a and b
    push(r, docs)
    drain(daemon)
    assert len({a["cluster"] for a in alerts(r)}) >= 4 and r.hlen(K.uf_parent) >= len(docs) - 5
    order = [d["id"] for d in docs]
    rng.shuffle(order)
    push(r, [{"id": i, "op": "delete"} for i in order[:20]])
    drain(daemon)
    # a delete whose union-find step fails once (a connection lost after the record and buckets went)
    daemon.gateway._forget = FailOnce(daemon.gateway._forget, "lost")
    push(r, [{"id": i, "op": "delete"} for i in order[20:]])
    with pytest.raises(redis.ConnectionError):
        drain(daemon)
    daemon._recover_after_error(redis.ConnectionError("lost"))  # as Daemon.run does: re-read own pending
    drain(daemon)
    push(r, [{"id": order[0], "op": "delete"}])  # a document deleted twice
    drain(daemon)
    assert ids_slot(r) == before


def test_a_partial_delete_keeps_the_clusters_and_names_of_the_others(r: redis.Redis, redis_url: str) -> None:
    """Deleting some copies, a cluster's first one among them, keeps the others in their clusters under the
    same names; later copies join them; the union-find keeps only the nodes of remaining documents and the
    deleted ones that still link them."""
    rng = random.Random(2)
    daemon = make_daemon(redis_url, batch_size=4)
    docs = clusters(rng, "ab", 10)
    push(r, docs)
    drain(daemon)
    names = {a["id"]: a["cluster"] for a in alerts(r)}
    assert {names[f"a{i}"] for i in range(1, 10)} == {"a0"} and {names[f"b{i}"] for i in range(1, 10)} == {
        "b0"
    }
    gone = ["a1", "a2", "a5", "b0", "b3", "b4"]
    nums = {d["id"]: num_of(r, d["id"]) for d in docs}
    push(r, [{"id": i, "op": "delete"} for i in gone])
    drain(daemon)
    survivors = [d["id"] for d in docs if d["id"] not in gone]
    gw = daemon.gateway
    roots = dict(zip(survivors, gw.roots([nums[s] for s in survivors]), strict=True))
    assert {roots[s] for s in survivors if s[0] == "a"} == {nums["a0"]}
    assert {roots[s] for s in survivors if s[0] == "b"} == {nums["b0"]}  # the deleted root still links b
    parents = {int(k): int(v) for k, v in r.hgetall(K.uf_parent).items()}
    assert set(parents) <= {nums[s] for s in survivors}  # no entry of a deleted document but b0's (a root)
    assert {int(k) for k in r.hkeys(K.uf_gone)} == {nums["b0"]}
    assert Counter(parents.values()) == {int(k): int(v) for k, v in r.hgetall(K.uf_children).items()}
    n_alerts = len(alerts(r))
    push(r, [{"id": "late-a", "text": docs[0]["text"]}, {"id": "late-b", "text": docs[1]["text"]}])
    drain(daemon)
    late = {a["id"]: a["cluster"] for a in alerts(r)[n_alerts:]}
    # named as before the deletes: by the first document, "#<its integer id>" once that one is deleted
    assert late == {"late-a": "a0", "late-b": f"#{nums['b0']}"}
    push(r, [{"id": i, "op": "delete"} for i in [*survivors, "late-a", "late-b"]])
    drain(daemon)
    assert ids_slot(r) == {}


def _chain(r: redis.Redis, gw: RedisGateway, n: int) -> None:
    """Documents d1..dn in one cluster, a chain: d(k+1) -> dk (each union of an older document with a newer
    one's cluster)."""
    r.hset(K.id_forward, mapping={f"d{k}": k for k in range(1, n + 1)})
    for k in range(n - 1, 0, -1):
        gw.union([(k, [(k + 1, f"d{k + 1}")])])


def test_a_chain_of_deleted_nodes_goes_with_its_last_child(r: redis.Redis, redis_url: str) -> None:
    gw = make_daemon(redis_url).gateway
    _chain(r, gw, 6)
    assert {int(k): int(v) for k, v in r.hgetall(K.uf_parent).items()} == {k + 1: k for k in range(1, 6)}
    gw.forget([(f"d{k}", k, f"{k}-0") for k in range(1, 6)])  # every one still links d6 to the root
    assert r.hlen(K.uf_parent) == 5 and r.hlen(K.uf_gone) == 5 and gw.roots([6]) == [1]
    gw.forget([("d6", 6, "6-0")])
    assert ids_slot(r) == {}


def test_a_match_deleted_meanwhile_is_not_brought_back(r: redis.Redis, redis_url: str) -> None:
    """A consumer read a match's record before another one deleted it: the union leaves it out when the
    union-find no longer holds it, and goes through it when it still links others."""
    gw = make_daemon(redis_url).gateway
    r.hset(K.id_forward, mapping={"d1": 1, "d2": 2, "d3": 3, "d4": 4, "d5": 5})
    gw.union([(2, [(1, "d1")])])
    gw.forget([("d2", 2, "1-0"), ("d1", 1, "1-1")])  # nothing is left of {1, 2}
    assert gw.union([(3, [(2, "d2"), (1, "d1")])]).clusters == [(3, [2, 1])]
    assert r.hlen(K.uf_parent) == 0 and r.hlen(K.uf_children) == 0
    gw.union([(5, [(4, "d4")])])
    gw.forget([("d4", 4, "2-0")])  # 4 stays: it is 5's root
    assert gw.union([(3, [(4, "d4")])]).clusters == [(3, [4])]
    assert gw.roots([3, 5]) == [3, 3]


def test_ids_of_an_earlier_version_keep_their_nodes(r: redis.Redis, redis_url: str) -> None:
    """An index whose union-find was made without child counts: its nodes are never removed (their children
    are unknown); the nodes made afterwards are counted and removed."""
    r.set(K.id_seq, 4)
    r.hset(K.uf_parent, mapping={2: 1, 3: 1, 4: 3})  # an earlier version's clusters
    r.hset(K.id_forward, mapping={f"d{k}": k for k in range(1, 7)})
    gw = make_daemon(redis_url).gateway  # opens the index: ids up to 4 stay uncounted
    assert int(r.get(K.uf_floor) or 0) == 4
    gw.union([(5, [(4, "d4")]), (6, [(5, "d5")])])
    gw.forget([(f"d{k}", k, f"{k}-0") for k in (1, 2, 3, 4, 5, 6)])
    assert set(map(int, r.hkeys(K.uf_parent))) == {2, 3, 4}  # (a union compressed 4 -> 3 -> 1 to 4 -> 1)
    assert r.hlen(K.uf_children) == 0 and r.hlen(K.uf_gone) == 0


def _check_nodes(r: redis.Redis, live: list[int], deleted: set[int]) -> None:
    """The children counts are exact; only remaining documents and deleted ones that link others have nodes."""
    parents = {int(k): int(v) for k, v in r.hgetall(K.uf_parent).items()}
    kids = {int(k): int(v) for k, v in r.hgetall(K.uf_children).items()}
    gone = {int(k) for k in r.hkeys(K.uf_gone)}
    assert Counter(parents.values()) == kids
    assert gone <= deleted and all(kids.get(g, 0) > 0 for g in gone)
    assert set(parents) | set(kids) <= set(live) | gone


def _check_rings(r: redis.Redis, live: list[int], find: Callable[[int], int]) -> None:
    """Each cluster's nodes (its remaining documents and the deleted ones that still link them) are one ring
    (next and prev agree), in which nothing else is; a node alone has no entry."""
    ring = {int(k): tuple(map(int, v.split())) for k, v in r.hgetall(K.uf_ring).items()}
    nodes = set(live) | {int(k) for k in r.hkeys(K.uf_gone)}
    clusters: dict[int, set[int]] = {}
    for n in nodes:
        clusters.setdefault(find(n), set()).add(n)
    for members in clusters.values():
        start = min(members)
        if len(members) == 1:
            assert start not in ring
            continue
        walked, at = [start], ring[start][0]
        while at != start:
            assert len(walked) <= len(members), "the ring is longer than its cluster"
            walked.append(at)
            at = ring[at][0]
        assert sorted(walked) == sorted(members)
        assert all(ring[ring[x][0]][1] == x for x in walked)
    assert set(ring) <= nodes


def test_random_unions_and_deletes_agree_with_a_union_find_that_keeps_every_node(
    r: redis.Redis, redis_url: str
) -> None:
    """Random unions (new documents, and older ones joining other clusters), deletes and redelivered deletes:
    every remaining document has the root it would have had with nothing removed, the counts are exact, only
    remaining documents and deleted ones that still link others have nodes, and each cluster's nodes are its
    ring; at the end, none."""
    gw = make_daemon(redis_url).gateway
    rng = random.Random(7)
    ref: dict[int, int] = {}

    def find(x: int) -> int:
        while ref.get(x, x) != x:
            x = ref[x]
        return x

    live: list[int] = []
    deleted: set[int] = set()
    pending: list[tuple[int, list[tuple[int, str]]]] = []  # unions sent together (as a batch's are)

    def flush() -> None:
        gw.union(pending)
        pending.clear()

    for step in range(1, 700):
        if rng.random() < 0.55 or len(live) < 3:
            n = step
            r.hset(K.id_forward, f"d{n}", n)
            near = live[-rng.choice([8, 8, 8, len(live)]) :]  # mostly recent documents: many clusters
            matches = rng.sample(near, min(len(near), rng.choice([0, 0, 1, 1, 2, 3])))
            live.append(n)
        elif rng.random() < 0.3:  # an older document, updated, joins another cluster
            n, m = rng.sample(live, 2)
            matches = [m]
        else:
            flush()
            oldest = rng.random() < 0.5  # retention by age: the oldest documents go first
            n = live.pop(rng.randrange(len(live) // 3 if oldest else len(live)))
            deleted.add(n)
            for _ in range(rng.choice([1, 1, 2])):  # redelivered: the second changes nothing
                gw.forget([(f"d{n}", n, f"{step}-0")])
            continue
        pending.append((n, [(m, f"d{m}") for m in matches]))
        if rng.random() < 0.5:
            flush()
        for m in matches:
            a, b = sorted((find(n), find(m)))
            if a != b:
                ref[b] = a
        if step % 10 == 0 or step > 690:
            flush()
            assert gw.roots(live) == [find(x) for x in live]
            _check_nodes(r, live, deleted)
            _check_rings(r, live, find)
    for n in live:
        gw.forget([(f"d{n}", n, "9999-0")])
    assert ids_slot(r) == {}
