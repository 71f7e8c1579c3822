"""`dedupd dedup FILE`: the near-duplicates of a file removed on a private Redis, checked against the exact
truth (brute-force Jaccard on word 3-shingles, scripts/oracle.py).

The command runs in process (click's CliRunner) unless the test needs a real process (standard input as a
pipe, the temporary directory of the environment).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from click.testing import CliRunner, Result
from helpers import load_script
from procs import wait_for

import dedupd.ops.dedup as dedup_module
import dedupd.server.private as private_server
from dedupd.cli import cli
from dedupd.ops.inprocess import InProcessEngine

oracle = load_script("oracle")

DEDUPD = [sys.executable, "-m", "dedupd"]
WORDS = [f"w{i}" for i in range(3000)]  # distinct words: shingles repeat only where planted


# ----- the truth -----
def components(texts: list[str], threshold: float = 0.8) -> list[list[int]]:
    """The connected components (document indices, ascending) of the exact Jaccard >= threshold graph."""
    pairs = oracle.naive_pairs(oracle.shingle_sets(texts, "word:3"), threshold)
    parent = list(range(len(texts)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, j in pairs:
        parent[max(find(i), find(j))] = min(find(i), find(j))
    groups: dict[int, list[int]] = {}
    for i in range(len(texts)):
        groups.setdefault(find(i), []).append(i)
    return sorted(groups.values())


def planted(rng: random.Random, bases: int = 20, copies: int = 4, longer: bool = False) -> list[str]:
    """Texts of 40 distinct words with near-copies (a word or two replaced, or with ``longer`` one or two
    words added at the end), shuffled: the first of a family is not always its base."""
    texts = []
    for _ in range(bases):
        base = rng.sample(WORDS, 40)
        texts.append(" ".join(base))
        for _ in range(rng.randint(0, copies)):
            words = list(base)
            if longer:
                words += rng.sample(WORDS, rng.randint(1, 2))
            else:
                for _ in range(rng.randint(0, 2)):
                    words[rng.randrange(len(words))] = rng.choice(WORDS)
            texts.append(" ".join(words))
    rng.shuffle(texts)
    return texts


def write_jsonl(path: Path, texts: list[str], ids: list[str] | None = None) -> list[str]:
    """One JSON line per text (ids d0, d1, ... unless given); returns the lines."""
    ids = ids or [f"d{i}" for i in range(len(texts))]
    lines = [json.dumps({"id": i, "text": t}) for i, t in zip(ids, texts, strict=True)]
    path.write_text("".join(line + "\n" for line in lines))
    return lines


@pytest.fixture
def run() -> Iterator[Any]:
    def invoke(*args: str, input: bytes | None = None) -> Result:
        return CliRunner().invoke(cli, ["dedup", *args], input=input, catch_exceptions=False)

    yield invoke


# ----- what is kept -----
def test_keeps_the_first_document_of_each_true_component(run: Any, tmp_path: Path) -> None:
    """JSONL: the output is exactly the first line of each exact-Jaccard component, in file order."""
    texts = planted(random.Random(7))
    src = tmp_path / "docs.jsonl"
    lines = write_jsonl(src, texts)
    truth = components(texts)
    assert len(truth) <= len(texts) - 8  # near-copies were planted
    res = run(str(src))
    assert res.exit_code == 0, res.output
    firsts = sorted(c[0] for c in truth)
    assert res.stdout.splitlines() == [lines[i] for i in firsts]
    dropped = len(texts) - len(truth)
    clusters = sum(1 for c in truth if len(c) > 1)
    expected = f"{len(texts)} documents, {len(truth)} kept, {dropped} dropped in {clusters} clusters, "
    assert res.stderr.startswith(expected), res.stderr


def test_keep_longest_keeps_the_longest_text_of_each_component(run: Any, tmp_path: Path) -> None:
    texts = planted(random.Random(11), longer=True)
    src = tmp_path / "docs.jsonl"
    lines = write_jsonl(src, texts)
    truth = components(texts)
    res = run(str(src), "--keep", "longest", "-o", str(tmp_path / "out.jsonl"))
    assert res.exit_code == 0, res.output
    longest = sorted(max(c, key=lambda i: (len(texts[i]), -i)) for c in truth)
    assert any(c[0] not in longest for c in truth)  # not the same as --keep first
    assert (tmp_path / "out.jsonl").read_text().splitlines() == [lines[i] for i in longest]
    assert res.stdout == ""


def test_clusters_file_names_every_component_of_two_or_more(run: Any, tmp_path: Path) -> None:
    texts = planted(random.Random(3))
    src = tmp_path / "docs.jsonl"
    write_jsonl(src, texts)
    truth = components(texts)
    res = run(str(src), "-o", str(tmp_path / "out.jsonl"), "--clusters", str(tmp_path / "clusters.jsonl"))
    assert res.exit_code == 0, res.output
    got = [json.loads(line) for line in (tmp_path / "clusters.jsonl").read_text().splitlines()]
    want = [
        {"cluster": f"d{c[0]}", "kept": f"d{c[0]}", "members": [f"d{i}" for i in c]}
        for c in truth
        if len(c) > 1
    ]
    assert got == want


def test_a_hub_that_merges_two_clusters_keeps_one_document(run: Any, tmp_path: Path) -> None:
    """A and B are not near each other (two clusters when B comes); H, later, is near both and merges them:
    only A is kept (B got no alert when it came, yet it is a duplicate in the end)."""
    hub = random.Random(5).sample(WORDS, 100)
    a, b = list(hub), list(hub)
    for at in (10, 20, 30):  # three isolated words each: J(A, H) = J(B, H) = 89/107, J(A, B) = 80/116
        a[at] = f"a{at}"
    for at in (60, 70, 80):
        b[at] = f"b{at}"
    other = " ".join(random.Random(6).sample(WORDS, 50))
    texts = [" ".join(a), other, " ".join(b), " ".join(hub)]
    assert components(texts) == [[0, 2, 3], [1]]  # (A and B alone are two)
    assert components(texts[:3]) == [[0], [1], [2]]
    src = tmp_path / "hub.txt"
    src.write_text("".join(t + "\n" for t in texts))
    res = run(str(src), "--format", "text", "--clusters", str(tmp_path / "c.jsonl"))
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines() == [texts[0], texts[1]]
    assert json.loads((tmp_path / "c.jsonl").read_text()) == {
        "cluster": "hub.txt:1",
        "kept": "hub.txt:1",
        "members": ["hub.txt:1", "hub.txt:3", "hub.txt:4"],
    }


def test_plain_text_from_standard_input(run: Any) -> None:
    """`-` reads standard input (kept in a copy for the second pass); ids are stdin:LINE."""
    texts = planted(random.Random(9), bases=8)
    truth = components(texts)
    data = "".join(t + "\n" for t in texts).encode()
    res = run("-", "--format", "text", "--clusters", "-", "-o", os.devnull, input=data)
    assert res.exit_code == 0, res.output
    got = [json.loads(line) for line in res.stdout.splitlines()]
    assert [c["members"] for c in got] == [[f"stdin:{i + 1}" for i in c] for c in truth if len(c) > 1]


def test_standard_input_through_a_real_pipe(tmp_path: Path) -> None:
    """The console script with a pipe for stdin: lines kept byte for byte (CRLF, no final line break)."""
    text = " ".join(WORDS[:30])
    data = (text + "\r\n" + text + "\r\nanother line\r\nthe last one, unterminated").encode()
    proc = subprocess.run(
        [*DEDUPD, "dedup", "-", "--format", "text"], input=data, capture_output=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (text + "\r\nanother line\r\nthe last one, unterminated\n").encode()
    assert proc.stderr.decode().startswith("4 documents, 3 kept, 1 dropped in 1 cluster, ")


def test_a_fifo_is_copied_for_the_second_pass(tmp_path: Path) -> None:
    """A named pipe can be read once only: the lines to keep are written from a copy made while it was
    read, not from a second read of the pipe (which would wait for a writer that never comes)."""
    texts = planted(random.Random(5), bases=10)
    expected = [texts[c[0]] for c in components(texts)]
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    def write() -> None:
        with open(fifo, "wb") as w:
            w.write("".join(t + "\n" for t in texts).encode())

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    proc = subprocess.run([*DEDUPD, "dedup", str(fifo), "--format", "text"], capture_output=True, timeout=120)
    writer.join(timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode().splitlines() == expected
    assert proc.stderr.decode().startswith(f"{len(texts)} documents, {len(expected)} kept, ")


def test_a_process_substitution_is_copied_for_the_second_pass(tmp_path: Path) -> None:
    """`dedupd dedup <(cat FILE)`: FILE is /dev/fd/N, a pipe that is empty when read again; the lines to
    keep still come out (not 0 lines under a summary that says some were kept)."""
    t = " ".join(WORDS[:30])
    data = f"{t}\n{t}\nsomething else\n".encode()
    r, w = os.pipe()
    writer = threading.Thread(target=lambda: (os.write(w, data), os.close(w)), daemon=True)
    writer.start()
    try:
        proc = subprocess.run(
            [*DEDUPD, "dedup", f"/dev/fd/{r}", "--format", "text"],
            pass_fds=(r,),
            capture_output=True,
            timeout=120,
        )
    finally:
        os.close(r)
        writer.join(timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode().splitlines() == [t, "something else"]
    assert proc.stderr.decode().startswith("3 documents, 2 kept, 1 dropped in 1 cluster, ")


def test_standard_input_from_a_file_is_read_again_from_where_it_started(tmp_path: Path) -> None:
    """Standard input redirected from a regular file (`{ head -1; dedupd dedup -; } < FILE`) is read a
    second time from its offset at the start, not from the file's beginning."""
    t = " ".join(WORDS[:30])
    src = tmp_path / "docs.txt"
    src.write_text(f"a header line\n{t}\n{t}\nsomething else\n")
    fd = os.open(src, os.O_RDONLY)
    try:
        os.lseek(fd, len("a header line\n"), os.SEEK_SET)
        proc = subprocess.run(
            [*DEDUPD, "dedup", "-", "--format", "text"], stdin=fd, capture_output=True, timeout=120
        )
    finally:
        os.close(fd)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode().splitlines() == [t, "something else"]


