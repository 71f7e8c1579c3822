"""Issue 14: a daemon's memory bounded by settings in bytes (entry, batch, stored document, NFKC expansion),
and Redis structures that do not only grow (consumers of stopped daemons, the ``:seen`` markers)."""

from __future__ import annotations

import doctest
import importlib
import time

import pytest
import redis
from helpers import dead, drain, make_daemon, pending, push

from dedupd.daemon.dead_letters import kept_fields
from dedupd.daemon.entries import CUT_FIELD, DOC_TOO_LARGE, TOO_LARGE, Entry, Op, entry_bytes, parse_entry
from dedupd.daemon.planner import byte_runs
from dedupd.errors import ConfigError, InputError
from dedupd.index.keys import GROUP, Keys
from dedupd.ops.stats import ConsumerStats, collect, render, stale_consumers
from dedupd.settings import load_settings

FDFA = "\ufdfa"  # 3 UTF-8 bytes; NFKC: 33 bytes, 4 words


@pytest.mark.parametrize(
    "module",
    [
        "dedupd.daemon.entries",
        "dedupd.daemon.planner",
        "dedupd.ops.stats",
        "dedupd.daemon.dead_letters",
        "dedupd.daemon.indexing",
    ],
)
def test_doctests(module: str) -> None:
    failures, tried = doctest.testmod(importlib.import_module(module))
    assert tried and not failures


# ----- pure: validation, splitting, settings -----
def test_an_entry_larger_than_max_entry_bytes_is_too_large_whatever_its_fields() -> None:
    fields = {b"id": b"a", b"text": b"short", b"junk": b"x" * 5000}
    with pytest.raises(InputError) as exc:
        parse_entry("1-1", fields, 100, 10, max_entry_bytes=4096)
    assert exc.value.code == TOO_LARGE and "max_entry_bytes=4096" in exc.value.detail
    assert parse_entry("1-1", fields, 100, 10, max_entry_bytes=6000).text == "short"


def test_an_entry_read_cut_short_counts_its_full_size() -> None:
    cut = {b"id": b"a", b"text": b"short", CUT_FIELD: b"40000000"}
    assert entry_bytes(cut) == 40_000_000
    with pytest.raises(InputError) as exc:
        parse_entry("1-1", cut, 100, 10, max_entry_bytes=10_000_000)
    assert exc.value.code == TOO_LARGE and "40000000 bytes" in exc.value.detail


def test_a_text_that_expands_under_nfkc_beyond_the_bound_is_too_large() -> None:
    fields = {b"id": b"a", b"text": (FDFA * 1000).encode()}  # 3,000 bytes, 33,000 after NFKC
    with pytest.raises(InputError) as exc:
        parse_entry("1-1", fields, 4000, 10, max_normalized_bytes=20_000)
    assert exc.value.code == TOO_LARGE and "NFKC" in exc.value.detail and "33000" in exc.value.detail
    assert parse_entry("1-1", fields, 4000, 10, max_normalized_bytes=40_000).size == 33_000
    assert parse_entry("1-1", {b"id": b"a", b"text": b"plain"}, 100, 10, max_normalized_bytes=100).size == 5


def test_runs_are_split_by_bytes_not_only_by_id() -> None:
    entries = [
        Entry(str(i), Op.UPSERT, str(i), "x", None, None, None, size=s) for i, s in enumerate([5, 5, 9, 1])
    ]
    assert [[e.entry_id for e in p] for p in byte_runs(entries, 10)] == [["0", "1"], ["2", "3"]]
    assert [len(p) for p in byte_runs(entries, 4)] == [1, 1, 1, 1]  # a larger entry alone


def test_dead_letter_of_an_entry_read_cut_short_says_so() -> None:
    pairs = kept_fields({b"id": b"a", b"junk": b"x" * 2000, CUT_FIELD: b"30000000"}, 2048)
    note = dict(zip(pairs[::2], pairs[1::2], strict=True))["truncated"]
    assert "the entry had 30000000 bytes" in note and CUT_FIELD not in pairs


def test_byte_bounds_must_fit_in_a_batch() -> None:
    with pytest.raises(ConfigError, match="max_entry_bytes"):
        load_settings(max_entry_bytes=50_000_000)
    with pytest.raises(ConfigError, match="max_normalized_bytes"):
        load_settings(max_normalized_bytes=1000)
    s = load_settings()
    assert s.max_doc_bytes >= 2_000_000 * 4  # real multi-megabyte documents fit (issue 14, item 4)
    assert s.max_doc_bytes <= s.max_normalized_bytes <= s.batch_max_bytes
    assert s.max_entry_bytes <= s.batch_max_bytes


