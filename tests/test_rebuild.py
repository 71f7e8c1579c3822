"""`dedupd rebuild` while `dedupd serve` runs and a producer pushes: nothing missed or doubled."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time

import redis
from helpers import alerts, drain, make_daemon, pending, push, text, variant

from dedupd.daemon.monitor import wait_drained
from dedupd.index.generations import Generations
from dedupd.index.keys import Keys

DEDUPD = [sys.executable, "-m", "dedupd"]


def corpus(seed: int, n: int, tag: str) -> tuple[list[dict[str, str]], set[tuple[str, str]]]:
    rng = random.Random(seed)
    docs, pairs = [], set()
    for i in range(n):
        base = text(rng, 40)
        docs += [{"id": f"{tag}{i}a", "text": base}, {"id": f"{tag}{i}b", "text": variant(rng, base)}]
        pairs.add((f"{tag}{i}b", f"{tag}{i}a"))
    return docs, pairs


def found(r: redis.Redis) -> list[tuple[str, str]]:
    return [(a["id"], m[0]) for a in alerts(r) for m in a["matches"]]


def run_rebuild(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DEDUPD_REDIS_URL": url}
    return subprocess.run([*DEDUPD, "rebuild", *args], env=env, capture_output=True, text=True, timeout=300)


def test_rebuild_rebands_in_process(r: redis.Redis, redis_url: str) -> None:
    """Without daemons: new bands from the stored signatures; the index answers with them afterwards."""
    docs, pairs = corpus(1, 60, "x")
    push(r, docs)
    drain(make_daemon(redis_url))
    res = run_rebuild(redis_url, "--bands", "16", "--rows", "8")
    assert res.returncode == 0, res.stderr
    state = Generations(r, Keys()).read()
    assert state is not None and (state.spec.bands, state.spec.rows, state.gen) == (16, 8, 1)
    assert state.next_gen is None
    assert not list(r.scan_iter(match=b"dedupd:b:0:*")) and not list(r.scan_iter(match=b"dedupd:doc:0:*"))
    more, more_pairs = corpus(2, 20, "y")
    push(r, [*more, {"id": "x0-copy", "text": docs[0]["text"]}])
    drain(make_daemon(redis_url, bands=16, rows=8))
    got = found(r)
    assert set(got) == pairs | more_pairs | {("x0-copy", "x0a"), ("x0-copy", "x0b")} and len(got) == len(
        set(got)
    )
    # a daemon given the old banding explicitly now refuses, naming the flags and the rebuild (one given
    # nothing follows the index: tests/test_settings_follow.py)
    res = subprocess.run(
        [*DEDUPD, "serve", "--bands", "25", "--rows", "5"],
        env={**os.environ, "DEDUPD_REDIS_URL": redis_url},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2, res.stderr
    assert (
        "bands 16, but --bands gives 25" in res.stderr and "dedupd rebuild --bands 25 --rows 5" in res.stderr
    )


def test_rebuild_while_serving_and_pushing(r: redis.Redis, redis_url: str) -> None:
    """Re-shingle from the stream's history while a daemon serves and a producer pushes."""
    before, pairs = corpus(3, 300, "a")
    push(r, before)
    env = {**os.environ, "DEDUPD_REDIS_URL": redis_url, "DEDUPD_BLOCK_MS": "50", "DEDUPD_BATCH_SIZE": "20"}
    serve = subprocess.Popen([*DEDUPD, "serve"], env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_drained(r, Keys(), 120)
        during, during_pairs = corpus(4, 300, "b")
        stop = threading.Event()

        def produce() -> None:
            for d in during:
                push(r, [d])
                time.sleep(0.002)
                if stop.is_set():
                    return

        producer = threading.Thread(target=produce)
        producer.start()
        res = run_rebuild(redis_url, "--shingle", "word:2", "--wait", "30")
        producer.join(timeout=120)
        assert res.returncode == 0, res.stderr
        assert wait_drained(r, Keys(), 120)
        after, after_pairs = corpus(5, 50, "c")
        push(r, [*after, {"id": "a0-again", "text": before[0]["text"]}])
        assert wait_drained(r, Keys(), 120)
    finally:
        serve.send_signal(signal.SIGTERM)
        _, err = serve.communicate(timeout=30)
    assert serve.returncode == 0, err
    assert "following it" in err  # the daemon switched to the new generation by itself
    state = Generations(r, Keys()).read()
    assert state is not None and state.spec.shingle == "word:2" and state.next_gen is None
    got = found(r)
    expected = pairs | during_pairs | after_pairs | {("a0-again", "a0a"), ("a0-again", "a0b")}
    assert set(got) == expected  # nothing missed across the switch
    assert len(got) == len(set(got))  # nothing doubled
    assert pending(r) == 0


def test_a_running_daemon_verifies_at_the_rebuilt_threshold(r: redis.Redis, redis_url: str) -> None:
    """`rebuild --threshold 0.7` while a daemon serves at 0.8: the daemon follows and alerts on a pair whose
    exact Jaccard is between the two thresholds (it verified at the old one before)."""
    from dedupd.similarity.shingling import Shingler, jaccard
    from dedupd.similarity.spec import ShingleSpec

    rng = random.Random(31)
    sh = Shingler(ShingleSpec("word", 3))
    base = " ".join(f"w{i}" for i in range(60))
    near = variant(rng, base, 3)
    while not 0.7 < jaccard(sh.hash_set(base), sh.hash_set(near)) < 0.8:
        near = variant(rng, base, 3)
    daemon = make_daemon(redis_url)
    push(r, [{"id": "base", "text": base}, {"id": "before", "text": near}])
    drain(daemon)
    assert alerts(r) == []  # verified at 0.8
    done: list[subprocess.CompletedProcess[str]] = []
    job = threading.Thread(target=lambda: done.append(run_rebuild(redis_url, "--threshold", "0.7")))
    job.start()
    while job.is_alive():  # the daemon keeps iterating: it pauses for the switch, then follows
        daemon.iteration()
    assert done[0].returncode == 0, done[0].stderr
    assert "threshold 0.8 -> 0.7" in done[0].stderr
    push(r, [{"id": "after", "text": near}])
    drain(daemon)
    assert daemon.gateway.spec.threshold == 0.7
    got = alerts(r)
    assert [a["id"] for a in got] == ["after"]  # ("before" is the same text: it matches at 1.0 in any case)
    assert "base" in [m[0] for m in got[0]["matches"]]  # below 0.8, above 0.7


def test_an_entry_pending_when_the_rebuild_begins_reaches_the_new_generation(
    r: redis.Redis, redis_url: str
) -> None:
    """Re-banding copies the records; an entry a daemon held (pending) when the rebuild began and applies only
    after the copy must still reach the new generation: the replay starts at the daemons' oldest pending entry,
    not at the stream's end (before, the completeness check failed, and a delete there was lost)."""
    from dedupd.ops.rebuild import Rebuild
    from dedupd.settings import load_settings

    rng = random.Random(41)
    a, b, c = text(rng), text(rng), text(rng)
    daemon = make_daemon(redis_url)
    push(r, [{"id": "X", "text": a}, {"id": "Z", "text": c}])
    drain(daemon)
    push(r, [{"id": "X", "text": b}, {"id": "Z", "op": "delete"}])
    held, _ = daemon._next_batch()  # delivered, not yet applied
    settings = load_settings(redis_url=redis_url, bands=16, rows=8)
    state = Generations(r, Keys()).read()
    assert state is not None
    rb = Rebuild(r, settings, settings.rebuild_target(state.spec), lambda *_: None)
    begun, _ = rb.begin()
    assert begun.next_mode == "signatures"
    rb.fill(begun)  # copies X = a, Z = c
    daemon.handle(held, None)  # the daemon applies X = b and deletes Z on the serving generation, and acks
    r.delete(Keys().heartbeat(daemon.consumer))  # it is not iterating here: the switch need not wait for it
    rb.run(begun)
    daemon.iteration()  # follows the new generation
    push(r, [{"id": "probe-b", "text": b}, {"id": "probe-a", "text": a}, {"id": "probe-c", "text": c}])
    drain(daemon)
    assert [(x["id"], x["duplicate_of"]) for x in alerts(r)] == [("probe-b", "X")]
