"""Redis Cluster: a real 6-node cluster (3 primaries, 3 replicas) from scripts/cluster-up.sh.

The same pairs as on a single Redis, four consumers as one, and a primary killed (SIGKILL) during a run:
its replica is promoted and the daemons carry on, losing and doubling nothing.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.cluster
from helpers import alerts, text, variant
from procs import DEDUPD, Served, check_exactly_once, counter, pairs_corpus, push_corpus, wait_for

from dedupd.daemon.monitor import group_state
from dedupd.index.keys import Keys

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
pytestmark = pytest.mark.slow


def _cluster_support() -> str | None:
    """Why a local cluster cannot be started here, or None."""
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        return "redis-server/redis-cli not installed"
    out = subprocess.run(["redis-cli", "--cluster", "help"], capture_output=True, text=True, check=False)
    if "create" not in out.stdout + out.stderr:
        return "this redis-cli has no --cluster create (Redis >= 5 needed)"
    return None


class Cluster:
    """A cluster started by scripts/cluster-up.sh in ``workdir``; stopped by scripts/cluster-down.sh."""

    def __init__(self, workdir: Path) -> None:
        self.dir = workdir
        out = subprocess.run(
            ["bash", str(SCRIPTS / "cluster-up.sh"), "", str(workdir)],
            capture_output=True,
            check=False,
            text=True,
            timeout=120,
            env={**os.environ, "CLUSTER_NODE_TIMEOUT": "2000"},
        )
        if out.returncode != 0:
            subprocess.run(
                ["bash", str(SCRIPTS / "cluster-down.sh"), str(workdir), "--keep"],
                capture_output=True,
                check=False,
            )
            raise RuntimeError(f"cluster-up.sh failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
        m = re.search(r"DEDUPD_REDIS_URL=(\S+) DEDUPD_REDIS_CLUSTER=1", out.stdout)
        assert m, out.stdout
        self.url = m.group(1)

    @property
    def ports(self) -> list[int]:
        base = int((self.dir / "base_port").read_text())
        return list(range(base, base + 6))

    def client(self) -> redis.cluster.RedisCluster:
        return redis.cluster.RedisCluster.from_url(self.url)

    def flush(self) -> None:
        c = self.client()
        c.flushall(target_nodes=redis.cluster.RedisCluster.PRIMARIES)
        c.close()

    def pid(self, port: int) -> int:
        return int((self.dir / str(port) / "redis.pid").read_text())

    def start(self, port: int) -> None:
        """Start a stopped node again (scripts/cluster-up.sh wrote its command line)."""
        subprocess.run(["bash", str(self.dir / str(port) / "start.sh")], check=True, timeout=30)

    def down(self) -> None:
        subprocess.run(
            ["bash", str(SCRIPTS / "cluster-down.sh"), str(self.dir)],
            capture_output=True,
            timeout=60,
            check=False,
        )


def _running_cluster(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[Cluster]:
    """A local cluster in a fresh directory, torn down afterwards (skips without cluster support)."""
    reason = _cluster_support()
    if reason:
        pytest.skip(f"no local Redis Cluster: {reason}")
    c = Cluster(tmp_path_factory.mktemp(name))
    yield c
    c.down()


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from _running_cluster(tmp_path_factory, "cluster")


@pytest.fixture
def rc(cluster: Cluster) -> Iterator[redis.cluster.RedisCluster]:
    """A client of the flushed session cluster."""
    cluster.flush()
    client = cluster.client()
    yield client
    client.close()


def serve(url: str, log: Path, *args: str, **env: str) -> Served:
    return Served(url, log, *args, DEDUPD_REDIS_CLUSTER="1", **env)


def _drained(client: Any, n: int) -> bool:
    try:
        state = group_state(client, Keys())
    except redis.RedisError:  # a failover in progress
        return False
    return state is not None and state["added"] >= n and state["lag"] == 0 and state["pending"] == 0


def _run(
    url: str,
    client: Any,
    docs: list[dict[str, str]],
    tmp_path: Path,
    name: str,
    consumers: int = 1,
    cluster: bool = True,
    **env: str,
) -> dict[str, str]:
    inputs = push_corpus(client, docs)
    extra = {"DEDUPD_REDIS_CLUSTER": "1"} if cluster else {}
    daemons = [
        Served(url, tmp_path / f"{name}-{k}.log", "--batch-size", "64", **extra, **env)
        for k in range(consumers)
    ]
    wait_for(lambda: _drained(client, len(docs)), 180, f"{name}: every entry processed", poll=0.1)
    for d in daemons:
        assert d.stop() == 0, d.stderr
        assert "Traceback" not in d.stderr, d.stderr
    return inputs


def _corpus(seed: int) -> tuple[list[dict[str, str]], set[frozenset[str]]]:
    """Pairs, groups of 4 variants of one text, then a delete, an append, an upsert and a late copy."""
    import random

    docs, expected = pairs_corpus(250, seed, words=60)
    pairs = {frozenset(p) for p in expected}
    rng = random.Random(seed + 1)
    for g in range(40):
        base = text(rng, 80)
        members = [f"g{g}-{k}" for k in range(4)]
        for m in members:
            docs.append({"id": m, "text": variant(rng, base)})
    # updates: a delete, an append, an upsert to other text, and a late copy of the first document
    docs += [
        {"id": "p1a", "op": "delete"},
        {"id": "p2b", "op": "append", "text": "and a few more words here"},
        {"id": "p3a", "text": text(rng, 60)},
        {"id": "late", "text": docs[0]["text"]},
    ]
    pairs.add(frozenset(("late", "p0a")))
    return docs, pairs


def _found(client: Any) -> set[frozenset[str]]:
    return {frozenset((a["id"], m[0])) for a in alerts(client) for m in a["matches"]}


def _once_per_input(client: Any, inputs: dict[str, str]) -> None:
    got = alerts(client)
    per_input = Counter(a["input"] for a in got)
    assert max(per_input.values(), default=1) == 1, [k for k, v in per_input.items() if v > 1]
    assert all(inputs[a["input"]] == a["id"] for a in got)


def test_serve_names_the_primary_that_evicts(cluster: Cluster, rc: redis.cluster.RedisCluster) -> None:
    """Every primary's eviction policy is read: one of them on volatile-lru is named, and serve exits 2."""
    node = rc.get_primaries()[1]
    rc.config_set("maxmemory-policy", "volatile-lru", target_nodes=node)
    try:
        env = {**os.environ, "DEDUPD_REDIS_URL": cluster.url, "DEDUPD_REDIS_CLUSTER": "1"}
        res = subprocess.run([*DEDUPD, "serve"], env=env, capture_output=True, text=True, timeout=60)
    finally:
        rc.config_set("maxmemory-policy", "noeviction", target_nodes=node)
    assert res.returncode == 2, res.stderr
    [line] = res.stderr.strip().splitlines()
    assert line.startswith("dedupd: error: the Redis node ") and "Traceback" not in res.stderr
    assert f":{node.port} evicts keys (maxmemory-policy volatile-lru)" in line
    assert f"-p {node.port} CONFIG SET maxmemory-policy noeviction" in line


