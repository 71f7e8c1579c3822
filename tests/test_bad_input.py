"""Bad input, property-based: whatever the field map, an entry is processed or dead-lettered with a code,
the daemon stays up, nothing stays pending, and no other document's keys change."""

from __future__ import annotations

import random
from typing import Any

import redis
from helpers import alerts, dead, drain, make_daemon, pending, push, text, variant
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dedupd.daemon.entries import CODES
from dedupd.daemon.loop import Daemon
from dedupd.index.keys import Keys

SENTINEL = "\x00sentinel\x00"
NASTY_IDS = [
    "",
    "x" * 65,
    "é" * 40,
    "a:b",
    "{dedupd:ids}:fwd",
    "}{",
    "with space",
    "line\nbreak",
    "dedupd:doc:1",
    "*",
    "\r\n",
    "\t",
    "0",
    "-1",
    "1-0",
    "{",
    "}",
    ":",
]
JSONS = [
    "[1,",
    '["a","b"]',
    '{"k": 1}',
    "[1, 2]",
    "null",
    '["\\ud800"]',
    '"str"',
    "{}",
    "[]",
    '{"a": [1, {}]}',
    "\x00",
    "NaN",
    '{"k": NaN}',
    "[" * 2000 + "]" * 2000,
]


def _b(v: str | bytes) -> bytes:
    return v.encode("utf-8") if isinstance(v, str) else v


strings = st.one_of(st.text(max_size=30), st.binary(max_size=30)).map(_b)
ids = st.one_of(st.sampled_from(NASTY_IDS).map(_b), strings, st.sampled_from([b"\xff", b"\xc3", b"ok\x80"]))
texts = st.one_of(
    st.text(max_size=300).map(_b),
    st.binary(max_size=300),
    st.sampled_from(
        [
            b"\xff\xfe bad",
            b"x" * 2001,
            ("lorem ipsum dolor " * 200).encode(),
            ("lorem ipsum dolor " * 110)[:1999].encode(),
            b"",
            b" \n\t ",
            "\u200b\u0301".encode(),
        ]
    ),
)
ops = st.sampled_from(
    [b"upsert", b"append", b"delete", b"APPEND", b" delete ", b"merge", b"", b"\xc3", b"x" * 40]
)
jsons = st.one_of(st.sampled_from(JSONS).map(_b), strings)
known = st.fixed_dictionaries(
    {},
    optional={
        b"id": ids,
        b"text": texts,
        b"op": ops,
        b"source": strings,
        b"items": jsons,
        b"meta": jsons,
        b"error": strings,
        b"input": strings,
    },
)
arbitrary = st.dictionaries(st.binary(max_size=8), st.binary(max_size=60), max_size=5)
field_maps = st.one_of(known, known, arbitrary).filter(bool)


def _snapshot(r: redis.Redis, daemon: Daemon, num: int) -> tuple[Any, ...]:
    """The sentinel's stored record (raw key dump, and as the index reads it) and its id mapping."""
    rec = daemon.gateway.load_records([num])[num]
    assert rec is not None
    fp = rec.fingerprint
    raw = r.dump(Keys().doc(num)) if hasattr(Keys, "doc") else None
    return (
        raw,
        r.hget(Keys().id_forward, SENTINEL),
        rec.doc_id,
        rec.entry_id,
        rec.source,
        fp.raw.tobytes(),
        fp.shingles.tobytes(),
        fp.tail,
        fp.n_units,
    )


def test_arbitrary_entries_are_processed_or_dead_lettered(r: redis.Redis, redis_url: str) -> None:
    rng = random.Random(51)
    sentinel_text = text(rng, 80)
    daemon = make_daemon(redis_url, max_doc_bytes=2000, max_id_bytes=64, baskets="words", batch_size=7)
    push(r, [{"id": SENTINEL, "text": sentinel_text, "source": "s", "meta": {"k": "v"}}])
    drain(daemon)
    num = int(r.hget(Keys().id_forward, SENTINEL))
    before = _snapshot(r, daemon, num)
    seen_dead = 0

    @settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(st.lists(field_maps, min_size=1, max_size=9))
    def check(batch: list[dict[bytes, bytes]]) -> None:
        nonlocal seen_dead
        pushed = [r.xadd(Keys().docs, fields).decode() for fields in batch]  # type: ignore[arg-type]
        processed = int(r.hget(Keys().counters, "processed") or 0)
        drain(daemon)  # raises if the daemon would stop
        assert pending(r) == 0
        letters = dead(r)[seen_dead:]
        seen_dead += len(letters)
        for letter in letters:
            assert letter[b"error"].decode() in CODES and letter[b"detail"]
            assert letter[b"input"].decode() in pushed
        dead_inputs = {letter[b"input"].decode() for letter in letters}
        assert len(dead_inputs) == len(letters)  # one dead letter per entry
        assert int(r.hget(Keys().counters, "processed") or 0) - processed == len(pushed) - len(letters)
        assert _snapshot(r, daemon, num) == before  # the sentinel's record and id mapping are untouched

    check()
    # the sentinel is still indexed as before: a near copy finds it
    push(r, [{"id": "probe", "text": variant(rng, sentinel_text)}])
    drain(daemon)
    assert [a["duplicate_of"] for a in alerts(r) if a["id"] == "probe"] == [SENTINEL]


def test_a_wide_entry_without_id_reaches_the_dead_letters(r: redis.Redis, redis_url: str) -> None:
    """5,000 fields and no id: the dead letter is written with its marker, keeps what fits in
    dead_letter_max_bytes (at most 1,000 fields) and says what it cut; a redelivery writes nothing more."""
    fields = {f"f{i}": f"value {i}" for i in range(5000)}
    r.xadd(Keys().docs, fields)
    daemon = make_daemon(redis_url)
    drain(daemon)
    letters = dead(r)
    assert len(letters) == 1 and letters[0][b"error"] == b"missing_id" and pending(r) == 0
    assert (
        letters[0][b"f0"] == b"value 0" and len(letters[0]) == 1000 + 4
    )  # 1,000 kept + error, detail, input, truncated
    assert letters[0][b"truncated"].startswith(b"4000 field(s) cut")
    entry = [(e.decode(), f) for e, f in r.xrange(Keys().docs)]
    daemon.processor.process(entry)  # redelivered: nothing more
    assert len(dead(r)) == 1


def test_a_huge_field_is_cut_in_the_dead_letter(r: redis.Redis, redis_url: str) -> None:
    r.xadd(Keys().docs, {"id": "big", "text": "t", "op": "explode", "junk": "x" * 3_000_000})
    drain(make_daemon(redis_url, dead_letter_max_bytes=4096))
    (letter,) = dead(r)
    assert letter[b"error"] == b"unknown_op" and letter[b"id"] == b"big"
    assert (
        sum(
            len(k) + len(v)
            for k, v in letter.items()
            if k not in (b"error", b"detail", b"input", b"truncated")
        )
        <= 4096
    )
    assert b"byte(s) left out" in letter[b"truncated"]
