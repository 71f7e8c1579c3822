"""The in-memory gateway (index/memory.py) against the Redis one: the same batches through a Processor on each,
the same alerts, buckets, ids, union-find and outputs. Each case runs on both (the ``index`` fixture), and
once more on both together, the whole of what each holds compared (``test_the_twin_holds_what_redis_holds``)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import redis
from helpers import raw_entry, star, text, variant

from dedupd.daemon.batch import BatchResult, RawEntry
from dedupd.daemon.expiry import expire_step
from dedupd.daemon.processor import Processor
from dedupd.index import gateway as redis_gateway
from dedupd.index.buckets import bucket_keys
from dedupd.index.gateway import RedisGateway
from dedupd.index.keys import Keys
from dedupd.index.memory import MemoryGateway
from dedupd.index.protocol import Gateway
from dedupd.settings import Settings, load_settings
from dedupd.similarity.bounds import NEWEST_KEPT
from dedupd.similarity.lsh import column_bands

ROOT = Path(__file__).resolve().parents[1]
Stream = list[dict[str, str]]


class Index:
    """One index behind one gateway (``memory`` or ``redis``): batches in, what it holds out, alike for both."""

    def __init__(self, kind: str, client: redis.Redis | None) -> None:
        self.kind, self.client = kind, client
        self.keys = Keys()
        self._next = 1000
        self.setup()

    def setup(self, serving: bool = True, **overrides: Any) -> None:
        """A gateway of a new, empty index (of the generation a rebuild builds, unless ``serving``)."""
        self.settings: Settings = load_settings(**overrides)
        spec, bounds = self.settings.index_spec(), self.settings.bounds()
        ttl = self.settings.tombstone_ttl_s
        if self.client is None:
            self.gw: Gateway = MemoryGateway(self.keys, spec, 0, serving, ttl, bounds)
        else:
            self.client.flushall()
            spec, gen = redis_gateway.open_spec(self.client, self.keys, spec)
            self.gw = RedisGateway(self.client, self.keys, spec, gen, serving, ttl, bounds)
        self.processor = Processor(self.gw, self.settings)

    def entries(self, docs: list[dict[str, Any]]) -> list[RawEntry]:
        """Stream entries of ``docs`` with new, increasing entry ids."""
        out = [raw_entry(f"{self._next + i}-0", d) for i, d in enumerate(docs)]
        self._next += len(docs)
        return out

    def run(self, docs: list[dict[str, Any]], batch: int = 1000) -> list[RawEntry]:
        raw = self.entries(docs)
        for lo in range(0, len(raw), batch):
            self.processor.process(raw[lo : lo + batch])
        return raw

    def process(self, raw: list[RawEntry], deliveries: dict[str, int] | None = None) -> BatchResult:
        return self.processor.process(raw, deliveries)

    def stream(self, name: str) -> Stream:
        got = self.gw.stream(name) if self.client is None else [f for _, f in self.client.xrange(name)]  # type: ignore[attr-defined]
        return [{k.decode(): v.decode() for k, v in f.items()} for f in got]

    def alerts(self) -> Stream:
        return self.stream(self.keys.alerts)

    def buckets(self) -> dict[tuple[str, int], list[int]]:
        """Every bucket of the generation: (hash name, field) -> its members, in order."""
        if self.client is None:
            store = self.gw.store  # type: ignore[attr-defined]
            return {(k, f): list(v) for k, h in store.buckets.items() for f, v in h.items()}
        out = {}
        for key in self.client.scan_iter(match=self.keys.band_pattern(0)):
            for f, v in self.client.hgetall(key).items():
                out[(key.decode(), int.from_bytes(f, "little"))] = np.frombuffer(v, "<u4").tolist()
        return out

    def num(self, doc_id: str) -> int:
        if self.client is None:
            return int(self.gw.store.ids.get(doc_id, 0))  # type: ignore[attr-defined]
        return int(self.client.hget(self.keys.id_forward, doc_id) or 0)

    def snapshot(self) -> dict[str, Any]:
        """Everything the index holds (times aside: expiry of tombstones and markers)."""
        k = self.keys
        if self.client is None:
            s = self.gw.store  # type: ignore[attr-defined]
            streams = {name: self.stream(name) for name in s.streams}
            return {
                "records": dict(s.records),
                "buckets": self.buckets(),
                "ids": dict(s.ids),
                "seq": s.seq,
                "tombstones": dict(s.tombstones),
                "expiring": set(s.tombstone_expiry),
                "uf": (dict(s.parent), dict(s.children), dict(s.gone), dict(s.ring)),
                "reps": {root: [tuple(e) for e in reps] for root, reps in s.reps.items()},
                "streams": streams,
                "seen": {k: set(v) for k, v in s.seen.items() if v},
                "counters": dict(s.counters),
                "deficits": dict(s.deficits.get(k.deficits(0), {})),
                "touched": set(s.touched),
                "claims": (set(s.expiring), dict(s.expiring_ids)),
                "expired": s.expired,
            }
        r = self.client

        def ints(name: str) -> dict[int, int]:
            return {int(a): int(b) for a, b in r.hgetall(name).items()}

        def gone(name: str) -> dict[int, str]:
            return {int(a): b.decode() for a, b in r.hgetall(name).items()}

        def rings(name: str) -> dict[int, tuple[int, int]]:
            return {int(a): (int(b.split()[0]), int(b.split()[1])) for a, b in r.hgetall(name).items()}

        def reps(name: str) -> dict[int, list[tuple[int, ...]]]:
            packed = {int(a): np.frombuffer(b, "<u4").reshape(-1, 2) for a, b in r.hgetall(name).items()}
            return {root: [tuple(e) for e in pairs.tolist()] for root, pairs in packed.items()}

        return {
            "records": {key.decode(): r.get(key) for key in r.scan_iter(match=k.doc_pattern_of(0))},
            "buckets": self.buckets(),
            "ids": {a.decode(): int(b) for a, b in r.hgetall(k.id_forward).items()},
            "seq": int(r.get(k.id_seq) or 0),
            "tombstones": {a.decode(): b.decode() for a, b in r.hgetall(k.tombstones).items()},
            "expiring": {a.decode() for a in r.zrange(k.tombstone_expiry, 0, -1)},
            "uf": (ints(k.uf_parent), ints(k.uf_children), gone(k.uf_gone), rings(k.uf_ring)),
            "reps": reps(k.uf_reps),
            "streams": {key.decode(): self.stream(key.decode()) for key in r.scan_iter(_type="STREAM")},
            "seen": {
                key.decode(): {m.decode() for m in r.zrange(key, 0, -1)}
                for key in r.scan_iter(match="{*}:seen")
                if r.zcard(key)
            },
            "counters": {a.decode(): int(b) for a, b in r.hgetall(k.counters).items()},
            "deficits": {int.from_bytes(a, "little"): int(b) for a, b in r.hgetall(k.deficits(0)).items()},
            "touched": {int(m) for m in r.zrange(k.touched, 0, -1)},
            "claims": (
                {int(m) for m in r.zrange(k.expiring, 0, -1)},
                {int(a): b.decode() for a, b in r.hgetall(k.expiring_ids).items()},
            ),
            "expired": int(r.get(k.expired_count) or 0),
        }


@pytest.fixture(params=["memory", "redis"])
def index(request: pytest.FixtureRequest) -> Iterator[Index]:
    """An index behind the in-memory gateway, then behind the Redis one (a flushed real redis-server)."""
    if request.param == "memory":
        yield Index("memory", None)
        return
    client = redis.Redis.from_url(request.getfixturevalue("redis_url"))
    yield Index("redis", client)
    client.close()


def _shingles(t: str) -> set[tuple[str, ...]]:
    w = t.lower().split()
    return {tuple(w[i : i + 3]) for i in range(len(w) - 2)}


def jaccard(a: str, b: str) -> float:
    """Exact Jaccard of two texts' word 3-gram sets (the default shingle), by hand."""
    x, y = _shingles(a), _shingles(b)
    return len(x & y) / len(x | y)


