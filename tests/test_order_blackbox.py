"""Per-document order, black box: the final state of a document is what its entries give in stream order, whichever
consumer processes which entry first — across a claim of a dead consumer's entries, and across a rebuild.

Only public interfaces: the input stream and its consumer group, the alerts stream, real `dedupd serve` /
`dedupd rebuild` processes. A document's final state is read with probes (an exact copy of a document's text gets an
alert naming it at similarity 1.0).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from blackbox import (  # noqa: F401
    DOCS,
    GROUP,
    Probes,
    Procs,
    corpus,
    procs_fixture,
    push,
    push_many,
    random_text,
    wait_drained,
    wait_for,
    wait_rebuild_begun,
)


@pytest.fixture
def procs(redis_url: str, tmp_path: Path) -> Iterator[Procs]:
    """Background dedupd processes of one test, all killed when it ends."""
    yield from procs_fixture(redis_url, tmp_path)


def _hold_then_release(r: redis.Redis, ghost: str, ids: list[str], until, timeout: float) -> None:  # type: ignore[no-untyped-def]
    """Keep the ghost consumer's entries fresh (XCLAIM to itself resets their idle time, JUSTID counts no
    delivery) until ``until()`` holds, so that no one claims them before; then let them go idle."""
    deadline = time.monotonic() + timeout
    while not until():
        r.xclaim(DOCS, GROUP, ghost, 0, ids, justid=True)
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout:.0f}s waiting for the later entries to be processed"
            )
        time.sleep(0.1)


@pytest.mark.slow
@pytest.mark.parametrize("y_known", [False, True], ids=["new-docs", "y-indexed-before"])
def test_append_and_delete_processed_before_the_upsert_they_follow(
    r: redis.Redis, procs: Procs, y_known: bool
) -> None:
    """`upsert X=A`, `upsert Y=C` are read by a consumer that dies; `append X B` and `delete Y` (later in the stream)
    are processed first by a live daemon, which claims the dead consumer's upserts afterwards. Stream order must
    win: X is `A\\nB` (not `B` alone), Y stays deleted. With ``y_known``, Y was indexed (as C0) before all that."""
    rng = random.Random(101)
    a, b, c, c0 = random_text(rng), random_text(rng), random_text(rng), random_text(rng)
    r.xgroup_create(DOCS, GROUP, id="0", mkstream=True)
    if y_known:
        first = procs.serve()
        push(r, {"id": "Y", "text": c0})
        wait_drained(r, 30, first)
        assert first.stop() == 0, first.stderr[-3000:]
    up_x = push(r, {"id": "X", "text": a})
    up_y = push(r, {"id": "Y", "text": c})
    got = r.xreadgroup(GROUP, "ghost", {DOCS: ">"}, count=10)
    assert [e[0].decode() for e in got[0][1]] == [up_x, up_y]  # the ghost holds both upserts and dies
    push(r, {"id": "X", "op": "append", "text": b})
    push(r, {"id": "Y", "op": "delete"})

    daemon = procs.serve(DEDUPD_CLAIM_IDLE_MS="1000")

    held_since: list[float] = []

    def later_entries_tried() -> bool:
        """The daemon has read the append and the delete, and had a second to process them (before the fix it
        applied them at once; now they wait for the ghost's upserts)."""
        groups = {g["name"]: g for g in r.xinfo_groups(DOCS)}
        delivered_all = groups[b"dedupd"]["last-delivered-id"] == r.xinfo_stream(DOCS)["last-generated-id"]
        if delivered_all and not held_since:
            held_since.append(time.monotonic())
        return bool(held_since) and time.monotonic() - held_since[0] > 1.0

    # the append and the delete reach the daemon while the ghost still holds the upserts
    _hold_then_release(r, "ghost", [up_x, up_y], later_entries_tried, 30)
    # then the ghost's entries go idle: the daemon claims them after claim_idle_ms
    wait_drained(r, 30, daemon)
    assert "claimed" in daemon.stderr

    probes = Probes(r)
    probes.push("A+B", a + "\n" + b)
    probes.push("B", b)
    probes.push("C", c)
    probes.push("C0", c0)
    wait_drained(r, 30, daemon)
    assert "Traceback" not in daemon.stderr, daemon.stderr[-3000:]

    whole, only_b = probes.matches("A+B"), probes.matches("B")
    deleted = {**probes.matches("C0"), **probes.matches("C")}
    problems = []
    if whole.get("X", 0.0) < 0.99:
        problems.append(f"X is not `A\\nB`: a probe `A\\nB` matched {whole}")
    if only_b.get("X", 0.0) >= 0.99:
        problems.append(f"X is `B` alone (the upsert's A was lost): a probe `B` matched {only_b}")
    if "Y" in deleted:
        problems.append(f"Y came back after its delete: a probe equal to Y's text matched {deleted}")
    assert not problems, "; ".join(problems)


# ----- during a rebuild -----
_INDEXED = 6000  # documents indexed before the rebuild: enough for the re-indexing to take seconds
_WORDS = 60


def _index(r: redis.Redis, procs: Procs, seed: int) -> tuple[list[dict[str, str]], object]:
    """A running daemon with ``_INDEXED`` unrelated documents indexed; returns the documents and the daemon."""
    docs = corpus(random.Random(seed), _INDEXED, "d", _WORDS)
    daemon = procs.serve()
    push_many(r, docs)
    wait_drained(r, 60, daemon)
    return docs, daemon


def _push_while_rebuilding(
    r: redis.Redis,
    daemon,
    rebuild,
    updates: list[dict[str, str]],  # type: ignore[no-untyped-def]
    every: float = 0.15,
) -> list[dict[str, str]]:
    """Push ``updates`` one by one every ``every`` seconds from the moment the rebuild has begun (and the daemon
    had the time to notice it: it reads every block_ms = 100 ms) until the rebuild exits, so that they land in
    its different phases. Returns those pushed while it was running (skips the test if none was)."""
    wait_rebuild_begun(rebuild, daemon)
    during = []
    for fields in updates:
        if not rebuild.running():
            break
        push(r, fields)
        if rebuild.running():
            during.append(fields)
        time.sleep(every)
    if not during:
        pytest.skip(
            f"the rebuild ended before any update could be pushed (rc {rebuild.proc.returncode}); "
            f"index more documents:\n{rebuild.stderr[-2000:]}"
        )
    return during


def _daemon_after_switch(procs: Procs, daemon, **env: str):  # type: ignore[no-untyped-def]
    """The running daemon is supposed to follow the switch; if it stopped, start one with the new settings."""
    if daemon.running():
        return daemon
    return procs.serve(**env)


_UPDATED = 40  # the last documents of the history get one update each, pushed at different moments


@pytest.mark.slow
def test_append_during_stream_rebuild_is_kept(r: redis.Redis, procs: Procs) -> None:
    """`append X B` pushed while `dedupd rebuild --shingle word:2` re-indexes the input stream's history (for the
    last documents of the history, which the replay reaches last; one append every 0.15 s while the rebuild runs):
    after the switch each X is `A\\nB` (the replay of the older upsert must not overwrite or drop the append)."""
    docs, daemon = _index(r, procs, 202)
    rng = random.Random(203)
    appends = {d["id"]: random_text(rng) for d in docs[-_UPDATED:]}
    texts = {d["id"]: d["text"] for d in docs}
    rebuild = procs.start("rebuild", "--shingle", "word:2", "--wait", "30")
    pushed = _push_while_rebuilding(
        r, daemon, rebuild, [{"id": x, "op": "append", "text": b} for x, b in appends.items()]
    )
    assert rebuild.wait(50) == 0, rebuild.stderr[-3000:]
    daemon = _daemon_after_switch(procs, daemon, DEDUPD_SHINGLE="word:2")
    wait_drained(r, 30, daemon)

    probes = Probes(r)
    for u in pushed:
        probes.push(u["id"] + "=A+B", texts[u["id"]] + "\n" + u["text"])
        probes.push(u["id"] + "=B", u["text"])
    wait_drained(r, 30, daemon)
    assert "Traceback" not in daemon.stderr, daemon.stderr[-3000:]
    lost = {}
    for u in pushed:
        x = u["id"]
        whole, only_b = probes.matches(x + "=A+B"), probes.matches(x + "=B")
        if whole.get(x, 0.0) < 0.99 or only_b.get(x, 0.0) >= 0.99:
            lost[x] = {"probe A+B matched": whole, "probe B matched": only_b}
    assert not lost, (
        f"{len(lost)} of the {len(pushed)} appends pushed during the rebuild were lost (the document "
        f"is not `A\\nB`): {lost}"
    )


@pytest.mark.slow
def test_delete_during_file_rebuild_is_kept(r: redis.Redis, procs: Procs, tmp_path: Path) -> None:
    """`delete Z` pushed while `dedupd rebuild --shingle word:2 --from FILE` re-indexes a JSONL file of the
    documents (for the file's last documents, which the rebuild reaches last; one delete every 0.15 s while the
    rebuild runs): after the switch each Z stays deleted (the file's older copy must not bring it back)."""
    docs, daemon = _index(r, procs, 302)
    texts = {d["id"]: d["text"] for d in docs}
    source = tmp_path / "docs.jsonl"
    source.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    rebuild = procs.start("rebuild", "--shingle", "word:2", "--from", str(source), "--wait", "30")
    pushed = _push_while_rebuilding(
        r, daemon, rebuild, [{"id": d["id"], "op": "delete"} for d in docs[-_UPDATED:]]
    )
    assert rebuild.wait(50) == 0, rebuild.stderr[-3000:]
    daemon = _daemon_after_switch(procs, daemon, DEDUPD_SHINGLE="word:2")
    wait_drained(r, 30, daemon)

    probes = Probes(r)
    for u in pushed:
        probes.push(u["id"], texts[u["id"]])
    probes.push("kept", docs[0]["text"])
    wait_drained(r, 30, daemon)
    assert "Traceback" not in daemon.stderr, daemon.stderr[-3000:]
    assert probes.matches("kept").get(docs[0]["id"], 0.0) >= 0.99  # the index answers after the switch
    back = {u["id"]: probes.matches(u["id"]) for u in pushed}
    back = {z: m for z, m in back.items() if z in m}
    assert not back, (
        f"{len(back)} of the {len(pushed)} documents deleted during the rebuild came back (a copy of "
        f"the text matched them): {back}"
    )
