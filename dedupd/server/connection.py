"""Connecting to Redis: a URL (``redis://``, ``rediss://``, cluster), or the embedded server (dedupd.server.embedded)."""

from __future__ import annotations

import logging
import re
import time
from typing import Any
from urllib.parse import quote

import hiredis
import redis
import redis.cluster

from dedupd.errors import ConfigError, RedisUnavailableError, ReplicasBehindError
from dedupd.server import embedded
from dedupd.settings import Settings

log = logging.getLogger("dedupd.connection")  # (named as before the layers: log lines and filters show it)

RedisClient = redis.Redis | redis.cluster.RedisCluster  # every client dedupd uses returns bytes

# Errors of the server or the network, not of the request: wait and retry (capped exponential backoff).
# OOM (maxmemory reached with noeviction), READONLY (a failover in progress), MASTERDOWN, TRYAGAIN and
# CLUSTERDOWN pass once the server recovers; an entry is never failed or dead-lettered because of them.
# Error replies of a server state, not of the request (redis-py raises them as plain ResponseError): BUSY
# (another client's long script), NOGROUP (a restart without persistence lost the consumer group), and
# the states redis-py has no class for on every version.
TRANSIENT_REPLIES = (
    "BUSY",
    "NOGROUP",
    "LOADING",
    "MASTERDOWN",
    "TRYAGAIN",
    "CLUSTERDOWN",
    "READONLY",
    "NOREPLICAS",
)
# at the start of the reply, or quoted by a pipeline ("... of pipeline caused error: BUSY ...") or a script
_TRANSIENT_RE = re.compile(r"(?:^|: )(?:" + "|".join(TRANSIENT_REPLIES) + r")\b")