# ----- the cases: each drives an index and asserts what any gateway must give -----
def case_flood(ix: Index) -> None:
    """A flood of copies over more than one BUCKETS call and several batches: every copy after the first
    alerts, one cluster, each bucket keeps the cluster's anchor (the first copy) and the NEWEST_KEPT newest
    copies that reached it."""
    ix.setup(max_candidates=16, max_matches=5, bucket_members=8)
    base = text(random.Random(7), 60)
    docs = [{"id": f"c{i:03}", "text": base} for i in range(150)]
    ix.run(docs[:100])  # one batch: two calls of APPLY_CHUNK documents
    ix.run(docs[100:], batch=10)
    got = ix.alerts()
    assert [a["id"] for a in got] == [d["id"] for d in docs[1:]]
    assert {a["cluster"] for a in got} == {"c000"}
    assert all(a["similarity"] == "1.0000" and len(json.loads(a["matches"])) <= 5 for a in got)
    nums = sorted(ix.num(d["id"]) for d in docs)
    kept = [nums[0], *nums[-NEWEST_KEPT:]]
    assert all(sorted(m) == kept for m in ix.buckets().values())
    assert set(ix.gw.roots([ix.num(d["id"]) for d in docs], fresh=True)) == {ix.num("c000")}


def case_star(ix: Index) -> None:
    """A base and variants of it: each variant names the earlier documents over the threshold (by hand)."""
    rng = random.Random(2)
    base = text(rng, 60)
    docs = [{"id": "base", "text": base}] + [{"id": f"v{i}", "text": variant(rng, base, 2)} for i in range(6)]
    docs.append({"id": "other", "text": text(rng, 60)})
    ix.run(docs[:1])
    ix.run(docs[1:], batch=3)
    got = {a["id"]: a for a in ix.alerts()}
    assert set(got) == {f"v{i}" for i in range(6)}
    for i, d in enumerate(docs[1:7]):
        a = got[d["id"]]
        sims = {e["id"]: jaccard(e["text"], d["text"]) for e in docs[: i + 1]}
        assert {m[0] for m in json.loads(a["matches"])} == {e for e, s in sims.items() if s >= 0.8}
        assert a["cluster"] == "base" and float(a["similarity"]) == pytest.approx(
            max(sims.values()), abs=1e-4
        )


