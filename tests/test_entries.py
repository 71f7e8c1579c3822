"""Entry validation: every malformed input has a stable dead-letter code."""

from __future__ import annotations

import pytest

from dedupd.daemon.entries import Op, check_id, parse_entry
from dedupd.errors import InputError
from dedupd.index.keys import entry_doc


def parse(fields: dict[bytes, bytes]):  # type: ignore[no-untyped-def]
    return parse_entry("1-1", fields, max_doc_bytes=100, max_id_bytes=10)


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({b"text": b"hello"}, "missing_id"),
        ({b"id": b"", b"text": b"hello"}, "missing_id"),
        ({b"id": b"x" * 11, b"text": b"hello"}, "id_too_long"),
        ({b"id": b"a"}, "missing_text"),
        ({b"id": b"a", b"op": b"append"}, "missing_text"),
        ({b"id": b"a", b"text": b"x" * 101}, "too_large"),
        ({b"id": b"a", b"text": b"\xff\xfe"}, "bad_utf8"),
        ({b"id": b"\xc3", b"text": b"ok"}, "bad_utf8"),
        ({b"id": b"a", b"text": b"t", b"items": b"[1, 2"}, "bad_json"),
        ({b"id": b"a", b"text": b"t", b"items": b"[1, 2]"}, "bad_json"),
        ({b"id": b"a", b"text": b"t", b"meta": b"[]"}, "bad_json"),
        ({b"id": b"a", b"text": b"t", b"meta": b"{oops"}, "bad_json"),
        ({b"id": b"a", b"text": b"t", b"op": b"frobnicate"}, "unknown_op"),
        ({b"id": b"a", b"text": b"t", b"items": b"[" * 100_000 + b"]" * 100_000}, "bad_json"),  # too deep
        ({b"id": b"a", b"text": b"t", b"meta": b'{"a":' * 10_000 + b"1" + b"}" * 10_000}, "bad_json"),
    ],
)
def test_codes(fields: dict[bytes, bytes], code: str) -> None:
    with pytest.raises(InputError) as info:
        parse(fields)
    assert info.value.code == code
    assert info.value.detail


def test_valid_entries() -> None:
    e = parse(
        {
            b"id": b"k:{x} y\n",
            b"text": "naïve".encode(),
            b"source": b"feed",
            b"items": b'["a","b"]',
            b"meta": b'{"n": 1}',
            b"op": b"UPSERT",
            b"extra": b"ignored",
        }
    )
    assert (e.doc_id, e.text, e.source, e.items, e.meta, e.op) == (
        "k:{x} y\n",
        "naïve",
        "feed",
        ("a", "b"),
        '{"n": 1}',
        Op.UPSERT,
    )
    d = parse({b"id": b"a", b"op": b"delete"})
    assert d.op is Op.DELETE and d.text is None
    assert parse({b"id": b"a", b"text": b""}).text == ""


@pytest.mark.parametrize("doc_id", ["", "a", "x" * 10, "x" * 11, "é" * 5, "é" * 6, "日本" * 2, "a\ud800"])
def test_a_producer_checks_an_id_as_the_daemon_does(doc_id: str) -> None:
    """check_id of an id as text (a producer, before sending) refuses exactly what the daemon refuses of
    its bytes (parse_entry, and the in-flight registry's rule keys.entry_doc), with the same code."""
    raw = doc_id.encode("utf-8", "surrogatepass")
    try:
        daemon: str = parse({b"id": raw, b"text": b"t"}).doc_id
    except InputError as exc:
        daemon = exc.code
    try:
        producer: str = check_id(doc_id, 10)
    except InputError as exc:
        producer = exc.code
    assert producer == daemon
    assert (entry_doc({b"id": raw}, 10) != b"") == (daemon not in ("missing_id", "id_too_long"))
