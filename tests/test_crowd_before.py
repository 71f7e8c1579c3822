"""Crowd attack (b) of issue 28, against a real redis-server: a crowd of a victim's sub-threshold neighbours
pushed before the victim fills every one of its buckets; a full bucket was read but not joined, so the victim
joined none, and no later copy of it could find it. A document kept out of most of its buckets because they were
full now takes a place in each of them (bounds.thin, lua.DISPLACE), giving up one other member there."""

from __future__ import annotations

import os
import random
import subprocess
from fractions import Fraction

import redis
from helpers import alerts, drain, load_script, make_daemon, push
from procs import DEDUPD

from dedupd.client import Client

T = Fraction(4, 5)  # the default threshold, 0.8
shapes = load_script("family_shapes")


def jaccard(a: str, b: str) -> Fraction:
    """Exact Jaccard of two texts' word 3-shingle sets (the package's own shingling)."""
    x, y = shapes.shingle_sets([a, b])
    return Fraction(len(x & y), len(x | y))


def crowd_before(rng: random.Random, n: int = 100, k: int = 600) -> tuple[str, list[str], str]:
    """A victim V of ``n`` words, ``k`` neighbours of it (each with a window of 10 consecutive words replaced by
    other words of V: about 0.78 to V, below the threshold) and V' (a window of 2 replaced: about 0.92 to V)."""
    v = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(4, 9))) for _ in range(n)]

    def edited(width: int) -> str:
        out = list(v)
        lo = rng.randrange(1, n - width - 1)
        for at in range(lo, lo + width):
            out[at] = v[rng.randrange(n)]  # made only of the victim's own words
        return " ".join(out)

    return " ".join(v), [edited(10) for _ in range(k)], edited(2)


def crowd_then_victims(r: redis.Redis, redis_url: str, victims: list[tuple[str, list[str], str]]) -> None:
    """Push every victim's neighbours (batches of 256), then the victims, each drained by a daemon."""
    crowd = [
        {"id": f"V{k}-n{i:03}", "text": c} for k, (_, cs, _) in enumerate(victims) for i, c in enumerate(cs)
    ]
    push(r, crowd)
    drain(make_daemon(redis_url, batch_size=256))
    push(r, [{"id": f"V{k}", "text": v} for k, (v, _, _) in enumerate(victims)])
    drain(make_daemon(redis_url))


def test_a_crowd_pushed_before_the_victim_cannot_make_it_invisible(r: redis.Redis, redis_url: str) -> None:
    """Three victims, 600 neighbours each pushed first: V' is alerted naming V, and a query of V's own text
    finds V, 3 of 3 (before: V joined none of its buckets, 0 of 3)."""
    rng = random.Random(2028)
    victims = [crowd_before(rng) for _ in range(3)]
    for v, neighbours, v2 in victims:  # the premise, by brute force
        assert all(jaccard(v, c) < T for c in neighbours) and jaccard(v, v2) >= T
    crowd_then_victims(r, redis_url, victims)
    push(r, [{"id": f"V{k}'", "text": v2} for k, (_, _, v2) in enumerate(victims)])
    drain(make_daemon(redis_url))
    got = {a["id"]: a for a in alerts(r)}
    with Client.connect(redis_url) as client:
        for k, (v, _, _) in enumerate(victims):
            assert f"V{k}'" in got and f"V{k}" in {m[0] for m in got[f"V{k}'"]["matches"]}, got.get(f"V{k}'")
            verdict = client.query(v)
            assert verdict.duplicate_of == f"V{k}" and verdict.similarity == 1.0, verdict


def test_a_rebuild_leaves_the_victim_findable(r: redis.Redis, redis_url: str) -> None:
    """`dedupd rebuild` re-bands the stored signatures in id order: the crowd first, so the victim found its
    new buckets full; it takes places there as the daemons' documents do (before: V' found nothing)."""
    rng = random.Random(2029)
    victims = [crowd_before(rng)]  # (one victim: the suite's time)
    crowd_then_victims(r, redis_url, victims)
    env = {**os.environ, "DEDUPD_REDIS_URL": redis_url}
    res = subprocess.run(
        [*DEDUPD, "rebuild", "--bands", "20", "--rows", "6"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr
    push(r, [{"id": f"V{k}'", "text": v2} for k, (_, _, v2) in enumerate(victims)])
    drain(make_daemon(redis_url))
    got = {a["id"]: a for a in alerts(r)}
    for k in range(len(victims)):
        assert f"V{k}'" in got and f"V{k}" in {m[0] for m in got[f"V{k}'"]["matches"]}, got.get(f"V{k}'")