def case_upsert(ix: Index) -> None:
    """An upsert replaces a document: its old text's buckets are left."""
    rng = random.Random(4)
    a, b = text(rng), text(rng)
    ix.run([{"id": "doc", "text": a}])
    ix.run([{"id": "doc", "text": b}])
    ix.run([{"id": "probe-a", "text": a}, {"id": "probe-b", "text": variant(rng, b)}])
    assert [(x["id"], x["duplicate_of"]) for x in ix.alerts()] == [("probe-b", "doc")]


def case_delete(ix: Index) -> None:
    """A deleted root: its cluster keeps its name as ``#n``, the document is no match, a tombstone stays."""
    rng = random.Random(5)
    a = text(rng)
    ix.run([{"id": "a", "text": a}, {"id": "b", "text": variant(rng, a)}])
    num_a = ix.num("a")
    ix.run([{"id": "a", "op": "delete"}])
    ix.run([{"id": "c", "text": variant(rng, a)}])
    got = ix.alerts()
    assert [(x["id"], x["cluster"]) for x in got] == [("b", "a"), ("c", f"#{num_a}")]
    assert [m[0] for m in json.loads(got[1]["matches"])] == ["b"]
    assert ix.num("a") == 0 and ix.snapshot()["tombstones"]["a"].endswith(f" {num_a}")


def case_append(ix: Index) -> None:
    """An append extends a document: the whole text matches it."""
    rng = random.Random(6)
    part1, part2 = text(rng, 40), text(rng, 40)
    ix.run([{"id": "log", "text": part1}, {"id": "log", "op": "append", "text": part2}])
    ix.run([{"id": "copy", "text": part1 + "\n" + part2}])
    assert [(a["id"], a["duplicate_of"], a["similarity"]) for a in ix.alerts()] == [("copy", "log", "1.0000")]


