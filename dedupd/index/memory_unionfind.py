"""The union-find's scripts (unionfind.py: FIND_ROOTS, UNION_ROOTS, REPRESENTATIVES, FORGET_IDS, CLUSTER_PAGE)
in Python on a :class:`~dedupd.index.memory_store.MemoryStore`, for the in-memory twin (memory.py).

:class:`UnionFind` changes the parents, children counts and rings as one script call does (_uf_writes.lua,
_uf_ring.lua), :class:`Representatives` a cluster's representatives (_uf_reps.lua); each function does
what one call of its script does, in the script's order. Redis's union-find keeps a view of its parent
hash in the call for speed: left out, it never changes what a call answers.
"""

from __future__ import annotations

from collections.abc import Sequence

from dedupd.index.memory_store import MemoryStore, stream_id
from dedupd.index.protocol import ClusterReps

__all__ = [
    "Representatives",
    "UnionFind",
    "cluster_page",
    "find_roots",
    "forget_ids",
    "representatives",
    "union_roots",
    "walk",
]


def find_roots(store: MemoryStore, nums: Sequence[int]) -> list[int]:
    """unionfind.FIND_ROOTS: the root of each (read only)."""
    return [walk(store.parent, n)[0] for n in nums]


def walk(parent: dict[int, int], x: int) -> tuple[int, list[int]]:
    root, path = x, []
    for _ in range(100000):
        p = parent.get(root, root)
        if p == root:
            break
        path.append(root)
        root = p
    return root, path


class UnionFind:
    """unionfind._WRITES: the union-find as one script call changes it (children counted as it goes)."""

    def __init__(self, store: MemoryStore) -> None:
        self.s = store
        self.added: dict[int, int] = {}  # children counted by this call, not yet in store.children
        self.ring: dict[int, list[int]] = {}  # ring links this call read or changed, not yet in store.ring

    def up(self, x: int) -> int:
        return self.s.parent.get(x, x)

    def counted(self, x: int) -> bool:
        return x > self.s.floor

    def has_children(self, n: int) -> bool:
        return n in self.added or n in self.s.children

    def flush_children(self) -> None:
        for p, d in self.added.items():
            self.s.children[p] = self.s.children.get(p, 0) + d
        self.added = {}

    def lost_child(self, p: int) -> None:
        """p lost a child: a deleted document's node left without children goes, its parent loses one, ..."""
        s = self.s
        while self.counted(p):
            left = s.children.get(p, 0) + self.added.pop(p, 0) - 1
            if left > 0:
                s.children[p] = left
                return
            s.children.pop(p, None)
            if s.gone.pop(p, None) is None:  # a live document's node: it stays
                return
            q = self.up(p)
            self.ring_leave(p)
            if q == p:
                return
            del s.parent[p]
            p = q

    def set_parent(self, x: int, p: int) -> None:
        old = self.up(x)
        if old == p:
            return
        self.s.parent[x] = p
        if self.counted(p):
            self.added[p] = self.added.get(p, 0) + 1
        if old != x:
            self.lost_child(old)

    def find(self, x: int) -> int:
        root, path = walk(self.s.parent, x)
        for node in reversed(path[:-1]):
            self.set_parent(node, root)
        return root

    def forget_node(self, n: int, name: str | None = None) -> None:
        """A deleted (or, with its ``name``, expired) document's node; a root that stays keeps the name."""
        if not self.counted(n):
            return
        if self.has_children(n):
            self.s.gone[n] = f"={name}" if name is not None and self.up(n) == n else "1"
            return
        p = self.up(n)
        self.ring_leave(n)
        if p == n:
            return
        del self.s.parent[n]
        self.lost_child(p)

    def links(self, x: int) -> list[int]:
        """x's next and previous node in its ring ([x, x] when it is alone), as this call has them."""
        if x not in self.ring:
            self.ring[x] = list(self.s.ring.get(x, (x, x)))
        return self.ring[x]

    def ring_join(self, a: int, b: int) -> None:
        """Join the rings of a and b (_uf_ring.lua's ring_join)."""
        an, bn = self.links(a)[0], self.links(b)[0]
        self.links(a)[0], self.links(bn)[1], self.links(b)[0], self.links(an)[1] = bn, a, an, b

    def ring_leave(self, x: int) -> None:
        """Take x out of its ring."""
        n, p = self.links(x)
        if n != x:
            self.links(p)[0], self.links(n)[1], self.links(x)[:] = n, p, [x, x]

    def flush_ring(self) -> None:
        for x, (n, p) in self.ring.items():
            if n == x:
                self.s.ring.pop(x, None)
            else:
                self.s.ring[x] = (n, p)
        self.ring = {}

    def vanished(self, m: int, doc_id: str) -> bool:
        """A match deleted meanwhile, its node gone or never there: it joins nothing."""
        s = self.s
        return self.up(m) == m and self.counted(m) and s.ids.get(doc_id) != m and not self.has_children(m)


