"""One bad line must not lose a pushed file (issue 29, item 3).

A JSONL line whose field holds a valid JSON escape of a lone surrogate (``\\ud800``, or a reversed pair
``\\udc00\\ud800``) is no text UTF-8 can carry: redis-py raised UnicodeEncodeError when it sent the chunk
holding it, so ``dedupd push`` exited 1 with one error line and no line number, and none of the file's lines
was pushed, those before the bad one included. Now such a line, and one whose id is longer than
``max_id_bytes``, is reported as ``file:line: skipped: reason`` and every other line is pushed (exit 1).
The same for ``dedupd query``, the other input formats, and the Python client (a ConfigError naming the
field, before anything is sent).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import redis
from click.testing import CliRunner
from helpers import drain, make_daemon, push

from dedupd import Client, ConfigError
from dedupd.cli import cli
from dedupd.index.keys import Keys
from dedupd.ops.producer import BadLine, parse_line

DOCS = Keys().docs
FIRST = "the first valid line of the file, with words enough for a fingerprint of its own to compare"

# line number -> (the document, the field its reason names; None: a valid line)
LINES: dict[int, tuple[dict[str, Any], str | None]] = {
    1: ({"id": "v1", "text": FIRST}, None),
    2: ({"id": "t2", "text": "a lone \ud800 in the text"}, "field 'text'"),
    3: ({"id": "v3", "text": "a valid line between bad ones", "source": "feed"}, None),
    4: ({"id": "bad\ud800id", "text": "a lone surrogate in the id"}, "field 'id'"),
    5: ({"id": "s5", "text": "a lone surrogate in the source", "source": "feed-\udfff"}, "field 'source'"),
    6: ({"id": "x" * 300, "text": "an id longer than max_id_bytes"}, "field 'id' has 300 bytes"),
    7: ({"id": "r7", "text": "a reversed pair \udc00\ud800 here"}, "field 'text'"),
    8: ({"id": "v8", "text": "a proper pair \U0001f600 is text", "meta": {"k": "v"}}, None),
    9: ({"id": "m9", "text": "a lone surrogate in meta", "meta": {"k": "\ud800"}}, "field 'meta'"),
    10: ({"id": "i10", "text": "a lone surrogate in items", "items": ["a", "\udc00"]}, "field 'items'"),
    11: ({"id": "n11", "te\ud800xt": "a lone surrogate in a field name"}, "a field name"),
    12: ({"id": "é" * 128, "text": "an id of exactly max_id_bytes (256) bytes"}, None),
    13: ({"id": "é" * 129, "text": "an id of 258 bytes"}, "field 'id' has 258 bytes"),
    14: (
        {"id": "o14", "text": "a reply_to with one", "op": "query", "reply_to": "r\ud800"},
        "field 'reply_to'",
    ),
    15: ({"id": "v15", "text": "the last valid line", "items": ["a", "b"]}, None),
}
VALID = [doc["id"] for doc, why in LINES.values() if why is None]
BAD = {no: why for no, (_, why) in LINES.items() if why is not None}


def jsonl(path: Path) -> Path:
    """LINES as a JSONL file; json.dumps writes each lone surrogate as its \\u escape (ASCII lines)."""
    path.write_text("".join(json.dumps(doc) + "\n" for doc, _ in LINES.values()), encoding="ascii")
    return path


def pushed(r: redis.Redis) -> list[dict[str, str]]:
    return [{k.decode(): v.decode() for k, v in f.items()} for _, f in r.xrange(DOCS)]


def reported(stderr: str, name: str) -> dict[str, str]:
    """``name:WHERE: skipped: REASON`` lines, as {WHERE: REASON}."""
    return dict(re.findall(rf"^{re.escape(name)}:([^:]+): skipped: (.*)$", stderr, flags=re.MULTILINE))


def test_push_reports_each_bad_line_by_number_and_pushes_every_other(
    r: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    """A real ``dedupd push in.jsonl``: was ``dedupd: error: 'utf-8' codec can't encode character '\\ud800'
    in position ...``, exit 1 and an empty stream."""
    res = subprocess.run(
        [sys.executable, "-m", "dedupd", "push", str(jsonl(tmp_path / "in.jsonl"))],
        env={**os.environ, "DEDUPD_REDIS_URL": redis_url},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 1, res.stderr
    assert "Traceback" not in res.stderr and "codec can't encode" not in res.stderr, res.stderr
    got = reported(res.stderr, "in.jsonl")
    assert sorted(map(int, got)) == sorted(BAD), res.stderr
    for no, why in BAD.items():
        assert got[str(no)].startswith(why), (no, got[str(no)])
    assert "'\\ud800' at character 8" in got["2"] and "'\\udc00' at character 17" in got["7"]
    assert f"pushed {len(VALID)} documents to dedupd:docs; skipped {len(BAD)} bad lines" in res.stderr
    entries = pushed(r)
    assert [e["id"] for e in entries] == VALID
    assert entries[2]["text"] == "a proper pair \U0001f600 is text" and entries[2]["meta"] == '{"k": "v"}'


def test_query_reports_the_same_bad_lines_and_answers_the_others(
    r: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    """``dedupd query FILE`` reads FILE as push does: same bad lines (with an index to ask, a surrogate id
    failed when it was sent to Redis, and the whole run with it)."""
    push(r, [{"id": "indexed", "text": FIRST}])
    drain(make_daemon(redis_url))
    res = CliRunner().invoke(
        cli, ["query", str(jsonl(tmp_path / "in.jsonl"))], env={"DEDUPD_REDIS_URL": redis_url}
    )
    assert res.exit_code == 1, (res.output, res.exception)
    assert "Traceback" not in res.output and "codec can't encode" not in res.stderr, res.stderr
    assert sorted(map(int, reported(res.stderr, "in.jsonl"))) == sorted(BAD), res.stderr
    verdicts = [line.partition(": ")[0] for line in res.stdout.splitlines()]
    assert verdicts == VALID
    assert res.stdout.splitlines()[0] == "v1: duplicate of indexed (1.00)"


@pytest.fixture
def run(redis_url: str):  # type: ignore[no-untyped-def]
    def invoke(*args: str, input: bytes | None = None):  # type: ignore[no-untyped-def]
        return CliRunner().invoke(cli, ["push", *args], input=input, env={"DEDUPD_REDIS_URL": redis_url})

    return invoke


def test_text_lines_not_utf8_are_bad_lines(run, r: redis.Redis) -> None:  # type: ignore[no-untyped-def]
    """``--format text`` decodes each line strictly: Latin-1 bytes and a surrogate written as UTF-8
    bytes (ED A0 80, as CESU-8 does) are bad lines by number; no surrogateescape lets one through."""
    data = b"plain one\ncaf\xe9 latin-1\nan encoded surrogate \xed\xa0\x80 here\nplain two\n"
    res = run("-", "--format", "text", input=data)
    assert res.exit_code == 1, res.output
    assert reported(res.stderr, "stdin") == {
        "2": "not UTF-8 (byte 0xe9 at byte 4 of the line)",
        "3": "not UTF-8 (byte 0xed at byte 22 of the line)",
    }
    assert [(e["id"], e["text"]) for e in pushed(r)] == [("stdin:1", "plain one"), ("stdin:4", "plain two")]


def test_a_file_name_not_utf8_names_text_ids_escaped(run, r: redis.Redis, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Plain-text ids are the file name and the line number: a name that is not UTF-8 (its bytes kept as
    surrogates) is written with \\x escapes instead of making every line unsendable."""
    path = tmp_path / os.fsdecode(b"caf\xe9.txt")
    path.write_bytes(b"one line\nanother line\n")
    res = run(str(path), "--format", "text")
    assert res.exit_code == 0, res.output
    assert [e["id"] for e in pushed(r)] == ["caf\\xe9.txt:1", "caf\\xe9.txt:2"]


