"""`dedupd rebuild --threshold T --alert-existing`: the pairs of documents indexed at a higher threshold that the
lower one makes duplicates are alerted once the rebuild switches (by = rebuild), and only those."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest
import redis
from helpers import alerts, drain, make_daemon, push

from dedupd.daemon.loop import Daemon
from dedupd.index.generations import Generations
from dedupd.index.keys import Keys
from dedupd.ops.alerts import decode_alert, render
from dedupd.similarity.shingling import Shingler, jaccard
from dedupd.similarity.spec import ShingleSpec

DEDUPD = [sys.executable, "-m", "dedupd"]
SHINGLER = Shingler(ShingleSpec("word", 3))


def _edited(base: list[str], every: int, tag: str) -> str:
    """``base`` with one word in ``every`` replaced (each replaced word changes three 3-shingles)."""
    return " ".join(f"{tag}{i}" if i % every == every // 2 else w for i, w in enumerate(base))


def similarity(a: str, b: str) -> float:
    return jaccard(SHINGLER.hash_set(a), SHINGLER.hash_set(b))


def stories() -> list[dict[str, str]]:
    """Three stories of 60 words, each with a variant: at 0.9 (alerted at 0.8), at about 0.65 (alerted only
    at 0.6) and at about 0.37 (never); and a story alone."""
    docs = []
    for s, (every, low, high) in enumerate([(60, 0.8, 1.0), (15, 0.6, 0.7), (7, 0.3, 0.45)]):
        base = [f"s{s}w{i}" for i in range(60)]
        docs += [
            {"id": f"base{s}", "text": " ".join(base)},
            {"id": f"near{s}", "text": _edited(base, every, "x")},
        ]
        assert low < similarity(docs[-2]["text"], docs[-1]["text"]) < high
    docs.append({"id": "alone", "text": " ".join(f"alone{i}" for i in range(60))})
    return docs


def run(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DEDUPD_REDIS_URL": url}
    return subprocess.run([*DEDUPD, "rebuild", *args], env=env, capture_output=True, text=True, timeout=300)


def run_while_serving(url: str, daemon: Daemon, *args: str) -> subprocess.CompletedProcess[str]:
    """The rebuild in a process of its own while the daemon keeps iterating (it pauses, then follows)."""
    done: list[subprocess.CompletedProcess[str]] = []
    job = threading.Thread(target=lambda: done.append(run(url, *args)))
    job.start()
    while job.is_alive():
        daemon.iteration()
    return done[0]


@pytest.fixture
def indexed(r: redis.Redis, redis_url: str) -> tuple[Daemon, list[str]]:
    """The stories indexed at 0.8 by an in-process daemon: only the pair at 0.9 alerted."""
    daemon = make_daemon(redis_url)
    entries = push(r, stories())
    drain(daemon)
    assert [(a["id"], a["duplicate_of"]) for a in alerts(r)] == [("near0", "base0")]
    return daemon, entries


def test_a_lower_threshold_alerts_the_existing_pairs_it_makes(
    r: redis.Redis, redis_url: str, indexed: tuple[Daemon, list[str]]
) -> None:
    daemon, entries = indexed
    res = run_while_serving(redis_url, daemon, "--threshold", "0.6", "--alert-existing")
    assert res.returncode == 0, res.stderr
    assert "threshold 0.8 -> 0.6" in res.stderr
    assert "alerted 1 document with a match among the 7 documents indexed before the switch" in res.stderr
    got = alerts(r)[1:]
    assert len(got) == 1
    alert = got[0]
    want = similarity(stories()[2]["text"], stories()[3]["text"])
    assert (alert["id"], alert["duplicate_of"], alert["by"]) == ("near1", "base1", "rebuild")
    assert alert["matches"] == [["base1", round(want, 4)]] and 0.6 <= float(alert["similarity"]) < 0.8
    assert alert["input"] == entries[3]  # the entry that indexed near1
    assert alert["cluster"] == "base1" and alert["verify"] == "exact"
    raw = r.xrange(Keys().alerts)[-1]
    assert decode_alert(*raw)["by"] == "rebuild"  # `dedupd alerts --json` shows it, and `dedupd alerts`:
    assert render(decode_alert(*raw)).endswith("cluster base1  by rebuild")
    # the union was written: a new copy of near1 joins base1's cluster, verified at 0.6 by the daemon
    push(r, [{"id": "copy1", "text": stories()[3]["text"]}])
    drain(daemon)
    last = alerts(r)[-1]
    assert last["id"] == "copy1" and last["cluster"] == "base1" and "by" not in last
    # nothing is owed any more: the same command again has nothing to do, and says why
    again = run(redis_url, "--threshold", "0.6", "--alert-existing")
    assert (
        again.returncode == 2
        and "give --threshold below the index's 0.6 (this rebuild keeps it)" in again.stderr
    )
    assert len(alerts(r)) == 3


def test_without_the_flag_no_existing_pair_is_alerted(
    r: redis.Redis, redis_url: str, indexed: tuple[Daemon, list[str]]
) -> None:
    daemon, _ = indexed
    res = run_while_serving(redis_url, daemon, "--threshold", "0.6")
    assert res.returncode == 0, res.stderr
    assert (
        "their pairs with a similarity from 0.6 to 0.8 get no alert (--alert-existing alerts them)"
        in res.stderr
    )
    assert [a["id"] for a in alerts(r)] == ["near0"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--threshold", "0.9"), "give --threshold below the index's 0.8 (this rebuild raises it to 0.9)"),
        ((), "give --threshold below the index's 0.8 (this rebuild keeps it)"),
        (
            ("--threshold", "0.6", "--shingle", "word:2"),
            "this one changes shingle: rebuild that first, then lower the threshold with --alert-existing",
        ),
    ],
)
def test_the_flag_is_refused_unless_the_threshold_only_goes_down(
    r: redis.Redis, redis_url: str, indexed: tuple[Daemon, list[str]], args: tuple[str, ...], message: str
) -> None:
    res = run(redis_url, *args, "--alert-existing")
    assert res.returncode == 2, res.stderr
    assert message in res.stderr and len(res.stderr.strip().splitlines()) == 1
    state = Generations(r, Keys()).read()
    assert state is not None and state.next_spec is None and state.spec.threshold == 0.8  # nothing begun


def test_interrupted_after_the_switch_the_same_command_writes_the_alerts_once(
    r: redis.Redis, redis_url: str, indexed: tuple[Daemon, list[str]]
) -> None:
    """The debt is recorded before the switch: a rebuild that dies after it leaves it, and the same command
    run again pays it; paying twice writes each alert once."""
    from dedupd.ops.existing_pairs import ExistingPairs
    from dedupd.ops.rebuild import Rebuild
    from dedupd.settings import load_settings

    daemon, _ = indexed
    r.delete(Keys().heartbeat(daemon.consumer))  # not iterating here: the switch need not wait for it
    settings = load_settings(redis_url=redis_url, threshold=0.6)
    generations = Generations(r, Keys())
    state = generations.read()
    assert state is not None
    rb = Rebuild(r, settings, settings.rebuild_target(state.spec), lambda *_: None, alert_existing=True)
    begun, _ = rb.begin()
    rb.run(begun)  # switched; "died" before paying
    owed = generations.owed_alerts()
    assert owed is not None and owed.old_threshold == 0.8 and owed.gen == begun.next_gen
    assert len(alerts(r)) == 1
    res = run(redis_url, "--threshold", "0.6", "--alert-existing")
    assert res.returncode == 0, res.stderr
    assert "resuming the alerts of the pairs of existing documents" in res.stderr
    assert [(a["id"], a.get("by")) for a in alerts(r)] == [("near0", None), ("near1", "rebuild")]
    assert generations.owed_alerts() is None
    # paid again (an interruption after the alerts, before the debt was cleared): nothing written twice
    generations.owe_alerts(owed)
    paid = ExistingPairs(r, settings, lambda *_: None).pay(owed)
    assert paid.alerts == 0 and len(alerts(r)) == 2