class Representatives:
    """_uf_reps.lua: the clusters' representatives as one script call changes them (written at its end)."""

    def __init__(self, store: MemoryStore, cap: int) -> None:
        self.s = store
        self.cap = cap
        self.view: dict[int, list[list[int]]] = {}

    def of(self, r: int) -> list[list[int]]:
        if r not in self.view:
            self.view[r] = [list(e) for e in self.s.reps.get(r, [])]
        return self.view[r]

    @staticmethod
    def rise(lst: list[list[int]], i: int) -> None:
        while i > 0 and lst[i - 1][1] < lst[i][1]:
            lst[i - 1], lst[i] = lst[i], lst[i - 1]
            i -= 1

    def count(self, r: int, m: int) -> None:
        if self.cap < 1:
            return
        lst = self.of(r)
        for i, e in enumerate(lst):
            if e[0] == m:
                e[1] += 1
                self.rise(lst, i)
                return
        del lst[self.cap :]
        if len(lst) < self.cap:
            lst.append([m, 1])
        else:
            lst[-1] = [m, lst[-1][1] + 1]
        self.rise(lst, len(lst) - 1)

    def merge(self, a: int, b: int) -> None:
        lb = self.of(b)
        if not lb:
            return
        la = self.of(a)
        for e in lb:
            la.append(e)
            self.rise(la, len(la) - 1)
        del la[self.cap :]
        self.view[b] = []

    def drop(self, r: int, m: int) -> None:
        lst = self.of(r)
        for i, e in enumerate(lst):
            if e[0] == m:
                del lst[i]
                return

    def flush(self) -> None:
        for r, lst in self.view.items():
            if lst:
                self.s.reps[r] = lst
            else:
                self.s.reps.pop(r, None)
        self.view = {}


def union_roots(
    store: MemoryStore, cap: int, groups: Sequence[tuple[int, Sequence[tuple[int, str]]]]
) -> list[int]:
    """unionfind.UNION_ROOTS: per group the root after it, the root each match had before, the root n had;
    each match counted in the representatives of n's cluster after it (not one deleted)."""
    uf = UnionFind(store)
    reps = Representatives(store, cap)
    out: list[int] = []
    for n, matches in groups:
        was = uf.find(n)
        roots: list[int] = []
        done: set[int] = set()
        lost: set[int] = set()
        for j, (m, doc_id) in enumerate(matches):
            if uf.vanished(m, doc_id):
                roots.append(m)
                done.add(m)
                lost.add(j)
            else:
                roots.append(uf.find(m))
        for r in roots:
            if r not in done:
                done.add(r)
                a, b = uf.find(n), uf.find(r)
                if a != b:
                    uf.set_parent(max(a, b), min(a, b))
                    uf.ring_join(min(a, b), max(a, b))
                    reps.merge(min(a, b), max(a, b))
        root = uf.find(n)
        for j, (m, _) in enumerate(matches):
            if j not in lost and m not in store.gone:
                reps.count(root, m)
        out += [root, *roots, was]
    uf.flush_children()
    uf.flush_ring()
    reps.flush()
    return out