def case_query(ix: Index) -> None:
    """A query's verdict goes to its reply stream; nothing of the index changes."""
    rng = random.Random(8)
    a = text(rng)
    ix.run([{"id": "a", "text": a}])
    before = {k: v for k, v in ix.snapshot().items() if k not in ("streams", "seen", "counters")}
    q = variant(rng, a)
    ix.run([{"id": "q", "op": "query", "text": q, "reply_to": "r1"}])
    after = {k: v for k, v in ix.snapshot().items() if k not in ("streams", "seen", "counters")}
    assert after == before
    (verdict,) = ix.stream(ix.keys.reply("r1"))
    assert (verdict["duplicate"], verdict["duplicate_of"], verdict["cluster"]) == ("1", "a", "a")
    assert float(verdict["similarity"]) == pytest.approx(jaccard(a, q), abs=1e-4)
    assert ix.alerts() == []


def case_redelivery(ix: Index) -> None:
    """A batch delivered again changes nothing and emits nothing new."""
    rng = random.Random(9)
    a = text(rng)
    raw = ix.entries([{"id": "a", "text": a}, {"id": "b", "text": variant(rng, a)}, {"text": "no id"}])
    ix.process(raw)
    state = ix.snapshot()
    again = ix.process(raw)
    assert again.ack == [e for e, _ in raw]
    after = ix.snapshot()
    assert after["streams"] == state["streams"] and after["records"] == state["records"]
    assert after["buckets"] == state["buckets"] and len(ix.alerts()) == 1


def case_too_large(ix: Index) -> None:
    """A document that would be stored larger than max_stored_bytes is dead-lettered, not stored."""
    ix.setup(max_stored_bytes=1024)
    rng = random.Random(10)
    ix.run([{"id": "big", "text": text(rng, 400)}, {"id": "small", "text": text(rng, 20)}])
    (letter,) = ix.stream(ix.keys.dead)
    assert (letter["error"], letter["id"]) == ("doc_too_large", "big")
    assert ix.gw.load_records([ix.num("big")]) == {ix.num("big"): None} and ix.num("small") > 0


def case_too_large_new_ids(ix: Index) -> None:
    """New ids whose documents would be stored larger than max_stored_bytes leave nothing behind (no id, no
    record, no bucket), whether new since ever or since a delete; an id with an indexed version keeps it and
    its record when its update is refused; a redelivery of a refused entry changes nothing."""
    ix.setup(max_stored_bytes=1024)
    rng = random.Random(34)
    ix.run([{"id": "kept", "text": text(rng, 20)}, {"id": "gone", "text": text(rng, 20)}])
    ix.run([{"id": "gone", "op": "delete"}])
    kept, before = ix.num("kept"), ix.snapshot()["records"]
    raw = ix.run(
        [
            *({"id": f"big{i}", "text": text(rng, 400)} for i in range(5)),
            {"id": "kept", "text": text(rng, 400)},
            {"id": "gone", "text": text(rng, 400)},
        ]
    )
    assert len(ix.stream(ix.keys.dead)) == 7
    state = ix.snapshot()
    assert state["ids"] == {"kept": kept} and state["records"] == before
    assert set(state["tombstones"]) == {"gone"}
    ix.process(raw[:2])
    assert ix.snapshot()["ids"] == {"kept": kept} and len(ix.stream(ix.keys.dead)) == 7


def case_in_batch(ix: Index) -> None:
    """Copies in one batch: each later copy names the earlier ones."""
    rng = random.Random(2)
    base = text(rng)
    ix.run([{"id": f"c{i}", "text": variant(rng, base) if i else base} for i in range(4)])
    got = {a["id"]: {m[0] for m in json.loads(a["matches"])} for a in ix.alerts()}
    assert got == {"c1": {"c0"}, "c2": {"c0", "c1"}, "c3": {"c0", "c1", "c2"}}
    assert {a["cluster"] for a in ix.alerts()} == {"c0"}


