"""dedupd refuses a Redis that evicts keys (issue 29): the pure decision, the reading of INFO (a single server,
a fake cluster's primaries, CONFIG GET when INFO does not say), and the commands against a real redis-server
with ``maxmemory 64mb``: ``serve`` and ``rebuild`` exit 2 with one line, ``check`` exits 1, ``stats`` shows the
policy and the headroom, a running daemon warns once, and ``noeviction`` serves as ever."""

from __future__ import annotations

import json
import logging
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from blackbox import Procs, run_cli, wait_for
from click.testing import CliRunner
from conftest import free_port, start_redis_server
from helpers import make_daemon

from dedupd.cli import cli
from dedupd.errors import ConfigError
from dedupd.index.generations import Generations
from dedupd.index.keys import Keys
from dedupd.server import eviction
from dedupd.server.eviction import (
    ServerMemory,
    first_refusal,
    headroom,
    headroom_margin,
    low_headroom,
    parse_memory,
    read_memory,
    refusal,
    refuse_eviction,
    tightest,
)

MAXMEMORY = 64 * 2**20
ALLKEYS_LINE = (
    "dedupd: error: the Redis server evicts keys (maxmemory-policy allkeys-lru): dedupd's index would lose "
    "documents in silence; set maxmemory-policy noeviction (redis-cli CONFIG SET maxmemory-policy "
    "noeviction, and in redis.conf)"
)


# ----- the pure decision -----
def test_only_noeviction_or_an_unknown_policy_is_accepted() -> None:
    assert refusal("noeviction") is None and refusal(None) is None
    for policy in ("allkeys-lru", "allkeys-lfu", "allkeys-random", "volatile-lru", "volatile-ttl"):
        message = refusal(policy)
        assert message is not None and f"(maxmemory-policy {policy})" in message
        assert "set maxmemory-policy noeviction" in message and "\n" not in message
    assert f"dedupd: error: {refusal('allkeys-lru')}" == ALLKEYS_LINE
    volatile = refusal("volatile-lru")
    assert volatile is not None and "tombstones, heartbeats, reply streams" in volatile


def test_a_cluster_node_is_named_with_the_command_for_it() -> None:
    message = refusal("volatile-lfu", "10.0.0.7:7001")
    assert message is not None and message.startswith("the Redis node 10.0.0.7:7001 evicts keys")
    assert "redis-cli -h 10.0.0.7 -p 7001 CONFIG SET maxmemory-policy noeviction" in message
    nodes = [
        ServerMemory("a:1", "noeviction", 0, 10),
        ServerMemory("b:2", "allkeys-lru", 100, 10),
        ServerMemory("c:3", "volatile-lru", 100, 10),
    ]
    first = first_refusal(nodes)
    assert first is not None and "node b:2" in first and "allkeys-lru" in first
    assert first_refusal([ServerMemory("a:1", "noeviction", 0, 1), ServerMemory("b:2", None, 0, 1)]) is None


def test_headroom_margin_and_the_tightest_node() -> None:
    mib = 2**20
    assert headroom(100 * mib, 30 * mib) == 70 * mib and headroom(100, 130) == 0
    assert headroom(0, 30) is None and headroom(None, 1) is None and headroom(100, None) is None
    assert headroom_margin(100 * mib) == 10 * mib  # 10 % ...
    assert headroom_margin(4096 * mib) == 64 * mib  # ... or 64 MiB, whichever is smaller
    assert low_headroom(100 * mib, 91 * mib) and not low_headroom(100 * mib, 89 * mib)
    assert not low_headroom(0, 10**12) and not low_headroom(None, 1)
    nodes = [
        ServerMemory("a:1", "noeviction", 0, 5),
        ServerMemory("b:2", "noeviction", 100, 90),
        ServerMemory("c:3", "noeviction", 100, 20),
    ]
    tight = tightest(nodes)
    assert tight is not None and tight.node == "b:2" and tight.headroom == 10
    assert tightest([ServerMemory(None, "noeviction", 0, 5)]) == ServerMemory(None, "noeviction", 0, 5)
    assert tightest([]) is None


