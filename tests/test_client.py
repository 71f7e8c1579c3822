"""The Python API (dedupd.Client) and ``op = query``: a query finds what an upsert would alert, and changes
nothing in the index; the docstring examples run."""

from __future__ import annotations

import doctest
import importlib
import random

import numpy as np
import pytest
import redis
from helpers import alerts, dead, drain, make_daemon, push, text, variant

from dedupd import Client, Verdict
from dedupd.index.keys import Keys

INDEX_PATTERNS = (b"dedupd:doc:*", b"dedupd:b:*", b"{dedupd:ids}:*", b"dedupd:meta")


def index_dump(r: redis.Redis) -> dict[bytes, bytes | None]:
    """Every key of the index (records, buckets, ids, tombstones, clusters, spec), serialised by DUMP."""
    return {k: r.dump(k) for pattern in INDEX_PATTERNS for k in r.scan_iter(match=pattern)}


@pytest.mark.parametrize("module", ["dedupd.client", "dedupd.index.verdict"])
def test_docstring_examples_run(redis_url: str, module: str) -> None:
    failures, tried = doctest.testmod(
        importlib.import_module(module), extraglobs={"redis_url": redis_url}, optionflags=doctest.ELLIPSIS
    )
    assert tried > 0 and failures == 0


def corpus(seed: int) -> list[dict[str, str]]:
    rng = random.Random(seed)
    docs = []
    for i in range(30):
        base = text(rng, 50)
        docs.append({"id": f"d{i}", "text": base})
        for j in range(i % 3):
            docs.append({"id": f"d{i}v{j}", "text": variant(rng, base, 1 + j)})
    return docs


def test_query_finds_what_an_upsert_would_alert_and_changes_nothing(r: redis.Redis, redis_url: str) -> None:
    rng = random.Random(5)
    docs = corpus(4)
    push(r, docs)
    daemon = make_daemon(redis_url)
    drain(daemon)
    probes = [variant(rng, d["text"], rng.randrange(0, 4)) for d in docs[::4]] + [text(rng, 50)]
    before = index_dump(r)
    with Client.connect(redis_url) as client:
        verdicts = client.query_many(probes, [f"q{i}" for i in range(len(probes))])
    assert index_dump(r) == before  # byte for byte
    assert any(v.duplicate for v in verdicts) and not verdicts[-1].duplicate
    n_alerts = len(alerts(r))
    push(r, [{"id": f"p{i}", "text": t} for i, t in enumerate(probes)])  # now insert them, one batch each
    drain(daemon)
    got = {a["id"]: a for a in alerts(r)[n_alerts:]}
    for i, v in enumerate(verdicts):
        alert = got.get(f"p{i}")
        earlier = [m for m in (alert["matches"] if alert else []) if not m[0].startswith("p")]
        assert [(m.id, round(m.similarity, 4)) for m in v.matches] == [(m[0], m[1]) for m in earlier], i
        if v.duplicate and alert is not None and earlier == alert["matches"]:
            assert v.cluster == alert["cluster"]


