"""Input stream entries: validation of the raw field map into a typed Entry, or an InputError with a code.

Dead-letter codes (stable; see DESIGN.md): ``missing_id``, ``id_too_long``, ``missing_text``,
``too_large``, ``doc_too_large``, ``bad_utf8``, ``bad_json``, ``unknown_op``, ``bad_reply_to``,
``max_deliveries``, ``processing_failed``.

Input bounds, in bytes: the whole entry (``max_entry_bytes``: field names and values together; an entry
read cut short because it is larger carries ``CUT_FIELD``, its full size), the text (``max_doc_bytes``) and
the text once normalised (``max_normalized_bytes``: default-ignorable code points dropped, then Unicode
NFKC, under which one U+FDFA, 3 bytes, becomes 18 characters and 4 words;
:func:`dedupd.similarity.normalization.normalized_bytes`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from dedupd.errors import InputError
from dedupd.index.keys import DOC_FIELD, id_fits
from dedupd.similarity.normalization import normalized_bytes

MISSING_ID = "missing_id"
ID_TOO_LONG = "id_too_long"
MISSING_TEXT = "missing_text"
TOO_LARGE = "too_large"
DOC_TOO_LARGE = "doc_too_large"  # the stored document would grow beyond max_stored_bytes
BAD_UTF8 = "bad_utf8"
BAD_JSON = "bad_json"
UNKNOWN_OP = "unknown_op"
BAD_REPLY_TO = "bad_reply_to"
MAX_DELIVERIES = "max_deliveries"
PROCESSING_FAILED = "processing_failed"

CODES = (
    MISSING_ID,
    ID_TOO_LONG,
    MISSING_TEXT,
    TOO_LARGE,
    DOC_TOO_LARGE,
    BAD_UTF8,
    BAD_JSON,
    UNKNOWN_OP,
    BAD_REPLY_TO,
    MAX_DELIVERIES,
    PROCESSING_FAILED,
)

MAX_ITEMS_BYTES = 1_000_000
MAX_META_BYTES = 64_000
MAX_SOURCE_BYTES = 1024
# the field a bounded read (lua.READ) adds to an entry it cut short for being larger than max_entry_bytes:
# the entry's full size in bytes (the name is no UTF-8, so no producer field is mistaken for it by accident)
CUT_FIELD = b"\xff\xfededupd:size"


class Op(StrEnum):
    """What an entry does to its document."""

    UPSERT = "upsert"
    APPEND = "append"
    DELETE = "delete"
    QUERY = "query"  # compare with the index, insert nothing; the verdict goes to the reply stream


REPLY_TO_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True, slots=True)
class Entry:
    """A validated input entry."""

    entry_id: str
    op: Op
    doc_id: str
    text: str | None
    source: str | None
    items: tuple[str, ...] | None
    meta: str | None  # the JSON object text, passed through to alerts as given
    reply_to: str | None = None  # a query's reply stream name
    size: int = 0  # the text's UTF-8 bytes once normalised, or more (what fingerprinting it takes)


_KEYS = {name: name.encode() for name in ("op", "text", "source", "items", "meta", "reply_to")}
_KEYS["id"] = DOC_FIELD


def _text(fields: dict[bytes, bytes], name: str, limit: int, code_if_long: str) -> str | None:
    raw = fields.get(_KEYS[name])
    if raw is None:
        return None
    if len(raw) > limit:
        raise InputError(code_if_long, f"field {name!r} has {len(raw)} bytes, more than the limit of {limit}")
    return _decode(name, raw)


def _decode(name: str, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            BAD_UTF8, f"field {name!r} is not valid UTF-8 ({exc.reason} at byte {exc.start})"
        ) from None


def entry_bytes(fields: dict[bytes, bytes]) -> int:
    """An entry's size: its field names and values together, in bytes (its full size if it was cut short).

    >>> entry_bytes({b"id": b"7", b"text": b"hello"})
    12
    """
    cut = fields.get(CUT_FIELD)
    if cut is not None and cut.isdigit():
        return int(cut)
    return sum(len(k) + len(v) for k, v in fields.items())


def unsendable(fields: Mapping[str, str], max_id_bytes: int | None = None) -> str | None:
    """Why a producer must not write ``fields`` (names and values as they go to Redis), or None.

    A name or value that UTF-8 cannot carry: a lone surrogate, as a JSON ``\\ud800`` escape (or a reversed
    pair) gives, or a byte a ``surrogateescape`` decoding kept; Redis clients cannot even send it. An id
    longer than ``max_id_bytes`` bytes (None: not checked), which the daemon refuses as ``id_too_long``.
    The reason names the field.

    >>> unsendable({"id": "a", "text": "ok \\ud800"}).partition(", which")[0]
    "field 'text' holds a lone surrogate, '\\\\ud800' at character 4"
    >>> unsendable({"id": "abcd", "text": "t"}, max_id_bytes=3)
    "field 'id' has 4 bytes, more than max_id_bytes = 3"
    >>> unsendable({"id": "a", "text": "t"}, max_id_bytes=3) is None
    True
    """
    for name, value in fields.items():
        problem = _surrogate(name, "a field name") or _surrogate(value, f"field {_shown(name)}")
        if problem:
            return problem
    doc_id = fields.get("id")
    if max_id_bytes is not None and doc_id:  # (an empty id is sendable: the daemon dead-letters it)
        try:
            check_id(doc_id, max_id_bytes)
        except InputError as exc:
            return exc.detail
    return None


def check_id(doc_id: str | bytes, max_id_bytes: int) -> str:
    """``doc_id`` as text, if the daemon accepts it as a document id: 1 to ``max_id_bytes`` bytes of UTF-8
    (keys.id_fits, the rule of the in-flight registry's scripts too). The one check of an id, for the
    daemon (the bytes of an entry's field) and for producers (text, before it is sent).

    Raises:
        InputError: ``missing_id``, ``id_too_long`` or ``bad_utf8`` (bytes that are not UTF-8, or text
            holding a lone surrogate), with a detail that names the field.

    >>> check_id("art-1", 8)
    'art-1'
    >>> check_id("é" * 5, 8)
    Traceback (most recent call last):
    dedupd.errors.InputError: id_too_long: field 'id' has 10 bytes, more than max_id_bytes = 8
    """
    if isinstance(doc_id, str):
        problem = _surrogate(doc_id, "field 'id'")
        if problem:
            raise InputError(BAD_UTF8, problem)
        size = len(doc_id) if doc_id.isascii() else len(doc_id.encode("utf-8"))
    else:
        size = len(doc_id)
    if not id_fits(size, max_id_bytes):
        if not size:
            raise InputError(MISSING_ID, "the 'id' field is missing or empty (a document needs an id)")
        raise InputError(
            ID_TOO_LONG, f"field 'id' has {size:,} bytes, more than max_id_bytes = {max_id_bytes:,}"
        )
    return doc_id if isinstance(doc_id, str) else _decode("id", doc_id)


def _surrogate(value: str, what: str) -> str | None:
    if value.isascii():
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (
            f"{what} holds a lone surrogate, {value[exc.start]!r} at character {exc.start + 1}, which UTF-8 "
            "cannot carry: escape a whole character (a high-low pair such as \\ud83d\\ude00) or write it as UTF-8"
        )
    return None


def _shown(name: str) -> str:
    shown = repr(name)
    return shown if len(shown) <= 40 else shown[:36] + "...'"


def parse_entry(
    entry_id: str,
    fields: dict[bytes, bytes],
    max_doc_bytes: int,
    max_id_bytes: int,
    max_entry_bytes: int | None = None,
    max_normalized_bytes: int | None = None,
) -> Entry:
    """Validate one raw stream entry.

    Args:
        entry_id: the stream entry id.
        fields: the raw field map as read from Redis.
        max_doc_bytes: the largest accepted text.
        max_id_bytes: the longest accepted id.
        max_entry_bytes: the largest accepted entry, names and values together (None: no bound).
        max_normalized_bytes: the largest accepted text once normalised (None: no bound).

    Returns:
        The entry.

    Raises:
        InputError: with a stable code and a detail that says what to fix.
    """
    size = entry_bytes(fields)
    if max_entry_bytes is not None and size > max_entry_bytes:
        raise InputError(
            TOO_LARGE,
            f"the entry has {size} bytes of field names and values, more than max_entry_bytes={max_entry_bytes}",
        )
    op = _op(fields)
    doc_id = _doc_id(fields, max_id_bytes)
    text = _text(fields, "text", max_doc_bytes, TOO_LARGE)
    if op is not Op.DELETE and text is None:
        raise InputError(MISSING_TEXT, f"op {op.value!r} needs a 'text' field")
    grown = 0
    if op is not Op.DELETE and text is not None:
        raw_bytes = len(fields[_KEYS["text"]])
        grown = (
            raw_bytes
            if max_normalized_bytes is None
            else normalized_bytes(text, raw_bytes, max_normalized_bytes)
        )
        if max_normalized_bytes is not None and grown > max_normalized_bytes:
            raise InputError(
                TOO_LARGE,
                f"field 'text' expands to {grown} bytes under Unicode NFKC normalisation, more than "
                f"max_normalized_bytes={max_normalized_bytes}",
            )
    source = _text(fields, "source", MAX_SOURCE_BYTES, TOO_LARGE)
    items, meta = _items(fields), _meta(fields)
    reply_to = _reply_to(fields, op)
    kept = text if op is not Op.DELETE else None
    return Entry(entry_id, op, doc_id, kept, source, items, meta, reply_to, grown)


def _doc_id(fields: dict[bytes, bytes], max_id_bytes: int) -> str:
    """The entry's document id (:func:`check_id`), as text."""
    return check_id(fields.get(DOC_FIELD, b""), max_id_bytes)


def _op(fields: dict[bytes, bytes]) -> Op:
    op_text = _text(fields, "op", 32, UNKNOWN_OP)
    try:
        return Op(op_text.strip().lower()) if op_text is not None else Op.UPSERT
    except ValueError:
        raise InputError(UNKNOWN_OP, f"op {op_text!r} is not one of upsert, append, delete, query") from None


def _reply_to(fields: dict[bytes, bytes], op: Op) -> str | None:
    reply_to = _text(fields, "reply_to", 64, BAD_REPLY_TO)
    if op is not Op.QUERY:
        return None
    if reply_to is None or not REPLY_TO_RE.match(reply_to):
        raise InputError(
            BAD_REPLY_TO,
            f"op 'query' needs a 'reply_to' of 1-64 letters, digits, '_' or '-' "
            f"(got {reply_to!r}): the verdict goes to the stream <prefix>:reply:<reply_to>",
        )
    return reply_to


def _items(fields: dict[bytes, bytes]) -> tuple[str, ...] | None:
    items_text = _text(fields, "items", MAX_ITEMS_BYTES, TOO_LARGE)
    if items_text is None:
        return None
    try:
        parsed = json.loads(items_text)
    except (ValueError, RecursionError) as exc:  # a deeply nested array exhausts the parser
        raise InputError(BAD_JSON, f"'items' is not valid JSON: {exc}") from None
    if not isinstance(parsed, list) or not all(isinstance(x, str) for x in parsed):
        raise InputError(BAD_JSON, "'items' must be a JSON array of strings")
    for x in parsed:
        try:
            x.encode("utf-8")
        except UnicodeEncodeError:
            raise InputError(
                BAD_JSON,
                f"'items' holds {x!r}: a \\u escape of a lone surrogate is not "
                "text (escape the whole character or send it as UTF-8)",
            ) from None
    return tuple(parsed)


def _meta(fields: dict[bytes, bytes]) -> str | None:
    meta = _text(fields, "meta", MAX_META_BYTES, TOO_LARGE)
    if meta is None:
        return None
    try:
        parsed_meta = json.loads(meta)
    except (ValueError, RecursionError) as exc:  # a deeply nested array exhausts the parser
        raise InputError(BAD_JSON, f"'meta' is not valid JSON: {exc}") from None
    if not isinstance(parsed_meta, dict):
        raise InputError(BAD_JSON, "'meta' must be a JSON object")
    return meta
