"""scripts/bench_stream.py runs end to end (real redis-server, dedupd serve, datasketch) on a small corpus."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "bench_stream.py"

pytestmark = pytest.mark.slow


def _corpus(path: Path, n: int = 200) -> Path:
    words = [f"w{i}" for i in range(5000)]
    lines = []
    for i in range(n):
        base = i - 1 if i % 10 == 9 else i  # every tenth document repeats the one before it
        text = " ".join(words[(base * 37 + k) % len(words)] for k in range(40))
        lines.append(json.dumps({"id": f"doc-{i}", "text": text}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server")
@pytest.mark.skipif(
    not (REPO / ".venv" / "bin" / "dedupd").exists() and shutil.which("dedupd") is None,
    reason="needs the dedupd executable",
)
@pytest.mark.timeout(240)
def test_quick_run_prints_every_figure(tmp_path: Path) -> None:
    pytest.importorskip("datasketch")
    corpus = _corpus(tmp_path / "small.jsonl")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEDUPD_")}
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--corpus", str(corpus), "--quick"],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=230,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    ((name, result),) = report["corpora"].items()
    assert name == "small" and result["docs"] == 200 and result["peer_docs"] == 50
    rows = result["rows"]
    assert set(rows) == {
        "dedupd c=1 verify=exact",
        "dedupd c=1 verify=signature",
        "datasketch query+insert",
        "datasketch session",
    }
    for label in ("dedupd c=1 verify=exact", "dedupd c=1 verify=signature"):
        row = rows[label]
        assert row["indexed"] == 200 and row["docs_per_s"] > 0 and row["daemon_exit_codes"] == [0]
        assert row["alerts"] >= 20  # the 20 repeated documents at least
        assert row["index_bytes_per_doc"] > 0 and row["total_bytes_per_doc"] > 0
        assert not row["dead_letters"]
    assert rows["datasketch query+insert"]["docs_with_candidates"] >= 5
    for label in ("datasketch query+insert", "datasketch session"):
        assert rows[label]["docs"] == 50 and rows[label]["bands"] == 9 and rows[label]["bytes_per_doc"] > 0
    assert any(k.startswith("dedupd c=1 verify=exact / datasketch") for k in result["ratios"])
    assert "ratios:" in proc.stdout and "targets" in proc.stdout


def test_help() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--help"], check=False, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0
    for flag in (
        "--corpus",
        "--docs",
        "--peer-docs",
        "--consumers",
        "--repeat",
        "--quick",
        "--verify",
        "--env",
    ):
        assert flag in proc.stdout


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server")
@pytest.mark.timeout(120)
def test_replay_buckets_reproduces_the_recorded_run(tmp_path: Path) -> None:
    """scripts/replay_buckets.py: the recorded calls replayed on a fresh server give the same replies (the
    duplicates found), and the figures are per document."""
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import redis
        import replay_buckets
    finally:
        sys.path.remove(str(REPO / "scripts"))
    corpus = _corpus(tmp_path / "small.jsonl", n=120)
    exe = shutil.which("redis-server")
    assert exe is not None
    # one document per call: a call's JOINs read what the buckets held before it (the documents of one batch
    # see each other through the batch itself, not through the script)
    calls = replay_buckets.record_calls(exe, corpus, tmp_path / "record", batch_size=1)
    assert sum(args[0].count(b"d") for _, args in calls) == 120  # every document, in order
    got = replay_buckets.replay(exe, calls, replay_buckets.lua.BUCKETS, tmp_path / "replay")
    assert got["docs"] == 120 and got["server_cpu"] > 0 and got["hsetnx"] > 0
    # the replies: each repeated document (every tenth) finds the one before it
    (tmp_path / "check").mkdir()
    proc, port = replay_buckets.quality.start_redis(exe, tmp_path / "check")
    try:
        client = redis.Redis(port=port)
        script = client.register_script(replay_buckets.lua.BUCKETS)
        found = [
            reply for keys, args in calls for reply in script(keys=keys, args=args)[:-1]
        ]  # less the hits
    finally:
        proc.terminate()
        proc.wait()
    hits = [i for i, packed in enumerate(found) if packed]
    assert hits == list(range(9, 120, 10))


def test_the_commit_reported_is_that_of_the_dedupd_run(tmp_path: Path) -> None:
    """With --dedupd from another checkout (a worktree of an older commit, as the benchmarks compare), the
    report names that checkout's commit, not this one's."""
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import bench_stream
    finally:
        sys.path.remove(str(REPO / "scripts"))
    other = tmp_path / "other"
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env["GIT_COMMITTER_EMAIL"] = "t@t"
    for cmd in (["init", "-q", str(other)], ["-C", str(other), "commit", "-q", "--allow-empty", "-m", "x"]):
        subprocess.run(["git", *cmd], check=True, env=env)
    head = subprocess.run(
        ["git", "-C", str(other), "rev-parse", "--short", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    (other / ".venv" / "bin").mkdir(parents=True)
    assert bench_stream.git_commit(str(other / ".venv" / "bin" / "dedupd")) == head
    assert bench_stream.git_commit(None) == bench_stream.git_commit(str(REPO / ".venv" / "bin" / "dedupd"))
    assert bench_stream.git_commit(None) != head
