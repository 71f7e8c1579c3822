"""`dedupd rebuild --threshold T --alert-existing`: the pairs of documents indexed at a higher threshold that the
lower one makes duplicates are alerted once the rebuild switches (by = rebuild), and only those."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from typing import Any

import pytest
import redis
from helpers import alerts, drain, make_daemon, pending, push

from dedupd.daemon.loop import Daemon
from dedupd.index.gateway import RedisGateway
from dedupd.index.generations import Generations, OwedAlerts, RebuildError
from dedupd.index.keys import Keys
from dedupd.ops.alerts import decode_alert, render
from dedupd.ops.existing_pairs import ExistingPairs
from dedupd.ops.rebuild import Rebuild
from dedupd.settings import load_settings
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


# ----- which documents get an alert: what a fresh match changes -----
def _edit(base: list[str], positions: set[int], tag: str) -> str:
    return " ".join(f"{tag}{i}" if i in positions else w for i, w in enumerate(base))


def families() -> list[dict[str, str]]:
    """Two families, pushed in this order (integer ids in it):

    - A, C, D: J(A, D) ~ 0.88 (D alerted at 0.8), J(A, C) ~ 0.78, J(C, D) ~ 0.69;
    - P, X, E: J(P, E) ~ 0.83 (E alerted at 0.8), J(E, X) ~ 0.65, J(P, X) ~ 0.5 (X stays alone at 0.6).
    """
    first = [f"f{i}" for i in range(100)]
    a, c, d = " ".join(first), _edit(first, {20, 40, 60, 80}, "c"), _edit(first, {10, 50}, "d")
    second = [f"g{i}" for i in range(200)]
    near = set(range(5, 200, 34))
    e_words = [f"e{i}" if i in near else w for i, w in enumerate(second)]
    p, e = " ".join(second), " ".join(e_words)
    x = _edit(e_words, set(range(17, 200, 12)) - near, "x")
    for (s, t), (low, high) in {
        (a, d): (0.8, 1.0),
        (a, c): (0.6, 0.8),
        (c, d): (0.6, 0.8),
        (p, e): (0.8, 1.0),
        (e, x): (0.6, 0.8),
        (p, x): (0.0, 0.6),
    }.items():
        assert low <= similarity(s, t) < high
    return [
        {"id": "A", "text": a},
        {"id": "C", "text": c},
        {"id": "D", "text": d},
        {"id": "P", "text": p},
        {"id": "X", "text": x},
        {"id": "E", "text": e},
    ]


def test_an_alert_only_where_a_fresh_match_changes_what_is_known(r: redis.Redis, redis_url: str) -> None:
    """A document alerted before whose fresh match is already in its cluster gets no second alert (D: C joined
    A's cluster by C's own alert); one whose fresh match is in another cluster gets one naming its best match
    overall, the fresh one listed after it (E: X's cluster merges into P's), without the input's meta."""
    daemon = make_daemon(redis_url)
    docs = families()
    docs[5]["meta"] = '{"feed": "wire"}'
    push(r, docs)
    drain(daemon)
    assert [(a["id"], a["duplicate_of"]) for a in alerts(r)] == [("D", "A"), ("E", "P")]
    assert alerts(r)[1]["meta"] == docs[5]["meta"]
    res = run_while_serving(redis_url, daemon, "--threshold", "0.6", "--alert-existing")
    assert res.returncode == 0, res.stderr
    got = {a["id"]: a for a in alerts(r)[2:]}
    assert sorted(got) == ["C", "E"]  # not D again
    assert (got["C"]["duplicate_of"], got["C"]["cluster"]) == ("A", "A")
    e = got["E"]
    assert (e["duplicate_of"], e["cluster"], e["by"]) == ("P", "P", "rebuild")
    assert [m[0] for m in e["matches"]] == ["P", "X"] and 0.6 <= e["matches"][1][1] < 0.8
    assert "meta" not in e  # (the index does not keep it: the README says so)
    # X is in P's cluster now: a copy of X alerts there
    push(r, [{"id": "X2", "text": families()[4]["text"]}])
    drain(daemon)
    assert alerts(r)[-1]["cluster"] == "P"


# ----- documents that change while the alerts are paid, entries pending at the switch, interruptions -----
def switched_unpaid(r: redis.Redis, redis_url: str, daemon: Daemon) -> tuple[ExistingPairs, OwedAlerts]:
    """Rebuild to 0.6 with --alert-existing in process, "dying" after the switch (nothing paid yet); the
    daemon follows the new generation."""
    settings = load_settings(redis_url=redis_url, threshold=0.6)
    generations = Generations(r, Keys())
    state = generations.read()
    assert state is not None
    r.delete(Keys().heartbeat(daemon.consumer))  # not iterating now: the switch need not wait for it
    rb = Rebuild(r, settings, settings.rebuild_target(state.spec), lambda *_: None, alert_existing=True)
    begun, _ = rb.begin()
    rb.run(begun)
    deadline = time.monotonic() + 30
    while daemon.gateway.generation != begun.next_gen:
        assert time.monotonic() < deadline, "the daemon did not follow the new generation"
        daemon.iteration()
    owed = generations.owed_alerts()
    assert owed is not None
    return ExistingPairs(r, settings, lambda *_: None), owed


def union_find(r: redis.Redis) -> dict[str, dict[bytes, bytes]]:
    k = Keys()
    return {
        name: r.hgetall(key)
        for name, key in [("uf", k.uf_parent), ("ufr", k.uf_ring), ("ufn", k.uf_children), ("ufd", k.uf_gone)]
    }


