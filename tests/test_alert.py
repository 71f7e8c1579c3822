"""The one alert type: what the daemon writes (Alert.fields) reads back (Alert.from_fields), and reading it back
shows users exactly what it showed before Alert.to_dict existed (decode_alert, `dedupd alerts --json`,
Client.alerts)."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
import redis
from click.testing import CliRunner
from helpers import drain, make_daemon
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dedupd.client import Client
from dedupd.daemon.alert import Alert
from dedupd.index.keys import Keys
from dedupd.index.verdict import Match
from dedupd.ops.alerts import decode_alert
from dedupd.similarity.matches import Found

KEYS = Keys()


def old_decode_alert(entry_id: bytes | str, fields: dict[bytes, bytes]) -> dict[str, Any]:
    """decode_alert as it was before Alert.to_dict (dedupd/ops/alerts.py at b8919c1), kept as the reference."""

    def _text(raw: bytes) -> str:
        return raw.decode("utf-8", "backslashreplace")

    out: dict[str, Any] = {"alert": entry_id.decode() if isinstance(entry_id, bytes) else entry_id}
    for k, v in fields.items():
        out[_text(k)] = _text(v)
    if "matches" in out:
        with contextlib.suppress(ValueError):
            out["matches"] = json.loads(out["matches"])
    if "similarity" in out:
        with contextlib.suppress(ValueError):
            out["similarity"] = float(out["similarity"])
    if "meta" in out:
        with contextlib.suppress(ValueError):
            out["meta"] = json.loads(out["meta"])
    return out


def entry(alert: Alert) -> dict[bytes, bytes]:
    """The alert's entry as a client returning bytes reads it."""
    f = alert.fields()
    return {k.encode(): v.encode() for k, v in zip(f[::2], f[1::2], strict=True)}