def test_repeated_ids_are_documents_each(run: Any, tmp_path: Path) -> None:
    """Two lines with one id are two documents: an exact repeat is dropped, a different text kept."""
    src = tmp_path / "rep.jsonl"
    t1, t2 = " ".join(WORDS[:30]), " ".join(WORDS[100:130])
    lines = write_jsonl(src, [t1, t1, t2], ids=["x", "x", "x"])
    res = run(str(src))
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines() == [lines[0], lines[2]]


# ----- what is left alone -----
def test_private_redis_in_a_temporary_directory_removed_afterwards(
    run: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, redis_url: str, r: redis.Redis
) -> None:
    """The private server lives in a directory of the temporary directory, gone after the run; neither
    DEDUPD_DATA_DIR (the embedded Redis's) nor the server of DEDUPD_REDIS_URL is touched."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.setenv("DEDUPD_REDIS_URL", redis_url)
    data_dir = Path(os.environ["DEDUPD_DATA_DIR"])
    used: list[Path] = []
    real = dedup_module.private_redis

    def spied():  # type: ignore[no-untyped-def]
        with real() as server:
            used.append(server.workdir)
            assert server.workdir.parent == tmp and server.socket.exists()
            yield server

    monkeypatch.setattr(dedup_module, "private_redis", __import__("contextlib").contextmanager(spied))
    src = tmp_path / "docs.jsonl"
    write_jsonl(src, planted(random.Random(1), bases=5))
    assert list(tmp.iterdir()) == []
    res = run(str(src), "-o", str(tmp_path / "out.jsonl"))
    assert res.exit_code == 0, res.output
    assert len(used) == 1
    assert list(tmp.iterdir()) == []
    assert not data_dir.exists()
    assert r.dbsize() == 0


def test_an_interrupted_run_leaves_nothing_behind(
    run: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while the engine works: exit 130, the output file as it was, the temporary directory and
    the private server gone."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    servers: list[int] = []

    def interrupted(self: InProcessEngine, texts: list[str]) -> None:
        servers.append(int(self.client.info("server")["process_id"]))
        raise KeyboardInterrupt

    monkeypatch.setattr(InProcessEngine, "add", interrupted)
    src = tmp_path / "docs.txt"
    src.write_text("one document\nanother one\n")
    out = tmp_path / "out.txt"
    out.write_text("before\n")
    res = CliRunner().invoke(cli, ["dedup", str(src), "-o", str(out)])
    assert res.exit_code == 130, res.output
    assert out.read_text() == "before\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs.txt", "out.txt", "tmp"]
    assert list(tmp.iterdir()) == []
    with pytest.raises(ProcessLookupError):
        os.kill(servers[0], 0)


def running(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie no longer does: an orphan is reaped by whoever adopts it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not stat.exists() or stat.read_text().rpartition(")")[2].split()[0] != "Z"


def _dedup_under_way(tmp: Path, out: Path) -> tuple[subprocess.Popen[bytes], int]:
    """A `dedupd dedup - -o OUT` process with TMPDIR=tmp, fed through a pipe left open, once its engine
    has indexed documents; and the pid of its private server."""
    texts = planted(random.Random(3), bases=20)
    proc = subprocess.Popen(
        [*DEDUPD, "dedup", "-", "--format", "text", "--batch-size", "1", "-o", str(out)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "TMPDIR": str(tmp)},
    )
    assert proc.stdin is not None
    proc.stdin.write("".join(t + "\n" for t in texts).encode())
    proc.stdin.flush()  # (and left open: the run waits for more)
    wait_for(lambda: bool(list(tmp.glob("dedupd-job-*/redis.sock"))), 60, "the private server")
    server = redis.Redis(unix_socket_path=str(next(tmp.glob("dedupd-job-*/redis.sock"))))
    wait_for(lambda: server.dbsize() > 0, 60, "documents indexed")
    pid = int(server.info("server")["process_id"])
    server.close()
    return proc, pid


def test_sigterm_mid_run_leaves_nothing_behind(tmp_path: Path) -> None:
    """SIGTERM while the engine works ends the run as Ctrl-C does: exit 143, one line on stderr, -o's file
    as it was, no OUT.*.part, no dedupd-job-* directory, the private server stopped."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    out = tmp_path / "out.txt"
    out.write_text("before\n")
    proc, server_pid = _dedup_under_way(tmp, out)
    try:
        assert list(tmp_path.glob(".out.txt.*.part"))
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    assert code == 143, err
    assert err == "dedupd: terminated\n"
    assert out.read_text() == "before\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt", "tmp"]
    assert list(tmp.iterdir()) == []
    assert not running(server_pid)


