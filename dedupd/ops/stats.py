"""What `dedupd stats` reports: index size, memory, stream lag, pending entries, daemons, outputs, throughput.

Every figure is read with a few cheap commands (HLEN, XLEN, XINFO, INFO memory, the heartbeat keys, the
counters hash); nothing is scanned except the heartbeat keys. Missing keys (an empty Redis, no consumer
group yet) read as zeros.

The server's eviction policy, ``maxmemory`` and the headroom (``maxmemory - used_memory``) come with warnings:
a policy other than ``noeviction`` (dedupd's keys would be evicted in silence), and a headroom under the
margin of dedupd/server/eviction.py (10 % of ``maxmemory`` or 64 MiB, whichever is smaller).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import redis

from dedupd.daemon.monitor import group_state, live_consumers
from dedupd.index.generations import Generations
from dedupd.index.keys import GROUP, Keys
from dedupd.server.eviction import (
    HEADROOM_MARGIN_BYTES,
    HEADROOM_MARGIN_FRACTION,
    ServerMemory,
    headroom_margin,
    read_memory,
    tightest,
)

COUNTERS = ("processed", "alerts", "dead")


@dataclass(frozen=True, slots=True)
class ConsumerStats:
    """One consumer of the group, as XINFO CONSUMERS sees it."""

    name: str
    pending: int
    idle_ms: int


@dataclass(frozen=True, slots=True)
class DaemonStats:
    """One live daemon, from its heartbeat (totals since it started)."""

    name: str
    pid: int | None
    processed: int
    alerts: int
    dead: int
    batches: int
    heartbeat_age_s: float


@dataclass(frozen=True, slots=True)
class Stats:
    """A snapshot of one prefix's state."""

    prefix: str
    documents: int
    spec: dict[str, Any] | None
    used_memory: int | None  # bytes, the whole Redis server (every prefix, every database)
    memory_per_document: float | None  # (used_memory - the server's memory at startup) / documents
    stream: str
    stream_length: int
    group: bool  # whether the consumer group exists yet
    lag: int | None  # entries not yet delivered to any consumer (None: Redis cannot tell)
    pending: int  # delivered, not yet acknowledged
    consumers: list[ConsumerStats] = field(default_factory=list)
    daemons: list[DaemonStats] = field(default_factory=list)
    alerts_length: int = 0
    dead_length: int = 0
    totals: dict[str, int] = field(default_factory=dict)
    throughput: dict[str, float] | None = None  # per second over ``interval_s``
    interval_s: float = 0.0
    rebuild: dict[str, Any] | None = None  # an unfinished rebuild: its target, and who runs it (if anyone)
    stale: list[str] = field(default_factory=list)  # consumers of stopped daemons (see stale_consumers)
    stale_idle_ms: int = 0
    # the server's eviction policy (a cluster: the first evicting primary's, else that of the primary with the
    # least headroom); None: the server does not say
    maxmemory_policy: str | None = None
    maxmemory: int | None = None  # bytes; 0: no limit; None: unknown (a cluster: the tightest primary's)
    memory_headroom: int | None = None  # maxmemory - used_memory (0 at or over it); None: no limit or unknown
    memory_node: str | None = None  # the cluster primary these figures are of (None: a single server)
    warnings: list[str] = field(default_factory=list)  # an evicting policy, a headroom under the margin
    retention: dict[str, Any] | None = None  # the window and its expiry (retention_of); None: no window

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _s(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def read_counters(client: Any, keys: Keys) -> dict[str, int]:
    """The running totals (``processed``, ``alerts``, ``dead``) kept by the daemons; 0 when absent."""
    raw = {_s(k): int(v) for k, v in client.hgetall(keys.counters).items()}
    return {name: raw.get(name, 0) for name in COUNTERS}


def used_memory(client: Any) -> tuple[int, int] | None:
    """``used_memory`` and ``used_memory_startup`` from INFO memory (summed over the nodes of a cluster)."""
    try:
        info = client.info("memory")
    except redis.ResponseError:
        return None
    nodes = [info] if "used_memory" in info else [v for v in info.values() if isinstance(v, dict)]
    nodes = [n for n in nodes if "used_memory" in n]
    if not nodes:
        return None
    used = sum(int(n["used_memory"]) for n in nodes)
    return used, sum(int(n.get("used_memory_startup", 0)) for n in nodes)


def memory_warnings(servers: list[ServerMemory]) -> list[str]:
    """One line per server (cluster primary) that evicts keys, then one per server short of memory.

    >>> memory_warnings([ServerMemory(None, "noeviction", 100 * 2**20, 99 * 2**20)])  # doctest: +ELLIPSIS
    ['the Redis server has 1.0 MiB left before maxmemory 100.0 MiB, under the margin of 10.0 MiB (...)...']
    """
    out = [s.refusal for s in servers if s.refusal is not None]
    for server in servers:
        if server.low and server.maxmemory is not None:
            where = f"node {server.node}" if server.node else "server"
            margin = human_bytes(headroom_margin(server.maxmemory))
            rule = (
                f"{HEADROOM_MARGIN_FRACTION:.0%} of maxmemory, at most {human_bytes(HEADROOM_MARGIN_BYTES)}"
            )
            out.append(
                f"the Redis {where} has {human_bytes(server.headroom)} left before maxmemory "
                f"{human_bytes(server.maxmemory)}, under the margin of {margin} ({rule}): at maxmemory Redis "
                "refuses writes (OOM) and the daemons wait until it has room; raise maxmemory, or keep less "
                "(docs_retention_s, the *_retention settings)"
            )
    return out


def consumers(client: Any, keys: Keys) -> list[ConsumerStats]:
    """Every consumer of the group with its pending count and idle time; [] without a group."""
    try:
        rows = client.xinfo_consumers(keys.docs, GROUP)
    except redis.ResponseError:
        return []
    out = [ConsumerStats(_s(c["name"]), int(c["pending"]), int(c["idle"])) for c in rows]
    return sorted(out, key=lambda c: c.name)


def stale_consumers(group: list[ConsumerStats], live: set[str], idle_ms: int) -> list[str]:
    """The consumers left by stopped daemons: idle longer than ``idle_ms``, nothing pending, no heartbeat.

    >>> stale_consumers([ConsumerStats("a", 0, 900), ConsumerStats("b", 2, 900)], set(), 500)
    ['a']
    """
    return [c.name for c in group if c.idle_ms > idle_ms and c.pending == 0 and c.name not in live]


def daemons(client: Any, keys: Keys) -> list[DaemonStats]:
    """The daemons whose heartbeat key is alive."""
    now = time.time()
    out = []
    for name, beat in live_consumers(client, keys).items():
        out.append(
            DaemonStats(
                name=name,
                pid=beat.pid or None,
                processed=beat.processed,
                alerts=beat.alerts,
                dead=beat.dead,
                batches=beat.batches,
                heartbeat_age_s=max(0.0, now - beat.time),
            )
        )
    return sorted(out, key=lambda d: d.name)


def stored_spec(client: Any, keys: Keys) -> dict[str, Any] | None:
    """The parameters the index was built with, or None before the first daemon starts."""
    state = Generations(client, keys).read()
    return asdict(state.spec) if state is not None else None


_WINDOW = ("retention_s", "max_documents", "refresh_on_duplicate")


def retention_of(client: Any, keys: Keys, spec: dict[str, Any] | None) -> dict[str, Any] | None:
    """The retention window of the stored index and its expiry (index/retention.py): the window, the age of
    the least recently touched document (s), documents expired, and the backlog: documents past the window
    not yet expired (claims under way included). None when the index has no window. Read only."""
    if spec is None or (spec.get("retention_s") is None and spec.get("max_documents") is None):
        return None
    age_s, count = spec.get("retention_s"), spec.get("max_documents")
    seconds, micros = client.time()
    now = int(seconds) * 1000 + int(micros) // 1000
    pipe = client.pipeline(transaction=False)
    pipe.zrange(keys.touched, 0, 0, withscores=True)
    pipe.zcard(keys.touched)
    pipe.zcount(keys.touched, "-inf", now - (age_s or 0) * 1000)
    pipe.zcard(keys.expiring)
    pipe.get(keys.expired_count)
    oldest, touched, old, claimed, expired = pipe.execute()
    due = max(old if age_s else 0, touched - count if count else 0)
    return {
        "retention_s": age_s,
        "max_documents": count,
        "refresh_on_duplicate": spec.get("refresh_on_duplicate", True),
        "oldest_age_s": round(max(0, now - oldest[0][1]) / 1000, 1) if oldest else None,
        "expired": int(expired or 0),
        "backlog": int(due) + int(claimed),
    }


def _retention_text(w: dict[str, Any]) -> str:
    """The retention line of the report."""
    bounds = [
        f"{w['retention_s']:,} s" if w["retention_s"] else "",
        f"{w['max_documents']:,} documents" if w["max_documents"] else "",
    ]
    refresh = "a match restarts a document's age" if w["refresh_on_duplicate"] else "matches do not refresh"
    oldest = "none" if w["oldest_age_s"] is None else f"{w['oldest_age_s']:,.1f} s"
    return (
        f"window {' and '.join(b for b in bounds if b)} ({refresh}); oldest document touched {oldest} ago; "
        f"{w['expired']:,} expired, backlog {w['backlog']:,}"
    )


def rebuild_state(client: Any, keys: Keys) -> dict[str, Any] | None:
    """An unfinished rebuild (generation, mode, changes, the running process if its lease lives), or None."""
    gens = Generations(client, keys)
    state = gens.read()
    if state is None or state.next_spec is None:
        return None
    changes = {name: [old, new] for name, old, new in state.spec.differences(state.next_spec)}
    return {
        "from_gen": state.gen,
        "to_gen": state.next_gen,
        "mode": state.next_mode,
        "changes": changes,
        "running": gens.lease_owner(),
    }


def collect(
    client: Any,
    keys: Keys,
    interval: float = 0.0,
    sleep: Callable[[float], None] = time.sleep,
    stale_idle_ms: int = 300_000,
) -> Stats:
    """Read a snapshot; with ``interval`` > 0, also the counters' rate over that many seconds.

    Args:
        client: a Redis client (bytes responses).
        keys: the key names of the prefix.
        interval: seconds between the two samples of the counters (0: no throughput).
        sleep: how to wait (tests pass a fake).
        stale_idle_ms: a consumer idle longer than this, with nothing pending and no heartbeat, is stale.

    Returns:
        The snapshot; figures of keys that do not exist yet are zeros.
    """
    started = time.monotonic()
    first = read_counters(client, keys) if interval > 0 else None
    state = group_state(client, keys)
    memory = used_memory(client)
    servers = read_memory(client)
    tight = tightest(servers)
    shown = next((m for m in servers if m.refusal is not None), tight)  # its policy: the first evicting one
    documents = int(client.hlen(keys.id_forward))
    pipe = client.pipeline(transaction=False)
    for stream in (keys.docs, keys.alerts, keys.dead):
        pipe.xlen(stream)
    docs_len, alerts_len, dead_len = (int(x) for x in pipe.execute())
    spec = stored_spec(client, keys)
    rebuild = rebuild_state(client, keys)
    window = retention_of(client, keys, spec)
    group_consumers = consumers(client, keys)
    live = daemons(client, keys)
    throughput = None
    totals = read_counters(client, keys)
    if first is not None:
        remaining = interval - (time.monotonic() - started)
        if remaining > 0:
            sleep(remaining)
        elapsed = max(time.monotonic() - started, 1e-9)
        totals = read_counters(client, keys)
        throughput = {name: (totals[name] - first[name]) / elapsed for name in COUNTERS}
        interval = elapsed
    return Stats(
        prefix=keys.prefix,
        documents=documents,
        spec=spec,
        rebuild=rebuild,
        used_memory=memory[0] if memory is not None else None,
        memory_per_document=(
            max(0, memory[0] - memory[1]) / documents if memory is not None and documents else None
        ),
        stream=keys.docs,
        stream_length=docs_len,
        group=state is not None,
        lag=(state["lag"] if state is not None else docs_len),
        pending=(state["pending"] if state is not None else 0),
        consumers=group_consumers,
        daemons=live,
        alerts_length=alerts_len,
        dead_length=dead_len,
        totals=totals,
        throughput=throughput,
        interval_s=round(interval, 3) if throughput is not None else 0.0,
        stale=stale_consumers(group_consumers, {d.name for d in live}, stale_idle_ms),
        stale_idle_ms=stale_idle_ms,
        maxmemory_policy=shown.policy if shown is not None else None,
        maxmemory=tight.maxmemory if tight is not None else None,
        memory_headroom=tight.headroom if tight is not None else None,
        memory_node=tight.node if tight is not None else None,
        warnings=memory_warnings(servers),
        retention=window,
    )


def human_bytes(n: float | None) -> str:
    """1536 -> '1.5 KiB'."""
    if n is None:
        return "n/a"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def _table(headers: list[str], rows: list[list[str]], indent: str = "  ") -> list[str]:
    """Columns aligned: text left, numbers right."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    numeric = [
        all(r[i].replace(".", "").replace(",", "").isdigit() for r in rows) for i in range(len(headers))
    ]

    def line(cells: list[str]) -> str:
        return (
            indent
            + "  ".join(
                c.rjust(w) if num else c.ljust(w) for c, w, num in zip(cells, widths, numeric, strict=True)
            ).rstrip()
        )

    return [line(headers), *(line(r) for r in rows)]


def render(stats: Stats) -> str:
    """The aligned human-readable report."""
    spec = stats.spec
    if spec is None:
        spec_text = "none yet (no daemon has opened the index)"
    else:
        extra = "".join(
            f", {k} {spec[k]}"
            for k in sorted(spec)
            if k not in ("shingle", "num_perm", "minhash", "bands", "rows", "seed", "scheme", *_WINDOW)
        )
        spec_text = (
            f"{spec['bands']} bands x {spec['rows']} rows, shingle {spec['shingle']}, num_perm "
            f"{spec['num_perm']} ({spec.get('minhash', '?')}), seed {spec['seed']}{extra}, "
            f"scheme {spec.get('scheme', '?')}"
        )
    lag = "unknown" if stats.lag is None else f"{stats.lag:,}"
    group = (
        f"lag {lag}, pending {stats.pending:,}, {len(stats.consumers)} consumer(s)"
        if stats.group
        else "no consumer group yet (no daemon has started)"
    )
    t = stats.totals
    pairs = [
        ("documents indexed", f"{stats.documents:,}"),
        ("index", spec_text),
        *([("rebuild", _rebuild_text(stats.rebuild))] if stats.rebuild else []),
        (
            "retention",
            _retention_text(stats.retention) if stats.retention else "none (every document is kept)",
        ),
        ("Redis memory", f"{human_bytes(stats.used_memory)} (whole server)"),
        ("memory limit", _limit_text(stats)),
        ("eviction policy", _policy_text(stats)),
        (
            "memory per document",
            "n/a (no documents)"
            if stats.memory_per_document is None
            else f"{human_bytes(stats.memory_per_document)} (above the server's startup memory)",
        ),
        ("input stream", f"{stats.stream}: {stats.stream_length:,} entries; {group}"),
        ("alerts stream", f"{stats.alerts_length:,} entries"),
        ("dead letters", f"{stats.dead_length:,} entries"),
        (
            "totals",
            (
                f"{t.get('processed', 0):,} processed, {t.get('alerts', 0):,} alerts, "
                f"{t.get('dead', 0):,} dead-lettered"
            ),
        ),
    ]
    if stats.throughput is not None:
        rate = stats.throughput
        pairs.append(
            (
                "throughput",
                (
                    f"{rate['processed']:,.1f} docs/s, {rate['alerts']:,.1f} alerts/s, "
                    f"{rate['dead']:,.1f} dead/s (over {stats.interval_s:.1f}s)"
                ),
            )
        )
    width = max(len(k) for k, _ in pairs)
    lines = [f"dedupd stats (prefix {stats.prefix!r})"] + [f"  {k.ljust(width)}  {v}" for k, v in pairs]
    lines += [f"warning: {w}" for w in stats.warnings]
    lines.append("")
    if stats.consumers:
        lines.append("consumers in the group:")
        lines += _table(
            ["consumer", "pending", "idle s"],
            [[c.name, f"{c.pending}", f"{c.idle_ms / 1000:.1f}"] for c in stats.consumers],
        )
    else:
        lines.append("consumers in the group: none")
    if stats.stale:
        lines.append(
            f"stale consumers (idle over {stats.stale_idle_ms / 1000:.0f}s, nothing pending, no heartbeat: "
            f"left by stopped daemons): {', '.join(stats.stale)}; remove each with "
            f"`redis-cli XGROUP DELCONSUMER {stats.stream} {GROUP} <name>`"
        )
    lines.append("")
    if stats.daemons:
        lines.append("live daemons (heartbeats; totals since each started):")
        lines += _table(
            ["daemon", "pid", "processed", "alerts", "dead", "batches", "beat s ago"],
            [
                [
                    d.name,
                    str(d.pid or "?"),
                    str(d.processed),
                    str(d.alerts),
                    str(d.dead),
                    str(d.batches),
                    f"{d.heartbeat_age_s:.1f}",
                ]
                for d in stats.daemons
            ],
        )
    else:
        lines.append("live daemons: none heartbeating")
    return "\n".join(lines)


def _limit_text(stats: Stats) -> str:
    if stats.maxmemory is None:
        return "unknown (INFO memory does not say)"
    if stats.maxmemory == 0:
        return "no limit (maxmemory 0)"
    node = f" (node {stats.memory_node}, the primary with the least headroom)" if stats.memory_node else ""
    return f"maxmemory {human_bytes(stats.maxmemory)}, headroom {human_bytes(stats.memory_headroom)}{node}"


def _policy_text(stats: Stats) -> str:
    if stats.maxmemory_policy is None:
        return "unknown (neither INFO memory nor CONFIG GET says): it must be noeviction"
    if stats.maxmemory_policy != "noeviction":
        return f"{stats.maxmemory_policy} (evicts keys: see the warning below)"
    return stats.maxmemory_policy


def _rebuild_text(rebuild: dict[str, Any]) -> str:
    changes = ", ".join(f"{k} {old} -> {new}" for k, (old, new) in rebuild["changes"].items())
    head = f"generation {rebuild['from_gen']} -> {rebuild['to_gen']} ({rebuild['mode']}: {changes})"
    if rebuild["running"]:
        return f"{head}, running in {rebuild['running']}"
    flags = " ".join(
        f"--{k.replace('_', '-')} {new}"
        for k, (_, new) in rebuild["changes"].items()
        if k in ("shingle", "num_perm", "seed", "minhash", "bands", "rows", "threshold", "verify")
    )
    return (
        f"{head}, unfinished and not running: resume with `dedupd rebuild {flags}` (the same flags as "
        "before), or run `dedupd rebuild --abort`"
    )
