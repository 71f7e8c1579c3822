"""Cluster-level quality of duplicate alerts: pure functions, no Redis (used by ``scripts/quality.py``).

Pair precision and recall judge each reported pair. A user of the alerts also sees clusters: the
connected components of the alert graph (each alert's ``id`` joined to every id in its ``matches``).
These functions compare those components with the components of the exact-truth graph (every pair
at or above the threshold by exact Jaccard):

- :func:`component_labels` -- the components of a graph by union-find, every node labelled
  (singletons included);
- :func:`comembership` -- co-membership precision and recall from the contingency table of two
  labellings of the same nodes: with ``n_ij`` the documents in found component ``i`` and true
  component ``j``, ``a_i`` and ``b_j`` the component sizes, the pairs together in both are
  ``sum C(n_ij, 2)``, together in the found components ``sum C(a_i, 2)``, together in the true ones
  ``sum C(b_j, 2)``; precision = both / found, recall = both / true (1.0 when the denominator is 0);
- :func:`named_share` -- of the documents with at least one true duplicate, the share that some
  alert names (as its ``id`` or in its ``matches``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import TypeVar

N = TypeVar("N", bound=Hashable)


def component_labels(nodes: Iterable[N], edges: Iterable[tuple[N, N]]) -> dict[N, N]:
    """Each node's component, named by one of its members (union-find with path halving and union by
    size). Nodes only seen in ``edges`` are included."""
    parent: dict[N, N] = {}
    size: dict[N, int] = {}

    def find(x: N) -> N:
        if x not in parent:
            parent[x], size[x] = x, 1
            return x
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for node in nodes:
        find(node)
    for u, v in edges:
        ru, rv = find(u), find(v)
        if ru == rv:
            continue
        if size[ru] < size[rv]:
            ru, rv = rv, ru
        parent[rv] = ru
        size[ru] += size[rv]
    return {x: find(x) for x in parent}


def pairs_of(n: int) -> int:
    """C(n, 2)."""
    return n * (n - 1) // 2


@dataclass(frozen=True)
class CoMembership:
    """Pairs of documents in the same component, in the found and the true components."""

    together_both: int
    together_found: int
    together_truth: int

    @property
    def precision(self) -> float:
        return self.together_both / self.together_found if self.together_found else 1.0

    @property
    def recall(self) -> float:
        return self.together_both / self.together_truth if self.together_truth else 1.0


def comembership(found: dict[N, Hashable], truth: dict[N, Hashable]) -> CoMembership:
    """Co-membership counts of two labellings of the same nodes, from their contingency table.

    Raises:
        ValueError: when the two labellings do not cover the same nodes.
    """
    if found.keys() != truth.keys():
        raise ValueError("the two labellings must cover the same nodes")
    cells = Counter((found[x], truth[x]) for x in found)
    return CoMembership(
        together_both=sum(pairs_of(c) for c in cells.values()),
        together_found=sum(pairs_of(c) for c in Counter(found.values()).values()),
        together_truth=sum(pairs_of(c) for c in Counter(truth.values()).values()),
    )


def component_sizes(labels: dict[N, Hashable]) -> list[int]:
    """The components' sizes, largest first."""
    return sorted(Counter(labels.values()).values(), reverse=True)


@dataclass(frozen=True)
class NamedShare:
    """Documents with at least one true duplicate, and how many of them some alert names."""

    with_true_duplicate: int
    named: int

    @property
    def share(self) -> float:
        return self.named / self.with_true_duplicate if self.with_true_duplicate else 1.0


def named_share(true_pairs: Iterable[tuple[N, N]], named: set[N]) -> NamedShare:
    """Of the documents in some true pair, how many are in ``named`` (an alert's id or one of its matches)."""
    dups = {x for pair in true_pairs for x in pair}
    return NamedShare(len(dups), len(dups & named))
