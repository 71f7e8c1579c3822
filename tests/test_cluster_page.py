"""The members of a cluster, a page at a time (index/cluster_page.py, unionfind.CLUSTER_PAGE, Client.cluster),
against a real redis-server and an in-process daemon: every member once from any member's id, whatever the
page size; deletes, merges and the cursor of a page whose member was deleted; an index made before the rings,
and which of its clusters a page can show whole (the script and its in-memory twin on hand-made union-finds)."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import pytest
import redis
from helpers import drain, make_daemon, push, text, variant

from dedupd.client import Client
from dedupd.daemon.loop import Daemon
from dedupd.errors import ConfigError
from dedupd.index import memory_scripts, unionfind
from dedupd.index.cluster_page import ClusterPage, CursorError, NotIndexedError
from dedupd.index.keys import Keys

K = Keys()


def copies(rng: random.Random, name: str, n: int) -> list[dict[str, str]]:
    """A text and ``n - 1`` near-copies of it (one word changed each): ids name0 .. name<n-1>."""
    base = text(rng, 60)
    return [{"id": f"{name}{i}", "text": base if i == 0 else variant(rng, base, 1)} for i in range(n)]


def pages(client: Client, doc_id: str, limit: int) -> list[ClusterPage]:
    """Every page of ``doc_id``'s cluster, following the cursors."""
    out = [client.cluster(doc_id, limit=limit)]
    while out[-1].next is not None:
        assert len(out) < 1000, "the pages never end"
        out.append(client.cluster(doc_id, limit=limit, cursor=out[-1].next))
    return out


def members(client: Client, doc_id: str, limit: int = 100) -> list[str]:
    return [m for page in pages(client, doc_id, limit) for m in page.members]


@pytest.fixture
def client(redis_url: str) -> Iterator[Client]:
    with Client.connect(redis_url) as c:
        yield c


@pytest.fixture
def daemon(redis_url: str) -> Daemon:
    return make_daemon(redis_url, batch_size=8)


def test_a_cluster_of_five_is_listed_whole_from_any_member(
    r: redis.Redis, daemon: Daemon, client: Client
) -> None:
    rng = random.Random(1)
    a, b = copies(rng, "a", 5), copies(rng, "b", 3)
    push(r, a + b)
    drain(daemon)
    for doc in a:
        page = client.cluster(doc["id"])
        assert page.members[0] == doc["id"] and sorted(page.members) == [d["id"] for d in a]
        assert (page.cluster, page.next, page.complete) == ("a0", None, True)
    assert sorted(client.cluster("b2").members) == ["b0", "b1", "b2"]


def test_pages_of_two_list_every_member_once(r: redis.Redis, daemon: Daemon, client: Client) -> None:
    rng = random.Random(2)
    a = copies(rng, "a", 5)
    push(r, a)
    drain(daemon)
    for doc in a:
        got = pages(client, doc["id"], 2)
        assert [len(p.members) for p in got] == [2, 2, 1] and all(p.cluster == "a0" for p in got)
        listed = [m for p in got for m in p.members]
        assert sorted(listed) == [d["id"] for d in a] and listed[0] == doc["id"]


def test_a_cluster_larger_than_the_page(r: redis.Redis, daemon: Daemon, client: Client) -> None:
    """40 copies in pages of 7: the first page stops at 7 with a cursor; all pages list each copy once."""
    rng = random.Random(3)
    a = copies(rng, "a", 40)
    push(r, a)
    drain(daemon)
    first = client.cluster("a17", limit=7)
    assert len(first.members) == 7 and first.next is not None
    got = pages(client, "a17", 7)
    assert [len(p.members) for p in got] == [7] * 5 + [5]
    assert sorted(m for p in got for m in p.members) == sorted(d["id"] for d in a)
    assert r.hlen(K.uf_ring) == 40  # one ring entry per member


def test_a_document_alone_is_a_cluster_of_one(r: redis.Redis, daemon: Daemon, client: Client) -> None:
    push(r, [{"id": "solo", "text": text(random.Random(4), 60)}])
    drain(daemon)
    assert client.cluster("solo") == ClusterPage("solo", "solo", ("solo",), None, True)
    assert r.hlen(K.uf_ring) == 0  # a node alone has no ring entry


def test_before_any_index_nothing_is_in_it(client: Client) -> None:
    with pytest.raises(NotIndexedError, match="no index under the prefix 'dedupd' yet"):
        client.cluster("a0")


def test_unknown_ids_and_bad_cursors(r: redis.Redis, daemon: Daemon, client: Client) -> None:
    push(r, copies(random.Random(5), "a", 3))
    drain(daemon)
    with pytest.raises(NotIndexedError, match=r"^'nope' is not in the index \(never pushed, deleted"):
        client.cluster("nope")
    with pytest.raises(ConfigError, match="cursor 'x1' is not one a page gave"):
        client.cluster("a0", cursor="x1")
    with pytest.raises(ConfigError, match="1 to 1,000 members, not 0"):
        client.cluster("a0", limit=0)