def case_crowded(ix: Index) -> None:
    """Different documents crowding small buckets (one row per band, word shingles of a small vocabulary):
    full buckets read and not joined, refused joins, evictions."""
    ix.setup(shingle="word:1", bands=64, rows=1, num_perm=64, bucket_members=4, threshold=0.7)
    rng = random.Random(12)
    docs = []
    for i in range(40):
        t = text(rng, 30) if i % 4 else (docs[-1]["text"] if docs else text(rng, 30))
        docs.append({"id": f"d{i}", "text": t})
    ix.run(docs, batch=8)
    assert max(len(m) for m in ix.buckets().values()) <= 4
    assert ix.alerts()


def case_rebuild_generation(ix: Index) -> None:
    """A generation being built: no outputs, no bound on new members a call, nothing forgotten."""
    ix.setup(serving=False, bucket_members=8)
    base = text(random.Random(13), 60)
    ix.run([{"id": f"c{i}", "text": base} for i in range(6)] + [{"id": "c0", "op": "delete"}])
    assert ix.snapshot()["streams"] == {} and ix.num("c0") > 0
    assert max(len(m) for m in ix.buckets().values()) == 5


def case_redelivered_flood(ix: Index) -> None:
    """A flood's batch delivered again: its copies rejoin buckets that evicted most of them (a REJOIN of a
    document no longer in a bucket reads only the older ids) and alert nothing new."""
    ix.setup(bucket_members=6)
    base = text(random.Random(14), 60)
    raw = ix.entries([{"id": f"c{i}", "text": base} for i in range(12)])
    ix.process(raw[:4])
    ix.process(raw[4:])
    alerts = ix.alerts()
    assert ix.process(raw[4:]).ack == [e for e, _ in raw[4:]] and ix.alerts() == alerts
    assert max(len(m) for m in ix.buckets().values()) <= 6


def case_update_in_batch(ix: Index) -> None:
    """In one batch a document leaves the buckets another one joins, and a third one joins after both; the
    one that read it in a bucket is compared with what the batch makes of it (no match)."""
    rng = random.Random(15)
    x, y = text(rng), text(rng)
    ix.run([{"id": "a", "text": x}])
    ix.run([{"id": "b", "text": x}, {"id": "a", "text": y}, {"id": "c", "text": x}])
    assert [(al["id"], al["duplicate_of"]) for al in ix.alerts()] == [("c", "b")]


def case_changed_record(ix: Index) -> None:
    """A write whose record changed since it was read (another consumer's): nothing of it is written."""
    from dedupd.index.buckets import DocWrite

    ix.run([{"id": "a", "text": text(random.Random(16))}])
    before = ix.snapshot()
    num = ix.num("a")
    bands = ix.gw.fingerprinter.band_hashes(ix.gw.fingerprinter.compute([text(random.Random(17))]))[0]
    write = DocWrite(num, add=bands, record=b"never stored", expected="1-0")
    found, hits = ix.gw.apply(ix.gw.prepare([write, DocWrite(num, expected="")]))
    assert found == [None, None] and not hits.key.size and ix.snapshot() == before


def case_cluster_members(ix: Index) -> None:
    """A cluster's members, in pages of 2 from any member: each once; a deleted member (the first one
    among them) no longer, the others under the name '#n'; two clusters merged by an update, as one; a
    cursor whose member was deleted refused."""
    from dedupd.index.cluster_page import CursorError

    rng = random.Random(18)
    a, b = text(rng), text(rng)
    ix.run([{"id": f"a{i}", "text": variant(rng, a) if i else a} for i in range(5)])
    ix.run([{"id": f"b{i}", "text": variant(rng, b) if i else b} for i in range(3)])

    def listed(doc_id: str) -> tuple[list[str], set[str]]:
        page = ix.gw.cluster_page(doc_id, None, 2)  # type: ignore[attr-defined]
        got, names = list(page.members), {page.cluster}
        while page.next is not None:
            page = ix.gw.cluster_page(doc_id, page.next, 2)  # type: ignore[attr-defined]
            got += page.members
            names.add(page.cluster)
        return got, names

    assert [sorted(listed(f"a{i}")[0]) for i in range(5)] == [[f"a{i}" for i in range(5)]] * 5
    first = ix.num("a0")
    ix.run([{"id": "a0", "op": "delete"}, {"id": "a3", "op": "delete"}])
    assert listed("a4") == (["a4", "a2", "a1"], {f"#{first}"})
    ix.run([{"id": "b0", "text": variant(rng, a)}])  # b's first document joins a's cluster: b with it
    got, names = listed("b2")
    assert sorted(got) == ["a1", "a2", "a4", "b0", "b1", "b2"] and names == {f"#{first}"}
    # a page stops before a member that links no other (b0 links b1 and b2: deleted, it would stay, walked)
    k = next(k for k in range(1, len(got)) if got[k] != "b0")
    stop = ix.gw.cluster_page("b2", None, k).next  # type: ignore[attr-defined]
    assert stop == str(ix.num(got[k]))
    ix.run([{"id": got[k], "op": "delete"}])
    with pytest.raises(CursorError):
        ix.gw.cluster_page("b2", stop, k)  # type: ignore[attr-defined]


