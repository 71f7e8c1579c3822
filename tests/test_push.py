"""`dedupd push`: streaming from a pipe (a flush at least every 100 ms), Ctrl-C, the input formats, bad input.

The streaming tests run a real `dedupd push -` process whose standard input is a pipe left open; the rest
run the command in process, and the parsing helpers of dedupd/producer.py directly.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner

from dedupd.cli import cli
from dedupd.index.keys import Keys
from dedupd.ops.producer import BadLine, array_items, detect_format, parse_line, read_items, read_lines

DEDUPD = [sys.executable, "-m", "dedupd"]
DOCS = Keys().docs


def entries(r: redis.Redis) -> list[dict[str, str]]:
    return [{k.decode(): v.decode() for k, v in f.items()} for _, f in r.xrange(DOCS)]


def wait_until(cond: object, timeout: float, what: str) -> float:
    """Poll ``cond`` until true; the seconds it took."""
    t0 = time.monotonic()
    while not cond():  # type: ignore[operator]
        assert time.monotonic() - t0 < timeout, f"{what}: not within {timeout}s"
        time.sleep(0.01)
    return time.monotonic() - t0


@pytest.fixture
def pusher(redis_url: str, r: redis.Redis):  # type: ignore[no-untyped-def]
    """A `dedupd push -` process with a pipe for stdin, once it has connected (so timings exclude startup)."""
    before = len(r.client_list())
    proc = subprocess.Popen(
        [*DEDUPD, "push", "-"],
        env={**os.environ, "DEDUPD_REDIS_URL": redis_url},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        wait_until(lambda: len(r.client_list()) > before or proc.poll() is not None, 30, "push connects")
        assert proc.poll() is None, proc.communicate()
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _write(proc: subprocess.Popen[bytes], data: bytes) -> None:
    assert proc.stdin is not None
    proc.stdin.write(data)
    proc.stdin.flush()


def test_push_stdin_sends_within_a_second_while_the_pipe_stays_open(
    pusher: subprocess.Popen[bytes], r: redis.Redis
) -> None:
    """`printf 'a b c\\n'; sleep 2; ... | dedupd push -`: the first document is in the stream well within 1 s."""
    _write(pusher, b"a b c\n")
    took = wait_until(lambda: r.xlen(DOCS) == 1, 1.0, "the first document")
    assert took < 1.0
    time.sleep(0.3)  # the input pauses
    _write(pusher, b'{"id": "j", "text": "d e f"}\n')
    wait_until(lambda: r.xlen(DOCS) == 2, 1.0, "the second document")
    _, err = pusher.communicate(timeout=60)  # closes stdin: end of input
    assert pusher.returncode == 0, err
    assert err.decode().strip() == "pushed 2 documents to dedupd:docs"
    assert [(e["id"], e["text"]) for e in entries(r)] == [("stdin:1", "a b c"), ("j", "d e f")]


def test_push_stdin_trickle_is_sent_every_100ms(pusher: subprocess.Popen[bytes], r: redis.Redis) -> None:
    """A line every 30 ms never leaves the pipe idle for 100 ms: what was read is still sent by time."""
    for i in range(20):
        _write(pusher, f"line {i} of a trickle\n".encode())
        time.sleep(0.03)
    assert r.xlen(DOCS) >= 10  # sent while the input kept flowing, not at the end
    pusher.communicate(timeout=60)
    assert pusher.returncode == 0
    assert r.xlen(DOCS) == 20


def test_ctrl_c_says_how_many_were_pushed(pusher: subprocess.Popen[bytes], r: redis.Redis) -> None:
    _write(pusher, b"one two three\nfour five six\n")
    wait_until(lambda: r.xlen(DOCS) == 2, 2.0, "two documents")
    pusher.send_signal(signal.SIGINT)
    _, err = pusher.communicate(timeout=60)
    assert pusher.returncode == 130
    # the entries can be in Redis before their reply reaches the pusher: then it says "at least" what it knows
    said = re.fullmatch(
        r"interrupted: pushed (at least )?(\d+) documents to dedupd:docs", err.decode().strip()
    )
    assert said, err
    assert int(said[2]) == 2 if not said[1] else int(said[2]) <= 2


@pytest.fixture
def run(redis_url: str):  # type: ignore[no-untyped-def]
    def invoke(*args: str, input: bytes | str | None = None):  # type: ignore[no-untyped-def]
        return CliRunner().invoke(
            cli, ["push", *args], input=input, env={"DEDUPD_REDIS_URL": redis_url}, catch_exceptions=False
        )

    return invoke


def test_one_document_is_singular(run, r: redis.Redis) -> None:  # type: ignore[no-untyped-def]
    res = run("-", input="just one\n")
    assert res.exit_code == 0 and res.stderr.strip() == "pushed 1 document to dedupd:docs"


def test_json_array_explicit_and_detected(run, r: redis.Redis, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "docs.json"
    f.write_text(json.dumps([{"id": "a", "text": "x y z", "meta": {"k": 1}}, "a bare string", {"id": "b"}]))
    res = run(str(f))
    assert res.exit_code == 0, res.output
    assert "starts with '['" in res.stderr and "pushed 3 documents" in res.stderr
    res = run(str(f), "--format", "json-array")
    assert res.exit_code == 0 and "starts with" not in res.stderr  # chosen explicitly: no warning
    assert entries(r)[:3] == [
        {"id": "a", "text": "x y z", "meta": '{"k": 1}'},
        {"id": "docs.json:2", "text": "a bare string"},
        {"id": "b"},
    ]
    f.write_text('[{"id": "a", "text": "x"}, 42]')
    res = run(str(f))
    assert res.exit_code == 1 and "docs.json:item 2: skipped: a JSON number, not an object" in res.stderr
    f.write_text('[{"id": "a", "text": "x"},\n  {"id": ]')
    res = run(str(f))
    assert res.exit_code == 1 and "docs.json:2: skipped: invalid JSON" in res.stderr


def test_files_format_reads_a_directory(run, r: redis.Redis, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path / "corpus"
    (root / "sub").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "a.txt").write_text("first document\n")
    (root / "sub" / "b.md").write_text("second document")
    (root / "empty.txt").write_text("  \n")
    (root / "latin1.txt").write_bytes(b"caf\xe9")
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main")
    res = run(str(root))  # auto: a directory is read as files
    assert res.exit_code == 1
    assert "corpus:latin1.txt: skipped: not UTF-8" in res.stderr
    assert "pushed 2 documents to dedupd:docs; skipped 1 bad line" in res.stderr
    assert [(e["id"], e["text"]) for e in entries(r)] == [
        ("a.txt", "first document\n"),
        ("sub/b.md", "second document"),
    ]


def test_files_larger_than_max_doc_bytes_are_reported(
    run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "big.txt").write_text("word " * 100)
    monkeypatch.setenv("DEDUPD_MAX_DOC_BYTES", "100")
    res = run(str(tmp_path), "--format", "files")
    assert res.exit_code == 1 and "big.txt: skipped: 500 bytes, more than max_doc_bytes = 100" in res.stderr


def test_bad_utf8_and_bad_json_lines_are_counted(run, r: redis.Redis) -> None:  # type: ignore[no-untyped-def]
    data = b'{"id": "a", "text": "fine"}\n\xff\xfe garbage\n{"id": "b", "text": "also fine"}\n{"id": \n'
    res = run("-", input=data)
    assert res.exit_code == 1
    assert "stdin:2: skipped: not UTF-8 (byte 0xff at byte 1 of the line)" in res.stderr
    assert "stdin:4: skipped: invalid JSON" in res.stderr
    assert "pushed 2 documents to dedupd:docs; skipped 2 bad lines" in res.stderr
    assert "Traceback" not in res.output and "UnicodeDecodeError" not in res.output
    assert [e["id"] for e in entries(r)] == ["a", "b"]


def test_many_bad_lines_are_shown_then_counted(run) -> None:  # type: ignore[no-untyped-def]
    res = run("-", "--format", "jsonl", input="nope\n" * 50)
    shown = [line for line in res.stderr.splitlines() if ": skipped: " in line]
    assert res.exit_code == 1 and len(shown) == 20 and "skipped 50 bad lines" in res.stderr


# ----- the parsing helpers -----
def test_parse_line() -> None:
    assert parse_line(b"\xef\xbb\xbfhello\r\n", 1, "auto", "f:") == {"id": "f:1", "text": "hello"}
    assert parse_line(b"   \n", 3, "auto", "f:") is None
    assert parse_line("{not json", 2, "text", "f:") == {"id": "f:2", "text": "{not json"}
    bad = parse_line("{not json", 2, "auto", "f:")
    assert (
        isinstance(bad, BadLine) and bad.reason.startswith("invalid JSON") and "--format text" in bad.reason
    )
    assert parse_line('{"id": 7, "items": ["a"]}', 1, "jsonl", "") == {"id": "7", "items": '["a"]'}
    bad = parse_line(b"caf\xe9", 4, "text", "")
    assert isinstance(bad, BadLine) and bad.line_no == 4 and "0xe9" in bad.reason


@pytest.mark.parametrize(
    ("first", "fmt", "warned"),
    [
        (b"[", "json-array", True),
        (b'  [{"id": "a"}', "json-array", True),
        (b'["a", "b"]', "json-array", True),
        (b"[INFO] the server started", "auto", False),
        (b"id,text,source", "auto", True),
        (b'"id";"text"', "auto", True),
        (b"Hello, world", "auto", False),
        (b'{"id": "a", "text": "b"}', "jsonl-auto", False),
        (b" {}", "jsonl-auto", False),
    ],
)
def test_detect_format(first: bytes, fmt: str, warned: bool) -> None:
    got = detect_format(first, "in")
    assert got.fmt == fmt and (got.warning is not None) == warned


def test_array_items_of_objects_and_strings() -> None:
    got = list(array_items(b'[{"id": "a", "text": "t"}, " ", "s", null]', "p:"))
    assert got[:2] == [{"id": "a", "text": "t"}, {"id": "p:3", "text": "s"}]
    assert isinstance(got[2], BadLine) and got[2].where == "item 4"
    (bad,) = array_items(b'{"id": "a"}', "p:")
    assert isinstance(bad, BadLine) and "not an array" in bad.reason


def test_read_lines_reports_idle_pipes() -> None:
    """On a pipe, None after idle_s without input; lines as soon as they arrive; the last line without
    a line break too."""
    rfd, wfd = os.pipe()
    with os.fdopen(rfd, "rb", buffering=0) as reader:
        lines = read_lines(reader, idle_s=0.05)
        os.write(wfd, b"first\nsec")
        assert next(lines) == b"first"
        assert next(lines) is None  # "sec" is waiting for the rest of its line
        os.write(wfd, b"ond\nthird")
        assert next(lines) == b"second"
        os.close(wfd)
        assert list(lines) == [b"third"]


def test_read_items_auto_array_across_lines(tmp_path: Path) -> None:
    f = tmp_path / "a.json"
    f.write_bytes(b'\n[\n {"id": "a", "text": "t"},\n "u"\n]\n')
    warnings: list[str] = []
    with f.open("rb") as stream:
        got = list(read_items(stream, "auto", "a:", "a.json", warn=warnings.append))
    assert got == [{"id": "a", "text": "t"}, {"id": "a:2", "text": "u"}]
    assert len(warnings) == 1 and "json-array" in warnings[0]