def test_deleted_members_are_no_longer_listed(r: redis.Redis, daemon: Daemon, client: Client) -> None:
    """Deleting a member and the cluster's first document: the others are listed, under the name '#n' (as
    alerts name it); a deleted id is not in the index; once all are deleted, no ring entry is left."""
    rng = random.Random(6)
    a = copies(rng, "a", 5)
    push(r, a)
    drain(daemon)
    first = int(r.hget(K.id_forward, "a0") or 0)
    push(r, [{"id": "a2", "op": "delete"}, {"id": "a0", "op": "delete"}])
    drain(daemon)
    for doc_id in ("a1", "a3", "a4"):
        got = pages(client, doc_id, 2)
        assert sorted(m for p in got for m in p.members) == ["a1", "a3", "a4"]
        assert {p.cluster for p in got} == {f"#{first}"}
    with pytest.raises(NotIndexedError):
        client.cluster("a2")
    push(r, [{"id": i, "op": "delete"} for i in ("a1", "a3", "a4")])
    drain(daemon)
    assert r.hlen(K.uf_ring) == 0


def test_a_cursor_whose_member_was_deleted_says_to_list_again(
    r: redis.Redis, daemon: Daemon, client: Client
) -> None:
    rng = random.Random(7)
    push(r, copies(rng, "a", 5))
    drain(daemon)
    page = client.cluster("a0", limit=2)
    assert page.next is not None
    at = [k.decode() for k, v in r.hgetall(K.id_forward).items() if v.decode() == page.next]
    push(r, [{"id": at[0], "op": "delete"}])
    drain(daemon)
    with pytest.raises(
        CursorError, match=r"changed since the page before.*list it again from the first page"
    ):
        client.cluster("a0", limit=2, cursor=page.next)
    assert len(members(client, "a0", 2)) == 4


def test_merged_clusters_are_listed_as_one(r: redis.Redis, daemon: Daemon, client: Client) -> None:
    """b0 (the first of cluster b) is updated to a copy of a's text: the two clusters are one, named a0."""
    rng = random.Random(8)
    a, b = copies(rng, "a", 4), copies(rng, "b", 4)
    push(r, a)
    push(r, b)
    drain(daemon)
    push(r, [{"id": "b0", "text": variant(rng, a[0]["text"], 1)}])
    drain(daemon)
    everyone = sorted(d["id"] for d in a + b)
    for doc_id in ("a2", "b0", "b3"):
        got = pages(client, doc_id, 3)
        assert sorted(m for p in got for m in p.members) == everyone and {p.cluster for p in got} == {"a0"}


def test_a_cluster_older_than_the_rings_says_it_may_be_incomplete(
    r: redis.Redis, redis_url: str, client: Client
) -> None:
    """An index made before the rings were kept (no ring, no ring floor): its clusters are listed as far as
    their rings go and say they may be incomplete; a cluster made after the first daemon that keeps rings
    opened the index is complete."""
    rng = random.Random(9)
    push(r, copies(rng, "a", 3))
    drain(make_daemon(redis_url))
    r.delete(K.uf_ring, K.uf_ring_floor)  # as an earlier version left it
    page = client.cluster("a1")
    assert (page.members, page.complete) == (("a1",), False)
    daemon = make_daemon(redis_url)  # opens the index: the ids given out so far are older than the rings
    assert int(r.get(K.uf_ring_floor) or 0) == 3
    more = copies(rng, "b", 2)
    push(r, [{"id": "a3", "text": variant(rng, r.xrange(K.docs, count=1)[0][1][b"text"].decode(), 1)}, *more])
    drain(daemon)
    page = client.cluster("a3")
    assert sorted(page.members) == ["a0", "a3"] and not page.complete and page.cluster == "a0"
    assert client.cluster("b1").complete


def test_a_document_alone_older_than_the_rings_is_a_whole_cluster(
    r: redis.Redis, redis_url: str, client: Client
) -> None:
    """A document indexed before the rings were kept (its children counted: no count, no child) is a
    cluster of one, complete; so is an older document joined after the rings by a new copy of it."""
    rng = random.Random(10)
    solo, old = {"id": "solo", "text": text(rng, 60)}, copies(rng, "a", 1)[0]
    push(r, [solo, old])
    drain(make_daemon(redis_url))
    r.set(K.uf_ring_floor, 1000)  # as when the first daemon that keeps rings opened an index of 1,000 ids
    assert client.cluster("solo") == ClusterPage("solo", "solo", ("solo",), None, True)
    r.delete(K.uf_ring_floor)  # the next daemon to open the index sets it: the two documents are older
    daemon = make_daemon(redis_url)
    push(r, [{"id": "a1", "text": variant(rng, old["text"], 1)}])
    drain(daemon)
    assert int(r.get(K.uf_ring_floor) or 0) == 2
    page = client.cluster("a1")
    assert sorted(page.members) == ["a0", "a1"] and page.complete and page.cluster == "a0"
    assert client.cluster("solo").complete


