"""A bucket keeps each cluster's anchor (its oldest member there) beside its newest, and a batch's look at
itself does the same (issue 28, part A), against a real redis-server: a star's variants find the base however
many came before them, a crowd of a victim's near-copies cannot push the victim out of its buckets, and a
chain that drifts is found as before."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest
import redis
from helpers import alerts, drain, load_script, make_daemon, push

from dedupd.client import Client

T = Fraction(4, 5)  # the default threshold, 0.8


shapes = load_script("family_shapes")


def jaccard(a: str, b: str) -> Fraction:
    """Exact Jaccard of two texts' word 3-shingle sets (the package's own shingling)."""
    x, y = shapes.shingle_sets([a, b])
    return Fraction(len(x & y), len(x | y))


def star(variants: int, seed: int) -> list[str]:
    """A base and ``variants`` variants (base first): each variant at 0.80 to 0.89 to the base, every two
    variants below 0.8 to each other (checked by brute force)."""
    texts = [t for _, t in shapes.star(random.Random(seed), T, variants + 1)]
    sets = shapes.shingle_sets(texts)
    assert not shapes.claim_breaks("star", sets, T)  # the premise
    return texts


def named(alert: dict[str, object]) -> set[str]:
    """The ids an alert names."""
    return {m[0] for m in alert["matches"]}  # type: ignore[attr-defined]


@pytest.mark.parametrize("batch_size", [1, 256])
def test_every_variant_of_a_star_names_the_base(r: redis.Redis, redis_url: str, batch_size: int) -> None:
    """Base first, then 40 variants: once the variants filled the base's buckets a bucket kept the two newest
    of the cluster, variants, and every later variant read only variants (below the threshold to it) and
    was called new (9 of 40 alerted with one document a batch). The base is the cluster's anchor in each
    bucket: every variant reads it and names it."""
    texts = star(40, seed=3)
    docs = [{"id": "base", "text": texts[0]}] + [
        {"id": f"v{i:02}", "text": t} for i, t in enumerate(texts[1:])
    ]
    push(r, docs)
    drain(make_daemon(redis_url, batch_size=batch_size))
    got = {a["id"]: a for a in alerts(r)}
    missing = [d["id"] for d in docs[1:] if d["id"] not in got or "base" not in named(got[d["id"]])]
    assert not missing, f"{len(missing)} of 40 variants do not name the base: {missing}"
    assert {a["cluster"] for a in got.values()} == {"base"}


def test_a_batch_sees_the_first_of_each_bucket_however_far_back(r: redis.Redis, redis_url: str) -> None:
    """One batch: a base and 150 variants after it. A variant sees the nearest earlier document of the batch
    in each band it shares and, matching none, the bucket_members (64 by default) nearest: variants only, once far
    enough from the base (49 of 150 named nothing). The batch's view keeps the first of each bucket (its
    anchor) as a bucket does."""
    texts = star(150, seed=4)
    docs = [{"id": "base", "text": texts[0]}] + [
        {"id": f"v{i:02}", "text": t} for i, t in enumerate(texts[1:])
    ]
    push(r, docs)
    drain(make_daemon(redis_url, batch_size=256))
    got = {a["id"]: a for a in alerts(r)}
    missing = [d["id"] for d in docs[1:] if d["id"] not in got or "base" not in named(got[d["id"]])]
    assert not missing, f"{len(missing)} of 150 variants do not name the base: {missing}"


def _words(rng: random.Random, n: int) -> list[str]:
    return ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(4, 9))) for _ in range(n)]


def crowd(rng: random.Random, n: int = 110) -> tuple[str, list[str], str]:
    """A victim V of ``n`` words, 30 near-copies of it (each with 3 words of its first half replaced by
    other words of V) and V' (3 words of its second half replaced): each copy and V' at about 0.85 to V,
    V' at about 0.71 to every copy."""
    v = _words(rng, n)

    def edited(lo: int, hi: int) -> str:
        out = list(v)
        for at in rng.sample(range(lo, hi, 4), 3):
            out[at] = v[rng.randrange(n)]  # made only of the victim's own words
        return " ".join(out)

    copies = [edited(2, n // 2) for _ in range(30)]
    return " ".join(v), copies, edited(n // 2, n - 2)


def test_a_crowd_of_near_copies_cannot_push_the_victim_out(r: redis.Redis, redis_url: str) -> None:
    """Crowd attack (a) of issue 28, three victims: 30 near-copies of V pushed after it join V's cluster;
    a bucket that kept only the two newest of the cluster let them push V out of every bucket, so that V'
    (0.8 or more to V, about 0.72 to the copies) was not alerted and a query of V's own text did not find
    V. V is its cluster's anchor: it stays."""
    rng = random.Random(28)
    victims = [crowd(rng) for _ in range(3)]
    for v, copies, v2 in victims:  # the premise, by brute force
        assert all(jaccard(v, c) >= Fraction(82, 100) for c in copies) and jaccard(v, v2) >= T
        assert all(jaccard(v2, c) < T for c in copies)
    push(r, [{"id": f"V{k}", "text": v} for k, (v, _, _) in enumerate(victims)])
    drain(make_daemon(redis_url))
    for k, (_, copies, _) in enumerate(victims):  # in batches of 8: the copies over many batches
        push(r, [{"id": f"V{k}-copy{i:02}", "text": c} for i, c in enumerate(copies)])
    drain(make_daemon(redis_url, batch_size=8))
    push(r, [{"id": f"V{k}'", "text": v2} for k, (_, _, v2) in enumerate(victims)])
    drain(make_daemon(redis_url))
    got = {a["id"]: a for a in alerts(r)}
    for k in range(3):
        assert f"V{k}'" in got and f"V{k}" in named(got[f"V{k}'"]), got.get(f"V{k}'")
        assert all(f"V{k}-copy{i:02}" in got for i in range(30))
    with Client.connect(redis_url) as client:
        for k, (v, _, _) in enumerate(victims):
            verdict = client.query(v)
            assert verdict.duplicate_of == f"V{k}" and verdict.similarity == 1.0, verdict


def test_a_chain_is_found_link_by_link(r: redis.Redis, redis_url: str) -> None:
    """A story that drifts (each version at or above the threshold to the one before, the first and last far
    apart), one version a batch: every version names the one before it, as when a bucket kept only the
    newest (the anchor is one more member, not one instead of the newest)."""
    texts = [t for _, t in shapes.chain(random.Random(9), T, 30)]
    assert not shapes.claim_breaks("chain", shapes.shingle_sets(texts), T)  # the premise
    push(r, [{"id": f"c{i:02}", "text": t} for i, t in enumerate(texts)])
    drain(make_daemon(redis_url, batch_size=1))
    got = {a["id"]: a for a in alerts(r)}
    missing = [
        i for i in range(1, 30) if f"c{i:02}" not in got or f"c{i - 1:02}" not in named(got[f"c{i:02}"])
    ]
    assert not missing, missing
    assert {a["cluster"] for a in got.values()} == {"c00"}
