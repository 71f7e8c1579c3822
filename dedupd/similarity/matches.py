"""Verified matches: what a verification found of one candidate (:class:`Found`), what an alert or a verdict
shows of it (:class:`Match`), and the order they are listed in.

>>> found = [Found("b", 0.8, 2), Found("a", 0.9, 1), Found("c", 0.8, 3), Found("d", 0.5, 4)]
>>> [m.doc_id for m in matches_of(found, 0.8)]
['a', 'b', 'c']
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple


class Found(NamedTuple):
    """A verified match: the earlier document's id, its similarity, and its integer id in the index."""

    doc_id: str
    similarity: float
    num: int


@dataclass(frozen=True, slots=True)
class Match:
    """An indexed document that is a near-duplicate of the text."""

    id: str
    similarity: float


def best_first(match: Found) -> tuple[float, str]:
    """The order of verified matches: best first, ties by id."""
    return -match[1], match[0]


def matches_of(candidates: Iterable[Found], threshold: float) -> list[Found]:
    """Verified matches at or above the threshold, best first (ties by id)."""
    return sorted((m for m in candidates if m[1] >= threshold), key=best_first)
