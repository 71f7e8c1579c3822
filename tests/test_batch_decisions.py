"""A batch's decisions against the in-memory gateway (index/memory.py), without any server: per-document
order, candidate selection, evictions, alerts, baskets and dead letters, each checked against what is derived
by hand from the documents (word 3-gram sets and their exact Jaccard, stream order applied one entry at a
time) rather than against the code's own answers."""

from __future__ import annotations

import json
import random
import re
from typing import Any

import numpy as np
import pytest
from helpers import raw_entry, text, variant

from dedupd.daemon.batch import BatchResult, RawEntry
from dedupd.daemon.processor import Processor
from dedupd.index import matching
from dedupd.index.buckets import Evictions, bucket_keys
from dedupd.index.keys import Keys
from dedupd.index.memory import MemoryGateway, MemoryStore
from dedupd.index.protocol import RecordsRead
from dedupd.settings import Settings, load_settings
from dedupd.similarity.bounds import ANCHORS_KEPT, KEPT_PER_CLUSTER, NEWEST_KEPT, VERIFIED_PER_CLUSTER
from dedupd.similarity.lsh import column_bands

KEYS = Keys()


class Batches:
    """A Processor on a MemoryGateway, fed documents with increasing entry ids."""

    def __init__(self, store: MemoryStore | None = None, inflight: Any = None, **overrides: Any) -> None:
        self.settings: Settings = load_settings(**overrides)
        spec, bounds = self.settings.index_spec(), self.settings.bounds()
        self.gw = MemoryGateway(KEYS, spec, bounds=bounds, store=store)
        self.processor = Processor(self.gw, self.settings, inflight)
        self.next = 1000

    def entries(self, docs: list[dict[str, Any]]) -> list[RawEntry]:
        out = [raw_entry(f"{self.next + i}-0", d) for i, d in enumerate(docs)]
        self.next += len(docs)
        return out

    def run(self, docs: list[dict[str, Any]], deliveries: dict[str, int] | None = None) -> BatchResult:
        return self.processor.process(self.entries(docs), deliveries)

    def stream(self, name: str) -> list[dict[str, str]]:
        return [{k.decode(): v.decode() for k, v in f.items()} for f in self.gw.stream(name)]

    def num(self, doc_id: str) -> int:
        return self.gw.store.ids.get(doc_id, 0)

    def shingles_of(self, doc_id: str) -> list[int] | None:
        """The stored document's shingle fingerprints (None: no document)."""
        rec = self.gw.load_records([self.num(doc_id)]).get(self.num(doc_id)) if self.num(doc_id) else None
        return None if rec is None else rec.fingerprint.shingles.tolist()

    def fingerprint_shingles(self, t: str) -> list[int]:
        return self.gw.fingerprinter.compute([t])[0].shingles.tolist()


def grams(t: str) -> set[tuple[str, ...]]:
    w = re.findall(r"\w+", t.lower())
    return {tuple(w[i : i + 3]) for i in range(len(w) - 2)}


def jaccard(a: str, b: str) -> float:
    """Exact Jaccard of two texts' word 3-gram sets, by hand."""
    x, y = grams(a), grams(b)
    return len(x & y) / len(x | y)


# ----- per-document order -----
@pytest.mark.parametrize("seed", range(6))
def test_entries_apply_in_stream_order_whatever_the_batches(seed: int) -> None:
    """Random upserts, appends and deletes of a few documents, cut into random batches, some delivered twice:
    each document ends as its entries applied one at a time in stream order make it."""
    rng = random.Random(seed)
    b = Batches()
    ops = []
    for _ in range(40):
        doc, op = rng.choice("xyz"), rng.choice(["upsert", "upsert", "append", "delete"])
        ops.append(
            {"id": doc, "op": op} | ({} if op == "delete" else {"text": text(rng, rng.randint(4, 20))})
        )
    raw = b.entries(ops)
    expected: dict[str, str | None] = {}
    for d in ops:  # by hand: stream order, one entry at a time
        old = expected.get(d["id"])
        if d["op"] == "delete":
            expected[d["id"]] = None
        elif d["op"] == "append" and old is not None:
            expected[d["id"]] = old + "\n" + d["text"]
        else:
            expected[d["id"]] = d["text"]
    at, batches = 0, []
    while at < len(raw):
        n = rng.randint(1, 8)
        batches.append(raw[at : at + n])
        at += n
    for i, batch in enumerate(batches):
        b.processor.process(batch)
        if i and rng.random() < 0.4:  # an earlier batch redelivered
            b.processor.process(batches[rng.randrange(i)])
    for doc, t in expected.items():
        assert b.shingles_of(doc) == (None if t is None else b.fingerprint_shingles(t)), doc
    assert all(a["id"] != a["duplicate_of"] for a in b.stream(KEYS.alerts))