def same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Equal values, keys in the same order, the same JSON (1 and 1.0 differ): what --json prints."""
    return a == b and json.dumps(a, ensure_ascii=False) == json.dumps(b, ensure_ascii=False)


ids = st.one_of(
    st.sampled_from(
        ['a "quoted" \\ id', "b-é—✓", "naïve\u00a0ünïcødé", "日本語", "emoji 🐍", "", "\x00\n\t"]
    ),
    st.text(max_size=20),
)
similarities = st.floats(min_value=0.0, max_value=1.0)
metas = st.none() | st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=3).map(
    lambda d: json.dumps(d, ensure_ascii=False)
)
alerts = st.builds(
    Alert,
    ids,
    st.lists(st.builds(Found, ids, similarities, st.integers(1, 2**40)), min_size=1, max_size=12),
    ids,
    st.from_regex(r"\A[0-9]{1,13}-[0-9]{1,3}\Z"),
    st.sampled_from(["exact", "signature"]),
    st.none() | ids,
    metas,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(alerts, st.from_regex(r"\A[0-9]{1,13}-[0-9]{1,3}\Z"))
def test_an_alert_reads_back_as_written(alert: Alert, entry_id: str) -> None:
    back = Alert.from_fields(entry_id.encode(), entry(alert))
    rounded = tuple(Match(m.id, round(m.similarity, 4)) for m in alert.matches)  # the stream's precision
    want = Alert(
        alert.doc_id, rounded, alert.cluster, alert.input, alert.verify, alert.source, alert.meta, entry_id
    )
    assert back == want
    assert back.fields() == alert.fields()  # byte for byte the same entry again
    assert Alert.from_fields(entry_id, entry(back)) == back
    assert same(back.to_dict(), old_decode_alert(entry_id, entry(alert)))  # what users saw before
    assert same(decode_alert(entry_id, entry(alert)), back.to_dict())


def test_the_daemon_keeps_no_integer_id_in_an_alert() -> None:
    alert = Alert("b", [Found("a", 0.9, 7)], "a", "1-0", "exact", None, None)
    assert alert.matches == (Match("a", 0.9),) and alert.entry_id is None
    assert (alert.duplicate_of, alert.similarity) == ("a", 0.9)
    assert alert.to_dict()["alert"] is None  # not written yet


BASE = (
    "the quick brown fox jumps over the lazy dog while the cat sleeps on the warm mat by the door today and "
    "the birds sing in the tall green trees of the old park near the river bank every single morning before "
    "the sun rises over the distant hills and the farmers walk out into their wide golden fields to start the "
    "long working day"
)
A = 'a "quoted" \\ id'
META = {"lang": "en", "n": [1, 2.5, None], "q": 'é"'}
# what decode_alert gave for these alerts before Alert.to_dict existed (at b8919c1), "alert" aside
EXPECTED = [
    {
        "id": "b-é—✓",
        "duplicate_of": A,
        "similarity": 0.9091,
        "matches": [[A, 0.9091]],
        "cluster": A,
        "input": "1700000000000-1",
        "verify": "exact",
    },
    {
        "id": "c",
        "duplicate_of": A,
        "similarity": 0.9091,
        "matches": [[A, 0.9091], ["b-é—✓", 0.8261]],
        "cluster": A,
        "input": "1700000000000-2",
        "verify": "exact",
        "source": "wire ☃",
        "meta": META,
    },
]


def test_a_real_alert_reads_as_it_did(r: redis.Redis, redis_url: str) -> None:
    r.xadd(KEYS.docs, {"id": A, "text": BASE}, id="1700000000000-0")
    r.xadd(KEYS.docs, {"id": "b-é—✓", "text": BASE.replace("warm", "cold")}, id="1700000000000-1")
    c = {"id": "c", "text": BASE.replace("today", "tonight"), "source": "wire ☃"}
    r.xadd(KEYS.docs, {**c, "meta": json.dumps(META, ensure_ascii=False)}, id="1700000000000-2")
    drain(make_daemon(redis_url))
    written = r.xrange(KEYS.alerts)
    expected = [{"alert": e.decode(), **d} for (e, _), d in zip(written, EXPECTED, strict=True)]
    read = [Alert.from_fields(e, f) for e, f in written]  # the daemon's alerts, not a fallback
    assert all(same(a.to_dict(), d) for a, d in zip(read, expected, strict=True))
    assert [entry(a) for a in read] == [f for _, f in written]
    assert all(same(decode_alert(e, f), d) for (e, f), d in zip(written, expected, strict=True))
    with Client.connect(redis_url) as client:
        got = list(client.alerts())
    assert all(same(a, d) for a, d in zip(got, expected, strict=True)) and len(got) == 2
    from dedupd.cli import cli

    env = {"DEDUPD_REDIS_URL": redis_url}
    out = CliRunner().invoke(cli, ["alerts", "--json"], env=env, catch_exceptions=False).output
    assert out.splitlines() == [json.dumps(d, ensure_ascii=False) for d in expected]  # byte for byte


@pytest.mark.parametrize(
    "fields",
    [
        # hand-written, fields out of the daemon's order and similarity not as it writes it
        {"id": "d1", "duplicate_of": "a", "similarity": "0.9", "matches": '[["a", 0.9]]', "cluster": "a"},
        {"id": "x1", "duplicate_of": "a", "similarity": "0.9", "cluster": "a"},  # no matches
        {"id": b"\xff\xfe", "matches": "nope", "similarity": "x", "meta": "{bad"},  # not UTF-8, not JSON
        {"id": "e", "duplicate_of": "a", "similarity": "1.0000", "matches": '[["a", 1]]', "cluster": "a",
         "input": "1-0", "verify": "exact"},  # a similarity 1, not 1.0: shown as an int, as it was
        {"id": "b", "duplicate_of": "z", "similarity": "0.9000", "matches": '[["a", 0.9]]', "cluster": "a",
         "input": "1-0", "verify": "exact"},  # duplicate_of is not the best match
        {"id": "b", "duplicate_of": "a", "similarity": "0.9000", "matches": '[["a", 0.9]]', "cluster": "a",
         "input": "1-0", "verify": "exact", "extra": "field"},
        {"id": "b", "duplicate_of": "a", "similarity": "0.9000", "matches": "[]", "cluster": "a",
         "input": "1-0", "verify": "exact"},
    ],
)  # fmt: skip
def test_any_other_entry_reads_field_by_field_as_before(fields: dict[str, Any]) -> None:
    raw = {k.encode(): v if isinstance(v, bytes) else v.encode() for k, v in fields.items()}
    with pytest.raises(ValueError, match="not an alert entry"):
        Alert.from_fields("5-0", raw)
    assert same(decode_alert(b"5-0", raw), old_decode_alert(b"5-0", raw))
