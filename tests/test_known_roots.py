"""Cluster roots a gateway saw a moment ago (known_roots.py) answer its root lookups: a flood's batch looks up
the copies the batch before it unioned, and needs no FIND_ROOTS call. The pure rules first, then against a
real redis-server: the answers are the union-find's, a lookup is saved, and another consumer's merge is seen
as the finer view it is documented to be until the view expires."""

from __future__ import annotations

import random

import redis
from helpers import drain, make_daemon, push, text, variant

from dedupd.index.gateway import RedisGateway
from dedupd.index.keys import Keys
from dedupd.index.known_roots import KnownRoots

K = Keys()


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_an_answer_follows_the_chain_to_a_known_root() -> None:
    roots = KnownRoots(clock=Clock())
    roots.learn([(30, 20), (20, 20), (40, 30)])
    assert [roots.get(n) for n in (30, 20, 40, 10)] == [20, 20, 20, None]
    roots.learn([(20, 5), (5, 5)])  # 20's cluster merged into 5's
    assert roots.get(40) == 5


def test_a_chain_that_ends_off_a_known_root_is_not_an_answer() -> None:
    roots = KnownRoots(clock=Clock())
    roots.learn([(30, 20)])  # 20 not known to be a root
    assert roots.get(30) is None
    roots.learn([(20, 20)])
    roots.forget([20])  # a match that merged or was deleted: what passes through it is not known
    assert roots.get(30) is None


def test_a_root_younger_than_its_id_is_not_kept() -> None:
    roots = KnownRoots(clock=Clock())
    roots.learn([(3, 9), (9, 9)])  # roots are the oldest ids: 9 cannot be 3's
    assert roots.get(3) is None and roots.get(9) == 9


def test_unions_teach_their_roots_in_order() -> None:
    roots = KnownRoots(clock=Clock())
    roots.learn([(7, 7)])
    # 9 (new) matched 8 (of 4's cluster) and 7 (its own root): one cluster, root 4
    roots.learn_unions([(9, 9, [8, 7], 4, [4, 7])])
    assert [roots.get(n) for n in (9, 8, 4)] == [4, 4, 4]
    assert roots.get(7) is None  # merged into 4, or deleted meanwhile (the script says the same): looked up
    # 5, in 2's cluster, matched 9: 4's cluster merges into 2's, and what followed 4 follows
    roots.learn_unions([(5, 2, [9], 2, [4])])
    assert [roots.get(n) for n in (9, 8, 5)] == [2, 2, 2]


def test_ids_given_out_again_forget_everything() -> None:
    """A server that restarted without its data (or lost its last writes) gives the ids out again: a created
    id not above the last ones created here means what is known is about other documents."""
    roots = KnownRoots(clock=Clock())
    roots.created([10, 11, 12])
    roots.learn([(12, 10), (10, 10)])
    roots.created([13, 14])
    assert roots.get(12) == 10
    roots.created([3, 4])  # ids given out again
    assert roots.get(12) is None and roots.get(10) is None and roots.get(3) == 3


def test_everything_goes_after_max_age_and_beyond_max_entries() -> None:
    clock = Clock()
    roots = KnownRoots(max_entries=4, max_age_s=10.0, clock=clock)
    roots.learn([(2, 1), (1, 1)])
    clock.now = 9.9
    roots.expire()
    assert roots.get(2) == 1
    clock.now = 10.0
    roots.expire()
    assert roots.get(2) is None and len(roots) == 0
    roots.learn([(n, 1) for n in range(1, 6)])  # five entries: over the bound, all forgotten
    assert len(roots) == 0


def documents(r: redis.Redis, gw: RedisGateway, nums: list[int]) -> None:
    """Documents d<n> with integer ids n, just created (a match whose id no longer maps to it joins nothing)."""
    r.flushall()
    for n in nums:
        r.hset(K.id_forward, f"d{n}", n)
    gw.created(nums)


def counting(gw: RedisGateway) -> list[int]:
    """Spy on the gateway's FIND_ROOTS calls: the list gets the number of ids of each call."""
    calls: list[int] = []
    real = gw._roots

    def spy(keys: list[str], args: list[int]) -> object:
        calls.append(len(args))
        return real(keys=keys, args=args)

    gw._roots = spy  # type: ignore[assignment,method-assign]
    return calls


