"""Pushing documents into the input stream: JSONL (the stream fields) or plain text, one per line."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dedupd.keys import Keys
from dedupd.lua import XADD_MANY

if TYPE_CHECKING:
    from dedupd.connection import RedisClient

FIELDS = ("id", "text", "op", "source", "items", "meta")


@dataclass(frozen=True, slots=True)
class BadLine:
    """A line that could not be turned into an entry."""

    line_no: int
    reason: str


def parse_lines(lines: Iterable[str], fmt: str, id_prefix: str) -> Iterator[dict[str, str] | BadLine]:
    """Turn input lines into stream field maps.

    Args:
        lines: the input lines.
        fmt: ``jsonl``, ``text`` or ``auto`` (a line that is a JSON object is JSONL, any other is text).
        id_prefix: plain-text lines get the id ``<id_prefix><line number>``.

    Yields:
        A field map per non-blank line, or a BadLine for a JSONL line that is not a JSON object.
    """
    for no, line in enumerate(lines, start=1):
        stripped = line.rstrip("\r\n")
        if not stripped.strip():
            continue
        if fmt in ("jsonl", "auto") and stripped.lstrip().startswith("{"):
            try:
                obj = json.loads(stripped)
            except ValueError as exc:
                if fmt == "jsonl":
                    yield BadLine(no, f"invalid JSON: {exc}")
                    continue
                obj = None
            if isinstance(obj, dict):
                fields = _fields(obj)
                if fields:
                    yield fields
                else:
                    yield BadLine(no, "a JSON object without fields (give at least an id and a text)")
                continue
        if fmt == "jsonl":
            yield BadLine(no, "not a JSON object (use --format text for plain text)")
            continue
        yield {"id": f"{id_prefix}{no}", "text": stripped}


def _fields(obj: dict[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in obj.items():
        if value is None:
            continue
        if key in ("items", "meta") and not isinstance(value, str):
            out[key] = json.dumps(value, ensure_ascii=False)
        elif isinstance(value, str):
            out[key] = value
        else:
            out[key] = json.dumps(value, ensure_ascii=False)
    return out


class Producer:
    """XADD of field maps to the input stream, ``chunk`` entries per script call (``lua.XADD_MANY``).

    One call per chunk instead of one pipelined XADD per entry: redis-py spends ~10 us of Python per
    command packing it and parsing its reply, more than the entry costs anywhere else.
    """

    def __init__(self, client: RedisClient, keys: Keys, chunk: int = 500) -> None:
        self.client = client
        self.keys = keys
        self.chunk = chunk
        self._script = client.register_script(XADD_MANY)
        self._args: list[str] = []
        self._queued = 0
        self.pushed = 0

    def add(self, fields: dict[str, str]) -> None:
        args = self._args
        args.append(str(len(fields)))
        for kv in fields.items():
            args += kv
        self._queued += 1
        if self._queued >= self.chunk:
            self.flush()

    def flush(self) -> None:
        if self._queued:
            self._script(keys=[self.keys.docs], args=self._args)
            self.pushed += self._queued
            self._args = []
            self._queued = 0