def test_a_newer_entry_waits_for_an_older_one_in_flight() -> None:
    b = Batches(inflight=lambda ids: [("1000-0", "1001-0") for _ in ids])
    raw = b.entries([{"id": "d", "text": "first version of it"}, {"id": "d", "text": "second version"}])
    result = b.processor.process(raw[1:])
    assert (result.deferred, result.ack, b.gw.store.records) == (["1001-0"], [], {})


def test_a_concurrent_update_is_retried_and_the_newer_entry_wins() -> None:
    """Two consumers on one store: the older entry's write finds the record changed under it (the newer
    entry's consumer wrote in between), is done again, and changes nothing: the newer version stays."""
    rng = random.Random(3)
    old_text, new_text = text(rng), text(rng)
    store = MemoryStore()
    first, second = Batches(store), Batches(store)
    first.run([{"id": "d", "text": "the version both read"}])
    first.next, second.next = 2000, 2001
    older, newer = (
        first.entries([{"id": "d", "text": old_text}]),
        second.entries([{"id": "d", "text": new_text}]),
    )
    real = first.gw.apply
    applied: list[Any] = []

    def racing(prepared: Any) -> Any:
        if not applied:
            second.processor.process(newer)  # gets there first
        applied.append(real(prepared))
        return applied[-1]

    first.gw.apply = racing  # type: ignore[method-assign]
    assert first.processor.process(older).ack == [older[0][0]]
    assert applied[0][0] == [None]  # the first attempt wrote nothing
    assert first.shingles_of("d") == first.fingerprint_shingles(new_text)


# ----- candidate selection -----
def _index(b: Batches, texts: dict[str, str]) -> dict[str, int]:
    b.run([{"id": k, "text": t} for k, t in texts.items()])
    return {k: b.num(k) for k in texts}


def _spy_reads(gw: MemoryGateway) -> list[set[int]]:
    """The ids whose records each verification reads, in order."""
    calls: list[set[int]] = []
    real = gw.read_records

    def spy(nums: Any, ahead: Any = (), held: Any = None) -> RecordsRead:
        nums = list(nums)
        calls.append(set(nums))
        return real(nums, ahead, held)

    gw.read_records = spy  # type: ignore[method-assign]
    return calls


def test_a_few_of_each_cluster_are_verified_first() -> None:
    """Twelve copies of one story (one cluster) and three other documents read once each: the five oldest
    copies and each other document are verified, and the matches are the verified ones over the threshold."""
    rng = random.Random(4)
    base = text(rng, 60)
    b = Batches()
    texts = {f"copy{i:02}": variant(rng, base, 1) for i in range(12)}
    nums = _index(b, texts)
    others = _index(b, {f"other{i}": text(rng, 60) for i in range(3)})
    roots = b.gw.roots(list(nums.values()), fresh=True)
    assert set(roots) == {nums["copy00"]}  # the copies made one cluster
    probe = variant(rng, base, 1)
    fp = b.gw.fingerprinter.compute([probe])[0]
    reads = {-1: (np.array([*nums.values(), *others.values()], dtype=np.uint32), 0)}
    calls = _spy_reads(b.gw)
    got = matching.verify_reads(b.gw, {-1: ("probe", fp)}, reads)
    oldest = sorted(nums.values())[:VERIFIED_PER_CLUSTER]
    assert calls[0] == set(oldest) | set(others.values()) and len(calls) == 1
    by_num = {n: k for k, n in {**nums, **others}.items()}
    every = {**texts, **{k: "" for k in others}}
    expected = {n for n in calls[0] if jaccard(probe, every[by_num[n]]) >= 0.8}
    assert {m.num for m in got.matches[-1]} == expected and expected