def test_parse_memory_takes_bytes_and_missing_figures() -> None:
    got = parse_memory({"maxmemory": "100", "used_memory": 40, "maxmemory_policy": b"allkeys-lfu"})
    assert got == ServerMemory(None, "allkeys-lfu", 100, 40) and got.headroom == 60
    assert parse_memory(None) == ServerMemory(None, None, None, None)
    assert parse_memory({"used_memory": 1}, "h:1", "volatile-ttl").policy == "volatile-ttl"


class FakeNode:
    def __init__(self, name: str) -> None:
        self.name = name


class FakeCluster:
    """A cluster client's surface: its primaries, INFO and CONFIG GET per node (or refused)."""

    def __init__(self, infos: dict[str, Any], configs: dict[str, Any] | None = None) -> None:
        self.infos, self.configs = infos, configs or {}

    def get_primaries(self) -> list[FakeNode]:
        return [FakeNode(name) for name in self.infos]

    def _reply(self, table: dict[str, Any], node: FakeNode) -> Any:
        reply = table.get(node.name)
        if isinstance(reply, Exception):
            raise reply
        return reply

    def info(self, section: str, target_nodes: FakeNode) -> Any:
        assert section == "memory"
        return self._reply(self.infos, target_nodes)

    def config_get(self, pattern: str, target_nodes: FakeNode) -> Any:
        assert pattern == "maxmemory-policy"
        return self._reply(self.configs, target_nodes)


def test_every_primary_of_a_cluster_is_read_and_the_evicting_one_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(eviction, "is_cluster", lambda client: isinstance(client, FakeCluster))
    ok = {"maxmemory": 0, "used_memory": 10, "maxmemory_policy": "noeviction"}
    client = FakeCluster(
        {
            "127.0.0.1:7000": ok,
            "127.0.0.1:7001": {"maxmemory": 0, "used_memory": 10},  # INFO without the policy: CONFIG GET
            "127.0.0.1:7002": redis.exceptions.NoPermissionError("NOPERM no +info"),
        },
        {
            "127.0.0.1:7001": {"maxmemory-policy": "volatile-lru"},
            "127.0.0.1:7002": redis.ResponseError("ERR unknown command 'CONFIG'"),
        },
    )
    got = read_memory(client)
    assert [(s.node, s.policy) for s in got] == [
        ("127.0.0.1:7000", "noeviction"),
        ("127.0.0.1:7001", "volatile-lru"),
        ("127.0.0.1:7002", None),
    ]
    with pytest.raises(
        ConfigError, match=r"^the Redis node 127\.0\.0\.1:7001 evicts keys \(maxmemory-policy volatile-lru\)"
    ):
        refuse_eviction(client)
    # a passing state is not "unknown": it is raised, for the caller to wait and retry
    busy = FakeCluster({"127.0.0.1:7000": redis.ResponseError("BUSY Redis is busy running a script")})
    with pytest.raises(redis.ResponseError, match="BUSY"):
        read_memory(busy)


