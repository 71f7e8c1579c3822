"""What the Redis server of one index holds, as plain values (:class:`MemoryStore`), for the in-memory twin of
the index's scripts (memory_scripts.py, memory_unionfind.py) and its gateway (memory.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["MemoryStore", "stream_id"]

_SID = re.compile(r"(\d+)-(\d+)")


@dataclass(slots=True)
class MemoryStore:
    """What the Redis server of one index (one prefix) holds, as plain values; shared by the gateways of its
    generations and consumers as the server is."""

    records: dict[str, bytes] = field(default_factory=dict)  # Keys.doc -> packed record (record.py)
    buckets: dict[str, dict[int, list[int]]] = field(default_factory=dict)  # Keys.buckets -> field -> ids
    ids: dict[str, int] = field(default_factory=dict)  # Keys.id_forward
    seq: int = 0  # Keys.id_seq
    tombstones: dict[str, str] = field(default_factory=dict)  # Keys.tombstones: '<entry id> <n>'
    tombstone_expiry: dict[str, int] = field(default_factory=dict)  # Keys.tombstone_expiry (ms)
    parent: dict[int, int] = field(default_factory=dict)  # Keys.uf_parent
    children: dict[int, int] = field(default_factory=dict)  # Keys.uf_children
    gone: dict[int, str] = field(default_factory=dict)  # Keys.uf_gone: '1', or '=' + an expired root's id
    floor: int = 0  # Keys.uf_floor (unionfind.SET_FLOOR of a new index)
    ring: dict[int, tuple[int, int]] = field(default_factory=dict)  # Keys.uf_ring: (next, prev)
    ring_floor: int = 0  # Keys.uf_ring_floor (unionfind.SET_FLOOR of a new index)
    reps: dict[int, list[list[int]]] = field(default_factory=dict)  # Keys.uf_reps: root -> [id, count] each
    deficits: dict[str, dict[int, int]] = field(default_factory=dict)  # Keys.deficits -> id -> its deficit
    streams: dict[str, list[dict[bytes, bytes]]] = field(default_factory=dict)  # entries as XRANGE reads them
    seen: dict[str, dict[str, int]] = field(default_factory=dict)  # Keys.seen(stream): marker -> ms
    counters: dict[str, int] = field(default_factory=dict)  # Keys.counters
    touched: dict[int, int] = field(default_factory=dict)  # Keys.touched: n -> ms
    expiring: dict[int, int] = field(default_factory=dict)  # Keys.expiring: n -> when the claim lapses (ms)
    expiring_ids: dict[int, str] = field(default_factory=dict)  # Keys.expiring_ids
    expired: int = 0  # Keys.expired_count


def stream_id(s: str) -> tuple[int, int]:
    """lua.STREAM_ID's sid: 'ms-seq' (or a tombstone 'ms-seq n') as numbers, (0, 0) when it is none."""
    m = _SID.match(s)
    return (int(m[1]), int(m[2])) if m else (0, 0)
