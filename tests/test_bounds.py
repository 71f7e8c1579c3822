"""Bounded work per document (dedupd/bounds.py, pure): checked against brute force on generated cases."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import pick_candidates, ranked

from dedupd.similarity.bounds import (
    alert_matches,
    batch_predecessors,
    deep_rows,
    eviction_rows,
    nearest_earlier,
    pick_many,
    predecessors,
    ranked_flat,
    shared_entries,
    split_by,
)


@given(st.lists(st.integers(1, 30), max_size=200), st.integers(1, 30))
def test_ranked_counts_shared_bands_most_first_then_oldest(reads: list[int], own: int) -> None:
    ids, counts = ranked(np.array(reads, dtype=np.uint32), own)
    expected = sorted(
        ({x: reads.count(x) for x in reads if x != own}).items(), key=lambda kv: (-kv[1], kv[0])
    )
    assert list(zip(ids, counts, strict=True)) == expected


@given(
    st.lists(st.integers(0, 6), min_size=1, max_size=60, unique=False),
    st.integers(1, 20),
)
def test_pick_candidates_keeps_every_cluster_it_can(root_list: list[int], limit: int) -> None:
    ids = list(range(100, 100 + len(root_list)))  # ranked order: best first
    picked = pick_candidates(ids, root_list, limit)
    root_of = dict(zip(ids, root_list, strict=True))
    assert len(picked) == min(limit, len(ids))
    assert len(set(picked)) == len(picked)
    distinct = list(dict.fromkeys(root_list))  # clusters in order of their best-ranked candidate
    represented = {root_of[n] for n in picked}
    # every cluster when they fit, else the best-ranked ones
    assert represented >= set(distinct[: min(limit, len(distinct))])
    for root in set(distinct[: min(limit, len(distinct))]):  # each by its best-ranked candidate
        best = next(n for n in ids if root_of[n] == root)
        assert best in picked


@given(
    st.lists(st.lists(st.integers(0, 6), max_size=30), min_size=1, max_size=8),
    st.integers(1, 20),
    st.integers(1, 6),
    st.integers(0, 8),
)
def test_pick_many_picks_what_pick_candidates_picks_for_each_key(
    root_lists: list[list[int]], limit: int, per: int, clusters: int
) -> None:
    who = np.repeat(np.arange(len(root_lists)), [len(r) for r in root_lists])
    roots = np.array([x for r in root_lists for x in r], dtype=np.int64)
    at = pick_many(who, roots, limit, per, clusters).tolist()
    assert at == sorted(set(at))
    start = 0
    for k, root_list in enumerate(root_lists):
        positions = list(range(start, start + len(root_list)))  # ranked order: best first
        expected = set(pick_candidates(positions, root_list, limit, per, clusters))
        assert {p for p in at if who[p] == k} == expected
        start += len(root_list)


def test_pick_candidates_under_the_limit_takes_all_without_roots() -> None:
    assert pick_candidates([3, 1, 2], None, 3) == [3, 1, 2]


@given(
    st.lists(st.tuples(st.floats(0.5, 1.0), st.integers(0, 12)), max_size=40),
    st.integers(1, 8),
    st.integers(1, 8),
)
def test_alert_matches_bounded_best_first_with_each_cluster(
    pairs: list[tuple[float, int]], limit: int, most: int
) -> None:
    found = sorted(((f"d{i}", sim, i + 1) for i, (sim, _) in enumerate(pairs)), key=lambda m: (-m[1], m[0]))
    roots = [pairs[m[2] - 1][1] for m in found]
    named = alert_matches(found, roots, limit, most)
    clusters = list(dict.fromkeys(roots))  # best first
    assert len(named) <= limit + min(most, len(clusters))
    assert named == [m for m in found if m in named]  # best first, as found
    assert named[: min(limit, len(found))] == found[:limit]
    root_of = {m[2]: r for m, r in zip(found, roots, strict=True)}
    for root in clusters[:most]:  # the best match of each earlier cluster is named, of the best ``most``
        best = next(m for m in found if root_of[m[2]] == root)
        assert best in named
    assert len({root_of[m[2]] for m in named}) <= max(most, len({root_of[m[2]] for m in found[:limit]}))


def test_alert_size_does_not_grow_with_the_cluster_nor_with_the_clusters() -> None:
    for size in (10, 1000, 100_000):
        found = [(f"copy-{i}", 0.99 - i * 1e-7, i + 2) for i in range(size)]
        assert len(alert_matches(found, [1] * size, 10, 128)) == 10
        assert len(alert_matches(found, list(range(size)), 10, 128)) == min(size, 10 + 118)


@settings(max_examples=300)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(1, 40), st.integers(0, 2)), max_size=40),
    st.integers(0, 3),
    st.integers(0, 2),
)
def test_eviction_rows_are_the_newest_and_oldest_of_each_bucket_and_cluster(
    hits: list[tuple[int, int, int]], newest: int, anchors: int
) -> None:
    bucket, num, cluster = (np.array([h[i] for h in hits], dtype=np.int64) for i in range(3))
    rows = eviction_rows(bucket, num, cluster, newest, anchors).tolist()
    groups = [(hits[i][0], hits[i][2]) for i in rows]
    # each bucket's and cluster's rows together
    assert [g for i, g in enumerate(groups) if i == 0 or groups[i - 1] != g] == list(dict.fromkeys(groups))
    for g in set(groups) | {(b, c) for b, _, c in hits}:  # brute force: the newest and the oldest of each
        mine = sorted((n for b, n, c in hits if (b, c) == g), reverse=True)
        want = mine[:newest] + mine[max(newest, len(mine) - anchors) :]
        assert sorted((hits[i][1] for i in rows if (hits[i][0], hits[i][2]) == g), reverse=True) == want


@given(
    st.lists(st.integers(0, 6), min_size=1, max_size=60),
    st.integers(1, 20),
    st.integers(1, 5),
)
def test_pick_candidates_verifies_at_most_per_cluster_and_every_cluster_it_can(
    root_list: list[int], limit: int, per: int
) -> None:
    ids = list(range(100, 100 + len(root_list)))  # ranked order: best first
    picked = pick_candidates(ids, root_list, limit, per)
    root_of = dict(zip(ids, root_list, strict=True))
    distinct = list(dict.fromkeys(root_list))
    allowed = sum(min(per, root_list.count(r)) for r in distinct)
    assert len(picked) == min(limit, allowed) and len(set(picked)) == len(picked)
    for root in distinct:
        mine = [n for n in ids if root_of[n] == root]
        taken = [n for n in picked if root_of[n] == root]
        assert len(taken) <= per
        assert taken == sorted(taken) and set(taken) <= set(mine[: len(taken)])  # its best-ranked ones
    for root in distinct[: min(limit, len(distinct))]:  # each cluster that fits, by its best one
        assert next(n for n in ids if root_of[n] == root) in picked


@given(
    st.dictionaries(
        st.integers(-5, 50), st.tuples(st.lists(st.integers(1, 40), max_size=60), st.integers(0, 40))
    )
)
def test_ranked_flat_is_ranked_per_key(reads_raw: dict[int, tuple[list[int], int]]) -> None:
    reads = {k: (np.array(ids, dtype=np.uint32), own) for k, (ids, own) in reads_raw.items()}
    keys, who, ids = ranked_flat(reads)
    got = dict(zip(keys, split_by(who, ids.tolist(), len(keys)), strict=True))
    assert got == {k: ranked(packed, own)[0] for k, (packed, own) in reads.items()}


def _predecessors_by_hand(
    table: list[list[int]], depth: int, n_bands: int, prefix_depth: int
) -> list[tuple[int, int]]:
    """batch_predecessors, one band and hash at a time: each row with the nearest earlier rows that hold
    the same hash in the same band (columns from n_bands on are one band), depth of them (prefix_depth in
    the prefix band when it is deeper), and the first row that holds it when that one is further back."""
    holders: dict[tuple[int, int], list[int]] = {}
    for row, hashes in enumerate(table):
        for col, h in enumerate(hashes):
            if h:
                holders.setdefault((min(col, n_bands), h), []).append(row)
    pairs = []
    for (band, _), rows in holders.items():
        d = max(depth, prefix_depth) if band == n_bands else depth
        pairs += [(row, rows[k - j]) for k, row in enumerate(rows) for j in range(1, min(d, k) + 1)]
        pairs += [(row, rows[0]) for k, row in enumerate(rows) if k > d]  # the bucket's anchor
    return sorted(pairs)


def _tables(top: int) -> st.SearchStrategy[list[list[int]]]:
    """Batches of 1 to 12 rows of 5 band hashes from 0 (none) to ``top``: 3 bands and 2 prefix columns."""
    return st.integers(1, 12).flatmap(
        lambda n: st.lists(st.lists(st.integers(0, top), min_size=5, max_size=5), min_size=n, max_size=n)
    )


def _distinct_prefixes(table: list[list[int]]) -> None:
    """A document's shingle prefixes are distinct hashes: a repeated one is dropped (0)."""
    for row in table:
        if row[3] == row[4]:
            row[4] = 0


