"""Writes sent only while some documents' records are at the versions read: for the writes about documents that
no daemon is processing (``dedupd rebuild --alert-existing``: a daemon may update or delete them meanwhile).

:func:`guarded` reads the records' versions again and lets the caller queue its writes knowing them (leaving
out what a changed or deleted document would make wrong), then sends them. On a single Redis this is one
``WATCH``/``MULTI``/``EXEC`` transaction on the records: a record changed between the read and the ``EXEC``
cancels it, and the read and the writes are done again, so the writes are applied only while every record
is at the version they were queued with. On a Redis Cluster the records live in other slots than the writes
(one transaction cannot hold them): the versions are read just before the writes are sent, one round trip
before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import redis

from dedupd.index import lua
from dedupd.index.gateway import RedisGateway

#: Transactions tried before giving up (each cancelled one because a watched record changed meanwhile).
ATTEMPTS = 50

Queue = Callable[[Mapping[int, str], Any], None]  # (the versions now, an exchange with .script and .get)


class _Transaction:
    """An exchange (``.script``, as connection.ScriptPipeline) queuing into a redis-py ``MULTI`` pipeline."""

    def __init__(self, pipe: Any) -> None:
        self.pipe = pipe

    def __len__(self) -> int:
        return len(self.pipe)

    def script(self, script: Any, keys: list[Any], args: list[Any]) -> None:
        script(keys=keys, args=args, client=self.pipe)  # (the pipeline loads a script the server lacks)


def guarded(gw: RedisGateway, nums: Sequence[int], queue: Queue) -> list[Any]:
    """Queue writes with ``queue(versions, exchange)``, given the versions of the records of ``nums`` read now
    ('' = no record), and send them while those records are still at those versions (see the module
    docstring). Returns the replies of what was queued.

    Raises:
        redis.WatchError: when the records kept changing for :data:`ATTEMPTS` transactions.
    """
    wanted = list(dict.fromkeys(nums))
    if gw.cluster:
        exchange = gw.exchange()
        queue(gw.versions(wanted), exchange)
        return exchange.execute() if len(exchange) else []
    versions = gw.client.register_script(lua.VERSIONS)
    names = [gw.record_key(n) for n in wanted]
    with gw.client.pipeline(transaction=True) as pipe:
        for attempt in range(ATTEMPTS):
            try:
                if names:
                    pipe.watch(*names)
                found = versions(keys=names, args=[], client=pipe) if names else []
                now = {n: _text(v) for n, v in zip(wanted, found, strict=True)}
                pipe.multi()
                queue(now, _Transaction(pipe))
                return pipe.execute() if len(pipe) else []
            except redis.WatchError:
                if attempt == ATTEMPTS - 1:
                    raise
            finally:
                pipe.reset()
    raise AssertionError("unreachable")


def _text(v: bytes | str) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)
