"""lua.BUCKETS remembers, within one call, the value of each bucket it read (a flood's copies join the same
buckets: one HSETNX and HGET per bucket and call). The remembered value must be exactly what Redis holds:
random calls of joins, rejoins and leaves, many on the same buckets, give the same replies and leave the same
buckets as the same script reading every bucket from Redis each time (the oracle: the script with its
remembered values never used)."""

from __future__ import annotations

import struct

import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dedupd.index.argv import Buckets
from dedupd.index.lua import BUCKETS, FULL_BIT, REFUSED_BIT, Op

REMEMBERED = "local v = kf and kf[field]"
ORACLE = BUCKETS.replace(REMEMBERED, "local v = nil")
NAMES = ("h:0", "h:1")  # bucket hashes; a bucket is (hash, field)
FIELDS = (b"f000", b"f001", b"f002")

# one bucket change: (op, hash index, field index); a document: its id and its changes
change = st.tuples(st.sampled_from([Op.JOIN, Op.REJOIN, Op.LEAVE]), st.integers(0, 1), st.integers(0, 2))
document = st.tuples(st.integers(1, 9), st.lists(change, max_size=5))
call = st.tuples(
    st.lists(document, min_size=1, max_size=8),
    st.integers(1, 6),  # the most members a bucket takes
    st.integers(0, 2),  # the most new members a bucket takes in this call (0: no such bound)
)


def arguments(
    prefix: str, docs: list[tuple[int, list[tuple[Op, int, int]]]], full: int, fresh: int
) -> list[bytes | str]:
    """BUCKETS' ARGV on a single Redis (bucket hash names in one string, no record checks)."""
    ops, kidx, fields, ids = b"", b"", b"", b""
    for num, changes in docs:
        for op, h, f in changes:
            ops += op.value
            kidx += struct.pack("<I", h + 1)
            fields += FIELDS[f]
            ids += struct.pack("<I", num)
        ops += Op.END.value
    names = [prefix + n for n in NAMES]
    ends = struct.pack("<3I", 0, len(names[0]), len(names[0]) + len(names[1]))
    return Buckets(
        ops=ops,
        key_index=kidx,
        fields=fields,
        ids=ids,
        names="".join(names),
        ends=ends,
        full=full,
        crowd=2,
        fresh=fresh,
    ).argv()


def state(r: redis.Redis, prefix: str) -> list[dict[bytes, bytes]]:
    return [r.hgetall(prefix + n) for n in NAMES]


def test_the_oracle_is_the_script_without_its_remembered_values() -> None:
    assert BUCKETS.count(REMEMBERED) == 1 and ORACLE != BUCKETS


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(calls=st.lists(call, min_size=1, max_size=4))
def test_remembered_buckets_read_as_redis_holds_them(
    r: redis.Redis, calls: list[tuple[list[tuple[int, list[tuple[Op, int, int]]]], int, int]]
) -> None:
    r.flushdb()
    script, oracle = r.register_script(BUCKETS), r.register_script(ORACLE)
    for docs, full, fresh in calls:
        got = script(keys=[], args=arguments("a:", docs, full, fresh))
        want = oracle(keys=[], args=arguments("b:", docs, full, fresh))
        assert got == want
        assert state(r, "a:") == state(r, "b:")


def _crowded(r: redis.Redis, prefix: str) -> None:
    """Every bucket of the two hashes holds two members (ids 1000 and 1001): a join of it is a hit."""
    for n in NAMES:
        for f in FIELDS:
            r.hset(prefix + n, f, struct.pack("<2I", 1000, 1001))


def _hits(reply: list[bytes]) -> list[int]:
    return list(struct.unpack(f"<{len(reply[-1]) // 4}I", reply[-1]))


def test_more_hits_than_one_packing_holds(r: redis.Redis) -> None:
    """The hits' positions are packed a thousand at a time at the end of the call: 1,500 hits in one call come
    back whole and in order (a flood's 64 copies hit every one of their 25 joins)."""
    r.flushdb()
    _crowded(r, "a:")
    docs = [(n, [(Op.JOIN, h, f) for h in (0, 1) for f in (0, 1, 2)]) for n in range(1, 251)]
    reply = r.register_script(BUCKETS)(keys=[], args=arguments("a:", docs, 2, 0))  # full: nobody joins
    assert _hits(reply) == [j + FULL_BIT for j in range(1, 1501)]  # (each marked full: lua.DISPLACE)


def test_refused_hits_keep_their_mark_in_every_packing(r: redis.Redis) -> None:
    """With one new member a call per bucket, the first join of each bucket gets in and every later one is
    refused: the refused ones carry the top bit, across the thousand-hit packings."""
    r.flushdb()
    _crowded(r, "a:")
    docs = [(n, [(Op.JOIN, h, f) for h in (0, 1) for f in (0, 1, 2)]) for n in range(1, 251)]
    reply = r.register_script(BUCKETS)(keys=[], args=arguments("a:", docs, 1000, 1))
    assert _hits(reply) == [j if j <= 6 else j + REFUSED_BIT for j in range(1, 1501)]
