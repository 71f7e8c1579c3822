"""Dead letters: an entry that cannot be processed is written to the dead-letter stream with its original
fields (bounded), a stable error code and a detail, once per input entry id."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from dedupd.daemon.batch import DeadLetter
from dedupd.daemon.entries import CUT_FIELD
from dedupd.index.protocol import Emitted, Gateway
from dedupd.settings import Settings

log = logging.getLogger("dedupd.processor")  # (named as before the layers: log lines and filters show it)
DEAD_LETTERED = "dead-lettered %s: %s (%s)"  # the WARNING per dead letter: entry id, code, detail (a filter
# may match it: `dedupd dedup` tells each as a bad line instead)

_OWN_FIELDS = (b"error", b"detail", b"input", b"truncated", CUT_FIELD)
MAX_DEAD_FIELDS = (
    1000  # a dead letter's original fields at most (and the server script's argument count bounded)
)


def kept_fields(fields: dict[bytes, bytes], max_bytes: int) -> list[Any]:
    """The original fields a dead letter keeps, as field/value pairs: in order, at most ``max_bytes`` of names
    and values and ``MAX_DEAD_FIELDS`` fields; the value that crosses the bound is cut, and a ``truncated``
    field says how many fields and bytes were left out (or, for an entry read cut short, how large it was).

    >>> kept_fields({b"id": b"a", b"text": b"x" * 10}, 8)
    [b'id', b'a', b'text', b'x', 'truncated', '1 field(s) cut, 9 byte(s) left out (dead_letter_max_bytes=8)']
    """
    out: list[Any] = []
    room, cut, lost = max_bytes, 0, 0
    for k, v in fields.items():
        if k in _OWN_FIELDS:
            continue
        if len(out) >= 2 * MAX_DEAD_FIELDS or len(k) > room:
            cut, lost = cut + 1, lost + len(v)
            continue
        keep = min(len(v), room - len(k))
        out += [k, v[:keep]]
        room -= len(k) + keep
        if keep < len(v):
            cut, lost = cut + 1, lost + len(v) - keep
    full = fields.get(CUT_FIELD)
    if full is not None:
        kept = max_bytes - room
        out += [
            "truncated",
            f"the entry had {int(full)} bytes; {kept} kept (dead_letter_max_bytes={max_bytes})",
        ]
    elif cut:
        out += [
            "truncated",
            f"{cut} field(s) cut, {lost} byte(s) left out (dead_letter_max_bytes={max_bytes})",
        ]
    return out


def dead_letter(gw: Gateway, settings: Settings, dead: Sequence[DeadLetter]) -> None:
    """Write dead letters (original fields + error + detail + input), once per input entry, and log each once:
    a batch done again (its first attempt wrote its dead letters, then met a server error) writes and logs
    none of them again."""
    entries: list[Emitted] = []
    for (entry_id, fields), code, detail in dead:
        pairs = kept_fields(fields, settings.dead_letter_max_bytes)
        pairs += ["error", code, "detail", detail, "input", entry_id]
        entries.append((entry_id, pairs))
    exchange = gw.exchange()
    gw.emit(exchange, gw.keys.dead, settings.dead_retention, settings.seen_ttl_s, entries)
    written = exchange.execute()[0] if entries else 0  # (the emit's reply: how many it appended)
    if written == 0:
        log.info("%d dead letter(s) written already (their batch was done again)", len(dead))
        return
    for (entry_id, _), code, detail in dead:
        log.warning(DEAD_LETTERED, entry_id, code, detail)