def test_query_through_the_stream_replies_and_changes_nothing(r: redis.Redis, redis_url: str) -> None:
    """`XADD dedupd:docs * op query reply_to NAME id ... text ...`: the verdict is on dedupd:reply:NAME (bounded,
    expiring), no alert, nothing in the index; a bad reply_to is dead-lettered."""
    rng = random.Random(6)
    base = text(rng, 60)
    push(r, [{"id": "orig", "text": base}, {"id": "orig2", "text": variant(rng, base, 2)}])
    daemon = make_daemon(redis_url)
    drain(daemon)
    before = index_dump(r)
    q1 = variant(rng, base)
    push(
        r,
        [
            {"id": "q1", "op": "query", "reply_to": "me", "text": q1},
            {"id": "q2", "op": "query", "reply_to": "me", "text": text(rng, 60)},
            {"id": "q3", "op": "query", "reply_to": "no such/name", "text": base},
            {"id": "q4", "op": "query", "text": base},
        ],
    )
    drain(daemon)
    assert index_dump(r) == before and len(alerts(r)) == 1  # orig2 ~ orig, from before: no new alert
    replies = [Verdict.from_fields(f) for _, f in r.xrange(Keys().reply("me"))]
    assert [(v.id, v.duplicate, v.duplicate_of) for v in replies] == [
        ("q1", True, "orig"),
        ("q2", False, None),
    ]
    assert replies[0].cluster == "orig" and replies[0].similarity is not None and replies[0].similarity > 0.8
    raw = r.xrange(Keys().reply("me"))[1][1]
    assert raw[b"duplicate"] == b"0" and b"cluster" not in raw and raw[b"input"]
    assert 0 < r.ttl(Keys().reply("me")) <= 3600
    assert [(f[b"id"], f[b"error"]) for f in dead(r)] == [(b"q3", b"bad_reply_to"), (b"q4", b"bad_reply_to")]
    assert r.hget(Keys().counters, "queries") == b"2"  # the two answered
    daemon.processor.process([(e.decode(), f) for e, f in r.xrange(Keys().docs)][-4:-2])  # redelivered
    assert len(r.xrange(Keys().reply("me"))) == 2  # once per query entry
    push(r, [{"id": "u1", "text": q1}])  # the same text as q1, upserted: its alert names the same matches
    drain(daemon)
    upserted = alerts(r)[-1]
    assert upserted["id"] == "u1" and replies[0].matches
    assert [[m.id, round(m.similarity, 4)] for m in replies[0].matches] == upserted["matches"]


def test_signature_uses_the_index_parameters(r: redis.Redis, redis_url: str) -> None:
    daemon = make_daemon(redis_url, num_perm=64, shingle="word:2")
    with Client.connect(redis_url) as client:
        spec = client.index_spec()
        assert spec is not None and (spec.num_perm, spec.shingle) == (64, "word:2")
        sig = client.signature("a rose is a rose is a rose")
    want = daemon.gateway.fingerprinter.compute(["a rose is a rose is a rose"])[0].signature
    assert sig.dtype == np.uint32 and np.array_equal(sig, want)


def test_push_checks_before_writing_and_reads_back(r: redis.Redis, redis_url: str) -> None:
    from dedupd import ConfigError

    with Client.connect(redis_url) as client:
        with pytest.raises(ConfigError, match="needs a 'text'"):
            client.push("x")
        with pytest.raises(ConfigError, match="not one of"):
            client.push("x", "t", op="frobnicate")
        assert r.xlen(Keys().docs) == 0  # nothing written
        client.push("a", "the same words in the same order", source="feed", meta={"k": 1}, items=["i"])
        client.push("b", "the same words in the same order")
        drain(make_daemon(redis_url))
        got = list(client.alerts())
        assert [(a["id"], a["duplicate_of"]) for a in got] == [("b", "a")]
        assert list(client.alerts(since=got[0]["alert"])) == [] and list(client.alerts(since="now")) == []
        client.push("c", "x" * 2000, meta={"too": "big"})
        drain(make_daemon(redis_url, max_doc_bytes=1000))
        assert [d["error"] for d in client.dead_letters()] == ["too_large"]


