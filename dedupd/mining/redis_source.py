"""Baskets from the Redis baskets stream, and mining results stored back for other consumers.

The daemon appends one entry per processed document to the stream ``Keys.baskets`` with fields
``id`` (the document id) and ``items`` (a JSON array of strings). A document processed again
(re-upserted) appends a new entry: the latest entry of each id replaces the earlier ones. A
document whose latest basket is empty contributes no basket.

Entries that also carry ``links`` (``baskets = "sources"``: a JSON array of the ids the document
duplicates) are grouped into duplicate clusters (:mod:`dedupd.mining.clusters`), always: one basket
per cluster, the sources of its documents, instead of one per document (which would hold a single
source and say nothing). Entries without ``links`` stay one basket per document. The stream is read with XRANGE in
pages, so memory stays bounded by the baskets themselves. Results go to ``Keys.mined`` as one JSON
string (SET), the shape of ``dedupd mine --format json`` plus a ``params`` object.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from dedupd.index.keys import Keys
from dedupd.mining.clusters import cluster_baskets

if TYPE_CHECKING:
    from dedupd.server.connection import RedisClient

PAGE = 10_000
# an XRANGE reply of a client that returns bytes (redis-py's types also allow str and None)
_Entries = list[tuple[bytes, dict[bytes, bytes]]]


@dataclass(frozen=True, slots=True)
class StreamBaskets:
    """What was read: the baskets (latest per document, or per duplicate cluster), how many entries
    were read and skipped, and how many documents were grouped into how many clusters."""

    baskets: list[list[str]]
    entries: int
    malformed: int
    clustered: int = 0
    clusters: int = 0


def read_baskets(client: RedisClient, keys: Keys, page: int = PAGE) -> StreamBaskets:
    """Read every basket of the stream, latest entry per document id.

    Args:
        client: a ``redis.Redis`` returning bytes.
        keys: key names for the prefix.
        page: entries per XRANGE call.

    Returns:
        The baskets in the order their latest entries were written (clusters: in the order of their
        first document); malformed entries (no id, or items or links that are not a JSON array of
        strings) are counted and skipped.
    """
    latest: dict[str, tuple[list[str], list[str] | None]] = {}
    entries = malformed = 0
    for fields in _entries(client, keys, page):
        entries += 1
        doc = fields.get(b"id")
        items = _parse_items(fields.get(b"items"))
        links = _parse_items(fields.get(b"links"))
        if doc is None or items is None or (b"links" in fields and links is None):
            malformed += 1
            continue
        key = doc.decode("utf-8", "replace")
        latest.pop(key, None)  # keep insertion order of the latest entry
        latest[key] = (items, links)
    linked = {d: (items, links) for d, (items, links) in latest.items() if links is not None}
    clusters = cluster_baskets(linked)
    alone = [items for items, links in latest.values() if links is None and items]
    return StreamBaskets(alone + clusters, entries, malformed, len(linked), len(clusters))


def _entries(client: RedisClient, keys: Keys, page: int) -> Iterator[dict[bytes, bytes]]:
    """The fields of every entry of the baskets stream, oldest first, read ``page`` at a time."""
    start = "-"
    while True:
        batch = cast(_Entries, client.xrange(keys.baskets, min=start, max="+", count=page))
        for _, fields in batch:
            yield fields
        if len(batch) < page:
            return
        last = batch[-1][0]
        start = "(" + (last.decode() if isinstance(last, bytes) else str(last))


def _parse_items(raw: bytes | None) -> list[str] | None:
    if raw is None:
        return None
    try:
        items = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
        return None
    return items


def store_result(client: RedisClient, keys: Keys, payload: dict[str, Any]) -> None:
    """SET the result JSON at ``Keys.mined`` (replacing the previous result)."""
    client.set(keys.mined, json.dumps(payload, separators=(",", ":")))


def load_result(client: RedisClient, keys: Keys) -> dict[str, Any] | None:
    """The last stored result, or None."""
    raw = client.get(keys.mined)
    return None if raw is None else json.loads(raw)
