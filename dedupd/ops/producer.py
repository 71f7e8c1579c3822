"""Pushing documents into the input stream: the input formats, reading them as they arrive, and batched XADDs.

Formats (``dedupd push --format``): ``jsonl`` (one JSON object per line with the stream fields), ``text``
(one document per line), ``json-array`` (the whole input is one JSON array of such objects, or of strings),
``files`` (a directory: one document per file, id = its path relative to the directory), and ``auto``
(:func:`detect_format`). Input is read as bytes and decoded line by line, so a line that is not UTF-8 is
one bad line, not the end of the run. So is a document that cannot be written as it is (``unsendable`` of
:mod:`dedupd.daemon.entries`: a field holding a lone surrogate, from a JSON escape such as ``\\ud800``; with
``max_id_bytes``, an id longer than that): each item is checked before it is handed on.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import re
import select
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from dedupd.daemon.entries import unsendable
from dedupd.index.keys import Keys

if TYPE_CHECKING:
    from dedupd.server.connection import RedisClient

FIELDS = ("id", "text", "op", "source", "items", "meta")
FORMATS = ("auto", "jsonl", "text", "json-array", "files")
# what --format auto makes of an input whose first line is a JSON object: JSONL, in which a plain-text line
# is still a document (with a warning: :class:`PlainTextLines`) and a JSON value that is no object is bad
JSONL_AUTO = "jsonl-auto"
SHOWN_TEXT_LINES = 20  # plain-text lines of a JSONL input warned of one by one; the rest are only counted
FLUSH_S = 0.1  # buffered entries are sent at least this often while the input pauses
_CHUNK = 1 << 16
_BOM = b"\xef\xbb\xbf"
# a first line that opens a JSON array of objects or strings (not "[INFO] ..." log text)
_ARRAY_START = re.compile(rb"^\s*\[\s*(?:[{\"\]]|$)")
# a first line made of short column names, as a CSV (or TSV) header is: id,text,source
_NAME = r'(?:"[^",;\t]{1,32}"|[A-Za-z_][\w.-]{0,31})'
_CSV_HEADER = re.compile(rf"^{_NAME}([,;\t]){_NAME}(?:\1{_NAME})*$")


@dataclass(frozen=True, slots=True)
class BadLine:
    """A line (or array item, or file) that could not be turned into an entry."""

    line_no: int
    reason: str
    where: str | None = None  # instead of the line number: "item 3" of a JSON array, or a file's path


Item = dict[str, str] | BadLine


def _decode(raw: bytes) -> str | BadLine:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return BadLine(0, f"not UTF-8 (byte 0x{raw[exc.start]:02x} at byte {exc.start + 1} of the line)")


def parse_line(
    raw: bytes | str, no: int, fmt: str, id_prefix: str, *, max_id_bytes: int | None = None
) -> Item | None:
    """One input line as stream fields, a BadLine, or None for a blank line.

    Args:
        raw: the line, bytes (decoded here) or text, with or without its line break.
        no: its line number (1-based); a plain-text line gets the id ``<id_prefix><no>``.
        fmt: ``jsonl``, ``text``, ``auto`` (a line starting with ``{`` is JSONL, any other is text) or
            :data:`JSONL_AUTO` (a line starting with ``{`` is JSONL, a JSON array, string, number... is bad,
            any other line is text).
        id_prefix: see ``no``.
        max_id_bytes: a longer id makes the line bad (None: not checked).

    >>> parse_line("[1, 2]", 4, JSONL_AUTO, "f:").reason.partition(":")[0]
    'a JSON array, not an object'
    >>> parse_line("plain words", 5, JSONL_AUTO, "f:")
    {'id': 'f:5', 'text': 'plain words'}
    """
    line = _line_text(raw, no)
    if line is None or isinstance(line, BadLine):
        return line
    return _parse_text(line, no, fmt, id_prefix, max_id_bytes)


def _line_text(raw: bytes | str, no: int) -> str | BadLine | None:
    """A line's text (decoded, without BOM or line break), a BadLine when it is not UTF-8, None if blank."""
    if isinstance(raw, bytes):
        decoded = _decode(raw[3:] if no == 1 and raw.startswith(_BOM) else raw)
        if isinstance(decoded, BadLine):
            return BadLine(no, decoded.reason)
        line = decoded
    else:
        line = raw
    line = line.rstrip("\r\n")
    return line if line.strip() else None


def _opens_object(line: str) -> bool:
    """Whether a line is read as a JSON object (in every format but ``text``)."""
    return line.lstrip().startswith("{")


def _parse_text(line: str, no: int, fmt: str, id_prefix: str, max_id_bytes: int | None) -> Item:
    """:func:`parse_line` of a non-blank line's text."""
    if fmt == "text":
        return checked({"id": f"{id_prefix}{no}", "text": line}, no, max_id_bytes)
    if _opens_object(line):
        try:
            obj = json.loads(line)
        except ValueError as exc:
            hint = "" if fmt == "jsonl" else " (a line starting with '{' is read as JSON: use --format text)"
            return BadLine(no, f"invalid JSON: {exc}{hint}")
        return object_fields(obj, no, max_id_bytes=max_id_bytes)
    if fmt in ("jsonl", JSONL_AUTO):
        kind = json_kind(line)
        if kind is not None:
            return BadLine(
                no,
                f"a JSON {kind}, not an object: each line of a JSONL input is one object with the stream "
                'fields, such as {"id": "42", "text": "..."}',
            )
        if fmt == "jsonl":
            return BadLine(no, "not a JSON object (use --format text for plain text)")
    return checked({"id": f"{id_prefix}{no}", "text": line}, no, max_id_bytes)


def json_kind(line: str) -> str | None:
    """What JSON value ``line`` is (``array``, ``string``, ``number``...), or None when it is no JSON.

    >>> json_kind(' [1, 2] '), json_kind('"a"'), json_kind("42"), json_kind("42 apples"), json_kind("null")
    ('array', 'string', 'number', None, 'null')
    """
    try:
        return _json_type(json.loads(line))
    except (ValueError, RecursionError):  # (plain text fails at its first character or word)
        return None


def checked(fields: dict[str, str], no: int, max_id_bytes: int | None, where: str | None = None) -> Item:
    """``fields``, or a BadLine saying why they cannot be written (:func:`dedupd.daemon.entries.unsendable`)."""
    problem = unsendable(fields, max_id_bytes)
    return fields if problem is None else BadLine(no, problem, where)


def _json_type(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return names.get(type(value), "null")


def object_fields(obj: Any, no: int, where: str | None = None, *, max_id_bytes: int | None = None) -> Item:
    """A parsed JSON object as stream fields (``items`` and ``meta`` kept as JSON), or a BadLine (also for
    fields that cannot be written: :func:`checked`)."""
    if not isinstance(obj, dict):
        return BadLine(no, f"a JSON {_json_type(obj)}, not an object", where)
    fields = _fields(obj)
    if not fields:
        return BadLine(no, "a JSON object without fields (give at least an id and a text)", where)
    return checked(fields, no, max_id_bytes, where)


def parse_lines(
    lines: Iterable[str | bytes], fmt: str, id_prefix: str, *, max_id_bytes: int | None = None
) -> Iterator[Item]:
    """Turn input lines into stream field maps (blank lines skipped).

    Args:
        lines: the input lines (text, or bytes decoded line by line).
        fmt: ``jsonl``, ``text`` or ``auto`` (a line starting with ``{`` is JSONL, any other is text).
        id_prefix: plain-text lines get the id ``<id_prefix><line number>``.
        max_id_bytes: a longer id makes the line bad (None: not checked).

    Yields:
        A field map per non-blank line, or a BadLine (not UTF-8, invalid JSON, not an object, a field
        holding a lone surrogate, an id too long...).
    """
    for no, line in enumerate(lines, start=1):
        item = parse_line(line, no, fmt, id_prefix, max_id_bytes=max_id_bytes)
        if item is not None:
            yield item


def _fields(obj: dict[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in obj.items():
        if value is None:
            continue
        out[key] = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return out


def array_items(data: bytes, id_prefix: str, *, max_id_bytes: int | None = None) -> Iterator[Item]:
    """A JSON array of objects (the stream fields) or strings (texts, id ``<id_prefix><index>``); an item
    that cannot be written (:func:`checked`) is a BadLine."""
    text = _decode(data[3:] if data.startswith(_BOM) else data)
    if isinstance(text, BadLine):
        yield BadLine(1, text.reason.replace(" of the line", ""), "the array")
        return
    try:
        arr = json.loads(text)
    except ValueError as exc:
        yield BadLine(getattr(exc, "lineno", 1), f"invalid JSON: {exc}")
        return
    if not isinstance(arr, list):
        yield BadLine(1, f"a JSON {_json_type(arr)}, not an array (--format json-array)")
        return
    for i, obj in enumerate(arr, start=1):
        if isinstance(obj, str):
            if obj.strip():
                yield checked({"id": f"{id_prefix}{i}", "text": obj}, i, max_id_bytes, f"item {i}")
        else:
            yield object_fields(obj, i, f"item {i}", max_id_bytes=max_id_bytes)


def directory_items(root: Path, max_bytes: int, *, max_id_bytes: int | None = None) -> Iterator[Item]:
    """One document per regular file under ``root`` (recursively, sorted, hidden ones skipped): id = its
    path relative to ``root``, text = its content. Files larger than ``max_bytes``, not UTF-8, with a name
    that is not UTF-8 or (with ``max_id_bytes``) a path longer than that are bad."""
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if any(part.startswith(".") for part in rel.parts) or not path.is_file():
            continue
        name = rel.as_posix()
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:  # its bytes were kept as surrogates (surrogateescape)
            shown = os.fsencode(name).decode("utf-8", "backslashreplace")
            yield BadLine(0, "its path is not UTF-8 (an id must be)", shown)
            continue
        size = path.stat().st_size
        if size > max_bytes:
            yield BadLine(0, f"{size:,} bytes, more than max_doc_bytes = {max_bytes:,}", name)
            continue
        text = _decode(path.read_bytes().removeprefix(_BOM))
        if isinstance(text, BadLine):
            yield BadLine(0, text.reason.replace(" of the line", ""), name)
        elif text.strip():
            yield checked({"id": name, "text": text}, 0, max_id_bytes, name)


def read_lines(stream: BinaryIO, idle_s: float | None = None) -> Iterator[bytes | None]:
    """The lines of ``stream`` as they arrive (line breaks removed), read in chunks of what is available;
    with ``idle_s``, None each time nothing arrived for that long (pipes and terminals; a regular file is
    never idle)."""
    try:
        fd: int | None = stream.fileno()
    except (OSError, ValueError, io.UnsupportedOperation):
        fd = None  # an in-memory stream (tests): plain reads
    if fd is not None and os.path.isfile(f"/proc/self/fd/{fd}"):
        idle_s = None
    pending: list[bytes] = []
    while True:
        if idle_s is not None and fd is not None and not select.select([fd], [], [], idle_s)[0]:
            yield None
            continue
        data = os.read(fd, _CHUNK) if fd is not None else stream.read(_CHUNK)
        if not data:
            break
        if b"\n" not in data:
            pending.append(data)
            continue
        lines = data.split(b"\n")
        if pending:
            lines[0] = b"".join(pending) + lines[0]
            pending = []
        tail = lines.pop()
        if tail:
            pending.append(tail)
        yield from lines
    if pending:
        yield b"".join(pending)


@dataclass(frozen=True, slots=True)
class Detected:
    """What ``--format auto`` chose, and the warning to print when the choice was a guess."""

    fmt: str
    warning: str | None = None


def detect_format(first_line: bytes, name: str) -> Detected:
    """``--format auto`` from the input's first non-blank line: a JSON array opening; a JSON object
    opening (:data:`JSONL_AUTO`: JSONL, its plain-text lines taken with a warning); a CSV-looking header
    (pushed as text, with a warning); else lines each read as JSONL (starting with ``{``) or text.

    >>> detect_format(b'{"id": "1", "text": "t"}', "f").fmt, detect_format(b"hello", "f").fmt
    ('jsonl-auto', 'auto')
    """
    line = first_line.removeprefix(_BOM)
    if line.lstrip().startswith(b"{"):
        return Detected(JSONL_AUTO)
    if _ARRAY_START.match(line):
        return Detected(
            "json-array",
            f"{name} starts with '[': reading it as one JSON array of documents (--format json-array); "
            "use --format text to push its lines as text",
        )
    try:
        text = line.decode("utf-8").strip()
    except UnicodeDecodeError:
        return Detected("auto")
    if _CSV_HEADER.match(text):
        return Detected(
            "auto",
            f"the first line of {name} looks like a CSV header ({text[:60]!r}); dedupd does not read CSV: "
            "every line, this one too, is pushed as a plain-text document (convert CSV to JSONL, or drop "
            "the header; --format text silences this)",
        )
    return Detected("auto")


def read_items(
    stream: BinaryIO,
    fmt: str,
    id_prefix: str,
    name: str,
    *,
    idle_s: float | None = None,
    warn: Callable[[str], None] | None = None,
    on_bytes: Callable[[int], None] | None = None,
    max_id_bytes: int | None = None,
) -> Iterator[Item | None]:
    """The documents of ``stream`` as they arrive, in format ``fmt`` (``auto``, ``jsonl``, ``text`` or
    ``json-array``); None whenever the input paused for ``idle_s`` (time to send what is buffered).

    Args:
        stream: binary input.
        fmt: the format; ``auto`` decides from the first non-blank line (:func:`detect_format`) and calls
            ``warn`` when that was a guess, and for each plain-text line of an input it took as JSONL
            (:class:`PlainTextLines`).
        id_prefix: plain-text documents get the id ``<id_prefix><line number>`` (array strings: the index).
        name: the input's name in warnings.
        idle_s: see above (pipes and terminals only).
        warn: called with each warning.
        on_bytes: called with the number of bytes of each line consumed (for a progress bar).
        max_id_bytes: a document with a longer id is bad (None: not checked); one with a field that cannot
            be written (a lone surrogate) always is.
    """
    lines: Iterator[bytes | None] = read_lines(stream, idle_s)
    if fmt == "auto":
        head: list[bytes | None] = []
        for line in lines:
            head.append(line)
            if line is not None and line.strip():
                detected = detect_format(line, name)
                fmt = detected.fmt
                if detected.warning and warn is not None:
                    warn(detected.warning)
                break
        lines = itertools.chain(head, lines)
    if fmt == "json-array":
        data = b"\n".join(_counted(lines, on_bytes))
        yield from array_items(data, id_prefix, max_id_bytes=max_id_bytes)
        return
    text_lines = PlainTextLines(name, warn) if fmt == JSONL_AUTO else None
    no = 0
    for line in lines:
        if line is None:
            yield None
            continue
        no += 1
        if on_bytes is not None:
            on_bytes(len(line) + 1)
        text = _line_text(line, no)
        if text is None or isinstance(text, BadLine):
            if text is not None:
                yield text
            continue
        item = _parse_text(text, no, fmt, id_prefix, max_id_bytes)
        if text_lines is not None and not isinstance(item, BadLine) and not _opens_object(text):
            text_lines.taken(no, item["id"])
        yield item
    if text_lines is not None:
        text_lines.finish()


class PlainTextLines:
    """Warns of the plain-text lines of an input read as JSONL (``--format auto``, first line a JSON
    object), each taken as a document: ``name:line: ...`` for the first :data:`SHOWN_TEXT_LINES`, then a
    count at the end."""

    def __init__(self, name: str, warn: Callable[[str], None] | None) -> None:
        self.name = name
        self.warn = warn
        self.count = 0

    def taken(self, no: int, doc_id: str) -> None:
        """Line ``no`` was taken as a plain-text document with id ``doc_id``."""
        self.count += 1
        if self.warn is None or self.count > SHOWN_TEXT_LINES + 1:
            return
        if self.count <= SHOWN_TEXT_LINES:
            self.warn(
                f"{self.name}:{no}: not JSON, in a JSONL input: taken as a plain-text document with id "
                f"{doc_id!r} (write it as a JSON object to give it its own id; --format text reads every "
                "line as text)"
            )
        else:
            self.warn(f"{self.name}: more plain-text lines taken as documents; only counting from here")

    def finish(self) -> None:
        """At the end of the input: the count, when some were not warned of one by one."""
        if self.warn is not None and self.count > SHOWN_TEXT_LINES:
            self.warn(f"{self.name}: {self.count:,} plain-text lines in all were taken as documents")


def _counted(lines: Iterable[bytes | None], on_bytes: Callable[[int], None] | None) -> Iterator[bytes]:
    for line in lines:
        if line is not None:
            if on_bytes is not None:
                on_bytes(len(line) + 1)
            yield line


class Producer:
    """XADD of field maps to the input stream, ``chunk`` entries per script call (``lua.XADD_MANY``).

    One call per chunk instead of one pipelined XADD per entry: redis-py spends ~10 us of Python per
    command packing it and parsing its reply, more than the entry costs anywhere else.
    """

    def __init__(self, client: RedisClient, keys: Keys, chunk: int = 500) -> None:
        self.client = client
        self.keys = keys
        self.chunk = chunk
        from dedupd.index.argv import xadd_many_entry  # here: the scripts (and numpy) cost a command
        from dedupd.index.lua import XADD_MANY  # that never pushes

        self._script = client.register_script(XADD_MANY)
        self._entry = xadd_many_entry
        self._args: list[str] = []
        self._queued = 0
        self.pushed = 0
        self.sending = False
        self.flushed_at = time.monotonic()

    @property
    def queued(self) -> int:
        """Entries added but not sent yet."""
        return self._queued

    def add(self, fields: dict[str, str]) -> None:
        self._args += self._entry(fields)
        self._queued += 1
        if self._queued >= self.chunk:
            self.flush()

    def flush_due(self, interval_s: float = FLUSH_S) -> bool:
        """Send what is queued when the last send is ``interval_s`` old; whether it sent."""
        if self._queued and time.monotonic() - self.flushed_at >= interval_s:
            self.flush()
            return True
        return False

    def flush(self) -> None:
        if self._queued:
            self.sending = True  # still True if the call is cut off (Ctrl-C): it may or may not have arrived
            self._script(keys=[self.keys.docs], args=self._args)
            self.sending = False
            self.pushed += self._queued
            self._args = []
            self._queued = 0
        self.flushed_at = time.monotonic()
