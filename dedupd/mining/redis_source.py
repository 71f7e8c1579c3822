"""Baskets from the Redis baskets stream, and mining results stored back for other consumers.

The daemon appends one entry per processed document to the stream ``Keys.baskets`` with fields
``id`` (the document id) and ``items`` (a JSON array of strings). A document processed again
(re-upserted) appends a new entry: the latest entry of each id replaces the earlier ones. A
document whose latest basket is empty contributes no basket. The stream is read with XRANGE in
pages, so memory stays bounded by the baskets themselves. Results go to ``Keys.mined`` as one JSON
string (SET), the shape of ``dedupd mine --format json`` plus a ``params`` object.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from dedupd.keys import Keys

if TYPE_CHECKING:
    from dedupd.connection import RedisClient

PAGE = 10_000
# an XRANGE reply of a client that returns bytes (redis-py's types also allow str and None)
_Entries = list[tuple[bytes, dict[bytes, bytes]]]


@dataclass(frozen=True, slots=True)
class StreamBaskets:
    """What was read: the baskets (latest per document) and how many entries were skipped."""

    baskets: list[list[str]]
    entries: int
    malformed: int


def read_baskets(client: RedisClient, keys: Keys, page: int = PAGE) -> StreamBaskets:
    """Read every basket of the stream, latest entry per document id.

    Args:
        client: a ``redis.Redis`` returning bytes.
        keys: key names for the prefix.
        page: entries per XRANGE call.

    Returns:
        The baskets in the order their latest entries were written; malformed entries (no id, or
        items that are not a JSON array of strings) are counted and skipped.
    """
    latest: dict[bytes, list[str]] = {}
    start = "-"
    entries = malformed = 0
    while True:
        batch = cast(_Entries, client.xrange(keys.baskets, min=start, max="+", count=page))
        if not batch:
            break
        for _, fields in batch:
            entries += 1
            doc = fields.get(b"id")
            items = _parse_items(fields.get(b"items"))
            if doc is None or items is None:
                malformed += 1
                continue
            latest.pop(doc, None)  # keep insertion order of the latest entry
            latest[doc] = items
        last = batch[-1][0]
        start = "(" + (last.decode() if isinstance(last, bytes) else str(last))
        if len(batch) < page:
            break
    return StreamBaskets([b for b in latest.values() if b], entries, malformed)


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