def test_the_directory_a_killed_run_left_is_removed_by_the_next(
    run: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kill -9 leaves the job's directory behind (its server stops with it); the next dedup removes it."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc, server_pid = _dedup_under_way(tmp, tmp_path / "out.txt")
    proc.kill()
    proc.wait(timeout=60)
    wait_for(lambda: not running(server_pid), 60, "the private server to stop")
    (left,) = tmp.iterdir()
    assert left.name.startswith("dedupd-job-")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    src = tmp_path / "docs.txt"
    src.write_text("one document\nanother one\n")
    res = run(str(src), "-o", os.devnull)
    assert res.exit_code == 0, res.output
    assert list(tmp.iterdir()) == []


def test_only_the_directories_of_jobs_proved_gone_are_removed(tmp_path: Path) -> None:
    """A directory is removed only when its job.lock can be locked (the job is gone) and its pid file names
    no running server; one whose job runs, whose server runs, or that has no lock file is left alone."""

    def job(name: str, pid: int | None, lock: bool = True) -> Path:
        d = tmp_path / name
        d.mkdir()
        (d / "redis.log").write_text("log\n")
        if lock:
            (d / "job.lock").touch()
        if pid is not None:
            (d / "redis.pid").write_text(f"{pid}\n")
        return d

    ended = subprocess.Popen(["true"])  # (a pid that ran and is gone)
    ended.wait()
    dead = job("dedupd-job-dead", ended.pid)
    stopped = job("dedupd-job-stopped", None)
    running = job("dedupd-job-running", None)
    serving = job("dedupd-job-serving", os.getpid())
    older = job("dedupd-job-older", None, lock=False)
    other = job("other-dir", None)
    held = os.open(running / "job.lock", os.O_RDWR)
    try:
        fcntl.flock(held, fcntl.LOCK_EX)
        removed = private_server.remove_stale_jobs(tmp_path)
    finally:
        os.close(held)
    assert sorted(removed) == [dead, stopped]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        p.name for p in (running, serving, older, other)
    )


