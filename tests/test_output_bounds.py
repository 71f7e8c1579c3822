"""Byte bounds of the output streams (issue 14, item 5): alerts, dead letters and baskets are trimmed to
alerts_max_bytes, dead_max_bytes and baskets_max_bytes, the oldest first (real redis-server)."""

from __future__ import annotations

import random

import redis
from helpers import drain, make_daemon, push, text, variant

from dedupd.daemon.upkeep import kept_length
from dedupd.index.keys import Keys


def test_kept_length_keeps_the_stream_under_its_bound() -> None:
    for length, used, bound in [(10_000, 5_000_000, 1_000_000), (3, 10_000, 4096), (1, 10**9, 4096)]:
        keep = kept_length(length, used, bound)
        assert keep is not None and keep * used / length <= bound
    assert kept_length(10, 100, 4096) is None and kept_length(0, 10**6, 4096) is None


def test_output_streams_are_trimmed_to_their_byte_bounds(r: redis.Redis, redis_url: str) -> None:
    rng = random.Random(9)
    docs = []
    for i in range(300):
        base = text(rng, 40)
        docs += [{"id": f"a{i}", "text": base}, {"id": f"b{i}", "text": variant(rng, base)}]
    docs += [{"text": "no id"} for _ in range(200)]  # dead letters
    push(r, docs)
    daemon = make_daemon(
        redis_url, baskets="words", alerts_max_bytes=16_384, dead_max_bytes=16_384, baskets_max_bytes=65_536
    )
    drain(daemon)  # (the daemon bounds them on its timer too, first at its start)
    daemon._bound_outputs()
    keys = Keys()
    emitted = {keys.alerts: 300, keys.dead: 200, keys.baskets: 600}
    for stream, bound in ((keys.alerts, 16_384), (keys.dead, 16_384), (keys.baskets, 65_536)):
        assert 0 < r.xlen(stream) < emitted[stream]
        assert (r.memory_usage(stream) or 0) <= 1.5 * bound  # XTRIM ~ trims whole stream nodes
    last = r.xrevrange(keys.alerts, count=1)[0][1]
    assert last[b"id"] == b"b299"  # the newest are kept
    untouched = make_daemon(redis_url)  # default bounds: nothing to trim
    lengths = {s: r.xlen(s) for s in emitted}
    untouched._bound_outputs()
    assert {s: r.xlen(s) for s in emitted} == lengths