def test_roots_after_unions_need_no_lookup_and_are_the_union_finds(redis_url: str, r: redis.Redis) -> None:
    gw = make_daemon(redis_url).gateway
    documents(r, gw, [1, 2, 3, 4, 5])
    calls = counting(gw)
    gw.union([(2, [(1, "d1")]), (4, [(3, "d3")])])  # {1, 2} and {3, 4}
    gw.union([(5, [(4, "d4"), (2, "d2")])])  # all one cluster, root 1
    assert gw.roots([5, 4, 3, 2, 1]) == [1, 1, 1, 1, 1]
    assert calls == []
    assert gw.roots([5, 4, 3, 2, 1], fresh=True) == [1, 1, 1, 1, 1]
    assert calls == [5]


def test_an_updated_document_takes_its_old_cluster_into_the_new_one(redis_url: str, r: redis.Redis) -> None:
    """A document already in a cluster (an update) joins another: its old root merges too (UNION_ROOTS says
    what it was), so the rest of its old cluster is answered with the new root."""
    gw = make_daemon(redis_url).gateway
    documents(r, gw, [1, 2, 3, 4])
    gw.union([(2, [(1, "d1")]), (4, [(3, "d3")])])  # {1, 2}, {3, 4}
    gw.union([(4, [(2, "d2")])])  # 4, updated, matches 2: {3, 4}'s root 3 merges into 1
    assert gw.roots([3]) == [1] == gw.roots([3], fresh=True)


def test_another_consumers_merge_is_seen_once_the_view_expires(redis_url: str, r: redis.Redis) -> None:
    ours, theirs = make_daemon(redis_url).gateway, make_daemon(redis_url).gateway
    documents(r, ours, [1, 2, 3, 4])
    ours.union([(2, [(1, "d1")]), (4, [(3, "d3")])])
    theirs.union([(3, [(2, "d2")])])  # another consumer merges the two clusters
    assert ours.roots([4]) == [3]  # the root 4 had: finer than Redis's view, never coarser
    assert ours.roots([4], fresh=True) == [1]
    ours._known.clear()  # (what max_age_s does)
    assert ours.roots([4]) == [1]


def test_a_deleted_document_is_not_answered_from_what_was_known(redis_url: str, r: redis.Redis) -> None:
    gw = make_daemon(redis_url).gateway
    documents(r, gw, [1, 2])
    gw.union([(2, [(1, "d1")])])
    gw.forget([("d2", 2, "9-0")])  # 2 had no children: its node goes
    calls = counting(gw)
    assert gw.roots([2]) == [2] and calls == [1]


def test_a_delete_done_twice_is_not_taken_for_a_new_document(redis_url: str, r: redis.Redis) -> None:
    """A second delete of a deleted document writes (its tombstone) with no record before it, like a new
    document; it is not one, and its id is not its own root to be known (found by the review: the deleted
    link node of a cluster this daemon had merged was then answered for a live document)."""
    r.flushall()
    daemon = make_daemon(redis_url)
    rng = random.Random(5)
    base = text(rng, 60)
    push(
        r,
        [
            {"id": "x", "text": text(rng, 60)},
            {"id": "y", "text": base},
            {"id": "z", "text": variant(rng, base)},
        ],
    )
    drain(daemon)
    push(r, [{"id": "x", "text": base}])  # x, updated, joins y's cluster: y's root merges into x's
    drain(daemon)
    for _ in range(2):
        push(r, [{"id": "y", "op": "delete"}])
        drain(daemon)
    z = int(r.hget(K.id_forward, "z") or 0)
    gw = daemon.processor.gateway
    assert gw.roots([z], fresh=True) == [int(r.hget(K.id_forward, "x") or 0)]
    assert gw.roots([z]) == gw.roots([z], fresh=True)


def test_a_server_error_forgets_the_roots_known(redis_url: str, r: redis.Redis) -> None:
    r.flushall()
    daemon = make_daemon(redis_url)
    gw = daemon.processor.gateway
    documents(r, gw, [1, 2])
    gw.union([(2, [(1, "d1")])])
    assert len(gw._known) > 0
    daemon._recover_after_error(redis.ConnectionError("the server went away"))
    assert len(gw._known) == 0
