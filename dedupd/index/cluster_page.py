"""A page of the members of a document's cluster (``dedupd cluster``, ``Client.cluster``).

The members are read from the ring of the cluster's union-find nodes (unionfind.py) by
``unionfind.CLUSTER_PAGE``, a page at a time: the script walks the ring from the document asked about (which
is listed first) and stops after ``limit`` members; the page's :attr:`ClusterPage.next` says where the next
page begins, and is None once the walk is back at the document. Each page costs one script call in the
``{<prefix>:ids}`` slot and one read of its members' records (their ids, and the root's for the cluster's
name, as an alert names it), whatever the size of the cluster.

While the daemons change the index, a member that is in the cluster from the first page to the last is listed
exactly once. One that joins meanwhile (a union) is listed if its cluster's ring was joined ahead of the walk;
one deleted meanwhile is left out once it is gone. If the member a page stopped at is deleted before the next
page is asked for, or the document itself, that page cannot go on (:class:`CursorError`: list again).

>>> reply = PageReply.of([1, 4, 1, 9, 4, 7])  # a page: root 4, whole, go on from 9; members 4 and 7
>>> reply.state, reply.root, reply.whole, reply.at, reply.nums
(1, 4, True, 9, [4, 7])
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dedupd.errors import ConfigError, DedupdError
from dedupd.index.record import record_doc_id

PAGE_LIMIT = 1_000  # the most members a page lists: one script call (~4 ms of Redis at 1,000) and one read
DEFAULT_LIMIT = 100  # members per page unless asked otherwise
_CURSOR = re.compile(r"[1-9][0-9]{0,9}")


class NotIndexedError(DedupdError):
    """The document asked about is not in the index (never pushed, deleted, or not processed yet)."""


class CursorError(DedupdError):
    """A page cannot go on from the cursor given: the cluster changed under it; list again."""


def page_steps(limit: int) -> int:
    """The most ring nodes one call walks for a page of ``limit`` members (the nodes of deleted documents
    that still link others are walked, not listed): a bound on a call's work by its page alone.

    >>> page_steps(100)
    464
    """
    return 4 * limit + 64


def checked_args(limit: int, cursor: str | None) -> str:
    """The script's start (``''``: the first page) after checking ``limit`` and ``cursor``.

    Raises:
        ConfigError: a limit outside 1..PAGE_LIMIT, or a cursor no page gave.

    >>> checked_args(10, None), checked_args(10, "42")
    ('', '42')
    """
    if not 1 <= limit <= PAGE_LIMIT:
        raise ConfigError(f"the page size must be 1 to {PAGE_LIMIT:,} members, not {limit}")
    if cursor is None:
        return ""
    if not _CURSOR.fullmatch(cursor):
        raise ConfigError(f"cursor {cursor[:40]!r} is not one a page gave (the `next` of the page before)")
    return cursor


@dataclass(frozen=True, slots=True)
class PageReply:
    """unionfind.CLUSTER_PAGE's reply: state (1 a page, 0 not indexed, 2 the cursor's member left), the
    cluster's root, whether its ring holds every member, the node to go on from (0: done), the members."""

    state: int
    root: int
    whole: bool
    at: int
    nums: list[int]

    @classmethod
    def of(cls, reply: Sequence[Any]) -> PageReply:
        state, root, whole, at, *nums = (int(x) for x in reply)
        return cls(state, root, bool(whole), at, nums)


@dataclass(frozen=True, slots=True)
class ClusterPage:
    """One page of the members of a document's cluster."""

    id: str  # the document asked about
    cluster: str  # its name, as alerts show it (its first document's id, kept if it expired; '#n' if deleted)
    members: tuple[str, ...]  # this page's members (the document itself first on the first page)
    next: str | None  # the cursor of the next page; None: this page is the last
    # False: the cluster began before dedupd kept members (an older index), and this page could not show
    # that none is missing (only a page that lists the whole cluster can: unionfind.CLUSTER_PAGE)
    complete: bool

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "id": self.id,
            "cluster": self.cluster,
            "members": list(self.members),
            "next": self.next,
            "complete": self.complete,
        }


def page_of(
    doc_id: str, first: bool, reply: PageReply, stored: Mapping[int, bytes | None], name: str
) -> ClusterPage:
    """The page ``reply`` lists, with the members' ids from their ``stored`` records (read in the serving
    generation: a member without one was deleted meanwhile, and is left out), and the cluster's ``name``
    (record.cluster_name of its root).

    Raises:
        NotIndexedError: the document is not in the index. CursorError: the page cannot go on.
    """
    if reply.state == 2:
        raise CursorError(
            f"the cluster of {doc_id!r} changed since the page before (the member that page stopped at was "
            "deleted): list it again from the first page"
        )
    if reply.state == 0 or (first and not (reply.nums and stored.get(reply.nums[0]))):
        raise NotIndexedError(
            f"{doc_id!r} is not in the index (never pushed, deleted, or not processed yet: `dedupd stats` "
            "shows the daemons' lag)"
        )
    members = tuple(record_doc_id(blob) for blob in (stored.get(n) for n in reply.nums) if blob)
    return ClusterPage(
        doc_id,
        name,
        members,
        str(reply.at) if reply.at else None,
        reply.whole,
    )