def test_a_server_that_says_nothing_is_not_refused(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(eviction, "is_cluster", lambda client: isinstance(client, FakeCluster))
    refused = redis.exceptions.NoPermissionError("NOPERM")
    client = FakeCluster({"h:1": refused}, {"h:1": refused})
    with caplog.at_level(logging.WARNING, logger="dedupd.eviction"):
        assert refuse_eviction(client) == [ServerMemory("h:1", None, None, None)]
    assert "does not say its maxmemory-policy" in caplog.text and "node h:1" in caplog.text


# ----- a real redis-server with maxmemory 64mb -----
def scrape(port: int) -> dict[str, float]:
    """The unlabelled samples of a daemon's /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        body = resp.read().decode()
    return {
        name: float(value)
        for name, _, value in (line.partition(" ") for line in body.splitlines())
        if value and not name.startswith("#") and "{" not in name
    }


@pytest.fixture(scope="module")
def limited_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    proc, port = start_redis_server(
        tmp_path_factory.mktemp("evicting"), "--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru"
    )
    yield f"redis://127.0.0.1:{port}/0"
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture
def limited(limited_server: str) -> Iterator[redis.Redis]:
    """A client on the 64 MB server, flushed, its policy as the test sets it (allkeys-lru to begin with)."""
    client = redis.Redis.from_url(limited_server)
    client.flushall()
    client.config_set("maxmemory", "64mb")
    client.config_set("maxmemory-policy", "allkeys-lru")
    yield client
    client.close()


def one_line_of(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


@pytest.mark.parametrize("policy", ["allkeys-lru", "volatile-lru"])
def test_serve_refuses_an_evicting_server(policy: str, limited: redis.Redis, limited_server: str) -> None:
    limited.config_set("maxmemory-policy", policy)
    res = run_cli(limited_server, "serve", timeout=60)
    assert res.returncode == 2, res.stderr
    line = one_line_of(res.stderr)
    assert line.startswith(f"dedupd: error: the Redis server evicts keys (maxmemory-policy {policy}): ")
    assert line.endswith(
        "set maxmemory-policy noeviction (redis-cli CONFIG SET maxmemory-policy noeviction, and in redis.conf)"
    )
    if policy == "allkeys-lru":
        assert line == ALLKEYS_LINE
    assert limited.dbsize() == 0, "nothing written to an evicting server"


def test_a_daemon_in_process_refuses_too(limited: redis.Redis, limited_server: str) -> None:
    with pytest.raises(ConfigError, match=r"maxmemory-policy allkeys-lru"):
        make_daemon(limited_server)


def test_check_is_unhealthy_on_an_evicting_server(limited: redis.Redis, limited_server: str) -> None:
    limited.config_set("maxmemory-policy", "volatile-ttl")
    res = CliRunner().invoke(cli, ["check"], env={"DEDUPD_REDIS_URL": limited_server})
    assert res.exit_code == 1
    assert res.output.startswith("unhealthy: the Redis server evicts keys (maxmemory-policy volatile-ttl)")


def test_stats_names_the_policy_the_limit_and_the_headroom(limited: redis.Redis, limited_server: str) -> None:
    env = {"DEDUPD_REDIS_URL": limited_server}
    res = CliRunner().invoke(cli, ["stats", "--interval", "0"], env=env, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    policy = next(x for x in res.output.splitlines() if x.strip().startswith("eviction policy"))
    assert "allkeys-lru" in policy and "evicts keys" in policy
    limit = next(x for x in res.output.splitlines() if x.strip().startswith("memory limit"))
    assert "maxmemory 64.0 MiB, headroom " in limit
    assert "warning: the Redis server evicts keys (maxmemory-policy allkeys-lru)" in res.output
    res = CliRunner().invoke(cli, ["stats", "--json", "--interval", "0"], env=env, catch_exceptions=False)
    data = json.loads(res.output)
    assert data["maxmemory_policy"] == "allkeys-lru" and data["maxmemory"] == MAXMEMORY
    used = int(limited.info("memory")["used_memory"])
    assert (
        0 < data["memory_headroom"] <= MAXMEMORY and abs(data["memory_headroom"] - (MAXMEMORY - used)) < 2**20
    )
    assert any("evicts keys" in w for w in data["warnings"])
    # noeviction, and a headroom under the margin (here 10 % of maxmemory): a warning of its own
    limited.config_set("maxmemory-policy", "noeviction")
    used = int(limited.info("memory")["used_memory"])
    limited.config_set("maxmemory", str(used + used // 25))  # 4 % left (0 once over it: still low)
    data = json.loads(CliRunner().invoke(cli, ["stats", "--json", "--interval", "0"], env=env).output)
    assert data["maxmemory_policy"] == "noeviction" and data["memory_headroom"] < used // 10
    assert len(data["warnings"]) == 1 and "under the margin of" in data["warnings"][0]


def test_stats_on_a_server_without_a_limit(r: redis.Redis, redis_url: str) -> None:
    res = CliRunner().invoke(cli, ["stats", "--interval", "0"], env={"DEDUPD_REDIS_URL": redis_url})
    assert res.exit_code == 0, res.output
    assert "no limit (maxmemory 0)" in res.output and "warning" not in res.output
    data = json.loads(
        CliRunner()
        .invoke(cli, ["stats", "--json", "--interval", "0"], env={"DEDUPD_REDIS_URL": redis_url})
        .output
    )
    assert data["maxmemory_policy"] == "noeviction" and data["maxmemory"] == 0
    assert data["memory_headroom"] is None and data["warnings"] == []


def test_rebuild_refuses_an_evicting_server(limited: redis.Redis, limited_server: str) -> None:
    limited.config_set("maxmemory-policy", "noeviction")
    make_daemon(limited_server).client.close()  # the index exists
    limited.config_set("maxmemory-policy", "allkeys-lfu")
    res = run_cli(limited_server, "rebuild", "--num-perm", "64", "--wait", "1", timeout=60)
    assert res.returncode == 2, res.stderr
    assert one_line_of(res.stderr).startswith(
        "dedupd: error: the Redis server evicts keys (maxmemory-policy allkeys-lfu): "
    )
    state = Generations(limited, Keys()).read()
    assert state is not None and state.gen == 0 and state.next_spec is None, "no rebuild began"


def test_noeviction_with_a_limit_serves(limited: redis.Redis, limited_server: str, tmp_path: Path) -> None:
    """maxmemory with noeviction is fine: serve finds a duplicate, check is healthy, the gauge shows the headroom."""
    limited.config_set("maxmemory-policy", "noeviction")
    procs = Procs(limited_server, tmp_path)
    port = free_port()
    try:
        served = procs.serve("--consumer", "limited", "--metrics-port", str(port))
        words = "storm hits the coast thousands without power as the river floods the old town tonight"
        limited.xadd("dedupd:docs", {"id": "a", "text": words})
        limited.xadd("dedupd:docs", {"id": "b", "text": words + " again"})
        wait_for(lambda: limited.xlen("dedupd:alerts") == 1, 60, "the alert")
        res = CliRunner().invoke(cli, ["check"], env={"DEDUPD_REDIS_URL": limited_server})
        assert res.exit_code == 0 and "limited" in res.output, res.output

        def gauge() -> float:
            try:
                return scrape(port).get("dedupd_redis_memory_headroom_bytes", -2.0)
            except OSError:  # the endpoint is not up yet
                return -2.0

        wait_for(lambda: gauge() > 0, 30, "the headroom gauge")
        assert gauge() < MAXMEMORY
        assert served.stop() == 0
        assert "evicts" not in served.stderr and "Traceback" not in served.stderr
    finally:
        procs.close()


def test_a_running_daemon_warns_once_when_the_policy_turns_evicting(
    limited: redis.Redis, limited_server: str, caplog: pytest.LogCaptureFixture
) -> None:
    limited.config_set("maxmemory-policy", "noeviction")
    daemon = make_daemon(limited_server, consumer="watcher")
    try:
        daemon.iteration()
        gauge = daemon.metrics.registry.get_sample_value("dedupd_redis_memory_headroom_bytes")
        assert gauge is not None and 0 < gauge < MAXMEMORY
        limited.config_set("maxmemory-policy", "allkeys-lru")
        with caplog.at_level(logging.INFO, logger="dedupd.daemon"):
            for _ in range(3):
                daemon.metrics._last_group = 0.0  # the gauges are due again
                daemon.iteration()  # goes on serving
        warned = [r for r in caplog.records if "evicts keys" in r.getMessage()]
        assert len(warned) == 1 and warned[0].levelno == logging.WARNING
        assert "maxmemory-policy allkeys-lru" in warned[0].getMessage()
        limited.config_set("maxmemory-policy", "noeviction")
        with caplog.at_level(logging.INFO, logger="dedupd.daemon"):
            daemon.metrics._last_group = 0.0
            daemon.iteration()
        assert "no longer reports an evicting" in caplog.text
    finally:
        daemon.client.close()


def test_the_gauge_is_minus_one_without_a_limit(r: redis.Redis, redis_url: str) -> None:
    daemon = make_daemon(redis_url, consumer="no-limit")
    daemon.iteration()
    assert daemon.metrics.registry.get_sample_value("dedupd_redis_memory_headroom_bytes") == -1
    daemon.client.close()
