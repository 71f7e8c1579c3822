"""The union-find of duplicate clusters in Redis: its Lua scripts (find, union, and a deleted document's node).

Every document has an integer id (keys.py: ``id_forward``); a cluster is a tree of them in one hash, child ->
parent (:attr:`Keys.uf_parent`; a root has no entry). Unions are by smaller integer id, so a cluster's root is
its oldest document, a node's parent is always older than the node, and an alert names the cluster by its
root (gateway.cluster_names). Finds that write (a union) compress the paths they walk.

Deleted documents: a node's children are counted (:attr:`Keys.uf_children`, only for nodes that have some).
When a document is deleted (``FORGET_IDS``), its node goes if no node points to it, and its parent loses a
child; a parent whose document was deleted before and which is left without children goes too, and so on
up the path. A deleted document's node that still has children stays, marked (:attr:`Keys.uf_gone`), as the
link that holds its cluster together and, when it is the root, as the cluster's name; it goes with its last
child. No child is ever moved to another parent on a delete: a script's work is bounded by the length of a
path, never by the size of a cluster (a flood makes clusters of 100,000 copies whose root has them all as
children). What stays after every document of a cluster is deleted: nothing.

Expired documents (a retention window, retention.py) leave their nodes the same way (``EXPIRE_FINISH``), but
an expired root whose node stays keeps its document id in its :attr:`Keys.uf_gone` entry (``'=' + id``
instead of ``1``), so that its cluster keeps its name while any member lives (record.cluster_name); the name
goes with the node. A deleted root's cluster is named ``#n``: a delete is a request to forget the document,
and its id is not kept beyond the tombstone's time.

Example: ``2 -> 1`` and ``3 -> 1`` (1 is the root, with two children). Delete 1: it stays, marked (the root
and name of {2, 3}). Delete 2: its entry goes, 1 has one child. Delete 3: its entry goes, 1 has none and is
marked: 1 goes too. The hashes are as before the three documents came.

Integer ids given out before the counts existed (an index made by an earlier version: up to
:attr:`Keys.uf_floor`, set when the first daemon of this version opens it) are not counted: their nodes stay,
as before. Every script touches the ``{<prefix>:ids}`` slot only.

Members: the parent hash only points up, so a cluster's nodes are also kept in a ring, a circular list
doubly linked through :attr:`Keys.uf_ring` (node -> ``'<next> <prev>'``; a node alone has no entry). A union
of two clusters joins their rings (four links changed, whatever their sizes); a node that goes leaves its ring
(two links), a deleted document's node that stays stays in it. So a cluster's ring holds exactly its nodes,
and ``CLUSTER_PAGE`` lists its members a page at a time, walking the ring from the document asked about: a
call's work is bounded by its page, never by the cluster. Cost: one hash field a node in a cluster of two or
more (``'<next> <prev>'``: about 60 bytes, as its parent entry costs). A cluster whose root was given out
before the rings were kept (up to :attr:`Keys.uf_ring_floor`, set as the other floor is) may lack the
members that joined it before; the page says so, unless it walked the whole ring and the children counts of
its older nodes show that none hangs outside it (a document alone, counted, is whole: cluster_page.lua).
Rebuilds leave the union-find, rings included, as it is.

Representatives: each cluster's root keeps, in :attr:`Keys.uf_reps`, up to ``representatives`` of its members
with a count each: how often a later document's best match in the cluster was that member (_uf_reps.lua,
written by ``UNION_ROOTS`` in the call that unions the document; a newcomer to a full list takes the last
one's place, Space-Saving's rule). A union merges the two lists into the older root's; a delete takes the
document out of its cluster's list (``FORGET_IDS``), and a list left empty goes. ``REPRESENTATIVES`` reads
them for a near miss (near_miss.py). Cost: 8 bytes per representative, one field per cluster an alert joined.

Example: unions 2 -> 1, then 3 -> 1: the ring 1 -> 2 -> 1, then 1 -> 3 -> 2 -> 1 (``{1: '3 2', 3: '2 1',
2: '1 3'}``). Delete 3: 1 -> 2 -> 1 again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dedupd.index.lua import load
from dedupd.index.protocol import ClusterReps

# The scripts (scripts/*.lua; their helpers: _uf_parents.lua, this call's view of the parent hash, and
# _uf_writes.lua, the child counts, path compression and a deleted document's node).
FIND_ROOTS = load("find_roots")  # the root of each id's cluster (read only)
UNION_ROOTS = load("union_roots")  # union each document with its matches' clusters
UNION_LIVE = load("union_live")  # the same for documents no daemon holds: only while their id maps to them
FORGET_IDS = load("forget_ids")  # deleted documents: their ids, their nodes, their tombstones
SET_FLOOR = load("set_floor")  # the ids given out before the counts (and the rings) existed stay uncounted
CLUSTER_PAGE = load("cluster_page")  # a page of the members of a document's cluster (read only)
REPRESENTATIVES = load("representatives")  # the representatives of some clusters (read only; _uf_reps.lua)


def union_replies(
    groups: Sequence[tuple[int, Sequence[tuple[int, str]]]], reply: Sequence[Any]
) -> tuple[list[tuple[int, list[int]]], list[tuple[int, int, list[int], int, list[int]]]]:
    """UNION_ROOTS's reply, per group (document, its matches as (integer id, document id)): the root of the
    document's cluster after it and the root each match had before; and what the unions did, as
    known_roots.KnownRoots.learn_unions takes it (the document, the root it had, its matches, its root after,
    the roots they had).

    >>> union_replies([(5, [(2, "b"), (3, "c")])], [1, 1, 3, 5])
    ([(1, [1, 3])], [(5, 5, [2, 3], 1, [1, 3])])
    """
    out: list[tuple[int, list[int]]] = []
    done: list[tuple[int, int, list[int], int, list[int]]] = []
    at = 0
    for num, matches in groups:
        k = len(matches)
        root, before = int(reply[at]), [int(x) for x in reply[at + 1 : at + 1 + k]]
        out.append((root, before))
        done.append((num, int(reply[at + 1 + k]), [m for m, _ in matches], root, before))
        at += 2 + k
    return out, done


def live_replies(sizes: Sequence[int], reply: Sequence[Any]) -> list[tuple[int, list[int]] | None]:
    """UNION_LIVE's reply, per group (given by how many matches it has): None when it was skipped (the id no
    longer maps to the document), else the root of the document's cluster after it and the root each match
    had before.

    >>> live_replies([1, 1], [0, 1, 1, 1, 6])
    [None, (1, [1])]
    """
    out: list[tuple[int, list[int]] | None] = []
    at = 0
    for k in sizes:
        if not int(reply[at]):
            out.append(None)
            at += 1
            continue
        out.append((int(reply[at + 1]), [int(x) for x in reply[at + 2 : at + 2 + k]]))
        at += 3 + k
    return out


def representatives_replies(reply: Sequence[Any]) -> list[ClusterReps]:
    """REPRESENTATIVES's reply: per id asked about, the root of its cluster now, the root's
    representatives (most matched first), whether it has a ring, the nodes the ring walk met, and whether
    they are the whole ring.

    >>> reps = bytes([2, 0, 0, 0, 5, 0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0])
    >>> representatives_replies([1, reps, 1, bytes([7, 0, 0, 0]), 4, b"", 0, b""])[0]
    ClusterReps(root=1, members=[2, 3], ring=True, walked=[7], whole=True)
    """
    out: list[ClusterReps] = []
    for root, packed, state, walked in zip(reply[0::4], reply[1::4], reply[2::4], reply[3::4], strict=True):
        # (most clusters asked about are single documents: nothing to unpack)
        members = np.frombuffer(packed, dtype="<u4")[0::2].tolist() if packed else []
        nodes = np.frombuffer(walked, dtype="<u4").tolist() if walked else []
        walk = int(state)
        out.append(ClusterReps(int(root), members, walk > 0, nodes, walk == 1))
    return out
