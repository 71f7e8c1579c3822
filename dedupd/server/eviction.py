"""Whether the Redis server may evict dedupd's keys, and how much memory it has left before ``maxmemory``.

dedupd keeps its index in Redis and nowhere else. A key that Redis evicts to stay under ``maxmemory`` is lost
in silence: a document's record, a bucket entry, the id map, even the index's own parameter record (measured
on ``maxmemory 24mb`` with ``allkeys-lru``: after 20,000 documents 499 of the first 500 could not be found any
more). The ``volatile-*`` policies evict the keys that expire (tombstones, heartbeats, reply streams) before
their time. So ``dedupd serve`` and ``dedupd rebuild`` refuse to start unless the server (every primary of a
Redis Cluster) has ``maxmemory-policy noeviction``, and ``dedupd check`` reports such a server unhealthy. With
``noeviction`` a full server refuses writes (OOM) instead: the daemons wait and retry, and nothing is lost.
``dedupd stats`` and the ``dedupd_redis_memory_headroom_bytes`` gauge show the headroom (``maxmemory`` minus
``used_memory``), with a warning under :func:`headroom_margin`.

The decisions (:func:`refusal`, :func:`headroom`, :func:`headroom_margin`, :func:`low_headroom`) are pure;
:func:`read_memory` reads the figures from ``INFO memory`` (``CONFIG GET maxmemory-policy`` only when INFO
does not say: managed Redis services often disable CONFIG). A server that tells neither is not refused: its
policy is reported unknown.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import redis

from dedupd.errors import ConfigError
from dedupd.server.connection import is_cluster, is_transient

log = logging.getLogger("dedupd.eviction")

NOEVICTION = "noeviction"
#: ``dedupd stats`` warns when the headroom is under HEADROOM_MARGIN_FRACTION of maxmemory or
#: HEADROOM_MARGIN_BYTES, whichever is smaller (10 % of maxmemory, at most 64 MiB; documented in README.md,
#: Operations). A choice, not a measurement: early enough to act on a small server, and quiet on a large one
#: while it has 64 MiB and more to go.
HEADROOM_MARGIN_FRACTION = 0.10
HEADROOM_MARGIN_BYTES = 64 * 1024 * 1024


def refusal(policy: str | None, node: str | None = None) -> str | None:
    """Why dedupd refuses a server with ``maxmemory-policy`` ``policy`` (one line), or None when it may use it.

    Every policy but ``noeviction`` refuses, whatever ``maxmemory`` is (with ``maxmemory 0`` it evicts once
    someone sets a limit). An unknown policy (None: the server did not say) is not refused.

    Args:
        policy: the server's ``maxmemory_policy``, or None when unknown.
        node: the ``host:port`` of a Redis Cluster node, named in the message; None for a single server.

    >>> refusal("noeviction") is None and refusal(None) is None
    True
    >>> print(refusal("allkeys-lru"))  # doctest: +NORMALIZE_WHITESPACE
    the Redis server evicts keys (maxmemory-policy allkeys-lru): dedupd's index would lose documents in
    silence; set maxmemory-policy noeviction (redis-cli CONFIG SET maxmemory-policy noeviction, and in
    redis.conf)
    """
    if policy is None or policy == NOEVICTION:
        return None
    if node is None:
        where, cli = "the Redis server", "redis-cli"
    else:
        host, _, port = node.rpartition(":")
        where, cli = f"the Redis node {node}", f"redis-cli -h {host} -p {port}" if host else "redis-cli"
    if policy.startswith("volatile-"):
        lost = (
            "dedupd's expiring keys (tombstones, heartbeats, reply streams) would go before their time, "
            "in silence"
        )
    else:
        lost = "dedupd's index would lose documents in silence"
    return (
        f"{where} evicts keys (maxmemory-policy {policy}): {lost}; set maxmemory-policy {NOEVICTION} "
        f"({cli} CONFIG SET maxmemory-policy {NOEVICTION}, and in redis.conf)"
    )


def headroom(maxmemory: int | None, used_memory: int | None) -> int | None:
    """Bytes the server can still use before ``maxmemory`` (0 at or over it); None with no limit
    (``maxmemory`` 0) or when a figure is unknown.

    >>> headroom(100, 30), headroom(100, 130), headroom(0, 30), headroom(None, 30)
    (70, 0, None, None)
    """
    if not maxmemory or used_memory is None:
        return None
    return max(0, maxmemory - used_memory)


def headroom_margin(maxmemory: int) -> int:
    """The headroom under which ``dedupd stats`` warns: 10 % of ``maxmemory`` or 64 MiB, whichever is smaller.

    >>> headroom_margin(100 * 2**20) == 10 * 2**20, headroom_margin(8 * 2**30) == 64 * 2**20
    (True, True)
    """
    return min(int(maxmemory * HEADROOM_MARGIN_FRACTION), HEADROOM_MARGIN_BYTES)


def low_headroom(maxmemory: int | None, used_memory: int | None) -> bool:
    """Whether the headroom is under :func:`headroom_margin` (never with no limit, or unknown figures).

    >>> low_headroom(100 * 2**20, 95 * 2**20), low_headroom(100 * 2**20, 50 * 2**20), low_headroom(0, 10)
    (True, False, False)
    """
    room = headroom(maxmemory, used_memory)
    return room is not None and maxmemory is not None and room < headroom_margin(maxmemory)


@dataclass(frozen=True, slots=True)
class ServerMemory:
    """What one server (a Redis Cluster: one primary) says of its memory; None where it does not say."""

    node: str | None  # host:port of a Redis Cluster primary; None for a single server
    policy: str | None  # maxmemory_policy
    maxmemory: int | None  # bytes; 0: no limit
    used_memory: int | None  # bytes

    @property
    def headroom(self) -> int | None:
        return headroom(self.maxmemory, self.used_memory)

    @property
    def refusal(self) -> str | None:
        return refusal(self.policy, self.node)

    @property
    def low(self) -> bool:
        return low_headroom(self.maxmemory, self.used_memory)


def first_refusal(servers: list[ServerMemory]) -> str | None:
    """The refusal of the first server (of a cluster's primaries) that evicts keys, or None."""
    return next((s.refusal for s in servers if s.refusal is not None), None)


def tightest(servers: list[ServerMemory]) -> ServerMemory | None:
    """The server with the least headroom (a cluster is full when one of its primaries is); else the first
    one (none has a limit, or none said); None for an empty list."""
    limited = [s for s in servers if s.headroom is not None]
    if limited:
        return min(limited, key=lambda s: s.headroom or 0)
    return servers[0] if servers else None


def parse_memory(
    info: Mapping[str, Any] | None, node: str | None = None, policy: str | bytes | None = None
) -> ServerMemory:
    """The figures of one server's ``INFO memory`` reply (None: refused), ``policy`` from CONFIG GET when
    INFO does not say.

    >>> parse_memory({"maxmemory": 100, "used_memory": 40, "maxmemory_policy": "noeviction"}).headroom
    60
    >>> parse_memory(None, "h:1", b"allkeys-lru").policy
    'allkeys-lru'
    """
    info = info or {}
    said = _text(info.get("maxmemory_policy"))
    return ServerMemory(
        node=node,
        policy=said if said is not None else _text(policy),
        maxmemory=_int(info.get("maxmemory")),
        used_memory=_int(info.get("used_memory")),
    )


def read_memory(client: Any) -> list[ServerMemory]:
    """What the server says of its memory: one :class:`ServerMemory`, or one per primary of a Redis Cluster.

    Errors of a passing state (BUSY, LOADING) and of the network are raised; a refused or unknown command
    (an ACL without ``+info``, CONFIG disabled) leaves the figure unknown.
    """
    if is_cluster(client):
        return [_read_one(client, node.name, {"target_nodes": node}) for node in client.get_primaries()]
    return [_read_one(client, None, {})]


def _read_one(client: Any, node: str | None, target: dict[str, Any]) -> ServerMemory:
    info = _ask(lambda: client.info("memory", **target))
    policy = None
    if not info or info.get("maxmemory_policy") is None:
        config = _ask(lambda: client.config_get("maxmemory-policy", **target))
        if config:
            policy = next(iter(config.values()), None)
    return parse_memory(info, node, policy)


def _ask(command: Callable[[], Any]) -> Any:
    """A command's reply, None when the server refuses it (not for a passing state: that is raised)."""
    try:
        return command()
    except redis.ResponseError as exc:
        if is_transient(exc):
            raise
        log.debug("Redis refused a memory query: %s", exc)
        return None


def refuse_eviction(client: Any) -> list[ServerMemory]:
    """Raise ConfigError (one line, naming the node on a cluster) when the server may evict keys; else the
    figures read. A server that does not say its policy is logged as a warning and not refused.

    Raises:
        ConfigError: when a server (any primary of a cluster) has a policy other than ``noeviction``.
    """
    servers = read_memory(client)
    message = first_refusal(servers)
    if message is not None:
        raise ConfigError(message)
    for unknown in (s for s in servers if s.policy is None):
        log.warning(
            "the Redis %s does not say its maxmemory-policy (INFO memory and CONFIG GET refused): make sure it "
            "is %s, or an index under maxmemory loses documents in silence",
            f"node {unknown.node}" if unknown.node else "server",
            NOEVICTION,
        )
    return servers


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None