def test_output_may_replace_the_input_file(run: Any, tmp_path: Path) -> None:
    src = tmp_path / "docs.txt"
    src.write_text("alpha beta gamma delta\nalpha beta gamma delta\nsomething else\n")
    res = run(str(src), "-o", str(src))
    assert res.exit_code == 0, res.output
    assert src.read_text() == "alpha beta gamma delta\nsomething else\n"


# ----- bad input -----
def test_bad_lines_are_reported_left_out_and_exit_1(run: Any, tmp_path: Path) -> None:
    src = tmp_path / "mixed.jsonl"
    t = " ".join(WORDS[:20])
    src.write_bytes(
        (
            f'{{"id": "a", "text": "{t}"}}\n'
            "{broken\n"
            '{"id": "b"}\n'
            '{"id": "c", "op": "delete"}\n'
            f'{{"id": "d", "text": "{t}"}}\n'
        ).encode()
        + b"\xff\xfe not utf-8\n"
        + b"plain text, kept\n"
    )
    res = run(str(src))
    assert res.exit_code == 1
    assert res.stdout.splitlines() == [f'{{"id": "a", "text": "{t}"}}', "plain text, kept"]
    err = res.stderr
    for line in (2, 3, 4, 6):
        assert f"mixed.jsonl:{line}: skipped: " in err, err
    assert "no 'text' field" in err and "op 'delete'" in err
    assert err.splitlines()[-1].startswith("3 documents, 2 kept, 1 dropped in 1 cluster, ")
    assert err.splitlines()[-1].endswith("; skipped 4 bad lines")