def test_cli_query_matches_the_upsert_alert_and_changes_nothing(r: redis.Redis, redis_url: str) -> None:
    """`dedupd query -` (a real process) gives, per document, the matches an upsert of it alerts, and leaves the
    index byte for byte as it was."""
    import json
    import os
    import subprocess
    import sys

    rng = random.Random(9)
    docs = corpus(8)
    push(r, docs)
    daemon = make_daemon(redis_url)
    drain(daemon)
    probes = [
        {"id": f"p{i}", "text": variant(rng, d["text"], rng.randrange(0, 3))} for i, d in enumerate(docs[::5])
    ]
    before = index_dump(r)
    env = {**os.environ, "DEDUPD_REDIS_URL": redis_url}
    res = subprocess.run(
        [sys.executable, "-m", "dedupd", "query", "-", "--json"],
        env=env,
        text=True,
        input="".join(json.dumps(p) + "\n" for p in probes),
        capture_output=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert index_dump(r) == before
    verdicts = {v["id"]: v for v in map(json.loads, res.stdout.splitlines())}
    assert len(verdicts) == len(probes) and any(v["duplicate"] for v in verdicts.values())
    n_alerts = len(alerts(r))
    push(r, probes)
    drain(daemon)
    got = {a["id"]: a for a in alerts(r)[n_alerts:]}
    for p in probes:
        earlier = [m for m in got[p["id"]]["matches"] if not m[0].startswith("p")] if p["id"] in got else []
        assert verdicts[p["id"]]["matches"] == earlier, p["id"]


def test_a_query_with_an_indexed_id_says_so(r: redis.Redis, redis_url: str) -> None:
    """A query carrying the id of an indexed document leaves that document out (as an upsert of the id
    would), and its verdict says the id is indexed, from the client and through the stream alike; a
    deleted document's id is not indexed any more."""
    rng = random.Random(11)
    a, far = text(rng, 60), text(rng, 60)
    near = variant(rng, far, 2)
    push(r, [{"id": "a", "text": a}, {"id": "far", "text": far}, {"id": "near", "text": near}])
    daemon = make_daemon(redis_url)
    drain(daemon)
    with Client.connect(redis_url) as client:
        alone, twin, new, anon = client.query_many([a, near, a, a], ["a", "near", "new", None])
        assert (alone.indexed, alone.duplicate) == (True, False)  # itself left out, nothing else near
        assert (twin.indexed, twin.duplicate_of) == (True, "far")  # itself left out, its near-duplicate found
        assert (new.indexed, new.duplicate_of) == (False, "a")
        assert anon.indexed is False and alone.to_dict()["indexed"] is True
        push(
            r,
            [
                {"id": "a", "op": "query", "reply_to": "me", "text": a},
                {"id": "zz", "op": "query", "reply_to": "me", "text": text(rng, 60)},
            ],
        )
        drain(daemon)
        raw = [f for _, f in r.xrange(Keys().reply("me"))]
        assert [(f[b"id"], f[b"indexed"], f[b"duplicate"]) for f in raw] == [
            (b"a", b"1", b"0"),
            (b"zz", b"0", b"0"),
        ]
        assert [Verdict.from_fields(f).indexed for f in raw] == [True, False]
        client.delete("a")
        drain(daemon)
        assert client.query(a, doc_id="a").indexed is False


def test_ids_are_checked_as_the_daemon_checks_them(r: redis.Redis, redis_url: str) -> None:
    """push, delete and query refuse an id the daemon would dead-letter (empty, longer than max_id_bytes in
    UTF-8 bytes, or not UTF-8) with the package's input error, its dead-letter code and a one-line message,
    before anything is written; the longest id the client accepts, the daemon indexes."""
    from dedupd import ConfigError, DocumentError, InputError

    with Client.connect(redis_url, max_id_bytes=8) as client:
        cases = [
            (
                lambda: client.push("x" * 9, "t"),
                "id_too_long",
                "field 'id' has 9 bytes, more than max_id_bytes = 8",
            ),
            (lambda: client.push("é" * 5, "t"), "id_too_long", "10 bytes"),
            (lambda: client.delete("y" * 300), "id_too_long", "300 bytes"),
            (lambda: client.query("t", doc_id="z" * 9), "id_too_long", "9 bytes"),
            (lambda: client.query_many(["t", "u"], ["ok", ""]), "missing_id", "missing or empty"),
            (lambda: client.push("", "t"), "missing_id", "missing or empty"),
            (lambda: client.push("\ud800", "t"), "bad_utf8", "lone surrogate"),
            (
                lambda: client.push_many([{"id": "ok", "text": "t"}, {"id": "q" * 9, "text": "t"}]),
                "id_too_long",
                "document 2: ",
            ),
        ]
        for call, code, said in cases:
            with pytest.raises(InputError) as got:
                call()
            assert isinstance(got.value, DocumentError) and isinstance(got.value, ConfigError)  # (as before)
            assert got.value.code == code
            assert said in str(got.value) and "\n" not in str(got.value)
        assert r.xlen(Keys().docs) == 0  # nothing written
        client.push("é" * 4, "the longest id: eight bytes")  # accepted by the client, so by the daemon
        drain(make_daemon(redis_url, max_id_bytes=8))
        assert dead(r) == [] and client.query("the longest id: eight bytes", doc_id="é" * 4).indexed