def test_cluster_finds_the_same_pairs_as_a_single_redis(
    rc: Any, cluster: Cluster, r: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    docs, pairs = _corpus(71)
    single_inputs = _run(redis_url, r, docs, tmp_path, "single", cluster=False)
    single = _found(r)
    assert pairs <= single  # every planted pair, and the groups' pairs
    cluster_inputs = _run(cluster.url, rc, docs, tmp_path, "cluster")
    assert _found(rc) == single
    _once_per_input(rc, cluster_inputs)
    _once_per_input(r, single_inputs)

    # one consumer: the same alerts, document by document
    def key(a: dict[str, Any]) -> tuple[Any, ...]:
        return (a["id"], a["duplicate_of"], a["similarity"], str(a["matches"]), a["cluster"])

    assert sorted(map(key, alerts(rc))) == sorted(map(key, alerts(r)))
    assert counter(rc, "processed") == len(docs)


def test_four_consumers_on_the_cluster_find_the_same_pairs_as_one(
    rc: Any, cluster: Cluster, tmp_path: Path
) -> None:
    docs, pairs = _corpus(72)
    _run(cluster.url, rc, docs, tmp_path, "one")
    one = _found(rc)
    assert pairs <= one
    cluster.flush()
    inputs = _run(cluster.url, rc, docs, tmp_path, "four", consumers=4)
    assert _found(rc) == one
    _once_per_input(rc, inputs)
    # the four left the group when they stopped, nothing pending for them
    assert not {_s(c["name"]) for c in rc.xinfo_consumers(Keys().docs, "dedupd")}


@pytest.fixture
def own_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A cluster of its own (the failover test changes its topology)."""
    yield from _running_cluster(tmp_path_factory, "failover")


def _s(x: bytes | str) -> str:
    return x.decode() if isinstance(x, bytes) else x


def _primary_of(client: Any, key: str) -> int:
    node = client.get_node_from_key(key)
    return int(node.port)


def test_failover_of_a_primary_mid_run_loses_and_doubles_nothing(
    own_cluster: Cluster, tmp_path: Path
) -> None:
    """SIGKILL the primary holding the input stream while two daemons work; its replica takes over.

    Replication is asynchronous: only with ``wait_replicas`` is a batch acknowledged once a replica has its
    writes, so nothing acknowledged dies with the primary. The killed node is started again after the
    promotion (as an operator would) and rejoins as the new primary's replica; until then the promoted
    primary has no replica, and batches touching it stay pending.
    """
    client = own_cluster.client()
    docs, expected = pairs_corpus(1500, 73, words=60)
    inputs = push_corpus(client, docs)
    victim_port = _primary_of(client, Keys().docs)
    time.sleep(0.5)  # let the replicas catch up with the push (replication is asynchronous)
    daemons = [
        serve(
            own_cluster.url,
            tmp_path / f"serve-{k}.log",
            "--batch-size",
            "50",
            DEDUPD_CLAIM_IDLE_MS="3000",
            DEDUPD_WAIT_REPLICAS="1",
        )
        for k in range(2)
    ]
    wait_for(lambda: counter(client, "processed") >= 300, 120, "300 documents processed")
    os.kill(own_cluster.pid(victim_port), signal.SIGKILL)
    processed_at_kill = counter(client, "processed")
    assert processed_at_kill < len(docs), "the kill came after the run"
    killed_at = time.monotonic()
    # the replica is promoted after cluster-node-timeout (2 s); the daemons wait and go on
    other = next(p for p in own_cluster.ports if p != victim_port)

    def promoted() -> bool:
        cli = ["redis-cli", "-p", str(other), "cluster"]
        info = subprocess.run([*cli, "info"], capture_output=True, text=True, check=False).stdout
        nodes = subprocess.run(
            [*cli, "nodes"], capture_output=True, text=True, check=False
        ).stdout.splitlines()
        victim = [n for n in nodes if f":{victim_port}@" in n]
        live_primaries = [n for n in nodes if "master" in n.split()[2] and "fail" not in n.split()[2]]
        return (
            "cluster_state:ok" in info
            and bool(victim)
            and "fail" in victim[0].split()[2]
            and len(live_primaries) == 3
        )

    wait_for(promoted, 60, "the replica to be promoted", poll=0.1)
    recovered_s = time.monotonic() - killed_at
    fresh = redis.cluster.RedisCluster(host="127.0.0.1", port=other)  # the URL's node may be the dead one
    # a daemon started now, with a URL naming the dead node first and a live one after it, joins them
    late = serve(
        f"redis://127.0.0.1:{victim_port},127.0.0.1:{other}",
        tmp_path / "serve-late.log",
        "--batch-size",
        "50",
        "--consumer",
        "late",
        DEDUPD_WAIT_REPLICAS="1",
    )
    daemons.append(late)
    wait_for(
        lambda: "late" in {_s(c["name"]) for c in fresh.xinfo_consumers(Keys().docs, "dedupd")},
        60,
        "the late daemon to join the group",
        poll=0.1,
    )
    own_cluster.start(victim_port)  # it comes back as the promoted primary's replica
    wait_for(lambda: _drained(fresh, len(docs)), 240, "every entry processed after the failover", poll=0.2)
    for d in daemons:
        assert d.proc.poll() is None, d.stderr  # carried on
        assert d.stop() == 0, d.stderr
    check_exactly_once(fresh, expected, inputs)
    assert counter(fresh, "processed") >= len(docs)
    logs = "".join(d.stderr for d in daemons)
    assert "Traceback" not in logs, logs
    assert "retrying" in logs  # they did meet the dead primary, and waited
    assert recovered_s < 30
    fresh.close()
    client.close()


def _bucket_sizes(client: Any) -> list[int]:
    return sorted(
        len(v) // 4 for key in client.scan_iter(match=f"{Keys().prefix}:b:*") for v in client.hvals(key)
    )


def test_a_flood_on_the_cluster_is_bounded_as_on_a_single_redis(
    rc: Any, cluster: Cluster, r: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    """The bucket script's hits and the evictions (one call per slot on the cluster) leave the same buckets
    and the same alerts as on a single Redis: every copy found, the buckets kept small."""
    import random

    rng = random.Random(5)
    base = text(rng, 100)
    docs = [{"id": f"copy-{i}", "text": variant(rng, base, 1)} for i in range(300)]
    # one batch at a time on both (a Redis Cluster does not overlap batches; overlapping ones read the buckets
    # before the last batch's evictions when they can)
    _run(redis_url, r, docs, tmp_path, "single", cluster=False, DEDUPD_OVERLAP_BATCHES="0")
    _run(cluster.url, rc, docs, tmp_path, "cluster")
    got = alerts(rc)
    assert {a["id"] for a in got} == {d["id"] for d in docs[1:]}
    assert {a["cluster"] for a in got} == {"copy-0"}

    def key(a: dict[str, Any]) -> tuple[Any, ...]:
        return (a["id"], a["duplicate_of"], a["similarity"], str(a["matches"]), a["cluster"])

    assert sorted(map(key, got)) == sorted(map(key, alerts(r)))
    sizes = _bucket_sizes(rc)
    assert sizes == _bucket_sizes(r)
    assert sum(sizes) < 300 * 25 * 0.75, sum(sizes)  # the shared buckets keep a few of the cluster


def test_the_members_of_a_cluster_are_listed_and_deleted_on_a_redis_cluster(
    rc: Any, cluster: Cluster, tmp_path: Path
) -> None:
    """`dedupd cluster` on a Redis Cluster (its script in the ids' slot, the members' records read from their
    nodes): every member once across pages; `dedupd delete` through the stream, then the rest."""
    import json
    import random

    rng = random.Random(6)
    base = text(rng, 80)
    docs = [{"id": f"c{i}", "text": variant(rng, base, 1)} for i in range(60)]
    _run(cluster.url, rc, docs, tmp_path, "members")
    env = {**os.environ, "DEDUPD_REDIS_URL": cluster.url, "DEDUPD_REDIS_CLUSTER": "1"}

    def listed(doc_id: str) -> list[str]:
        out: list[str] = []
        cursor: list[str] = []
        while True:
            args = [*DEDUPD, "cluster", doc_id, "--json", "--limit", "25", *cursor]
            res = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
            assert res.returncode == 0, res.stderr
            page = json.loads(res.stdout)
            assert page["cluster"] == "c0" and page["complete"]
            out += page["members"]
            if page["next"] is None:
                return out
            cursor = ["--cursor", page["next"]]

    assert sorted(listed("c7")) == sorted(d["id"] for d in docs)
    res = subprocess.run(
        [*DEDUPD, "delete", "c1", "c2", "c3"], env=env, capture_output=True, text=True, timeout=60
    )
    assert res.returncode == 0 and "pushed 3 deletes" in res.stderr, res.stderr
    _run(cluster.url, rc, [], tmp_path, "deletes")
    assert sorted(listed("c7")) == sorted(d["id"] for d in docs[4:] + docs[:1])


def test_rebuild_alert_existing_on_a_redis_cluster(rc: Any, cluster: Cluster, tmp_path: Path) -> None:
    """`dedupd rebuild --threshold 0.6 --alert-existing` on a Redis Cluster (the unions in the ids' slot, the
    debt in the meta hash's, the records re-read from their nodes just before the alerts): the alerts of a
    single Redis (tests/test_alert_existing.py)."""
    from test_alert_existing import families

    _run(cluster.url, rc, families(), tmp_path, "families")
    assert [(a["id"], a["duplicate_of"]) for a in alerts(rc)] == [("D", "A"), ("E", "P")]
    env = {**os.environ, "DEDUPD_REDIS_URL": cluster.url, "DEDUPD_REDIS_CLUSTER": "1"}
    res = subprocess.run(
        [*DEDUPD, "rebuild", "--threshold", "0.6", "--alert-existing"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    got = [(a["id"], a["duplicate_of"], [m[0] for m in a["matches"]], a["by"]) for a in alerts(rc)[2:]]
    assert got == [("C", "A", ["A"], "rebuild"), ("E", "P", ["P", "X"], "rebuild")]


def _windowed(
    url: str,
    client: Any,
    docs: list[dict[str, str]],
    keys: Keys,
    tmp_path: Path,
    name: str,
    window: int,
    cluster: bool,
) -> None:
    """``docs`` through one `dedupd serve` with a count window, one batch at a time (a Redis Cluster does not
    overlap batches), until every entry is processed and nothing is past the window."""
    push_corpus(client, docs)
    extra = {"DEDUPD_REDIS_CLUSTER": "1"} if cluster else {}
    daemon = Served(
        url,
        tmp_path / f"{name}.log",
        "--batch-size",
        "64",
        DEDUPD_MAX_DOCUMENTS=str(window),
        DEDUPD_OVERLAP_BATCHES="0",
        **extra,
    )

    def done() -> bool:
        return _drained(client, len(docs)) and client.zcard(keys.touched) == window

    wait_for(done, 240, f"{name}: every entry processed and expired", poll=0.1)
    assert daemon.stop() == 0, daemon.stderr
    assert "Traceback" not in daemon.stderr, daemon.stderr


def test_a_window_on_the_cluster_gives_the_verdicts_of_a_single_redis(
    rc: Any, cluster: Cluster, r: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    """bench_retention.py's planted-pairs stream (3,000 documents, a window of 600, pairs at 0.1 to 2 W, a
    text re-copied every 0.8 W and one copied once) through a count window on a single Redis and on the
    cluster (expiry's scripts in the ids' slot, the records deleted and the buckets left per slot): the same
    alerts, the same verdicts; every pair closer than the window alerted, none twice as far."""
    from helpers import load_script

    bench = load_script("bench_retention")
    window = 600
    docs, truth = bench.build_stream(3000, window, 40, 3, 5)
    keys = Keys()
    _windowed(redis_url, r, docs, keys, tmp_path, "single", window, cluster=False)
    _windowed(cluster.url, rc, docs, keys, tmp_path, "cluster", window, cluster=True)
    single, on_cluster = bench.verdicts(r, truth, window, keys), bench.verdicts(rc, truth, window, keys)
    assert on_cluster == single

    def key(a: dict[str, Any]) -> tuple[Any, ...]:
        return (a["id"], a["duplicate_of"], a["similarity"], str(a["matches"]), a["cluster"])

    assert sorted(map(key, alerts(rc))) == sorted(map(key, alerts(r)))
    for row in single["pairs"].values():
        if row["distance"] < window:
            assert row["alerted"] == row["pairs"], single
        elif row["distance"] >= 2 * window:
            assert row["alerted"] == 0, single
    assert single["kept_indexed"] and single["kept_named_by"] == single["kept_copies"] > 0
    assert single["once_named"] and not single["once_indexed"]
    assert int(rc.get(keys.expired_count) or 0) == len(docs) - window == int(r.get(keys.expired_count) or 0)
    assert rc.hlen(keys.id_forward) == window and not rc.exists(keys.expiring)


def test_an_expiry_step_killed_between_the_bucket_leave_and_the_record_delete_leaves_nothing(
    rc: Any, cluster: Cluster
) -> None:
    """On a Redis Cluster a record and its buckets live in other slots: an expiry step leaves the buckets
    first and deletes the record after (cluster_records.py: settle). A step that dies in between (here: the
    settle raises) leaves its claim; the step that takes it over finds the records still there, leaves the
    buckets again (nothing) and deletes them: no expired document is left in any bucket."""
    import random

    from helpers import drain

    from dedupd.daemon.expiry import expire_step
    from dedupd.daemon.loop import Daemon
    from dedupd.index.cluster_records import ClusterRecords
    from dedupd.settings import load_settings

    keys = Keys()
    settings = load_settings(redis_url=cluster.url, redis_cluster=True, max_documents=10, block_ms=50)
    daemon = Daemon(settings)
    rng = random.Random(8)
    push_corpus(rc, [{"id": f"d{i}", "text": text(rng, 40)} for i in range(30)])
    chores = daemon.housekeeping
    chores.expire_timer.due = lambda: False  # type: ignore[method-assign]
    real = chores.expire
    chores.expire = lambda gw, background=False, held=False: None  # type: ignore[method-assign]
    drain(daemon)
    chores.expire = real  # type: ignore[method-assign]
    gw = daemon.gateway
    gone = [int(n) for n, _ in rc.zrange(keys.touched, 0, 19, withscores=True)]
    settle = ClusterRecords.settle

    def dies(self: ClusterRecords, *args: Any) -> None:
        raise redis.ConnectionError("killed between the bucket leave and the record delete")

    ClusterRecords.settle = dies  # type: ignore[method-assign]
    try:
        with pytest.raises(redis.ConnectionError):
            expire_step(gw, 100, 0)  # its claim lapses at once
    finally:
        ClusterRecords.settle = settle  # type: ignore[method-assign]
    assert all(rc.exists(keys.doc(n, gw.generation)) for n in gone)  # left, not deleted
    done = expire_step(gw, 100, 60_000)  # another step takes the claim over
    assert (done.expired, done.backlog) == (20, 0)
    assert not any(rc.exists(keys.doc(n, gw.generation)) for n in gone)
    members = {m for key in rc.scan_iter(match=f"{keys.prefix}:b:*") for v in rc.hvals(key) for m in _ids(v)}
    assert members and not members & set(gone)
    assert int(rc.get(keys.expired_count) or 0) == 20 and rc.hlen(keys.id_forward) == 10


def _ids(packed: bytes) -> list[int]:
    return [int.from_bytes(packed[i : i + 4], "little") for i in range(0, len(packed), 4)]