def test_a_text_over_the_daemons_bounds_is_a_bad_line(
    run: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine refuses a text larger than max_doc_bytes, as the daemon dead-letters it: reported with
    its line number, left out, exit 1; the documents after it go on (in a batch of their own too)."""
    monkeypatch.setenv("DEDUPD_MAX_DOC_BYTES", "1000")
    t = " ".join(WORDS[:30])
    src = tmp_path / "big.txt"
    src.write_text(f"{t}\n{'x' * 1500}\n{t}\nsmall\n")
    res = run(str(src), "--format", "text", "--batch-size", "2")
    assert res.exit_code == 1
    assert res.stdout.splitlines() == [t, "small"]
    assert "big.txt:2: skipped: too_large: field 'text' has 1500 bytes" in res.stderr
    assert "dead-lettered" not in res.stderr  # (the engine's entry ids mean nothing here)
    assert res.stderr.splitlines()[-1].startswith("3 documents, 2 kept, 1 dropped in 1 cluster, ")


def test_auto_reads_jsonl_as_push_does(run: Any, tmp_path: Path) -> None:
    """A first line that is a JSON object makes the input JSONL (--format auto): a plain-text line in it is
    still a document, with a warning; a JSON array line is bad."""
    src = tmp_path / "j.jsonl"
    t = " ".join(WORDS[:20])
    src.write_text(f'{{"id": "a", "text": "{t}"}}\n{t}\n[1, 2]\nother words here\n')
    res = run(str(src), "--clusters", str(tmp_path / "c.jsonl"))
    assert res.exit_code == 1
    assert res.stdout.splitlines() == [f'{{"id": "a", "text": "{t}"}}', "other words here"]
    assert "j.jsonl:2: not JSON, in a JSONL input: taken as a plain-text document with id 'j.jsonl:2'" in (
        res.stderr
    )
    assert "j.jsonl:3: skipped: a JSON array, not an object" in res.stderr
    assert json.loads((tmp_path / "c.jsonl").read_text())["members"] == ["a", "j.jsonl:2"]


def test_a_json_array_is_refused_with_exit_2(run: Any, tmp_path: Path) -> None:
    src = tmp_path / "arr.json"
    src.write_text('[{"id": "a", "text": "t"}]\n')
    res = run(str(src))
    assert res.exit_code == 2
    assert res.stderr.count("\n") == 1 and "dedupd: error: arr.json starts with '['" in res.stderr
    assert "jq -c" in res.stderr


def test_help_explains_the_command(run: Any) -> None:
    res = run("--help")
    assert res.exit_code == 0
    for words in ("--keep", "--clusters", "private Redis", "--threshold", "--shingle", "exits 1"):
        assert words in res.output


def test_format_help_says_auto_as_push_reads_it(run: Any) -> None:
    """--format auto's help is push's: a first line that is a JSON object means JSONL, a plain-text line in
    it gets a warning, other JSON values are bad lines (not "each line starting with '{' is JSONL")."""
    from dedupd.cli.documents import AUTO_LINES_HELP

    res = run("--help")
    assert res.exit_code == 0
    shown = " ".join(res.output.split())
    assert " ".join(AUTO_LINES_HELP.split()) in shown
    assert "first line is a JSON object is JSONL" in shown and "is a bad line" in shown
    assert "a file starting with a JSON array is refused" in shown


@pytest.mark.parametrize("level", ["WARNING", "INFO", "DEBUG"])
def test_only_the_processors_dead_letter_lines_are_left_out(
    level: str, caplog: pytest.LogCaptureFixture
) -> None:
    """While dedup runs, the processor's line per dead letter is left out (dedup tells each as a bad line
    with its line number), unless at DEBUG; its other lines (a warning, with -v its informational ones) are
    shown as always, and after the run the dead-letter line is back."""
    from dedupd.cli.dedup import _quiet_dead_letters
    from dedupd.daemon.dead_letters import DEAD_LETTERED

    logger = logging.getLogger("dedupd.processor")
    with caplog.at_level(logging.DEBUG):
        with _quiet_dead_letters(level):
            logger.warning(DEAD_LETTERED, "0-1", "too_large", "field 'text' has 1500 bytes")
            logger.warning("a warning of the processor")
            logger.info("a line of the processor")
        logger.warning(DEAD_LETTERED, "0-2", "too_large", "field 'text' has 1500 bytes")
    during = ["a warning of the processor", "a line of the processor"]
    if level == "DEBUG":
        during.insert(0, "dead-lettered 0-1: too_large (field 'text' has 1500 bytes)")
    after = ["dead-lettered 0-2: too_large (field 'text' has 1500 bytes)"]
    assert [r.getMessage() for r in caplog.records if r.name == "dedupd.processor"] == during + after
    assert logger.level == logging.NOTSET and not logger.filters


@pytest.mark.parametrize("flag", ["-v", "--verbose"])
def test_verbose_says_more_on_stderr(run: Any, tmp_path: Path, flag: str) -> None:
    """`dedup -v` (as the README says of every one-shot command): informational lines on stderr (where the
    private server is, what was indexed); without it only the summary."""
    src = tmp_path / "docs.txt"
    src.write_text("one document here\none document here\nanother one\n")
    quiet = run(str(src))
    res = run(str(src), flag)
    assert res.exit_code == 0, res.output
    assert res.stdout == quiet.stdout == "one document here\nanother one\n"
    assert " INFO dedupd.private: private Redis of this job at unix socket " in res.stderr
    assert " INFO dedupd.dedup: 3 documents indexed and their final clusters read in " in res.stderr
    assert res.stderr.splitlines()[-1].startswith("3 documents, 2 kept, 1 dropped in 1 cluster, ")
    assert quiet.stderr.startswith("3 documents, 2 kept") and quiet.stderr.count("\n") == 1