@settings(max_examples=300, deadline=None)
@given(
    _tables(4),
    st.integers(1, 4),
    st.integers(0, 6),
)
def test_batch_predecessors_equal_the_nearest_holders_by_hand(
    table: list[list[int]], depth: int, prefix_depth: int
) -> None:
    # three LSH bands and a prefix band of two columns; few hash values, so that a hash is often shared,
    # also across bands (the sort by hash alone must keep the bands apart)
    _distinct_prefixes(table)
    got = batch_predecessors(np.array(table, dtype=np.uint64), depth, 3, prefix_depth)
    assert sorted(zip(got[0].tolist(), got[1].tolist(), strict=True)) == _predecessors_by_hand(
        table, depth, 3, prefix_depth
    )


@settings(max_examples=300, deadline=None)
@given(
    _tables(4),
    st.integers(1, 6),
    st.sets(st.integers(0, 11)),
)
def test_nearest_earlier_of_some_rows_equals_the_whole_batchs_look_at_them(
    table: list[list[int]], depth: int, rows: set[int]
) -> None:
    _distinct_prefixes(table)
    entries = shared_entries(np.array(table, dtype=np.uint64), 3)
    got = nearest_earlier(entries, np.array(sorted(rows), dtype=np.int64), depth)
    expected = [p for p in _predecessors_by_hand(table, depth, 3, depth) if p[0] in rows]
    assert sorted(zip(got[0].tolist(), got[1].tolist(), strict=True)) == expected