@pytest.mark.parametrize("max_candidates", [64, 6])
def test_the_next_candidates_of_a_cluster_none_of_whose_first_ones_matched(max_candidates: int) -> None:
    """A cluster (made by hand) of eight different documents, read once each: the five best-ranked (oldest)
    do not match the probe, the seventh does. It is found in a second look, within max_candidates."""
    rng = random.Random(5)
    b = Batches(max_candidates=max_candidates)
    texts = {f"d{i}": text(rng, 60) for i in range(8)}
    nums = _index(b, texts)
    group = [(nums[k], [(nums["d0"], "d0")]) for k in texts if k != "d0"]
    b.gw.union(group, b.gw.exchange())
    assert set(b.gw.roots(list(nums.values()), fresh=True)) == {nums["d0"]}
    probe = variant(rng, texts["d6"], 1)
    sims = {nums[k]: jaccard(probe, t) for k, t in texts.items()}
    assert [n for n, s in sims.items() if s >= 0.8] == [nums["d6"]]  # the premise, by hand
    calls = _spy_reads(b.gw)
    reads = {-1: (np.array(list(nums.values()), dtype=np.uint32), 0)}
    got = matching.verify_reads(b.gw, {-1: ("probe", b.gw.fingerprinter.compute([probe])[0])}, reads)
    ranked = sorted(nums.values())
    assert calls[0] == set(ranked[:VERIFIED_PER_CLUSTER])
    assert got.candidates[-1] == set(ranked[:max_candidates])  # the rest, best-ranked first, within the bound
    assert [m.num for m in got.matches.get(-1, [])] == ([nums["d6"]] if max_candidates > 6 else [])


# ----- evictions -----
def _buckets_by_hand(b: Batches, texts: dict[str, str]) -> dict[tuple[str, int], set[str]]:
    """Which documents each bucket (hash name, field) would hold without bounds: from their band hashes."""
    gw = b.gw
    fps = gw.fingerprinter.compute(list(texts.values()))
    out: dict[tuple[str, int], set[str]] = {}
    for doc, bands in zip(texts, gw.fingerprinter.band_hashes(fps), strict=True):
        shift = np.uint64(64 - gw.spec.shard_bits)
        band = column_bands(bands.size, gw.spec.bands)
        names, name_of, fields = bucket_keys(band, bands, shift, gw.spec.shard_bits, gw._names)
        for at, f in zip(name_of.tolist(), fields.tolist(), strict=True):
            out.setdefault((names[at], f), set()).add(doc)
    return out


def test_each_bucket_keeps_the_anchor_and_the_newest_of_each_cluster() -> None:
    """Variants of two stories, interleaved over several batches: each bucket ends with the oldest (the
    anchor) and the NEWEST_KEPT newest documents of each story among those whose band hashes reach it."""
    rng = random.Random(6)
    bases = [text(rng, 80), text(rng, 80)]
    texts = {f"s{i % 2}-{i:02}": variant(rng, bases[i % 2], 1) for i in range(30)}
    b = Batches()
    evicted: list[Evictions] = []
    real = b.gw.evict
    b.gw.evict = lambda ex, ev: (evicted.append(ev), real(ex, ev))[1]  # type: ignore[method-assign]
    docs = [{"id": k, "text": t} for k, t in texts.items()]
    for lo in range(0, 30, 7):
        b.run(docs[lo : lo + 7])
    assert {a["cluster"] for a in b.stream(KEYS.alerts)} == {"s0-00", "s1-01"} and evicted
    by_hand = _buckets_by_hand(b, texts)
    held = {(k, f): set(v) for k, h in b.gw.store.buckets.items() for f, v in h.items()}
    assert set(held) == set(by_hand)
    for bucket, docs_in in by_hand.items():
        want = set()
        for story in ("s0", "s1"):
            mine = sorted((b.num(d) for d in docs_in if d.startswith(story)), reverse=True)
            want |= {*mine[:NEWEST_KEPT], *mine[-ANCHORS_KEPT:]}
        assert held[bucket] == want, bucket
    for ev in evicted:  # EVICT's rows: per bucket and cluster at most KEPT_PER_CLUSTER documents of the batch
        rows = list(zip(ev.key.tolist(), ev.field.tolist(), ev.cluster.tolist(), strict=True))
        assert max(rows.count(r) for r in rows) <= KEPT_PER_CLUSTER