def case_near_miss(ix: Index) -> None:
    """A star whose base has left every bucket (its variants, below the threshold to one another, crowd it
    out): each later variant nearly matches the variants it reads and finds the base among the cluster's
    representatives; a union merges two clusters' representatives into the older root's; a deleted
    representative is named no more."""
    ix.setup(representatives=3)
    rng = random.Random(19)
    base, other = text(rng, 80), text(rng)
    ix.run([{"id": "o0", "text": other}, {"id": "o1", "text": variant(rng, other, 2)}])
    ix.run([{"id": "base", "text": base}])
    variants = [{"id": f"v{i:02}", "text": t} for i, t in enumerate(star(rng, base, 16))]
    ix.run(variants, batch=2)
    named = {a["id"]: {m[0] for m in json.loads(a["matches"])} for a in ix.alerts()}
    assert all("base" in named[v["id"]] for v in variants), named
    reps = ix.snapshot()["reps"]
    assert sorted(reps) == [ix.num("o0"), ix.num("base")] and reps[ix.num("base")][0][0] == ix.num("base")
    ix.run([{"id": "o1", "text": variant(rng, base, 1)}])  # o1 joins the star: the clusters merge
    reps = ix.snapshot()["reps"]
    # (one list, the older root's: the base, matched by every variant, first; o0, matched by o1, in it)
    assert list(reps) == [ix.num("o0")] and ix.num("o0") in [m for m, _ in reps[ix.num("o0")]]
    assert reps[ix.num("o0")][0][0] == ix.num("base")
    ix.run([{"id": "base", "op": "delete"}])
    assert [m for m, _ in ix.snapshot()["reps"][ix.num("o0")]] == [m for m, _ in reps[ix.num("o0")][1:]]
    ix.run([{"id": "late", "text": star(rng, base, 1)[0]}])
    assert all(m[0] != "base" for a in ix.alerts() if a["id"] == "late" for m in json.loads(a["matches"]))