def representatives(store: MemoryStore, nums: Sequence[int], ring: int = 0) -> list[ClusterReps]:
    """unionfind.REPRESENTATIVES (read only), as unionfind.representatives_replies gives it: per id, its root
    now, the root's representatives, whether it has a ring, and the first ``ring`` nodes of its ring after
    the root along the next links."""
    out: list[ClusterReps] = []
    for n in nums:
        root = walk(store.parent, n)[0]
        met: list[int] = []
        at, whole = root, False
        while at in store.ring:
            at = store.ring[at][0]
            if at == root:
                whole = True
                break
            if len(met) == ring:
                break
            met.append(at)
        reps = [m for m, _ in store.reps.get(root, [])]
        out.append(ClusterReps(root, reps, root in store.ring, met, whole))
    return out


def forget_ids(store: MemoryStore, deleted: Sequence[tuple[str, int, str]], now: int, ttl_ms: int) -> int:
    """unionfind.FORGET_IDS: forget each (doc id, n, delete's entry id), its node, leave its tombstone;
    expired tombstones go (at most 256). Returns how many expired."""
    uf = UnionFind(store)
    reps = Representatives(store, 0)
    for doc_id, n, entry in deleted:
        if n != 0 and store.ids.get(doc_id) == n:
            del store.ids[doc_id]
            store.touched.pop(n, None)
            reps.drop(walk(store.parent, n)[0], n)
            uf.forget_node(n)
        tomb = store.tombstones.get(doc_id)
        if tomb is None or stream_id(entry) > stream_id(tomb):
            store.tombstones[doc_id] = f"{entry} {n}"
            store.tombstone_expiry[doc_id] = now + ttl_ms
    old = sorted((t, d) for d, t in store.tombstone_expiry.items() if t <= now)[:256]
    for _, doc_id in old:
        store.tombstones.pop(doc_id, None)
        del store.tombstone_expiry[doc_id]
    uf.flush_children()
    uf.flush_ring()
    reps.flush()
    return len(old)


def cluster_page(store: MemoryStore, doc_id: str, at: str, limit: int, steps: int) -> list[int]:
    """unionfind.CLUSTER_PAGE: [state, root, whole, next, members...] of one page (read only)."""
    start = store.ids.get(doc_id)
    if start is None:
        return [0, 0, 0, 0]
    root = walk(store.parent, start)[0]
    out = [1, root, int(root > store.ring_floor), 0]
    first = not at
    if first:
        node = start
    else:
        node = int(at)
        if node == start or start not in store.ring or node not in store.ring:
            out[0] = 2
            return out
        if walk(store.parent, node)[0] != root:
            out[0] = 2
            return out
    walked: list[int] = []
    for _ in range(steps):
        walked.append(node)
        if node not in store.gone:
            out.append(node)
        node = store.ring.get(node, (node, node))[0]
        if node == start:
            if first and not out[2] and _holds_all(store, root, walked):
                out[2] = 1
            return out
        if len(out) - 4 >= limit:
            break
    out[3] = node
    return out


def _holds_all(store: MemoryStore, root: int, nodes: list[int]) -> bool:
    """cluster_page.lua's holds_all: whether the whole ring walked (``nodes``) holds every member of the
    cluster of ``root``: it is the root's ring, and each of its nodes older than the rings is counted and has
    as many children as point at it from the ring."""
    if root not in nodes:
        return False
    kids: dict[int, int] = {}
    for x in nodes:
        p = store.parent.get(x, x)
        if p != x:
            kids[p] = kids.get(p, 0) + 1
    return all(
        x > store.floor and store.children.get(x, 0) == kids.get(x, 0) for x in nodes if x <= store.ring_floor
    )