def test_stale_consumers_are_idle_empty_and_without_heartbeat() -> None:
    group = [
        ConsumerStats("gone", 0, 10_000),
        ConsumerStats("busy", 3, 10_000),
        ConsumerStats("live", 0, 10_000),
    ]
    assert stale_consumers(group, {"live"}, 5_000) == ["gone"]
    assert stale_consumers(group, set(), 20_000) == []


# ----- against a real Redis -----
def test_a_read_takes_at_most_the_byte_budget(r: redis.Redis, redis_url: str) -> None:
    daemon = make_daemon(
        redis_url,
        max_entry_bytes=400_000,
        batch_max_bytes=1_000_000,
        max_doc_bytes=300_000,
        max_normalized_bytes=300_000,
    )
    push(r, [{"id": f"d{i}", "text": "w " * 140_000} for i in range(6)])  # 280 kB each
    got = daemon.stream.read_new(100, 10, 1_000_000)
    assert len(got) == 3 and sum(entry_bytes(f) for _, f in got) <= 1_000_000
    assert daemon.stream.inflight(["d0", "d2", "d3"]) == [(got[0][0],), (got[2][0],), ()]


def test_an_oversized_entry_never_reaches_the_daemon_whole(r: redis.Redis, redis_url: str) -> None:
    daemon = make_daemon(redis_url, max_entry_bytes=100_000, dead_letter_max_bytes=4096)
    push(
        r, [{"id": "big", "text": "hello there", "junk": "j" * 3_000_000}, {"id": "ok", "text": "fine words"}]
    )
    got = daemon.stream.read_new(10, 10)
    assert [len(f) for _, f in got][1] == 2
    big = got[0][1]
    assert big[b"id"] == b"big" and int(big[CUT_FIELD]) > 3_000_000 and entry_bytes(big) > 3_000_000
    assert sum(len(k) + len(v) for k, v in big.items()) < 4096 + 100
    daemon.handle(got, None)
    (letter,) = dead(r)
    assert letter[b"error"] == TOO_LARGE.encode() and b"max_entry_bytes=100000" in letter[b"detail"]
    assert len(letter[b"junk"]) < 4096 and b"the entry had" in letter[b"truncated"]


def test_an_append_beyond_max_stored_bytes_is_dead_lettered_and_the_document_kept(
    r: redis.Redis, redis_url: str
) -> None:
    daemon = make_daemon(redis_url, max_stored_bytes=14_000)
    chunk = [" ".join(f"w{c}x{i}" for i in range(1000)) for c in range(4)]  # ~4 kB stored per chunk
    ids = push(
        r, [{"id": "doc", "text": chunk[0]}, *({"id": "doc", "op": "append", "text": c} for c in chunk[1:])]
    )
    drain(daemon)
    letters = dead(r)
    assert [x[b"error"] for x in letters] == [DOC_TOO_LARGE.encode()]
    assert b"max_stored_bytes=14000" in letters[0][b"detail"] and letters[0][b"input"] == ids[3].encode()
    gw = daemon.gateway
    record = gw.load_records(gw.nums_of(["doc"]))
    (rec,) = record.values()
    assert rec is not None and rec.entry_id == ids[2]  # as the last accepted append left it
    assert len(r.get(gw.record_key(rec.num)) or b"") <= 14_000
    assert int(r.xpending(Keys().docs, GROUP)["pending"]) == 0


def _big(i: int) -> str:
    """A text stored in ~8 kB (more than max_stored_bytes=6000), distinct per ``i``."""
    return " ".join(f"w{i}x{j}" for j in range(2000))


def test_new_documents_too_large_to_store_leave_no_id_behind(r: redis.Redis, redis_url: str) -> None:
    """Distinct new ids each refused (doc_too_large) before anything was written: none stays in the id map (a
    producer could grow Redis without bound), and stats counts only the documents indexed. An id with an
    indexed version keeps it when its update is refused; a redelivery of a refused entry changes nothing."""
    daemon = make_daemon(redis_url, max_stored_bytes=6_000)
    push(r, [{"id": "kept", "text": "a short document that fits"}])
    drain(daemon)
    kept = daemon.gateway.nums_of(["kept"])[0]
    entries = push(r, [{"id": f"big{i}", "text": _big(i)} for i in range(20)])
    push(r, [{"id": "kept", "text": _big(99)}, {"id": "small", "text": "another short one"}])
    drain(daemon)
    assert [x[b"error"] for x in dead(r)] == [DOC_TOO_LARGE.encode()] * 21
    assert sorted(r.hkeys(Keys().id_forward)) == [b"kept", b"small"]
    assert daemon.gateway.nums_of(["kept"]) == [kept]
    assert collect(r, Keys()).documents == 2
    fields = dict(r.xrange(Keys().docs, entries[0], entries[0]))[entries[0].encode()]
    daemon.handle([(entries[0], fields)], None)  # (redelivered)
    assert sorted(r.hkeys(Keys().id_forward)) == [b"kept", b"small"] and len(dead(r)) == 21