def test_an_id_prefix_not_utf8_is_a_usage_error(run, r: redis.Redis) -> None:  # type: ignore[no-untyped-def]
    res = run("-", "--format", "text", "--id-prefix", "p\udcff:", input=b"one\ntwo\n")
    assert res.exit_code == 2 and "--id-prefix 'p\\udcff:' is not UTF-8" in res.stderr, res.output
    assert r.xlen(DOCS) == 0


def test_json_array_items_and_files_are_checked_too(run, r: redis.Redis, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    array = tmp_path / "docs.json"
    array.write_text(
        json.dumps([{"id": "a", "text": "fine"}, {"id": "b", "text": "\ud800"}, "\udc00 bare", "ok"])
    )
    res = run(str(array))
    assert res.exit_code == 1, res.output
    got = reported(res.stderr, "docs.json")
    assert sorted(got) == ["item 2", "item 3"] and got["item 2"].startswith("field 'text'")
    assert [e["id"] for e in pushed(r)] == ["a", "docs.json:4"]

    r.delete(DOCS)
    root = tmp_path / "dir"
    root.mkdir()
    (root / "ok.txt").write_text("a fine document")
    (root / os.fsdecode(b"bad\xff.txt")).write_text("a document whose name is not UTF-8")
    (root / ("n" * 200)).mkdir()
    (root / ("n" * 200) / ("m" * 100)).write_text("a path of 301 bytes")
    res = run(str(root), "--format", "files")
    assert res.exit_code == 1, res.output
    got = reported(res.stderr, "dir")
    assert got["bad\\xff.txt"] == "its path is not UTF-8 (an id must be)"
    assert got[f"{'n' * 200}/{'m' * 100}"] == "field 'id' has 301 bytes, more than max_id_bytes = 256"
    assert [e["id"] for e in pushed(r)] == ["ok.txt"]


def test_parse_line_checks_the_fields() -> None:
    bad = parse_line(b'{"id": "a", "text": "x \\ud800"}', 3, "jsonl", "")
    assert isinstance(bad, BadLine) and bad.line_no == 3 and bad.reason.startswith("field 'text' holds")
    assert parse_line(b'{"id": "abcd", "text": "t"}', 1, "jsonl", "") == {"id": "abcd", "text": "t"}
    bad = parse_line(b'{"id": "abcd", "text": "t"}', 1, "jsonl", "", max_id_bytes=3)
    assert isinstance(bad, BadLine) and bad.reason == "field 'id' has 4 bytes, more than max_id_bytes = 3"
    bad = parse_line(b"a plain line", 5, "auto", "x" * 10, max_id_bytes=10)
    assert isinstance(bad, BadLine) and bad.line_no == 5 and "11 bytes" in bad.reason


# ----- the Python client -----
@pytest.mark.parametrize(
    ("args", "kwargs", "field"),
    [
        (("a\ud800", "t"), {}, "field 'id'"),
        (("a", "lone \ud800"), {}, "field 'text'"),
        (("a", "reversed \udc00\ud800"), {}, "field 'text'"),
        (("a", "t"), {"source": "\udfff"}, "field 'source'"),
        (("a", "t"), {"meta": {"k": "\ud800"}}, "field 'meta'"),
        (("a", "t"), {"items": ["i", "\ud800"]}, "field 'items'"),
        (("x" * 257, "t"), {}, "field 'id' has 257 bytes, more than max_id_bytes = 256"),
    ],
)
def test_client_push_refuses_unsendable_fields(
    r: redis.Redis, redis_url: str, args: tuple[str, ...], kwargs: dict[str, Any], field: str
) -> None:
    with Client.connect(redis_url) as client, pytest.raises(ConfigError, match=re.escape(field)):
        client.push(*args, **kwargs)
    assert r.xlen(DOCS) == 0


def test_client_push_many_sends_nothing_of_a_call_with_a_bad_document(r: redis.Redis, redis_url: str) -> None:
    """The bad document is the 551st: the first 500 used to be sent before it was even looked at."""
    docs = [{"id": f"d{i}", "text": f"document number {i}"} for i in range(600)]
    docs[550] = {"id": "d550", "text": "ok", "source": "lone \udc00"}
    with Client.connect(redis_url, max_id_bytes=64) as client:
        with pytest.raises(ConfigError, match=r"^document 551: field 'source' holds a lone surrogate"):
            client.push_many(docs)
        assert r.xlen(DOCS) == 0
        with pytest.raises(ConfigError, match="document 2: field 'id' has 65 bytes"):
            client.push_many([{"id": "a", "text": "t"}, {"id": "i" * 65, "text": "t"}])
        assert r.xlen(DOCS) == 0
        docs[550] = {"id": "d550", "text": "a proper pair \U0001f600 is text"}
        assert len(client.push_many(docs)) == 600
    assert r.xlen(DOCS) == 600 and pushed(r)[550]["text"] == "a proper pair \U0001f600 is text"