@pytest.mark.parametrize("gone", ["near1", "base1"])
@pytest.mark.parametrize("when", ["before the union", "after the union", "as the alert is written"])
def test_a_document_deleted_while_paying_is_not_alerted_nor_brought_back(
    r: redis.Redis,
    redis_url: str,
    indexed: tuple[Daemon, list[str]],
    monkeypatch: pytest.MonkeyPatch,
    gone: str,
    when: str,
) -> None:
    """A daemon deletes near1 (the document owed an alert) or base1 (its match) while the alert is being paid:
    before the union (the union leaves near1's node out, so that no node without a document stays), after it,
    or between the check of the records the alert names and its write: no alert names a deleted document, and
    once both are deleted their cluster leaves nothing in the union-find."""
    daemon, _ = indexed
    payer, owed = switched_unpaid(r, redis_url, daemon)
    nums = {doc: r.hget(Keys().id_forward, doc) for doc in ("near1", "base1")}
    hooked = {
        "before the union": ("roots", "fresh"),
        "after the union": ("cluster_names", None),
        "as the alert is written": ("emit", None),  # (after the records are checked, before it is sent)
    }[when]
    real = getattr(RedisGateway, hooked[0])
    deleted: list[str] = []

    def delete_first(self: RedisGateway, *args: Any, **kwargs: Any) -> Any:
        if not deleted and (hooked[1] is None or kwargs.get(hooked[1])):
            deleted.append(gone)  # (first: the daemon's own calls go through)
            push(r, [{"id": gone, "op": "delete"}])
            drain(daemon)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(RedisGateway, hooked[0], delete_first)
    payer.pay(owed)
    assert deleted == [gone]
    assert [a["id"] for a in alerts(r)] == ["near0"]  # near1's alert would name a deleted document
    monkeypatch.undo()
    other = "base1" if gone == "near1" else "near1"
    push(r, [{"id": other, "op": "delete"}])
    drain(daemon)
    left = union_find(r)
    assert not any(nums[doc] in hash_ for doc in nums for hash_ in left.values()), left


def test_an_entry_pending_at_the_switch_is_alerted_once(r: redis.Redis, redis_url: str) -> None:
    """A consumer dies after indexing its batch, before acknowledging it; after the switch another one
    claims its entries and verifies them at the new threshold (the pair near1, base1 alerted): the rebuild
    leaves them to it, and the pair is alerted once."""
    victim = make_daemon(redis_url, consumer="victim")
    victim.stream.ack = lambda entries: None  # type: ignore[method-assign]  # dies before acknowledging
    push(r, stories())
    drain(victim)
    assert pending(r) == 7 and [a["id"] for a in alerts(r)] == ["near0"]
    r.delete(Keys().heartbeat(victim.consumer))  # dead
    res = run(redis_url, "--threshold", "0.6", "--alert-existing")
    assert res.returncode == 0, res.stderr
    rescuer = make_daemon(redis_url, consumer="rescuer", claim_idle_ms=100)
    deadline = time.monotonic() + 60
    while pending(r):
        assert time.monotonic() < deadline, "the rescuer did not claim the victim's entries"
        rescuer.iteration()
    # (the rescuer alerts the entries applied already by either side of their pairs: it claims in any order)
    pairs = [{a["id"], m[0]} for a in alerts(r) for m in a["matches"]]
    assert pairs.count({"near1", "base1"}) == 1 and not [a for a in alerts(r) if "by" in a]
    assert "alerted 0 documents with a match among the 0 documents indexed before the switch" in res.stderr


def test_a_resumed_payment_does_not_repeat_alerts_once_their_markers_expired(
    r: redis.Redis, redis_url: str, indexed: tuple[Daemon, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Interrupted after its alerts were written, before the debt was cleared, and resumed after the seen
    set's markers expired (seen_ttl_s): the debt says how far it was paid, nothing is alerted twice."""
    daemon, _ = indexed
    payer, owed = switched_unpaid(r, redis_url, daemon)

    def die(*_: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(Generations, "settle_alerts", die)
    with pytest.raises(KeyboardInterrupt):
        payer.pay(owed)
    monkeypatch.undo()
    assert [a["id"] for a in alerts(r)] == ["near0", "near1"]
    r.delete(Keys().seen(Keys().alerts))  # seen_ttl_s later: every marker expired
    res = run(redis_url, "--threshold", "0.6", "--alert-existing")
    assert res.returncode == 0, res.stderr
    assert "resuming the alerts of the pairs of existing documents" in res.stderr
    assert [a["id"] for a in alerts(r)] == ["near0", "near1"]
    assert Generations(r, Keys()).owed_alerts() is None


def test_another_rebuild_switching_first_stops_the_payment_in_one_line(
    r: redis.Redis, redis_url: str, indexed: tuple[Daemon, list[str]]
) -> None:
    daemon, _ = indexed
    payer, owed = switched_unpaid(r, redis_url, daemon)
    settings = load_settings(redis_url=redis_url, threshold=0.5)
    state = Generations(r, Keys()).read()
    assert state is not None
    r.delete(Keys().heartbeat(daemon.consumer))  # not iterating now: the switch need not wait for it
    other = Rebuild(r, settings, settings.rebuild_target(state.spec), lambda *_: None)
    other.run(other.begin()[0])
    with pytest.raises(RebuildError) as caught:
        payer.pay(owed)
    message = str(caught.value)
    assert "another rebuild switched the index" in message and "\n" not in message
    assert [a["id"] for a in alerts(r)] == ["near0"]
