"""Input stream entries: validation of the raw field map into a typed Entry, or an InputError with a code.

Dead-letter codes (stable; see DESIGN.md): ``missing_id``, ``id_too_long``, ``missing_text``,
``too_large``, ``bad_utf8``, ``bad_json``, ``unknown_op``, ``max_deliveries``, ``processing_failed``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum

from dedupd.errors import InputError

MISSING_ID = "missing_id"
ID_TOO_LONG = "id_too_long"
MISSING_TEXT = "missing_text"
TOO_LARGE = "too_large"
BAD_UTF8 = "bad_utf8"
BAD_JSON = "bad_json"
UNKNOWN_OP = "unknown_op"
MAX_DELIVERIES = "max_deliveries"
PROCESSING_FAILED = "processing_failed"

CODES = (
    MISSING_ID,
    ID_TOO_LONG,
    MISSING_TEXT,
    TOO_LARGE,
    BAD_UTF8,
    BAD_JSON,
    UNKNOWN_OP,
    MAX_DELIVERIES,
    PROCESSING_FAILED,
)

MAX_ITEMS_BYTES = 1_000_000
MAX_META_BYTES = 64_000
MAX_SOURCE_BYTES = 1024


class Op(StrEnum):
    """What an entry does to its document."""

    UPSERT = "upsert"
    APPEND = "append"
    DELETE = "delete"


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


def _text(fields: dict[bytes, bytes], name: str, limit: int, code_if_long: str) -> str | None:
    raw = fields.get(name.encode())
    if raw is None:
        return None
    if len(raw) > limit:
        raise InputError(code_if_long, f"field {name!r} has {len(raw)} bytes, more than the limit of {limit}")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            BAD_UTF8, f"field {name!r} is not valid UTF-8 ({exc.reason} at byte {exc.start})"
        ) from None


def parse_entry(entry_id: str, fields: dict[bytes, bytes], max_doc_bytes: int, max_id_bytes: int) -> Entry:
    """Validate one raw stream entry.

    Args:
        entry_id: the stream entry id.
        fields: the raw field map as read from Redis.
        max_doc_bytes: the largest accepted text.
        max_id_bytes: the longest accepted id.

    Returns:
        The entry.

    Raises:
        InputError: with a stable code and a detail that says what to fix.
    """
    op_text = _text(fields, "op", 32, UNKNOWN_OP)
    try:
        op = Op(op_text.strip().lower()) if op_text is not None else Op.UPSERT
    except ValueError:
        raise InputError(UNKNOWN_OP, f"op {op_text!r} is not one of upsert, append, delete") from None
    doc_id = _text(fields, "id", max_id_bytes, ID_TOO_LONG)
    if doc_id is None or doc_id == "":
        raise InputError(MISSING_ID, "the entry has no non-empty 'id' field")
    text = _text(fields, "text", max_doc_bytes, TOO_LARGE)
    if op is not Op.DELETE and text is None:
        raise InputError(MISSING_TEXT, f"op {op.value!r} needs a 'text' field")
    source = _text(fields, "source", MAX_SOURCE_BYTES, TOO_LARGE)
    items_text = _text(fields, "items", MAX_ITEMS_BYTES, TOO_LARGE)
    items: tuple[str, ...] | None = None
    if items_text is not None:
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
        items = tuple(parsed)
    meta = _text(fields, "meta", MAX_META_BYTES, TOO_LARGE)
    if meta is not None:
        try:
            parsed_meta = json.loads(meta)
        except (ValueError, RecursionError) as exc:  # a deeply nested array exhausts the parser
            raise InputError(BAD_JSON, f"'meta' is not valid JSON: {exc}") from None
        if not isinstance(parsed_meta, dict):
            raise InputError(BAD_JSON, "'meta' must be a JSON object")
    return Entry(entry_id, op, doc_id, text if op is not Op.DELETE else None, source, items, meta)
