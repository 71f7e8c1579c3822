"""`dedupd rebuild` and `dedupd serve` against an existing index, black box: concurrent rebuilds, an abort in the
middle of a rebuild, a rebuild keeping the parameters it is not given, a daemon whose threshold differs from the
index's.

Only public interfaces: real `dedupd` processes, their exit codes and messages, `dedupd stats --json`, the input
and alerts streams. Whether the index answers is checked with probes (an exact copy of an indexed document's text
gets an alert naming it).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from blackbox import (
    Probes,
    Procs,
    assert_clean_error,
    assert_no_rebuild_in_progress,
    corpus,
    procs_fixture,
    push_many,
    run_cli,
    stats_json,
    wait_drained,
    wait_for,
    wait_rebuild_begun,
)


@pytest.fixture
def procs(redis_url: str, tmp_path: Path) -> Iterator[Procs]:
    """Background dedupd processes of one test, all killed when it ends."""
    yield from procs_fixture(redis_url, tmp_path)


def _index(r: redis.Redis, procs: Procs, n: int, seed: int, words: int = 60, **env: str):  # type: ignore[no-untyped-def]
    """A running daemon with ``n`` unrelated documents indexed; returns the documents and the daemon."""
    docs = corpus(random.Random(seed), n, "d", words)
    daemon = procs.serve(**env)
    push_many(r, docs)
    wait_drained(r, 60, daemon)
    return docs, daemon


def _probe_copies(r: redis.Redis, daemon, docs: list[dict[str, str]]) -> None:  # type: ignore[no-untyped-def]
    """Exact copies of ``docs`` pushed as probes each get an alert naming the original at similarity 1.0."""
    probes = Probes(r)
    for d in docs:
        probes.push(d["id"], d["text"])
    wait_drained(r, 30, daemon)
    for d in docs:
        got = probes.matches(d["id"])
        assert got.get(d["id"], 0.0) >= 0.99, f"a copy of indexed document {d['id']} matched {got}, not it"


@pytest.mark.slow
def test_two_rebuilds_started_together_at_most_one_succeeds(r: redis.Redis, procs: Procs) -> None:
    """Two `dedupd rebuild --num-perm 64` started at the same moment on one index: at most one succeeds, the other
    exits non-zero with a one-line message (no traceback); afterwards no rebuild is in progress, the index has
    num_perm 64 if one succeeded, and a copy of an indexed document still alerts."""
    docs, daemon = _index(r, procs, 3000, 401)
    first = procs.start("rebuild", "--num-perm", "64", "--wait", "30")
    second = procs.start("rebuild", "--num-perm", "64", "--wait", "30")
    codes = [first.wait(50), second.wait(50)]
    for p in (first, second):
        assert "Traceback" not in p.stderr, p.stderr[-3000:]
    assert codes.count(0) <= 1, (
        f"both concurrent rebuilds reported success (exit codes {codes}):\n--- first:\n"
        f"{first.stderr[-1500:]}\n--- second:\n{second.stderr[-1500:]}"
    )
    for p, code in zip((first, second), codes, strict=True):
        if code != 0:
            assert_clean_error(p.stderr, "the refused rebuild")
    wait_drained(r, 30, daemon)
    stats = assert_no_rebuild_in_progress(procs.url)
    if 0 in codes:
        assert stats["spec"]["num_perm"] == 64, stats["spec"]
    if (
        not daemon.running()
    ):  # a daemon with the old settings may have had to stop; start one with the index's
        daemon = procs.serve(DEDUPD_NUM_PERM=str(stats["spec"]["num_perm"]))
    _probe_copies(r, daemon, [docs[0], docs[len(docs) // 2], docs[-1]])


@pytest.mark.slow
def test_abort_during_a_rebuild_leaves_the_current_generation_serving(r: redis.Redis, procs: Procs) -> None:
    """`dedupd rebuild --abort` while a `dedupd rebuild --shingle word:2` runs: once both have exited, the index
    still has its original parameters, no rebuild is in progress, and a daemon started with the ORIGINAL
    parameters serves it: copies of indexed documents alert against them."""
    docs, daemon = _index(r, procs, 12000, 402)  # a replay long enough to meet the abort
    rebuild = procs.start("rebuild", "--shingle", "word:2", "--wait", "30")
    wait_rebuild_begun(rebuild, daemon)  # it now re-indexes the stream's history
    # the daemon stops answering (its heartbeat lives on): the rebuild cannot switch before it pauses, so the
    # abort surely meets a running rebuild, during its replay or while it waits for the daemon
    os.kill(daemon.proc.pid, signal.SIGSTOP)
    try:
        assert rebuild.running(), f"the rebuild ended before the abort:\n{rebuild.stderr[-2000:]}"
        abort = run_cli(procs.url, "rebuild", "--abort", timeout=50)
        rebuild_rc = rebuild.wait(50)
    finally:
        os.kill(daemon.proc.pid, signal.SIGCONT)
    assert "Traceback" not in abort.stderr, abort.stderr[-3000:]
    assert "Traceback" not in rebuild.stderr, rebuild.stderr[-3000:]
    if abort.returncode != 0 and "no rebuild" in abort.stderr and rebuild_rc == 0:
        pytest.skip("the rebuild finished before the abort reached it; index more documents")
    assert abort.returncode == 0, abort.stderr[-3000:]
    stats = assert_no_rebuild_in_progress(procs.url)
    assert stats["spec"]["shingle"] == "word:3", (
        f"the aborted rebuild switched the index anyway (rebuild exit {rebuild_rc}): {stats['spec']}\n"
        f"{rebuild.stderr[-1500:]}"
    )
    assert rebuild_rc != 0, f"the aborted rebuild reported success:\n{rebuild.stderr[-1500:]}"

    daemon.stop()
    fresh = procs.serve(ready=False)  # the ORIGINAL parameters (defaults: word:3)
    wait_for(lambda: "serving" in fresh.stderr or not fresh.running(), 60, "the daemon to start")
    assert fresh.running(), (
        f"a daemon with the original parameters refused the index:\n{fresh.stderr[-3000:]}"
    )
    _probe_copies(r, fresh, [docs[0], docs[len(docs) // 2], docs[-1]])


def test_rebuild_keeps_the_parameters_it_is_not_given(r: redis.Redis, procs: Procs) -> None:
    """An index built with DEDUPD_SHINGLE=word:2, then `dedupd rebuild --num-perm 64` with no DEDUPD_SHINGLE in its
    environment: only num_perm changes; `dedupd stats --json` shows shingle word:2 and num_perm 64."""
    _docs, daemon = _index(r, procs, 300, 403, DEDUPD_SHINGLE="word:2")
    assert daemon.stop() == 0
    before = stats_json(procs.url)["spec"]
    assert (before["shingle"], before["num_perm"]) == ("word:2", 128), before
    res = run_cli(procs.url, "rebuild", "--num-perm", "64", "--wait", "5", timeout=50)
    assert res.returncode == 0, res.stderr[-3000:]
    after = stats_json(procs.url)["spec"]
    assert (after["shingle"], after["num_perm"]) == ("word:2", 64), (
        f"the rebuild changed parameters it was not given: before {before}, after {after}"
    )


@pytest.mark.parametrize(
    "flags",
    [["--threshold", "0.5"], ["--threshold", "0.5", "--bands", "25", "--rows", "5"]],
    ids=["threshold", "threshold-same-banding"],
)
def test_serve_with_another_threshold_refuses_naming_the_flag(
    r: redis.Redis, procs: Procs, flags: list[str]
) -> None:
    """`dedupd serve --threshold 0.5` on an index built at 0.8 (25 bands x 5 rows) refuses: non-zero exit within
    seconds, a message naming `--threshold`, no traceback; also when the banding asked for is the index's own."""
    _, daemon = _index(r, procs, 50, 404)
    assert daemon.stop() == 0
    try:
        res = run_cli(procs.url, "serve", *flags, timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail(
            f"`dedupd serve {' '.join(flags)}` on an index built at 0.8 did not refuse: it was still "
            "serving after 20 s"
        )
    assert res.returncode != 0, res.stderr[-3000:]
    assert "Traceback" not in res.stderr, res.stderr[-3000:]
    assert "--threshold" in res.stderr, f"the refusal does not name --threshold:\n{res.stderr[-3000:]}"