def test_a_refused_new_id_stays_while_a_rebuild_runs(r: redis.Redis, redis_url: str) -> None:
    """While a rebuild holds its lease, a refused new document's id stays (the rebuild's replay of the same
    entry may write the document under its own parameters with that id: released, the record would be left
    without an id); once the rebuild is gone, the next refusal releases as before."""
    keys = Keys()
    daemon = make_daemon(redis_url, max_stored_bytes=6_000)
    r.set(keys.rebuild_lease, "elsewhere:1:test", px=600_000)
    daemon._follow()
    push(r, [{"id": "big", "text": _big(1)}])
    drain(daemon)
    assert len(dead(r)) == 1 and r.hkeys(keys.id_forward) == [b"big"]
    r.delete(keys.rebuild_lease)
    daemon._follow()
    push(r, [{"id": "big2", "text": _big(2)}])
    drain(daemon)
    assert len(dead(r)) == 2 and r.hkeys(keys.id_forward) == [b"big"]


def test_a_new_id_assigned_by_a_deferred_entry_is_forgotten_when_every_entry_is_refused(
    r: redis.Redis, redis_url: str
) -> None:
    """Two entries of one new document, each too large, held by two daemons: the newer one waits for the older
    (its id assigned while it waits), the older one is refused, then the newer one: no id is left."""
    a = make_daemon(redis_url, consumer="a", max_stored_bytes=6_000, batch_size=1)
    b = make_daemon(redis_url, consumer="b", max_stored_bytes=6_000, batch_size=1)
    push(r, [{"id": "x", "text": _big(1)}, {"id": "x", "text": _big(2)}])
    older, newer = a.stream.read_new(1, 10), b.stream.read_new(1, 10)
    assert b.handle(newer, None).deferred == [newer[0][0]]  # (waits for the older one, in flight)
    a.handle(older, None)
    drain(b)
    assert pending(r) == 0 and len(dead(r)) == 2
    assert r.hlen(Keys().id_forward) == 0


def test_seen_markers_are_pruned_on_a_timer(r: redis.Redis, redis_url: str) -> None:
    daemon = make_daemon(redis_url, seen_ttl_s=60, seen_prune_s=1)
    keys = Keys()
    now = int(time.time() * 1000)
    for stream in (keys.alerts, keys.baskets, keys.dead):
        r.zadd(keys.seen(stream), {"old": now - 120_000, "new": now})
    daemon.iteration()
    for stream in (keys.alerts, keys.baskets, keys.dead):
        assert r.zrange(keys.seen(stream), 0, -1) == [b"new"]
    r.zadd(keys.seen(keys.dead), {"old": now - 120_000})
    daemon.iteration()
    assert r.zscore(keys.seen(keys.dead), "old") is not None  # not before seen_prune_s
    time.sleep(1.05)
    daemon.iteration()
    assert r.zscore(keys.seen(keys.dead), "old") is None


def test_a_clean_exit_leaves_the_group_unless_entries_are_pending(r: redis.Redis, redis_url: str) -> None:
    done = make_daemon(redis_url, consumer="done")
    push(r, [{"id": "a", "text": "some words here"}])
    drain(done)
    push(r, [{"id": "b", "text": "more words here"}])
    r.xreadgroup(GROUP, "holder", {Keys().docs: ">"}, count=1)  # "holder" now holds b
    done._farewell()
    holder = make_daemon(redis_url, consumer="holder")
    holder._farewell()
    assert [c["name"] for c in r.xinfo_consumers(Keys().docs, GROUP)] == [b"holder"]


def test_stats_names_stale_consumers_with_how_to_remove_them(r: redis.Redis, redis_url: str) -> None:
    make_daemon(redis_url)
    (entry_id,) = push(r, [{"id": "a", "text": "words"}])
    r.xreadgroup(GROUP, "ghost", {Keys().docs: ">"}, count=1)
    r.xack(Keys().docs, GROUP, entry_id)  # a consumer that read, finished and went away
    time.sleep(0.05)
    snapshot = collect(r, Keys(), stale_idle_ms=10)
    assert snapshot.stale == ["ghost"]
    assert "XGROUP DELCONSUMER dedupd:docs dedupd <name>" in render(snapshot)
