"""ops/owed_groups.py: which documents indexed before a lower threshold get an alert, and their unions (pure)."""

from __future__ import annotations

from dedupd.ops.owed_groups import owed_groups
from dedupd.similarity.matches import Found

OLD = 0.8


def test_a_document_never_alerted_gets_one_even_within_its_own_cluster() -> None:
    """B (2) is in A's cluster through a later document that matched both; its only match, A at 0.7, is fresh:
    it was never alerted, so it is now (the user was never told B duplicates A)."""
    got = owed_groups([(2, [Found("A", 0.7, 1)])], {2: 1, 3: 1}, {1, 2, 3}, OLD)
    assert [(g.num, g.roots, g.best) for g in got] == [(2, [1], [1])]


def test_a_document_alerted_before_gets_none_when_its_fresh_matches_are_in_its_cluster() -> None:
    got = owed_groups([(3, [Found("A", 0.9, 1), Found("B", 0.7, 2)])], {2: 1, 3: 1}, {1, 2, 3}, OLD)
    assert got == []


def test_a_merge_lists_every_match_best_first_and_unites_one_per_cluster() -> None:
    """E (6) was alerted with P (4) and V (5); its fresh match X (3) is alone: E's alert lists all three, its
    unions take the best of each cluster (P for P's, X for X's)."""
    matches = [Found("P", 0.9, 4), Found("V", 0.85, 5), Found("X", 0.65, 3)]
    got = owed_groups([(6, matches)], {5: 4, 6: 4}, {3, 4, 5, 6}, OLD)
    assert [(g.num, [m.doc_id for m in g.matches], g.roots, g.best) for g in got] == [
        (6, ["P", "V", "X"], [4, 4, 3], [4, 3])
    ]


def test_a_match_changed_since_the_switch_is_left_to_the_daemons() -> None:
    """X changed after the switch: the daemons verified it at the new threshold; it neither makes an alert
    nor counts as an earlier one; B's cluster does, and the alert lists every match, X too."""
    assert owed_groups([(3, [Found("X", 0.7, 2)])], {}, {1, 3}, OLD) == []
    got = owed_groups(
        [(5, [Found("A", 0.9, 1), Found("X", 0.7, 2), Found("B", 0.65, 4)])], {5: 1}, {1, 4, 5}, OLD
    )
    assert [[m.doc_id for m in g.matches] for g in got] == [["A", "X", "B"]]


def test_the_unions_of_earlier_documents_apply_to_later_ones() -> None:
    """C (2) joins A's cluster by its own alert; D (3), alerted before with A, then finds C in its cluster."""
    docs = [(2, [Found("A", 0.77, 1)]), (3, [Found("A", 0.91, 1), Found("C", 0.7, 2)])]
    assert [g.num for g in owed_groups(docs, {3: 1}, {1, 2, 3}, OLD)] == [2]
    assert [g.num for g in owed_groups(docs[1:], {3: 1}, {1, 2, 3}, OLD)] == [3]  # (alone: C elsewhere)
