"""Reading the output streams back (alerts, dead letters): from an id or from now, the newest N, following.

The stream logic is generic (:func:`read_stream`, :func:`follow_stream`, :func:`stream_end`); the alert
and dead-letter decoders and renderers sit on top of it. ``since`` accepts ``-`` (the oldest entry kept),
``now`` (also ``$`` or ``+``: nothing already there), a stream id ``1700000000000-0`` (at or after it) or
``(1700000000000-0`` (strictly after it); :func:`parse_since` checks it.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import redis

from dedupd.daemon.alert import Alert
from dedupd.errors import ConfigError
from dedupd.index.keys import Keys

if TYPE_CHECKING:
    from dedupd.server.connection import RedisClient

# stream entries as a client that returns bytes reads them (redis-py's types also allow str and None)
_Entries = list[tuple[bytes, dict[bytes, bytes]]]
Entry = tuple[str, dict[bytes, bytes]]

NOW = "now"
_ID_RE = re.compile(r"^(\()?(\d{1,20})(?:-(\d{1,20}))?$")
_U64 = 2**64
SINCE_HELP = "a stream id like 1700000000000-0, '-' (the oldest kept) or 'now'"
DEAD_FIELDS = ("error", "detail", "input")  # what a dead letter adds to the original fields
_SHOWN_CHARS = 60  # a dead letter's original field, shortened for display


def parse_since(since: str) -> str:
    """``since`` normalised: ``-``, :data:`NOW` (for ``now``, ``$`` and ``+``), ``ID`` or ``(ID``.

    Raises:
        ConfigError: when it is none of those.
    """
    value = since.strip()
    if value == "-":
        return "-"
    if value.lower() in (NOW, "$", "+"):
        return NOW
    m = _ID_RE.match(value)
    if m is None or int(m.group(2)) >= _U64 or int(m.group(3) or 0) >= _U64:
        raise ConfigError(f"--since must be {SINCE_HELP}; got {since!r}")
    return value


def stream_end(client: RedisClient, stream: str) -> str:
    """The id of the last entry ever added to ``stream`` (``0-0`` when it does not exist): following from
    it shows exactly what is added from now on, even across idle timeouts."""
    try:
        info = client.xinfo_stream(stream)
    except redis.ResponseError:  # no such key
        return "0-0"
    last = info.get("last-generated-id") or b"0-0"
    return last.decode() if isinstance(last, bytes) else str(last)


def read_stream(
    client: RedisClient,
    stream: str,
    since: str = "-",
    count: int | None = None,
    newest: bool = True,
    until: str = "+",
) -> Iterator[Entry]:
    """Entries of ``stream`` from ``since`` to ``until`` (inclusive), oldest first, in pages.

    Args:
        client: a client returning bytes.
        stream: the stream's key.
        since: ``-``, ``now``, ``ID`` or ``(ID`` (see :func:`parse_since`).
        count: at most this many (None: all).
        newest: with ``count``, the newest ``count`` of the range (else the oldest).
        until: the last id to read (``+``: the end); :func:`stream_end` pins it before a follow.

    Yields:
        ``(entry_id, fields)``.
    """
    start = parse_since(since)
    if start == NOW or count == 0:
        return
    if count is not None and newest:
        entries = cast(_Entries, client.xrevrange(stream, max=until, min=start, count=count))
        for entry_id, fields in reversed(entries):
            yield entry_id.decode(), fields
        return
    remaining = count
    cursor = start
    while remaining is None or remaining > 0:
        page = 1000 if remaining is None else min(1000, remaining)
        entries = cast(_Entries, client.xrange(stream, min=cursor, max=until, count=page))
        for entry_id, fields in entries:
            yield entry_id.decode(), fields
        if len(entries) < page:
            return
        cursor = "(" + entries[-1][0].decode()
        if remaining is not None:
            remaining -= len(entries)


def follow_stream(
    client: RedisClient, stream: str, last_id: str = "$", block_ms: int = 1000
) -> Iterator[Entry | None]:
    """Entries added after ``last_id`` as they arrive; None on each idle timeout (so a caller can stop).

    ``$`` (or ``now``) is pinned to the stream's current end first, so nothing added between two blocking
    reads is missed.
    """
    if last_id in ("$", "+", NOW):
        last_id = stream_end(client, stream)
    while True:
        reply = cast(list[tuple[bytes, _Entries]], client.xread({stream: last_id}, block=block_ms, count=500))
        if not reply:
            yield None
            continue
        for entry_id, fields in reply[0][1]:
            last_id = entry_id.decode()
            yield last_id, fields


@dataclass(frozen=True, slots=True)
class Window:
    """What ``dedupd alerts`` / ``dedupd dead`` show: a range, and where following goes on from."""

    since: str
    until: str
    follow_from: str


def window(client: RedisClient, stream: str, since: str, follow: bool) -> Window:
    """The range to print before following: up to the stream's end as it is now (pinned, so that
    following from there neither repeats nor misses an entry)."""
    start = parse_since(since)
    if not follow:
        return Window(start, "+", "$")
    end = stream_end(client, stream)
    return Window(start, end, end)


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "backslashreplace")


# ----- alerts -----
def decode_alert(entry_id: bytes | str, fields: dict[bytes, bytes]) -> dict[str, Any]:
    """One alerts-stream entry as a JSON-ready dict: an alert the daemon wrote as :meth:`Alert.to_dict
    <dedupd.daemon.alert.Alert.to_dict>` gives it; any other entry (written by hand or by another program)
    field by field, in its order, with ``matches``, ``similarity`` and ``meta`` parsed where they parse."""
    try:
        return Alert.from_fields(entry_id, fields).to_dict()
    except ValueError:
        return _entry_dict(entry_id, fields)


def _entry_dict(entry_id: bytes | str, fields: dict[bytes, bytes]) -> dict[str, Any]:
    """Any alerts-stream entry as a dict: ``alert`` (its id), then its fields as text, in order, with
    ``matches`` and ``meta`` parsed as JSON and ``similarity`` as a float where they parse."""
    out: dict[str, Any] = {"alert": entry_id.decode() if isinstance(entry_id, bytes) else entry_id}
    for k, v in fields.items():
        out[_text(k)] = _text(v)
    if "matches" in out:
        with contextlib.suppress(ValueError):
            out["matches"] = json.loads(out["matches"])
    if "similarity" in out:
        with contextlib.suppress(ValueError):
            out["similarity"] = float(out["similarity"])
    if "meta" in out:
        with contextlib.suppress(ValueError):
            out["meta"] = json.loads(out["meta"])
    return out


def render(alert: dict[str, Any]) -> str:
    """A one-line human rendering of an alert."""
    matches = alert.get("matches")
    more = len(matches) - 1 if isinstance(matches, list) else 0
    extra = f" (+{more} more)" if more > 0 else ""
    src = f" [{alert['source']}]" if alert.get("source") else ""
    sim = alert.get("similarity")
    shown = f"{sim:.3f}" if isinstance(sim, float) else str(sim)
    by = f"  by {alert['by']}" if alert.get("by") else ""  # (a rebuild's alert of an existing pair)
    return (
        f"{alert.get('id', '?')}{src} ~ {alert.get('duplicate_of', '?')}  similarity {shown} "
        f"({alert.get('verify', '?')}){extra}  cluster {alert.get('cluster', '?')}{by}"
    )


def read_alerts(
    client: RedisClient, keys: Keys, start: str = "-", count: int | None = None, newest: bool = False
) -> Iterator[dict[str, Any]]:
    """Alerts from ``start`` (inclusive) on; with ``count``, the oldest ``count`` of them (the newest
    with ``newest=True``)."""
    for entry_id, fields in read_stream(client, keys.alerts, start, count, newest):
        yield decode_alert(entry_id, fields)


def follow_alerts(
    client: RedisClient, keys: Keys, last_id: str = "$", block_ms: int = 1000
) -> Iterator[dict[str, Any] | None]:
    """New alerts as they arrive; yields None on each idle timeout so the caller can check for stop."""
    for entry in follow_stream(client, keys.alerts, last_id, block_ms):
        yield None if entry is None else decode_alert(*entry)


# ----- dead letters -----
def decode_dead(entry_id: bytes | str, fields: dict[bytes, bytes]) -> dict[str, Any]:
    """One dead letter as a JSON-ready dict: ``dead`` (its id in the dead-letter stream), ``input`` (the
    input entry's id), ``error`` (the stable code), ``detail``, then the original entry's fields, whole
    (bytes that are not UTF-8 shown as ``\\xNN``)."""
    out: dict[str, Any] = {"dead": entry_id.decode() if isinstance(entry_id, bytes) else entry_id}
    for name in ("input", "error", "detail"):
        out[name] = _text(fields.get(name.encode(), b""))
    for k, v in fields.items():
        name = _text(k)
        if name not in out:
            out[name] = _text(v)
    return out


def _short(value: str, limit: int = _SHOWN_CHARS) -> str:
    flat = " ".join(value.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def render_dead(dead: dict[str, Any]) -> str:
    """A one-line human rendering of a dead letter: input id, code, detail, original fields shortened."""
    original = [(k, v) for k, v in dead.items() if k not in ("dead", *DEAD_FIELDS)]
    shown = "  ".join(f"{k}={json.dumps(_short(str(v)), ensure_ascii=False)}" for k, v in original)
    detail = f": {_short(str(dead['detail']), 100)}" if dead.get("detail") else ""
    return f"{dead.get('input') or '?'} {dead.get('error') or '?'}{detail}  {shown}".rstrip()


def read_dead(
    client: RedisClient, keys: Keys, start: str = "-", count: int | None = None, newest: bool = True
) -> Iterator[dict[str, Any]]:
    """Dead letters from ``start`` on (the newest ``count`` when given)."""
    for entry_id, fields in read_stream(client, keys.dead, start, count, newest):
        yield decode_dead(entry_id, fields)


def follow_dead(
    client: RedisClient, keys: Keys, last_id: str = "$", block_ms: int = 1000
) -> Iterator[dict[str, Any] | None]:
    """New dead letters as they arrive; None on each idle timeout."""
    for entry in follow_stream(client, keys.dead, last_id, block_ms):
        yield None if entry is None else decode_dead(*entry)
