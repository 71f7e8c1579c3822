"""Every error of the command line is one line on stderr with the right exit status and no traceback.

Table-driven: each case runs a real ``python -m dedupd`` process (against the session's redis-server where
a server is needed, else against a port nothing listens on, so no embedded Redis starts) and checks the exit
status, the number of non-blank stderr lines, what they say, and that no traceback appears. The cases are
the ones of issue 15 ("Tracebacks instead of one line", the input that was silently misread, the small
surprises) plus the usage errors around them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner
from conftest import free_port

from dedupd.cli import cli

DEDUPD = [sys.executable, "-m", "dedupd"]

FILES: dict[str, bytes] = {
    "syntax.toml": b'threshold = 0.5\nshingle = = "word:3"\n',
    "typo.toml": b"threshhold = 0.5\n",
    "value.toml": b"threshold = 1.5\n",
    "latin1.txt": b"caf\xe9 au lait, a Latin-1 line\na plain UTF-8 line\n",
    "broken.jsonl": b'{"id": "a", "text": "one two three"}\n{"id": "b", "text": \n',
    "array.json": b'[\n  {"id": "a", "text": "one two three"},\n  {"id": "b", "text": "four five six"}\n]\n',
    "table.csv": b"id,text\n1,hello world\n",
    "baskets.jsonl": b'{"items": ["bread", "milk"]}\n{"items": \n',
}


@dataclass(frozen=True)
class Case:
    """One command line: ``args`` may hold {tmp} (the directory holding FILES), {url} (the session's
    Redis), {port} (the session Redis's port) and {nothing} (a URL nobody listens on)."""

    name: str
    args: tuple[str, ...]
    code: int
    needles: tuple[str, ...] = ()
    lines: int | None = 1  # non-blank stderr lines (None: not checked)
    env: dict[str, str] = field(default_factory=dict)
    redis: bool = False  # DEDUPD_REDIS_URL is the session's server (else a port nothing listens on)
    absent: tuple[str, ...] = ()  # must not appear anywhere
    prepare: Callable[[redis.Redis], object] | None = None


def _one_document(r: redis.Redis) -> object:
    return r.xadd("dedupd:docs", {"id": "plain", "text": "a document without items"})


CASES = [
    # --- configuration ---
    Case(
        "toml-syntax-error",
        ("alerts", "--config", "{tmp}/syntax.toml"),
        2,
        ("syntax.toml: invalid TOML", "line 2"),
    ),
    Case(
        "toml-unknown-key",
        ("alerts", "--config", "{tmp}/typo.toml"),
        2,
        ("typo.toml: unknown setting 'threshhold'", "did you mean 'threshold'"),
        absent=("DEDUPD_THRESHHOLD",),
    ),
    Case(
        "toml-bad-value",
        ("alerts", "--config", "{tmp}/value.toml"),
        2,
        ("threshold (in ", "value.toml): Input should be less than 1"),
        absent=("DEDUPD_THRESHOLD",),
    ),
    Case("config-missing", ("alerts", "--config", "{tmp}/nope.toml"), 2, ("does not exist",)),
    Case("env-config-missing", ("alerts",), 2, ("not a file",), env={"DEDUPD_CONFIG": "/nonexistent.toml"}),
    Case("bad-setting-env", ("alerts",), 2, ("threshold (DEDUPD_THRESHOLD)",), env={"DEDUPD_THRESHOLD": "2"}),
    Case(
        "validator-in-plain-words",
        ("alerts",),
        2,
        ("shingle (DEDUPD_SHINGLE): shingle must look like 'word:3'",),
        env={"DEDUPD_SHINGLE": "words:3"},
        absent=("Value error",),
    ),
    Case(
        "model-validator-in-plain-words",
        ("push", "-"),
        2,
        ("invalid settings: set both bands and rows",),
        env={"DEDUPD_BANDS": "4"},
        absent=("Value error",),
    ),
    Case(
        "two-bad-settings-one-line",
        ("alerts",),
        2,
        ("invalid settings: num_perm (DEDUPD_NUM_PERM): ", "; threshold (DEDUPD_THRESHOLD): "),
        env={"DEDUPD_THRESHOLD": "2", "DEDUPD_NUM_PERM": "3"},
    ),
    Case("banding", ("tune", "--bands", "20", "--rows", "5", "--num-perm", "64"), 2, ("exceeds num_perm",)),
    Case(
        "env-typo-is-a-warning",
        ("tune", "--json"),
        0,
        ("DEDUPD_THRESHHOLD", "did you mean DEDUPD_THRESHOLD?"),
        env={"DEDUPD_THRESHHOLD": "0.5"},
    ),
    Case("env-log-level-any-case", ("tune", "--json"), 0, lines=None, env={"DEDUPD_LOG_LEVEL": "debug"}),
    # --- the Redis URL and the server ---
    Case(
        "db-index-out-of-range",
        ("alerts", "--redis-url", "redis://127.0.0.1:{port}/99"),
        2,
        ("has no database 99", "DB index is out of range"),
    ),
    Case(
        "db-index-huge",
        ("alerts", "--redis-url", "redis://127.0.0.1:{port}/123456789012345678901234"),
        2,
        ("has no database 123456789012345678901234",),
    ),
    Case(
        "db-index-not-a-number",
        ("alerts", "--redis-url", "redis://127.0.0.1:{port}/zero"),
        2,
        ("names database 'zero': it must be a number",),
    ),
    Case(
        "redis-unreachable",
        ("alerts",),
        2,
        ("cannot reach Redis at redis://127.0.0.1:", "Connection refused. Is the server running"),
        absent=("..",),
    ),
    Case(
        "check-unreachable",
        ("check",),
        1,
        ("unhealthy: cannot reach Redis",),
        lines=0,  # a probe answers on stdout
        absent=("..",),
    ),
    # --- alerts and dead letters ---
    Case(
        "since-bogus",
        ("alerts", "--since", "bogus"),
        2,
        ("--since must be a stream id like 1700000000000-0", "'now'", "got 'bogus'"),
    ),
    Case("since-bad-id", ("dead", "--since", "12-x"), 2, ("--since must be a stream id",)),
    Case("since-dollar-is-now", ("alerts", "--since", "$"), 0, ("no alerts yet",), redis=True),
    Case("since-plus-is-now", ("alerts", "--since", "+"), 0, ("no alerts yet",), redis=True),
    Case(
        "count-negative", ("alerts", "-n", "-1"), 2, ("-1 is not in the range x>=0", "dedupd alerts --help")
    ),
    # --- usage ---
    Case("unknown-command", ("alert",), 2, ("No such command 'alert'", "'dedupd --help'")),
    Case("unknown-option", ("push", "--bogus", "-"), 2, ("No such option '--bogus'", "dedupd push --help")),
    Case("missing-file", ("push", "{tmp}/nothing.jsonl"), 2, ("does not exist",)),
    # --- mine: usage and input-file problems exit 2, as every command's do ---
    Case("mine-missing-input", ("mine", "--input", "{tmp}/missing.txt"), 2, ("does not exist",)),
    Case(
        "mine-malformed-input",
        ("mine", "--input", "{tmp}/baskets.jsonl"),
        2,
        ("baskets.jsonl:2: not valid JSON",),
        absent=("bad_basket",),
    ),
    Case("mine-bad-memory", ("mine", "--input", "{tmp}/table.csv", "-q", "--memory", "12zz"), 2, ("64MiB",)),
    Case("mine-redis-unreachable", ("mine", "-q"), 2, ("cannot reach Redis at redis://127.0.0.1:",)),
    # --- input: one clear line per bad line, a count at the end, exit 1 ---
    Case(
        "push-not-utf8",
        ("push", "{tmp}/latin1.txt"),
        1,
        (
            "latin1.txt:1: skipped: not UTF-8 (byte 0xe9",
            "pushed 1 document to dedupd:docs; skipped 1 bad line",
        ),
        lines=2,
        redis=True,
        absent=("UnicodeDecodeError",),
    ),
    Case(
        "push-broken-jsonl-line",
        ("push", "{tmp}/broken.jsonl"),
        1,
        ("broken.jsonl:2: skipped: invalid JSON", "pushed 1 document to"),
        lines=2,
        redis=True,
    ),
    Case(
        "push-json-array-detected",
        ("push", "{tmp}/array.json"),
        0,
        ("warning: array.json starts with '['", "--format json-array", "pushed 2 documents"),
        lines=2,
        redis=True,
    ),
    Case(
        "push-csv-header-warned",
        ("push", "{tmp}/table.csv"),
        0,
        ("looks like a CSV header ('id,text')", "pushed 2 documents"),
        lines=2,
        redis=True,
    ),
    Case(
        "push-files-needs-a-directory",
        ("push", "--format", "files", "{tmp}/table.csv"),
        2,
        ("reads a directory",),
    ),
    Case(
        "push-directory-as-text",
        ("push", "--format", "text", "{tmp}"),
        2,
        ("is a directory: use --format files",),
    ),
    # --- mining from a plain stream ---
    Case(
        "mine-no-baskets-says-how",
        ("mine", "-q"),
        1,
        ("no baskets in redis stream dedupd:baskets", "DEDUPD_BASKETS=words", "items"),
        redis=True,
        prepare=_one_document,
    ),
    Case("mine-nothing-at-all", ("mine", "-q"), 1, ("no baskets", "is empty too"), redis=True),
    Case("rebuild-without-index", ("rebuild", "--threshold", "0.7"), 2, ("nothing to rebuild",), redis=True),
]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("inputs")
    for name, data in FILES.items():
        (d / name).write_bytes(data)
    return d


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_one_line_error(case: Case, inputs: Path, redis_url: str, r: redis.Redis, tmp_path: Path) -> None:
    port = redis_url.rsplit(":", 1)[1].split("/")[0]
    nothing = f"redis://127.0.0.1:{free_port()}/0"
    args = [a.format(tmp=inputs, url=redis_url, port=port, nothing=nothing) for a in case.args]
    env = {**os.environ, "DEDUPD_REDIS_URL": redis_url if case.redis else nothing, **case.env}
    if case.prepare is not None:
        case.prepare(r)
    res = subprocess.run(
        [*DEDUPD, *args],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    shown = res.stdout + res.stderr
    err_lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert res.returncode == case.code, shown
    assert "Traceback" not in shown, shown
    if case.lines is not None:
        assert len(err_lines) == case.lines, shown
    for needle in case.needles:
        assert needle in shown, f"{needle!r} not in:\n{shown}"
    for bad in case.absent:
        assert bad not in shown, shown
    if case.code and case.lines == 1:
        assert err_lines[0].startswith("dedupd: error: "), shown


def test_unexpected_exception_is_one_line(monkeypatch: pytest.MonkeyPatch, redis_url: str) -> None:
    """A bug anywhere in a command: one line naming the exception and how to see the traceback, exit 1."""
    import dedupd.ops.stats

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(dedupd.ops.stats, "collect", broken)
    res = CliRunner().invoke(cli, ["stats"], env={"DEDUPD_REDIS_URL": redis_url})
    assert res.exit_code == 1
    assert res.output.strip() == (
        "dedupd: error: RuntimeError: boom; second line (run with --log-level DEBUG for details)"
    )


def test_follow_since_plus_follows_only_new_alerts(redis_url: str, r: redis.Redis) -> None:
    """`alerts --follow --since +`: nothing old, then what arrives; Ctrl-C ends it with status 0."""
    import signal
    import time

    r.xadd("dedupd:alerts", {"id": "old", "duplicate_of": "x", "similarity": "0.9", "cluster": "x"})
    env = {**os.environ, "DEDUPD_REDIS_URL": redis_url}
    proc = subprocess.Popen(
        [*DEDUPD, "alerts", "--follow", "--since", "+"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not any(c.get("cmd") == "xread" for c in r.client_list()):  # it is blocked reading
            assert time.monotonic() < deadline and proc.poll() is None, proc.stderr
            time.sleep(0.05)
        r.xadd("dedupd:alerts", {"id": "new", "duplicate_of": "x", "similarity": "0.9", "cluster": "x"})
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("new ~ x")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0 and "old" not in out and "Traceback" not in err
    # the wait for new alerts is said on stderr (stdout holds only alerts)
    assert err.strip() == "waiting for new alerts (Ctrl-C stops); dedupd:alerts holds 1 older one"
