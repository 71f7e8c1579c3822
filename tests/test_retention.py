"""The retention window against a real Redis: documents past the window (by count or by age) are forgotten
as a delete forgets them, but leave nothing behind; documents within it, or kept alive by their copies, are
found; an id pushed again after its document expired is a new document; an update racing an expiry ends as
the stream says."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

import redis
from helpers import alerts, drain, make_daemon, push, text, variant

from dedupd.daemon.loop import Daemon
from dedupd.index.keys import Keys

K = Keys()


def wait_until(what: Callable[[], bool], step: Callable[[], Any], deadline_s: float = 60.0) -> None:
    """Run ``step`` until ``what`` holds (a generous deadline, never a timed assertion)."""
    end = time.monotonic() + deadline_s
    while not what():
        assert time.monotonic() < end, "the condition did not come about"
        step()


def settle_expiry(daemon: Daemon) -> None:
    """Steps until nothing is past the window (the backlog the last step saw is 0 and nothing is claimed)."""
    r = daemon.client

    def done() -> bool:
        daemon._expire()
        return daemon.metrics.expiry_backlog._value.get() == 0 and not r.exists(K.expiring)

    wait_until(done, lambda: time.sleep(0.01))


def query(r: redis.Redis, daemon: Daemon, doc_id: str, body: str) -> dict[str, str]:
    push(r, [{"id": doc_id, "text": body, "op": "query", "reply_to": "t"}])
    drain(daemon)
    _, fields = r.xrange(K.reply("t"))[-1]
    return {k.decode(): v.decode() for k, v in fields.items()}


def named(r: redis.Redis, doc_id: str) -> list[str]:
    """The ids the alerts of ``doc_id`` name."""
    return [m[0] for a in alerts(r) if a["id"] == doc_id for m in a["matches"]]


def test_a_count_window_keeps_the_newest_documents_and_forgets_the_others(
    r: redis.Redis, redis_url: str
) -> None:
    rng = random.Random(1)
    daemon = make_daemon(redis_url, max_documents=20, batch_size=10)
    texts = [text(rng) for _ in range(60)]
    push(r, [{"id": f"d{i}", "text": t} for i, t in enumerate(texts)])
    drain(daemon)
    settle_expiry(daemon)
    assert r.zcard(K.touched) == 20
    assert int(r.hlen(K.id_forward)) == 20
    assert len(r.keys("dedupd:doc:*")) == 20
    # an old one is forgotten: its copy finds nothing, a query of it is no duplicate
    assert query(r, daemon, "q-old", texts[5])["duplicate"] == "0"
    assert query(r, daemon, "q-new", texts[55])["duplicate"] == "1"
    push(
        r,
        [
            {"id": "copy-old", "text": variant(rng, texts[5])},
            {"id": "copy-new", "text": variant(rng, texts[55])},
        ],
    )
    drain(daemon)
    assert named(r, "copy-old") == []
    assert named(r, "copy-new") == ["d55"]