@settings(max_examples=300, deadline=None)
@given(
    _tables(4),
    st.dictionaries(st.integers(-2, 13), st.integers(1, 6)),
)
def test_nearest_earlier_with_a_depth_per_row_is_each_rows_own_look(
    table: list[list[int]], depth: dict[int, int]
) -> None:
    entries = shared_entries(np.array(table, dtype=np.uint64), 3)
    rows = sorted(depth)  # (a row outside the table finds nothing)
    got = nearest_earlier(
        entries, np.array(rows, dtype=np.int64), np.array([depth[r] for r in rows], dtype=np.int64)
    )
    expected = []
    for r in rows:  # one look per row, as deep as its own depth
        one = nearest_earlier(entries, np.array([r], dtype=np.int64), depth[r])
        expected += list(zip(one[0].tolist(), one[1].tolist(), strict=True))
    assert sorted(zip(got[0].tolist(), got[1].tolist(), strict=True)) == sorted(expected)


@settings(max_examples=300, deadline=None)
@given(
    _tables(3),
    st.integers(1, 3),
    st.integers(0, 5),
    st.integers(0, 4),
)
def test_a_row_not_deep_finds_nothing_more_looking_deeper(
    table: list[list[int]], depth: int, prefix_depth: int, more: int
) -> None:
    _distinct_prefixes(table)
    entries = shared_entries(np.array(table, dtype=np.uint64), 3)
    given = predecessors(entries, depth, 3, prefix_depth)
    seen = set(zip(given[0].tolist(), given[1].tolist(), strict=True))
    deep = deep_rows(entries, depth, 3, prefix_depth)
    deeper = max(depth, prefix_depth) + more
    for r in range(len(table)):
        looked = nearest_earlier(entries, np.array([r], dtype=np.int64), deeper)
        found = set(zip(looked[0].tolist(), looked[1].tolist(), strict=True))
        if not deep[r]:
            assert found <= seen
    assert not deep.any() or len(table) > depth + 2  # (a bucket deeper than the look needs the rows)