def case_crowded_out(ix: Index) -> None:
    """A crowd of a victim's sub-threshold neighbours fills its buckets before it comes (buckets of 4): the victim
    takes places in them all the same (lua.DISPLACE), members with a smaller deficit giving theirs up, until its
    deficit is within one of theirs; a later near-copy names it."""
    ix.setup(bucket_members=4)
    rng = random.Random(20)
    v = text(rng, 100).split()

    def edited(width: int) -> str:
        out = list(v)
        lo = rng.randrange(1, len(v) - width - 1)
        out[lo : lo + width] = [f"n{rng.randrange(10**6)}" for _ in range(width)]
        return " ".join(out)

    ix.run([{"id": f"n{i:02}", "text": edited(10)} for i in range(60)], batch=16)
    crowded = ix.buckets()
    displace = ix.gw.displace
    ix.gw.displace = lambda exchange, pl: None  # type: ignore[method-assign]  # (a daemon killed before it)
    raw = ix.run([{"id": "V", "text": " ".join(v)}])
    V = ix.num("V")
    unplaced = sum(V in m for m in ix.buckets().values())
    ix.gw.displace = displace  # type: ignore[method-assign]
    ix.process(raw, {raw[0][0]: 2})  # redelivered: its full buckets are reported again and it takes places
    assert sum(V in m for m in ix.buckets().values()) > unplaced
    placed = {k: v for k, v in ix.snapshot().items() if k != "counters"}
    ix.process(raw, {raw[0][0]: 3})  # again: nothing more taken, no deficit counted twice
    assert {k: v for k, v in ix.snapshot().items() if k != "counters"} == placed
    held = {b: m for b, m in ix.buckets().items() if V in m}
    bands = ix.gw.spec.bands
    assert len(held) > bands // 2 and all(len(m) <= 4 for m in ix.buckets().values())
    displaced = [b for b in held if len(crowded.get(b, [])) == 4]
    assert displaced and all(len(held[b]) == 4 for b in displaced)  # each full one gave up one member
    deficits = ix.snapshot()["deficits"]
    assert deficits.get(V, 0) == bands - len(held)  # the buckets it is not in
    fp = ix.gw.fingerprinter
    bands_of_v = fp.band_hashes(fp.compute([" ".join(v)]))[0]
    names, name_of, fields = bucket_keys(
        column_bands(bands_of_v.size, bands), bands_of_v, ix.gw._shift, ix.gw.spec.shard_bits, ix.gw._names
    )
    now = ix.buckets()
    for at, f in zip(name_of.tolist(), fields.tolist(), strict=True):  # shared out evenly: where V is not,
        members = now[(names[at], int(f))]  # nobody has 2 fewer buckets than V
        assert V in members or min(deficits.get(m, 0) for m in members) >= deficits[V] - 1
    ix.run([{"id": "V'", "text": edited(2)}])
    assert [a["duplicate_of"] for a in ix.alerts() if a["id"] == "V'"] == ["V"]


def case_retention(ix: Index) -> None:
    """A count window: each step expires the least recently touched documents beyond it as a delete would,
    but leaves no tombstone (its id pushed again is a new document); a document named by a later alert is
    touched again and stays; a step abandoned after its claim (a daemon killed) is taken over once its
    claim lapses, and its documents are expired once."""
    ix.setup(max_documents=6)
    rng = random.Random(31)
    texts = [text(rng) for _ in range(12)]
    ix.run([{"id": f"d{i}", "text": t} for i, t in enumerate(texts[:8])], batch=4)
    first = ix.num("d0")
    done = expire_step(ix.gw, 100, 60_000)
    assert (done.expired, done.backlog) == (2, 0)
    snap = ix.snapshot()
    assert sorted(snap["ids"]) == [f"d{i}" for i in range(2, 8)] and not snap["tombstones"]
    assert len(snap["records"]) == 6 and len(snap["touched"]) == 6
    assert not any(first in b for b in snap["buckets"].values())
    ix.run([{"id": "copy2", "text": variant(rng, texts[2])}])  # names d2, which lives on
    ix.run([{"id": f"d{i}", "text": t} for i, t in enumerate(texts[8:], start=8)])
    claim = ix.gw.claim_expiry(100, 0)  # a daemon claims, then dies: its claim lapses at once
    assert len(claim.nums) == 5 and ix.num("d2") not in claim.nums
    done = expire_step(ix.gw, 100, 60_000)  # another takes it over
    assert done.expired == 5
    assert sorted(ix.snapshot()["ids"]) == sorted(["d2", "copy2", "d8", "d9", "d10", "d11"])
    assert ix.snapshot()["claims"] == (set(), {})
    ix.run([{"id": "d0", "text": texts[0]}])  # pushed again after it expired: a new document
    assert ix.num("d0") not in (0, first) and ix.snapshot()["expired"] == 7


