"""Duplicate clusters as baskets: the documents linked by the daemon's matches, grouped by union-find.

With ``baskets = "sources"`` the daemon writes, for each document with a ``source``, a basket entry
whose ``items`` is ``[source]`` and whose ``links`` are the ids of the earlier documents it was found
to duplicate. The links join documents into duplicate clusters (connected components: a copy of a
copy is in the cluster of the original); each cluster is one basket, the set of its documents'
sources. A document that duplicates nothing is a cluster of one: a basket of one source, which
counts in the denominators. So ``conf({feed-a} -> {feed-b})`` is the share of feed-a's clusters
(stories) that feed-b joined: how often b copies a, or both copy the same third party.

Worked example: d2 (feed b) duplicates d1 (feed a), d3 (feed c) duplicates d2, d4 (feed a) duplicates
nothing: clusters {d1, d2, d3} and {d4}, baskets ``[a, b, c]`` and ``[a]``; conf(a -> b) = 1/2.

    >>> cluster_baskets({"d1": (["a"], []), "d2": (["b"], ["d1"]), "d3": (["c"], ["d2"]), "d4": (["a"], [])})
    [['a', 'b', 'c'], ['a']]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


class UnionFind:
    """Disjoint sets over hashable keys (strings here), with path halving and union by size."""

    __slots__ = ("parent", "size")

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}
        self.size: dict[str, int] = {}

    def find(self, x: str) -> str:
        """The representative of ``x``'s set (``x`` joins as a set of its own when new)."""
        parent = self.parent
        if x not in parent:
            parent[x] = x
            self.size[x] = 1
            return x
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(self, a: str, b: str) -> None:
        """Merge the sets of ``a`` and ``b``."""
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        if self.size[ra] < self.size[rb]:
            ra, rb = rb, ra
        self.parent[rb] = ra
        self.size[ra] += self.size[rb]


def cluster_baskets(docs: Mapping[str, tuple[Sequence[str], Sequence[str]]]) -> list[list[str]]:
    """One basket per duplicate cluster: the sorted distinct items of its documents.

    Args:
        docs: document id -> (its items, the ids it duplicates). A linked id that is not a key (a
            document without a source, or trimmed from the stream) still joins clusters, but adds
            no item.

    Returns:
        The clusters' baskets in the order of their first document in ``docs`` (empty ones left out).
    """
    uf = UnionFind()
    for doc, (_, links) in docs.items():
        uf.find(doc)
        for other in links:
            uf.union(doc, other)
    items: dict[str, set[str]] = {}
    for doc, (own, _) in docs.items():
        items.setdefault(uf.find(doc), set()).update(own)
    return [sorted(s) for s in items.values() if s]