@dataclass
class Shape:
    """A union-find as the scripts leave it, written by hand: documents d<n> have integer id n."""

    ring_floor: int
    parent: dict[int, int] = field(default_factory=dict)
    children: dict[int, int] = field(default_factory=dict)
    cycles: list[list[int]] = field(default_factory=list)  # the rings, each in its order
    gone: set[int] = field(default_factory=set)  # deleted documents' nodes that stay (no id maps to them)
    floor: int = 0  # the children counts' floor

    def ring(self) -> dict[int, tuple[int, int]]:
        return {x: (c[(i + 1) % len(c)], c[i - 1]) for c in self.cycles for i, x in enumerate(c)}

    def store(self) -> memory_scripts.MemoryStore:
        s = memory_scripts.MemoryStore(parent=dict(self.parent), children=dict(self.children))
        s.ids = {f"d{n}": n for n in range(1, 10) if n not in self.gone}
        s.seq, s.gone, s.floor, s.ring, s.ring_floor = (
            9,
            set(self.gone),
            self.floor,
            self.ring(),
            self.ring_floor,
        )
        return s

    def write(self, r: redis.Redis) -> None:
        pipe = r.pipeline()
        pipe.hset(K.id_forward, mapping={f"d{n}": n for n in range(1, 10) if n not in self.gone})
        pipe.set(K.id_seq, 9).set(K.uf_floor, self.floor).set(K.uf_ring_floor, self.ring_floor)
        for key, values in ((K.uf_parent, self.parent), (K.uf_children, self.children)):
            if values:
                pipe.hset(key, mapping=values)  # type: ignore[arg-type]
        if self.gone:
            pipe.hset(K.uf_gone, mapping=dict.fromkeys(self.gone, 1))  # type: ignore[arg-type]
        if self.cycles:
            pipe.hset(K.uf_ring, mapping={x: f"{n} {p}" for x, (n, p) in self.ring().items()})
        pipe.execute()


# (a union-find, the document asked about, the page's limit, its cursor, the script's reply)
WHOLE_OR_NOT: dict[str, tuple[Shape, str, int, str, Sequence[int]]] = {
    "alone, counted": (Shape(1000), "d1", 10, "", [1, 1, 1, 0, 1]),
    "alone, older than the counts": (Shape(1000, floor=1000), "d1", 10, "", [1, 1, 0, 0, 1]),
    # 2 -> 1 before the rings, no union since: 2 is in no ring
    "a cluster no union touched since": (Shape(1000, {2: 1}, {1: 1}), "d1", 10, "", [1, 1, 0, 0, 1]),
    "... asked from its member": (Shape(1000, {2: 1}, {1: 1}), "d2", 10, "", [1, 1, 0, 0, 2]),
    # 4 (new) joined 1 (old, alone before)
    "an old document and a new one": (Shape(3, {4: 1}, {1: 1}, [[1, 4]]), "d4", 10, "", [1, 1, 1, 0, 4, 1]),
    "... over two pages": (Shape(3, {4: 1}, {1: 1}, [[1, 4]]), "d1", 1, "", [1, 1, 0, 4, 1]),
    "... the second page": (Shape(3, {4: 1}, {1: 1}, [[1, 4]]), "d1", 1, "4", [1, 1, 0, 0, 4]),
    "an old cluster and a new one": (
        Shape(3, {2: 1, 4: 1}, {1: 2}, [[1, 4]]),
        "d4",
        10,
        "",
        [1, 1, 0, 0, 4, 1],
    ),
    # 1 (alone) and 2 (with 3 before the rings) joined by 5 (new): as many children of 1 as ring nodes
    # besides it, but 3 is missing, under 2
    "two old clusters, one a pair": (
        Shape(4, {3: 2, 2: 1, 5: 1}, {1: 2, 2: 1}, [[1, 5, 2]]),
        "d5",
        10,
        "",
        [1, 1, 0, 0, 5, 2, 1],
    ),
    # 1 and 2 (alone before the rings) joined; 5 (new) joined 2 first; d2 deleted: its node stays
    "two old documents, one deleted": (
        Shape(4, {5: 2, 2: 1}, {1: 1, 2: 1}, [[1, 2, 5]], gone={2}),
        "d1",
        10,
        "",
        [1, 1, 1, 0, 1, 5],
    ),
    "a root newer than the rings": (Shape(3, {5: 4}, {4: 1}, [[4, 5]]), "d5", 10, "", [1, 4, 1, 0, 5, 4]),
}


@pytest.mark.parametrize("name", list(WHOLE_OR_NOT))
def test_a_page_is_whole_only_when_it_shows_every_member(r: redis.Redis, name: str) -> None:
    """A cluster whose root is older than the rings is whole when one page walks its ring and each older node
    in it has as many children (counted) as point at it from the ring; the script and its twin agree."""
    shape, doc_id, limit, at, want = WHOLE_OR_NOT[name]
    shape.write(r)
    keys = [K.uf_parent, K.uf_children, K.uf_gone, K.uf_floor, K.uf_ring, K.uf_ring_floor, K.id_seq]
    script = r.register_script(unionfind.CLUSTER_PAGE)
    got = script(keys=[*keys, K.id_forward], args=[doc_id, at, limit, 4 * limit + 64])
    assert got == list(want)
    assert memory_scripts.cluster_page(shape.store(), doc_id, at, limit, 4 * limit + 64) == list(want)
