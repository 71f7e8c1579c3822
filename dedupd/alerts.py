"""Reading the alerts stream back: decoding entries and rendering them for people."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, cast

from dedupd.keys import Keys

if TYPE_CHECKING:
    from dedupd.connection import RedisClient

# stream entries as a client that returns bytes reads them (redis-py's types also allow str and None)
_Entries = list[tuple[bytes, dict[bytes, bytes]]]


def decode_alert(entry_id: bytes | str, fields: dict[bytes, bytes]) -> dict[str, Any]:
    """One alerts-stream entry as a JSON-ready dict (``matches`` and ``meta`` parsed)."""
    out: dict[str, Any] = {"alert": entry_id.decode() if isinstance(entry_id, bytes) else entry_id}
    for k, v in fields.items():
        out[k.decode()] = v.decode("utf-8", "replace")
    if "matches" in out:
        out["matches"] = json.loads(out["matches"])
    if "similarity" in out:
        out["similarity"] = float(out["similarity"])
    if "meta" in out:
        with contextlib.suppress(ValueError):
            out["meta"] = json.loads(out["meta"])
    return out


def render(alert: dict[str, Any]) -> str:
    """A one-line human rendering."""
    more = len(alert.get("matches", [])) - 1
    extra = f" (+{more} more)" if more > 0 else ""
    src = f" [{alert['source']}]" if alert.get("source") else ""
    return (
        f"{alert['id']}{src} ~ {alert['duplicate_of']}  similarity {alert['similarity']:.3f} "
        f"({alert.get('verify', '?')}){extra}  cluster {alert.get('cluster', '?')}"
    )


def read_alerts(
    client: RedisClient, keys: Keys, start: str = "-", count: int | None = None
) -> Iterator[dict[str, Any]]:
    """Alerts from ``start`` (inclusive) on, in pages."""
    remaining = count
    cursor = start
    while remaining is None or remaining > 0:
        page = 1000 if remaining is None else min(1000, remaining)
        entries = cast(_Entries, client.xrange(keys.alerts, min=cursor, count=page))
        if not entries:
            return
        for entry_id, fields in entries:
            yield decode_alert(entry_id, fields)
        last = entries[-1][0].decode()
        cursor = "(" + last
        if remaining is not None:
            remaining -= len(entries)
        if len(entries) < page:
            return


def follow_alerts(
    client: RedisClient, keys: Keys, last_id: str = "$", block_ms: int = 1000
) -> Iterator[dict[str, Any] | None]:
    """New alerts as they arrive; yields None on each idle timeout so the caller can check for stop."""
    while True:
        reply = cast(
            list[tuple[bytes, _Entries]], client.xread({keys.alerts: last_id}, block=block_ms, count=500)
        )
        if not reply:
            yield None
            continue
        for entry_id, fields in reply[0][1]:
            last_id = entry_id.decode()
            yield decode_alert(entry_id, fields)
