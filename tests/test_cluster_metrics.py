"""scripts/cluster_metrics.py (quality.py's cluster figures) against brute-force pair enumeration."""

from __future__ import annotations

from itertools import combinations

import pytest
from helpers import load_script
from hypothesis import given, settings
from hypothesis import strategies as st

cm = load_script("cluster_metrics")

Edge = tuple[int, int]


def _reachable(n: int, edges: list[Edge]) -> list[set[int]]:
    """Brute force: for each node, every node reachable from it by a depth-first walk."""
    adj: list[set[int]] = [set() for _ in range(n)]
    for u, v in edges:
        adj[u].add(v)
        adj[v].add(u)
    out = []
    for start in range(n):
        seen, todo = {start}, [start]
        while todo:
            for nxt in adj[todo.pop()] - seen:
                seen.add(nxt)
                todo.append(nxt)
        out.append(seen)
    return out


def _together(n: int, edges: list[Edge]) -> set[Edge]:
    reach = _reachable(n, edges)
    return {(i, j) for i, j in combinations(range(n), 2) if j in reach[i]}


graphs = st.integers(min_value=1, max_value=14).flatmap(
    lambda n: st.tuples(
        st.just(n),
        st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=2 * n),
        st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=2 * n),
    )
)


@settings(max_examples=300, deadline=None)
@given(graphs)
def test_components_and_comembership_match_brute_force(graph: tuple[int, list[Edge], list[Edge]]) -> None:
    n, found_edges, truth_edges = graph
    found = cm.component_labels(range(n), found_edges)
    truth = cm.component_labels(range(n), truth_edges)
    assert set(found) == set(range(n)) == set(truth)

    found_pairs, truth_pairs = _together(n, found_edges), _together(n, truth_edges)
    # same component by union-find <=> reachable by brute force
    assert {(i, j) for i, j in combinations(range(n), 2) if found[i] == found[j]} == found_pairs
    assert {(i, j) for i, j in combinations(range(n), 2) if truth[i] == truth[j]} == truth_pairs

    co = cm.comembership(found, truth)
    assert co.together_found == len(found_pairs)
    assert co.together_truth == len(truth_pairs)
    assert co.together_both == len(found_pairs & truth_pairs)
    both = len(found_pairs & truth_pairs)
    assert co.precision == (both / len(found_pairs) if found_pairs else 1.0)
    assert co.recall == (both / len(truth_pairs) if truth_pairs else 1.0)
    assert sorted(cm.component_sizes(found), reverse=True) == cm.component_sizes(found)
    assert sum(cm.component_sizes(found)) == n


@settings(max_examples=200, deadline=None)
@given(graphs, st.sets(st.integers(0, 13)))
def test_named_share_matches_brute_force(graph: tuple[int, list[Edge], list[Edge]], named: set[int]) -> None:
    n, _, truth_edges = graph
    true_pairs = [(u, v) for u, v in truth_edges if u != v]
    with_dup = [x for x in range(n) if any(x in p for p in true_pairs)]
    share = cm.named_share(true_pairs, named)
    assert share.with_true_duplicate == len(with_dup)
    assert share.named == sum(1 for x in with_dup if x in named)
    assert share.share == (share.named / len(with_dup) if with_dup else 1.0)


def test_hand_worked_example() -> None:
    # alerts: a-b, b-c, d-e  -> components {a,b,c} {d,e} {f}
    # truth:  a-b, c-d, e-f  -> components {a,b} {c,d} {e,f}
    nodes = "abcdef"
    found = cm.component_labels(nodes, [("a", "b"), ("b", "c"), ("d", "e")])
    truth = cm.component_labels(nodes, [("a", "b"), ("c", "d"), ("e", "f")])
    assert cm.component_sizes(found) == [3, 2, 1]
    assert cm.component_sizes(truth) == [2, 2, 2]
    # contingency cells: {a,b,c}x{a,b} = 2, {a,b,c}x{c,d} = 1, {d,e}x{c,d} = 1, {d,e}x{e,f} = 1, {f}x{e,f} = 1
    co = cm.comembership(found, truth)
    assert (co.together_both, co.together_found, co.together_truth) == (1, 3 + 1, 1 + 1 + 1)
    assert co.precision == pytest.approx(1 / 4)
    assert co.recall == pytest.approx(1 / 3)
    # the alerts name a..e; every document has a true duplicate; f is named by none
    share = cm.named_share([("a", "b"), ("c", "d"), ("e", "f")], set("abcde"))
    assert (share.named, share.with_true_duplicate) == (5, 6)
    assert share.share == pytest.approx(5 / 6)


def test_edge_cases() -> None:
    # nodes seen only in edges are labelled; self-loops change nothing
    labels = cm.component_labels([1], [(2, 3), (4, 4)])
    assert set(labels) == {1, 2, 3, 4} and labels[2] == labels[3] and len(set(labels.values())) == 3
    # nothing together anywhere: precision and recall are 1.0, as pair precision/recall are with no pairs
    single = cm.component_labels(range(3), [])
    co = cm.comembership(single, single)
    assert (co.together_both, co.precision, co.recall) == (0, 1.0, 1.0)
    # everything in one component on both sides
    whole = cm.component_labels(range(4), [(0, 1), (1, 2), (2, 3)])
    assert cm.comembership(whole, whole).together_both == 6
    # all found together, truth all apart: precision 0, recall 1
    co = cm.comembership(whole, cm.component_labels(range(4), []))
    assert (co.precision, co.recall) == (0.0, 1.0)
    assert cm.named_share([], {1}).share == 1.0
    with pytest.raises(ValueError):
        cm.comembership({1: 1}, {2: 2})
