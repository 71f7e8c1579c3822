"""Baskets read from the Redis stream (latest entry per document) and results stored back."""

from __future__ import annotations

import json
import random

import pytest
import redis
from click.testing import CliRunner
from mining_oracle import SEED_BASKETS

from dedupd.index.keys import Keys
from dedupd.mining.cli import mine
from dedupd.mining.clusters import cluster_baskets
from dedupd.mining.redis_source import load_result, read_baskets, store_result

KEYS = Keys("dedupd")


def _push(r: redis.Redis, doc: str, items: list[str] | str) -> None:
    r.xadd(KEYS.baskets, {"id": doc, "items": items if isinstance(items, str) else json.dumps(items)})


def test_latest_entry_per_document_wins(r: redis.Redis) -> None:
    """A re-upserted document replaces its basket; malformed entries are skipped and counted."""
    _push(r, "d1", ["x", "y"])
    _push(r, "d2", ["a"])
    _push(r, "d1", ["Beer", "Bread"])
    _push(r, "d3", "not json")
    _push(r, "d2", [])  # emptied: no basket any more
    got = read_baskets(r, KEYS, page=2)
    assert got.baskets == [["Beer", "Bread"]]
    assert got.entries == 5 and got.malformed == 1


def test_store_and_load(r: redis.Redis) -> None:
    store_result(r, KEYS, {"itemsets": [], "rules": [], "params": {"support": 2}})
    assert load_result(r, KEYS) == {"itemsets": [], "rules": [], "params": {"support": 2}}


def test_mine_reads_redis_and_stores_the_result(
    r: redis.Redis, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEDUPD_REDIS_URL", redis_url)
    for i, basket in enumerate(SEED_BASKETS):
        _push(r, f"doc{i}", basket)
    res = CliRunner().invoke(mine, ["--support", "2", "--confidence", "0.6", "--format", "json"])
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    assert {frozenset(x["items"]): x["count"] for x in out["itemsets"]}[frozenset({"Beer", "Bread"})] == 2
    stored = json.loads(r.get(KEYS.mined) or b"{}")
    assert stored["itemsets"] == out["itemsets"] and stored["rules"] == out["rules"]
    assert stored["params"]["support"] == 2 and stored["params"]["n_baskets"] == 5
    assert stored["params"]["passes"][0]["what"] == "items"


def test_empty_stream_is_a_clear_error(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEDUPD_REDIS_URL", redis_url)
    res = CliRunner().invoke(mine, ["--support", "2"])
    assert res.exit_code == 1 and "no baskets" in res.stderr


def _push_linked(r: redis.Redis, doc: str, source: str, links: list[str]) -> None:
    r.xadd(KEYS.baskets, {"id": doc, "items": json.dumps([source]), "links": json.dumps(links)})


def test_linked_entries_become_one_basket_per_duplicate_cluster(r: redis.Redis) -> None:
    """Entries with links (baskets = "sources") are grouped by union-find over id <-> links: a copy
    of a copy joins the original's cluster, a document that duplicates nothing is a cluster of one,
    a re-upserted document keeps only its latest links; entries without links stay per document."""
    _push_linked(r, "s1", "feed-a", [])
    _push_linked(r, "s2", "feed-b", ["s1"])
    _push_linked(r, "s3", "feed-d", ["s2"])  # copies the copy
    _push_linked(r, "s4", "feed-a", [])
    _push_linked(r, "s5", "feed-c", ["s4", "gone"])  # a link to a document without a basket entry
    _push_linked(r, "s6", "feed-b", ["s4"])
    _push_linked(r, "s6", "feed-b", [])  # re-upserted, no longer a duplicate
    _push(r, "x1", ["bread", "milk"])
    r.xadd(KEYS.baskets, {"id": "bad", "items": '["feed-a"]', "links": "{not json"})
    got = read_baskets(r, KEYS, page=3)
    assert got.baskets == [
        ["bread", "milk"],
        ["feed-a", "feed-b", "feed-d"],
        ["feed-a", "feed-c"],
        ["feed-b"],
    ]
    assert (got.clustered, got.clusters, got.malformed, got.entries) == (6, 3, 1, 9)


def test_cluster_baskets_against_a_brute_force_closure() -> None:
    """Union-find clusters equal the connected components found by repeated merging, on random links."""
    rng = random.Random(5)
    docs = {
        f"d{i}": (
            [f"s{rng.randrange(6)}"],
            [f"d{rng.randrange(i)}" for _ in range(rng.randrange(3))] if i else [],
        )
        for i in range(300)
    }
    groups = [{d} | set(links) for d, (_, links) in docs.items()]
    merged = True
    while merged:
        merged = False
        for i in range(len(groups)):
            for j in range(i + 1, len(groups)):
                if groups[i] & groups[j]:
                    groups[i] |= groups.pop(j)
                    merged = True
                    break
            if merged:
                break
    expected = sorted(sorted({docs[d][0][0] for d in g}) for g in groups)
    assert sorted(cluster_baskets(docs)) == expected