UNREACHABLE = "cannot reach Redis at"  # how the error for a server that cannot be reached begins


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` is a passing state of the server or the network (wait and retry; never the entry's fault)."""
    if isinstance(exc, (*RETRYABLE, ReplicasBehindError)):
        return True
    if not isinstance(exc, redis.ResponseError):
        return False
    return _TRANSIENT_RE.search(str(exc)) is not None


RETRYABLE = (
    redis.ConnectionError,
    redis.TimeoutError,
    redis.BusyLoadingError,
    redis.exceptions.OutOfMemoryError,
    redis.exceptions.ReadOnlyError,
    redis.exceptions.MasterDownError,
    redis.exceptions.TryAgainError,
    redis.exceptions.ClusterDownError,
    OSError,
)

# Errors that say nothing about the entries of a batch: never a reason to fail or dead-letter an entry.
_NOT_THE_ENTRY = (*RETRYABLE, redis.exceptions.NoPermissionError)


def not_the_entry(exc: BaseException) -> bool:
    """Whether ``exc`` says nothing about the entries being processed (a passing server state, or a
    permission the user lacks)."""
    return isinstance(exc, _NOT_THE_ENTRY) or is_transient(exc)


def wait_for_replicas(client: RedisClient, replicas: int, timeout_ms: int) -> None:
    """Block until ``replicas`` replicas of every primary acknowledged this client's writes (WAIT), so that a
    failover loses nothing acknowledged after it.

    Raises:
        ReplicasBehindError: when fewer did within ``timeout_ms``.
    """
    if isinstance(client, redis.cluster.RedisCluster):
        got = min(
            int(client.wait(replicas, timeout_ms, target_nodes=node)) for node in client.get_primaries()
        )
    else:
        got = int(client.wait(replicas, timeout_ms))
    if got < replicas:
        raise ReplicasBehindError(
            f"{got} of {replicas} replicas acknowledged the writes within {timeout_ms} ms (wait_replicas); "
            "the batch is done again"
        )


def embedded_socket(settings: Settings, start: bool = True) -> str:
    """The socket of the embedded server for ``settings.data_dir``, started if none runs (see dedupd.server.embedded).

    This process holds a lease on the server until it ends; the server stops once no process holds one.
    """
    return str(embedded.attach(settings.data_dir, start))


class CommandPacker:
    """redis-py's command packing (``HiredisRespSerializer.pack``) without its Python pass over every argument
    (which turns a bytearray or memoryview into bytes: hiredis takes a memoryview as it is; a bytearray makes it
    fall back to that pass). A batch sends tens of thousands of arguments (an alert is 16); this takes about half
    as long per argument.

    >>> CommandPacker().pack("XINFO GROUPS", b"k", 1, memoryview(b"v"))
    [b'*5\\r\\n$5\\r\\nXINFO\\r\\n$6\\r\\nGROUPS\\r\\n$1\\r\\nk\\r\\n$1\\r\\n1\\r\\n$1\\r\\nv\\r\\n']
    """

    def pack(self, *args: Any) -> list[bytes]:
        first = args[0]
        if isinstance(first, str):
            args = (*first.encode().split(), *args[1:])
        elif b" " in first:
            args = (*first.split(), *args[1:])
        try:
            return [hiredis.pack_command(args)]
        except TypeError:  # a bytearray (hiredis takes memoryview, not bytearray): as redis-py does
            args = tuple(bytes(a) if isinstance(a, (bytearray, memoryview)) else a for a in args)
        try:
            return [hiredis.pack_command(args)]
        except TypeError as exc:
            raise redis.exceptions.DataError(str(exc)) from None


def connect(
    settings: Settings,
    *,
    retry_for_s: float = 0.0,
    unreachable_for_s: float | None = None,
    start_embedded: bool = True,
) -> Any:
    """A client returning bytes, for the configured Redis.

    Args:
        settings: the settings (``redis_url``, ``redis_cluster``, ``data_dir``).
        retry_for_s: keep retrying a failing first PING for this long (capped exponential backoff).
        unreachable_for_s: of that, how long a server that cannot be reached at all (refused, timed out)
            is waited for; None: as long. A server that answers with a passing state (LOADING, BUSY, ...)
            is waited for all of ``retry_for_s``.
        start_embedded: with no URL, start the embedded server if none runs (else raise).

    Returns:
        ``redis.Redis`` or ``redis.cluster.RedisCluster``.

    Raises:
        RedisUnavailableError: when Redis does not answer in time; the message names the URL (password hidden).
    """
    client: Any
    common: dict[str, Any] = {"socket_timeout": 30, "socket_connect_timeout": 5, "health_check_interval": 30}
    packer: dict[str, Any] = {"command_packer": CommandPacker()}  # (not a Redis Cluster client's nodes)
    try:
        if settings.redis_url is None:
            socket = quote(embedded_socket(settings, start_embedded))  # (from_url: Redis() takes no packer)
            client = redis.Redis.from_url(f"unix://{socket}", socket_timeout=30, **packer)
        elif settings.redis_cluster:
            url = settings.redis_url
            # the cluster client asks a node for the slot map as it is built: unreachable is retried like a PING
            client = _retry(
                lambda: cluster_client(url, **common),
                settings,
                retry_for_s,
                (*RETRYABLE, redis.exceptions.RedisClusterException),
                unreachable_for_s=unreachable_for_s,
            )
        else:
            client = redis.Redis.from_url(settings.redis_url, **common, **packer)
    except ValueError:  # its message may quote a piece of the password: not shown
        raise ConfigError(
            f"the Redis URL {settings.redacted_url()} cannot be parsed; characters such as # / ? @ "
            "in the user name or password must be percent-encoded (# as %23)"
        ) from None
    wait_until_up(client, settings, retry_for_s, unreachable_for_s)
    return client


def cluster_client(url: str, **kwargs: Any) -> Any:
    """A Redis Cluster client from a URL naming one node or several: ``redis://[user:pass@]h1:p1,h2:p2/0``.

    Any one reachable node is enough to discover the cluster; naming several lets a client start while
    one of them is down (a killed primary, before it comes back as a replica).
    """
    scheme, sep, rest = url.partition("://")
    netloc, slash, tail = rest.partition("/")
    userinfo, at, hosts = netloc.rpartition("@")
    if not sep or "," not in hosts:
        return redis.cluster.RedisCluster.from_url(url, **kwargs)
    others = []
    for hostport in hosts.split(",")[1:]:
        host, colon, port = hostport.rpartition(":")
        if not colon or not port.isdigit():
            raise ValueError("a cluster node must be host:port")
        others.append(redis.cluster.ClusterNode(host, int(port)))
    first = f"{scheme}://{userinfo}{at}{hosts.split(',')[0]}{slash}{tail}"
    return redis.cluster.RedisCluster.from_url(first, startup_nodes=others, **kwargs)


def wait_until_up(
    client: Any, settings: Settings, retry_for_s: float, unreachable_for_s: float | None = None
) -> None:
    """PING until it answers, backing off 0.1 s doubling up to 5 s, for at most ``retry_for_s``: a server
    loading, or busy with another client's script (BUSY) is waited for; one that cannot be reached for at
    most ``unreachable_for_s`` (None: as long)."""
    _retry(client.ping, settings, retry_for_s, RETRYABLE, replies=True, unreachable_for_s=unreachable_for_s)


def retry_transient(action: Any, settings: Settings, retry_for_s: float) -> Any:
    """``action()``, retried like the first PING while the server is away or in a passing state (see
    :func:`is_transient`) for at most ``retry_for_s``; for what a daemon does as it starts."""
    return _retry(action, settings, retry_for_s, RETRYABLE, replies=True)


def is_unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says the server cannot be reached at all (refused, timed out, no route, no cluster
    node), rather than that it answered with a passing state (LOADING, BUSY, OOM, ...)."""
    away = (redis.ConnectionError, redis.TimeoutError, OSError, redis.exceptions.RedisClusterException)
    return isinstance(exc, away) and not isinstance(exc, redis.BusyLoadingError)


def _retry(
    action: Any,
    settings: Settings,
    retry_for_s: float,
    retryable: tuple[type[BaseException], ...],
    replies: bool = False,
    unreachable_for_s: float | None = None,
) -> Any:
    """Retry ``action`` on ``retryable`` errors (and, with ``replies``, on the error replies of a passing
    server state, which are raised as they are when the time is up); a server that cannot be reached at all
    is given up on after ``unreachable_for_s`` (None: ``retry_for_s``)."""
    started = time.monotonic()
    deadline = started + retry_for_s
    unreachable_deadline = (
        deadline if unreachable_for_s is None else min(deadline, started + unreachable_for_s)
    )
    delay = 0.1
    while True:
        try:
            return action()
        except redis.AuthenticationError as exc:
            raise RedisUnavailableError(
                f"Redis at {settings.redacted_url()} refused the credentials: {exc}"
            ) from None
        except Exception as exc:
            away = isinstance(exc, retryable)
            if not away and not (replies and is_transient(exc)):
                raise
            unreachable = is_unreachable(exc)
            if time.monotonic() + delay > (unreachable_deadline if unreachable else deadline):
                if not away:
                    raise
                raise RedisUnavailableError(
                    f"{UNREACHABLE} {settings.redacted_url()}: {str(exc).rstrip('.')}. Is the server running and is "
                    "DEDUPD_REDIS_URL right?"
                ) from None
            log.warning(
                "Redis at %s %s (%s); retrying in %.1fs",
                settings.redacted_url(),
                "unreachable" if unreachable else "not ready",
                exc,
                delay,
            )
            time.sleep(delay)
            delay = min(delay * 2, 5.0)


def is_cluster(client: Any) -> bool:
    """Whether ``client`` talks to a Redis Cluster (redis-py's cluster client or one of its pipelines)."""
    return isinstance(client, redis.cluster.RedisCluster)


class ScriptPipeline:
    """A non-transactional pipeline that also takes script calls, for a single Redis or a Redis Cluster.

    Each call is queued as a raw ``EVALSHA`` (on a Redis Cluster routed by its keys' slot, one round trip per
    node: redis-py's cluster pipeline refuses ``evalsha``). redis-py's own pipeline of ``Script`` objects
    asks ``SCRIPT EXISTS`` before every execute, a round trip more each time. Instead a ``NOSCRIPT`` reply
    (a server that has not seen the script: new, restarted, flushed, or a replica just promoted) loads the
    script (on every primary) and runs that call again (it did not run), after the calls that did: the
    calls one pipeline holds are independent of each other. Other errors are raised after the whole pipeline
    has run.
    """

    def __init__(self, client: Any) -> None:
        self.client = client
        self.cluster = is_cluster(client)
        self.pipe = client.pipeline(transaction=False)
        self._scripts: dict[int, tuple[Any, list[Any], list[Any]]] = {}

    def __len__(self) -> int:
        return len(self.pipe)

    def script(self, script: Any, keys: list[Any], args: list[Any]) -> None:
        """Queue one call of a registered ``Script``."""
        self._scripts[len(self.pipe)] = (script, keys, args)  # (callers build them for this call)
        self.pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args, **self._target(keys))

    def get(self, key: str) -> None:
        """Queue a GET (on a Redis Cluster routed by the key's slot, as redis-py's cluster pipeline does)."""
        self.pipe.get(key)

    def hdel(self, key: str, *fields: Any) -> None:
        """Queue an HDEL (on a Redis Cluster routed by the key's slot)."""
        self.pipe.hdel(key, *fields)

    def _target(self, keys: list[Any]) -> dict[str, Any]:
        """On a Redis Cluster, the node from the client's slot map: without it redis-py's cluster pipeline
        asks the server for the keys of each EVALSHA (COMMAND GETKEYS, one round trip per call); a stale map
        gets MOVED, followed."""
        return {"target_nodes": self.client.get_node_from_key(keys[0])} if self.cluster else {}

    def execute(self) -> list[Any]:
        """Run everything queued; the replies in order."""
        calls, self._scripts = self._scripts, {}
        replies: list[Any] = self.pipe.execute(raise_on_error=False)
        redo = [
            i for i, r in enumerate(replies) if i in calls and isinstance(r, redis.exceptions.NoScriptError)
        ]
        if redo:
            for script in {id(calls[i][0]): calls[i][0] for i in redo}.values():
                script.sha = self.client.script_load(script.script)
            again = self.client.pipeline(transaction=False)
            for i in redo:
                script, keys, args = calls[i]
                again.execute_command("EVALSHA", script.sha, len(keys), *keys, *args, **self._target(keys))
            for i, reply in zip(redo, again.execute(raise_on_error=False), strict=True):
                replies[i] = reply
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        return replies
