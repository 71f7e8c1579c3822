"""Issue 14 items 3, 4 and 5 with real `dedupd serve` processes: memory bounded by settings under adversarial
input, multi-megabyte documents accepted and matched, consumers and ``:seen`` markers that do not only grow."""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from blackbox import Procs, alerts, procs_fixture, push, run_cli, wait_drained, wait_for

from dedupd.index.keys import GROUP, Keys

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import adversarial

PEAK_RSS_BOUND_MB = 600  # README, Operations: a daemon's peak memory at default settings


@pytest.fixture
def procs(redis_url: str, tmp_path: Path) -> Iterator[Procs]:
    yield from procs_fixture(redis_url, tmp_path)


def test_item3_memory_is_bounded_by_settings_under_adversarial_input(redis_url: str, r: redis.Redis) -> None:
    """Eight entries with a 30 MB junk field, four 1 MB texts of U+FDFA (11 MB after NFKC), an append chain
    of sixteen 0.99 MB chunks and a 2 MB document with its near-copy, all waiting when the daemon starts."""
    docs = adversarial.entries(14, junk=8, junk_mb=30, nfkc=4, chains=1, appends=16, large=1, large_mb=2.0)
    got = adversarial.serve_and_measure(redis_url, "dedupd", docs, timeout=300)
    assert got["exit"] == 0, got
    assert got["peak_rss_mb"] < PEAK_RSS_BOUND_MB, got
    # junk (max_entry_bytes) and NFKC expansion (max_normalized_bytes): too_large; the appends that would
    # grow the stored document beyond max_stored_bytes: doc_too_large
    assert got["dead"] == {"too_large": 12, "doc_too_large": 4}, got
    assert got["dead_stream_bytes"] < 16 * 100_000, got  # dead letters keep dead_letter_max_bytes each
    assert [(a["id"], a["duplicate_of"]) for a in alerts(r)] == [("large0b", "large0a")]
    letters = {f[b"id"]: f for _, f in r.xrange(Keys().dead)}
    assert b"the entry had" in letters[b"junk0"][b"truncated"]
    assert b"NFKC" in letters[b"nfkc0"][b"detail"]


def test_item4_a_2mb_document_is_accepted_and_its_duplicate_found(procs: Procs, r: redis.Redis) -> None:
    rng = random.Random(4)
    base = adversarial.realistic(rng, 2_100_000)
    serve = procs.serve()
    push(r, {"id": "licence", "text": base})
    copy = push(r, {"id": "licence-copy", "text": adversarial.near_copy(rng, base)})
    wait_drained(r, 120, serve)
    assert r.xlen(Keys().dead) == 0, r.xrange(Keys().dead)
    assert [(a["id"], a["duplicate_of"], a["input"]) for a in alerts(r)] == [
        ("licence-copy", "licence", copy)
    ]


def test_item5_a_clean_exit_leaves_the_group_and_stats_names_stale_consumers(
    procs: Procs, r: redis.Redis, redis_url: str
) -> None:
    serve = procs.serve("--consumer", "tidy")
    push(r, {"id": "a", "text": "a few words of text"})
    wait_drained(r, 60, serve)
    assert [c["name"] for c in r.xinfo_consumers(Keys().docs, GROUP)] == [b"tidy"]
    assert serve.stop() == 0
    assert r.xinfo_consumers(Keys().docs, GROUP) == []
    # a consumer left by a daemon that did not exit cleanly (killed, or an older version)
    entry = push(r, {"id": "b", "text": "more words of text"})
    r.xreadgroup(GROUP, "ghost", {Keys().docs: ">"}, count=1)
    r.xack(Keys().docs, GROUP, entry)
    time.sleep(1.1)
    res = run_cli(redis_url, "stats", "--interval", "0", DEDUPD_CLAIM_IDLE_MS="100")
    assert res.returncode == 0, res.stderr
    assert "stale consumers" in res.stdout and "ghost" in res.stdout
    assert "XGROUP DELCONSUMER dedupd:docs dedupd <name>" in res.stdout


def test_item5_seen_markers_are_pruned_on_a_timer(procs: Procs, r: redis.Redis) -> None:
    keys = Keys()
    serve = procs.serve(DEDUPD_SEEN_TTL_S="60", DEDUPD_SEEN_PRUNE_S="1")
    seen = keys.seen(keys.dead)
    r.zadd(seen, {"old": int(time.time() * 1000) - 120_000, "recent": int(time.time() * 1000)})
    wait_for(lambda: r.zscore(seen, "old") is None, 10, "the old marker to be pruned")
    assert r.zscore(seen, "recent") is not None and serve.running()