def case_refused_touches_nothing(ix: Index) -> None:
    """A window of 2: an append that would store "old" larger than max_stored_bytes, and an upsert of a new
    document too large to store, are dead-lettered and touch nothing: "old" stays the least recently touched
    and is the one that expires; the refused new id has no touch time (it holds no document)."""
    ix.setup(max_documents=2, max_stored_bytes=1024)
    rng = random.Random(33)
    ix.run([{"id": "old", "text": text(rng, 20)}, {"id": "a", "text": text(rng, 20)}])
    time.sleep(0.005)  # (the entries below come at a later millisecond)
    ix.run([{"id": "old", "op": "append", "text": text(rng, 400)}, {"id": "big", "text": text(rng, 400)}])
    assert sorted(x["id"] for x in ix.stream(ix.keys.dead)) == ["big", "old"]
    assert ix.snapshot()["touched"] == {ix.num("old"), ix.num("a")}
    time.sleep(0.005)
    ix.run([{"id": "b", "text": text(rng, 20)}])
    assert expire_step(ix.gw, 100, 60_000).expired == 1
    assert ix.num("old") == 0 and ix.num("a") > 0 and ix.num("b") > 0


def case_expired_root(ix: Index) -> None:
    """The document a cluster is named after expires while copies of it live: alerts, pages and query
    verdicts go on naming the cluster after it (its name kept in its root's gone node, as a deleted root's is not: case_delete);
    once its last member expired, nothing of the cluster is left."""
    ix.setup(max_documents=3, refresh_on_duplicate=False)
    rng = random.Random(32)
    a = text(rng)
    ix.run([{"id": "a", "text": a}, {"id": "b", "text": variant(rng, a)}], batch=1)
    ix.run([{"id": f"o{i}", "text": text(rng)} for i in range(2)])
    assert expire_step(ix.gw, 100, 60_000).expired == 1 and ix.num("a") == 0
    ix.run([{"id": "c", "text": variant(rng, a)}])
    assert [(x["id"], x["cluster"]) for x in ix.alerts()] == [("b", "a"), ("c", "a")]
    page = ix.gw.cluster_page("c")  # type: ignore[attr-defined]
    assert (sorted(page.members), page.cluster) == (["b", "c"], "a")
    ix.run([{"id": "q", "op": "query", "text": variant(rng, a), "reply_to": "r1"}])
    assert ix.stream(ix.keys.reply("r1"))[0]["cluster"] == "a"
    ix.run([{"id": f"p{i}", "text": text(rng)} for i in range(3)])
    assert expire_step(ix.gw, 100, 60_000).expired == 4 and ix.num("c") == 0
    assert ix.snapshot()["uf"] == ({}, {}, {}, {})


CASES: dict[str, Callable[[Index], None]] = {
    name.removeprefix("case_"): f for name, f in dict(globals()).items() if name.startswith("case_")
}


@pytest.mark.parametrize("case", list(CASES))
def test_case(index: Index, case: str) -> None:
    CASES[case](index)


@pytest.mark.parametrize("case", list(CASES))
def test_the_twin_holds_what_redis_holds(r: redis.Redis, case: str) -> None:
    """The same case on both: records (bytes), buckets (members in order), ids, tombstones, the union-find
    (parents, children counts, gone nodes, rings), every stream's entries, markers and counters all equal."""
    twin, real = Index("memory", None), Index("redis", r)
    CASES[case](twin)
    CASES[case](real)
    assert twin.snapshot() == real.snapshot()


def test_the_twin_imports_no_redis() -> None:
    code = "import sys, dedupd.index.memory; print(sorted(m for m in sys.modules if 'redis' in m))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert run.stdout.strip() == "[]"


def test_the_layer_gate_follows_the_twins_imports(tmp_path: Path) -> None:
    """scripts/check_layers.py: a module the twin imports that imports a Redis client is a violation."""
    import importlib.util
    import shutil

    package = Path(
        shutil.copytree(ROOT / "dedupd", tmp_path / "dedupd", ignore=shutil.ignore_patterns("__pycache__"))
    )
    spec = importlib.util.spec_from_file_location("check_layers", ROOT / "scripts" / "check_layers.py")
    assert spec is not None and spec.loader is not None
    checker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(checker)
    assert checker.check(package) == []
    path = package / "index" / "memory_scripts.py"
    path.write_text(path.read_text() + "\nfrom dedupd.index import gateway  # planted\n")
    problems = checker.check(package)
    assert any(
        "dedupd.index.memory imports redis" in p and "through dedupd.index.gateway" in p for p in problems
    ), problems
