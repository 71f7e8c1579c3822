"""Baskets read from the Redis stream (latest entry per document) and results stored back."""

from __future__ import annotations

import json

import pytest
import redis
from click.testing import CliRunner
from mining_oracle import SEED_BASKETS

from dedupd.keys import Keys
from dedupd.mining.cli import mine
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