# ----- outputs -----
def test_an_alert_names_what_the_texts_say() -> None:
    rng = random.Random(7)
    a = text(rng)
    b_text = variant(rng, a)
    b = Batches()
    b.run([{"id": "a", "text": a}, {"id": "other", "text": text(rng)}])
    raw = b.entries([{"id": "b", "text": b_text, "source": "wire", "meta": {"lang": "en"}}])
    b.processor.process(raw)
    sim = jaccard(a, b_text)
    assert b.stream(KEYS.alerts) == [
        {
            "id": "b",
            "duplicate_of": "a",
            "similarity": f"{sim:.4f}",
            "matches": json.dumps([["a", round(sim, 4)]]),
            "cluster": "a",
            "input": raw[0][0],
            "verify": "exact",
            "source": "wire",
            "meta": json.dumps({"lang": "en"}),
        }
    ]
    assert b.gw.store.counters == {"processed": 3, "alerts": 1}


@pytest.mark.parametrize("mode", ["items", "words", "sources", "phrases", "none"])
def test_baskets(mode: str) -> None:
    rng = random.Random(8)
    a = text(rng, 30)
    copy = variant(rng, a)
    docs = [
        {"id": "a", "text": a, "source": "s1"},
        {"id": "b", "text": "Hello, hello World", "items": ["x", "y"]},
        {"id": "c", "text": copy, "source": "s2"},
        {"id": "a", "op": "delete"},
    ]
    b = Batches(baskets=mode)
    b.run(docs)

    def words(t: str) -> list[str]:
        return sorted(set(re.findall(r"\w+", t.lower())))

    def phrases(t: str) -> list[str]:
        w = re.findall(r"\w+", t.lower())
        return list(dict.fromkeys(" ".join(w[i : i + 3]) for i in range(len(w) - 2)))

    expected: dict[str, list[dict[str, str]]] = {
        "items": [{"id": "b", "items": '["x", "y"]'}],
        "words": [{"id": d["id"], "items": json.dumps(words(d["text"]))} for d in docs[:3]],
        "phrases": [{"id": d["id"], "items": json.dumps(phrases(d["text"]))} for d in docs[:3]],
        "sources": [
            {"id": "a", "items": '["s1"]', "links": "[]"},
            {"id": "b", "items": '["x", "y"]'},
            {"id": "c", "items": '["s2"]', "links": '["a"]'},
        ],
        "none": [],
    }
    expected["words"][1] = expected["phrases"][1] = {"id": "b", "items": '["x", "y"]'}  # named items win
    assert jaccard(a, copy) >= 0.8  # (c duplicates a: its source basket links it)
    assert b.stream(KEYS.baskets) == expected[mode]


def test_dead_letters_once_per_entry() -> None:
    b = Batches(max_deliveries=2)
    bad = [
        ({"text": "no id"}, "missing_id"),
        ({"id": "a"}, "missing_text"),
        ({"id": "a", "text": "t", "items": "[1,"}, "bad_json"),
        ({"id": "a", "text": "t", "op": "merge"}, "unknown_op"),
        ({"id": "q", "text": "t", "op": "query"}, "bad_reply_to"),
        ({"id": "p", "text": "poison"}, "max_deliveries"),
    ]
    raw = [(f"{2000 + i}-0", {k.encode(): v.encode() for k, v in f.items()}) for i, (f, _) in enumerate(bad)]
    good = b.entries([{"id": "fine", "text": "a perfectly good document"}])
    result = b.processor.process(raw + good, {raw[-1][0]: 3})
    b.processor.process(raw, {raw[-1][0]: 3})  # redelivered: no new letter
    letters = b.stream(KEYS.dead)
    assert [(d["input"], d["error"]) for d in letters] == [
        (e, code) for (e, _), (_, code) in zip(raw, bad, strict=True)
    ]
    for letter, (fields, _) in zip(letters, bad, strict=True):
        assert {k: letter[k] for k in fields} == fields and letter["detail"]
    assert result.ack == [e for e, _ in raw + good] and result.dead == len(bad) and b.num("fine") > 0


@pytest.fixture(autouse=True)
def _no_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing here talks to a server: a Redis client made by mistake fails at once."""
    import redis

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a test of the in-memory gateway made a Redis client")

    monkeypatch.setattr(redis.Redis, "__init__", refuse)
