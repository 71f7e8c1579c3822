"""dedupd stats: zeros on an empty Redis, the right counts after a few documents, the table and --json."""

from __future__ import annotations

import json
import random
import time

import pytest
import redis
from click.testing import CliRunner
from helpers import drain, make_daemon, push, text, variant

from dedupd.cli import cli
from dedupd.index.keys import Keys
from dedupd.ops.stats import collect, human_bytes, render


def stats_cli(redis_url: str, *args: str) -> str:
    res = CliRunner().invoke(
        cli, ["stats", *args], env={"DEDUPD_REDIS_URL": redis_url}, catch_exceptions=False
    )
    assert res.exit_code == 0, res.output
    return res.output


def test_empty_redis_reads_as_zeros(r: redis.Redis, redis_url: str) -> None:
    """No stream, no group, no index yet: zeros and None, never an error."""
    s = collect(r, Keys())
    assert (s.documents, s.stream_length, s.lag, s.pending) == (0, 0, 0, 0)
    assert (s.alerts_length, s.dead_length) == (0, 0)
    assert s.group is False and s.spec is None and s.consumers == [] and s.daemons == []
    assert s.totals == {"processed": 0, "alerts": 0, "dead": 0} and s.throughput is None
    assert s.memory_per_document is None and s.used_memory and s.used_memory > 0
    text_out = stats_cli(redis_url, "--interval", "0")
    assert "no consumer group yet" in text_out and "none heartbeating" in text_out
    data = json.loads(stats_cli(redis_url, "--json", "--interval", "0"))
    assert data["documents"] == 0 and data["group"] is False and data["spec"] is None


def test_counts_after_processing(r: redis.Redis, redis_url: str) -> None:
    """Documents, alerts, dead letters, totals, the stored spec, consumers and the daemon's heartbeat."""
    rng = random.Random(11)
    docs = []
    for i in range(8):
        base = text(rng)
        docs.append({"id": f"d{i}", "text": base})
        if i < 3:
            docs.append({"id": f"d{i}-copy", "text": variant(rng, base)})
    docs.append({"id": "broken", "op": "frobnicate", "text": "x"})
    push(r, docs)
    daemon = make_daemon(redis_url, consumer="stats-probe", heartbeat_ttl_s=30)
    drain(daemon)
    daemon._heartbeat()  # refresh the heartbeat so it carries the totals

    s = collect(r, Keys())
    assert s.documents == 11 and s.stream_length == 12
    assert (s.alerts_length, s.dead_length) == (3, 1)
    assert s.totals == {"processed": 11, "alerts": 3, "dead": 1}
    assert s.group and s.lag == 0 and s.pending == 0
    assert [c.name for c in s.consumers] == ["stats-probe"] and s.consumers[0].pending == 0
    assert [(d.name, d.processed, d.alerts, d.dead) for d in s.daemons] == [("stats-probe", 11, 3, 1)]
    spec = daemon.gateway.spec
    assert s.spec is not None and (s.spec["bands"], s.spec["rows"], s.spec["num_perm"]) == (
        spec.bands,
        spec.rows,
        spec.num_perm,
    )
    assert s.memory_per_document is not None and s.memory_per_document > 0

    out = render(s)
    assert "documents indexed    11" in out and f"{spec.bands} bands x {spec.rows} rows" in out
    assert "stats-probe" in out and "3 alerts" in out and "1 dead-lettered" in out
    data = json.loads(stats_cli(redis_url, "--json", "--interval", "0"))
    assert data["documents"] == 11 and data["totals"]["alerts"] == 3
    assert data["daemons"][0]["name"] == "stats-probe"


def test_pending_and_lag_before_processing(r: redis.Redis, redis_url: str) -> None:
    """Entries read but not acknowledged are pending on their consumer; unread ones are lag."""
    push(r, [{"id": f"x{i}", "text": f"doc {i}"} for i in range(5)])
    daemon = make_daemon(redis_url, consumer="slow")
    r.xreadgroup("dedupd", "slow", {Keys().docs: ">"}, count=2)
    s = collect(r, Keys())
    assert (s.pending, s.lag) == (2, 3)
    assert [(c.name, c.pending) for c in s.consumers] == [("slow", 2)]
    daemon.client.close()


def test_throughput_from_two_samples(r: redis.Redis) -> None:
    """The counters' change over the interval, per second."""
    keys = Keys()

    def busy_sleep(seconds: float) -> None:
        r.hincrby(keys.counters, "processed", 50)
        r.hincrby(keys.counters, "alerts", 5)
        time.sleep(seconds)

    s = collect(r, keys, interval=0.3, sleep=busy_sleep)
    assert s.throughput is not None and 0.3 <= s.interval_s < 1.0
    assert s.throughput["processed"] == pytest.approx(50 / s.interval_s, rel=0.02)
    assert s.throughput["alerts"] == pytest.approx(5 / s.interval_s, rel=0.02) and s.throughput["dead"] == 0
    assert "docs/s" in render(s)


def test_human_bytes() -> None:
    assert [human_bytes(x) for x in (None, 12, 1536, 3 * 2**20)] == ["n/a", "12 B", "1.5 KiB", "3.0 MiB"]


def test_stats_shows_an_unfinished_rebuild_and_how_to_go_on(r: redis.Redis, redis_url: str) -> None:
    """A rebuild that began and died (its lease gone): stats names the target and says how to resume or abort;
    while its lease lives, it names the process running it."""
    from dedupd.index.generations import Generations

    make_daemon(redis_url)  # creates the index
    gens = Generations(r, Keys())
    state = gens.read()
    assert state is not None
    target = state.spec.with_changes({"num_perm": 64, "bands": 16, "rows": 4})
    gens.begin(target, "stream", "0-0", "host:1:abc", 60_000)
    running = collect(r, Keys()).rebuild
    assert (
        running is not None
        and running["running"] == "host:1:abc"
        and running["changes"]["num_perm"] == [128, 64]
    )
    gens.release("host:1:abc")
    text_out = stats_cli(redis_url)
    line = next(x for x in text_out.splitlines() if x.strip().startswith("rebuild"))
    assert "num_perm 128 -> 64" in line and "--num-perm 64" in line and "dedupd rebuild --abort" in line
