"""Which documents indexed before a lower threshold get an alert, and which unions it makes (pure: no Redis).

``dedupd rebuild --threshold T --alert-existing`` verifies each document indexed before the switch with the
earlier documents in its new buckets (ops/existing_pairs.py). Its *fresh* matches are those the old
threshold did not alert: a similarity below it, with a document the daemons have not verified again at the
new one (not changed since the switch). A fresh match matters when it changes what the user knows:

- a fresh match in another cluster than the document's (its cluster and that one merge), or
- a document that had no alert before (no match at or above the old threshold: the daemon did not alert it).

A document whose fresh matches are all in its own cluster already, and which was alerted before, gets no
alert. Otherwise its alert lists all its matches (best first: ``duplicate_of`` is its best match overall,
fresh or not), bounded as every alert (bounds.alert_matches), and it is united with the best match of each
distinct cluster. The documents are taken in integer id order (creation order, as the daemons took them):
the unions of the earlier ones apply to the later ones (a document joined to a cluster by an earlier one's
alert finds its fresh matches there).

Example: A (1), C (2), D (3); J(A, D) = 0.913, J(A, C) = 0.768, J(C, D) = 0.70. At 0.8 the daemon alerted
"D duplicate of A" (D joined A's cluster). Lowered to 0.6: C's fresh match A is in another cluster: C is
alerted and joins A's cluster; D's fresh match C is then in D's own cluster, and D was alerted before: no
second alert for D.

>>> A, C = Found("A", 0.913, 1), Found("C", 0.70, 2)
>>> owed = owed_groups([(2, [Found("A", 0.768, 1)]), (3, [A, C])], {3: 1}, {1, 2, 3}, 0.8)
>>> [(o.num, [m.doc_id for m in o.matches], o.best) for o in owed]
[(2, ['A'], [1])]
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from dedupd.similarity.matches import Found


@dataclass(frozen=True, slots=True)
class OwedGroup:
    """One document's owed alert: its matches (best first), the cluster root each had before the document
    joined it (in the same order), and the best match of each distinct one (the unions to make)."""

    num: int
    matches: list[Found]
    roots: list[int]
    best: list[int]


def owed_groups(
    docs: Sequence[tuple[int, list[Found]]],
    root_of: Mapping[int, int],
    unchanged: Collection[int],
    old_threshold: float,
) -> list[OwedGroup]:
    """The documents that get an alert (see the module docstring).

    Args:
        docs: per document, in integer id order, its integer id and its verified matches at the new threshold,
            best first.
        root_of: the cluster roots read before (an id absent from it is its own root).
        unchanged: the integer ids of the documents not changed since the switch (nor pending then): a match
            with one of the others was verified by the daemons at the new threshold.
        old_threshold: the threshold the documents were verified at before.
    """
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        x = root_of.get(x, x)
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    out: list[OwedGroup] = []
    for num, matches in docs:
        kept = [m for m in matches if m.num in unchanged]
        fresh = [m for m in kept if m.similarity < old_threshold]
        if not fresh:
            continue
        own = find(num)
        alerted_before = len(fresh) < len(
            kept
        )  # a match at or above the old threshold: the daemon alerted it
        if alerted_before and all(find(m.num) == own for m in fresh):
            continue
        roots = [find(m.num) for m in matches]
        best: dict[int, int] = {}
        for m, r in zip(matches, roots, strict=True):
            best.setdefault(r, m.num)
        top = min(own, *best)
        for r in (own, *best):
            parent[r] = top
        out.append(OwedGroup(num, matches, roots, list(best.values())))
    return out
