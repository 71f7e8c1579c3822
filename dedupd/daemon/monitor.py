"""Reading the daemons' state from Redis: group lag and pending entries, heartbeats."""

from __future__ import annotations

import time
from typing import Any

import redis

from dedupd.index.generations import Generations
from dedupd.index.keys import GROUP, Heartbeat, Keys
from dedupd.server.connection import RedisClient


def group_state(client: RedisClient, keys: Keys) -> dict[str, Any] | None:
    """The consumer group's lag, pending count and consumers, and the stream's length and entries added
    (None when the group does not exist yet)."""
    try:
        groups = client.xinfo_groups(keys.docs)
        info = client.xinfo_stream(keys.docs)
    except redis.ResponseError:
        return None
    for g in groups:
        name = g["name"].decode() if isinstance(g["name"], bytes) else g["name"]
        if name != GROUP:
            continue
        lag = g.get("lag")
        # Redis < 7, lag unknown, or a stale count: Redis 7.0 can report lag > 0 for ever after a restart
        # from the AOF (entries-read is not restored exactly). Everything delivered means no lag.
        if lag != 0 and info.get("last-generated-id") == g.get("last-delivered-id"):
            lag = 0
        return {
            "pending": int(g["pending"]),
            "lag": lag,
            "consumers": int(g["consumers"]),
            "length": int(info["length"]),
            "added": int(info.get("entries-added") or info["length"]),
        }
    return None


def wait_drained(client: RedisClient, keys: Keys, timeout: float, poll: float = 0.2) -> bool:
    """Wait until the group has no lag and nothing pending; False on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = group_state(client, keys)
        if state is not None and state["lag"] == 0 and state["pending"] == 0:
            return True
        time.sleep(poll)
    return False


def live_consumers(client: RedisClient, keys: Keys, max_age: float | None = None) -> dict[str, Heartbeat]:
    """Consumers whose heartbeat key exists (and is at most ``max_age`` seconds old)."""
    return Generations(client, keys).heartbeats(max_age)
