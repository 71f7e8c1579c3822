"""Invisible characters end to end: copies with one in every word alert at similarity 1.00 through a daemon;
an index built with the older normalisation (its stored spec has no version) is refused by `dedupd serve`
with one line naming `dedupd rebuild`, and `dedupd rebuild` reshingles it under the new one."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys

import pytest
import redis
from helpers import alerts, drain, make_daemon, push, text

from dedupd.errors import ParameterMismatchError
from dedupd.index.generations import Generations
from dedupd.index.keys import Keys, Meta
from dedupd.similarity import normalization
from dedupd.similarity.normalization import NORMALIZATION

DEDUPD = [sys.executable, "-m", "dedupd"]

MARKS = {
    "zwsp": "\u200b",
    "zwj": "\u200d",
    "zwnj": "\u200c",
    "soft-hyphen": "\u00ad",
    "cgj": "\u034f",
    "rlm": "\u200f",
    "word-joiner": "\u2060",
    "bom": "\ufeff",
}
BIDI = {"rli-pdi": ("\u2067", "\u2069"), "rlo-pdf": ("\u202e", "\u202c"), "lre-pdf": ("\u202a", "\u202c")}


def in_every_word(words: str, mark: str) -> str:
    return " ".join(w[:1] + mark + w[1:] for w in words.split(" "))


def by_copy(r: redis.Redis) -> dict[str, tuple[str, str, dict[str, float]]]:
    """Each alerting document's best match, similarity, and all its matches."""
    return {
        a["id"]: (a["duplicate_of"], a["similarity"], {m[0]: m[1] for m in a["matches"]}) for a in alerts(r)
    }


def test_copies_with_an_invisible_character_in_every_word_alert_at_one(
    r: redis.Redis, redis_url: str
) -> None:
    rng = random.Random(29)
    docs, want = [], {}
    for name, mark in MARKS.items():
        original = text(rng, 40)
        docs += [
            {"id": f"{name}-original", "text": original},
            {"id": f"{name}-copy", "text": in_every_word(original, mark)},
        ]
        want[f"{name}-copy"] = f"{name}-original"
    for name, (left, right) in BIDI.items():
        original = text(rng, 40)
        copy = " ".join(left + w + right for w in original.split(" "))
        docs += [{"id": f"{name}-original", "text": original}, {"id": f"{name}-copy", "text": copy}]
        want[f"{name}-copy"] = f"{name}-original"
    push(r, docs)
    drain(make_daemon(redis_url))
    got = by_copy(r)
    assert {c: (best, sim) for c, (best, sim, _) in got.items()} == {
        c: (o, "1.0000") for c, o in want.items()
    }


def stored_spec(r: redis.Redis) -> dict[str, object]:
    raw = r.hget(Keys().meta, Meta.SPEC)
    assert raw is not None
    loaded: dict[str, object] = json.loads(raw)
    return loaded


def test_an_index_of_the_old_normalisation_is_refused_then_rebuilt(
    r: redis.Redis, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(30)
    original, other = text(rng, 40), text(rng, 40)
    # an index built by a version that did not drop default-ignorables: its copy did not match
    with monkeypatch.context() as old:
        old.setattr(normalization, "_IGNORABLE_RE", re.compile(r"(?!)"))
        push(
            r,
            [
                {"id": "original", "text": original},
                {"id": "zwsp-copy", "text": in_every_word(original, "\u200b")},
            ],
        )
        push(r, [{"id": "other", "text": other}])
        daemon = make_daemon(redis_url)
        drain(daemon)
    r.delete(Keys().heartbeat(daemon.consumer))  # it is not iterating: the rebuild need not wait for it
    assert alerts(r) == []
    spec = stored_spec(r)
    assert spec["normalization"] == NORMALIZATION
    del spec["normalization"]  # as that version stored it
    r.hset(Keys().meta, Meta.SPEC, json.dumps(spec, sort_keys=True))

    # refused: in process, and by `dedupd serve` with one line naming `dedupd rebuild`
    with pytest.raises(ParameterMismatchError, match="dedupd rebuild"):
        make_daemon(redis_url)
    env = {**os.environ, "DEDUPD_REDIS_URL": redis_url}
    res = subprocess.run([*DEDUPD, "serve"], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stderr
    (error,) = [line for line in res.stderr.splitlines() if line.startswith("dedupd: error: ")]
    assert "normalization" in error and "`dedupd rebuild`" in error and "Traceback" not in res.stderr
    assert res.stderr.strip().endswith(error)  # the message is that one line

    # `dedupd rebuild` without flags moves it to the new normalisation, reshingling the texts
    res = subprocess.run([*DEDUPD, "rebuild"], env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "(stream): normalization 1 -> 2" in res.stderr, res.stderr
    state = Generations(r, Keys()).read()
    assert state is not None and state.gen == 1 and state.spec.normalization == NORMALIZATION
    assert stored_spec(r)["normalization"] == NORMALIZATION
    res = subprocess.run([*DEDUPD, "rebuild"], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode != 0 and "nothing to rebuild" in res.stderr  # it is current now

    # served again: a new copy finds the original and the rebuilt old copy, both at 1.00
    push(r, [{"id": "cgj-copy", "text": in_every_word(original, "\u034f")}])
    drain(make_daemon(redis_url))
    got = by_copy(r)
    assert set(got) == {"cgj-copy"}
    _, similarity, matches = got["cgj-copy"]
    assert similarity == "1.0000" and matches == {"original": 1.0, "zwsp-copy": 1.0}
