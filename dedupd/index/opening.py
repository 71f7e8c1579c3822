"""Opening an index: the spec it serves and its generation, the index created with the spec given on its first use.

An index remembers the parameters it was built with (keys.Meta.SPEC); whoever opens it follows those it was
not given, or refuses one set to another value (:class:`~dedupd.errors.ParameterMismatchError`).
"""

from __future__ import annotations

from collections.abc import Callable

from dedupd.index import unionfind
from dedupd.index.keys import Keys, Meta
from dedupd.server.connection import RedisClient
from dedupd.similarity.spec import IndexSpec

__all__ = ["open_spec"]


def open_spec(
    client: RedisClient,
    keys: Keys,
    spec: IndexSpec,
    follow: Callable[[IndexSpec], IndexSpec] | None = None,
) -> tuple[IndexSpec, int]:
    """The serving spec and generation, creating the index with ``spec`` if there is none.

    An existing index is served by ``follow(stored)`` (the settings' :meth:`~dedupd.settings.Settings.serving_spec`:
    what was not given follows the index), or, without ``follow``, only when ``spec`` is the stored one. An
    index stored before threshold and verify were part of its spec adopts the requested ones.

    Raises:
        ParameterMismatchError: when the index has another spec than the one required (names where the
            differing values were given and `dedupd rebuild`).
    """
    client.hsetnx(keys.meta, Meta.SPEC, spec.to_json())
    client.hsetnx(keys.meta, Meta.GEN, 0)
    raw, gen = client.hmget(keys.meta, [Meta.SPEC, Meta.GEN])
    assert raw is not None
    if IndexSpec.lacks_verdict(raw):
        client.hset(
            keys.meta,
            Meta.SPEC,
            IndexSpec.from_json(raw)
            .with_changes({"threshold": spec.threshold, "verify": spec.verify})
            .to_json(),
        )
        raw = client.hget(keys.meta, Meta.SPEC)
        assert raw is not None
    stored = IndexSpec.from_json(raw)
    if follow is not None:
        spec = follow(stored)
    else:
        spec.require_same(stored, keys.prefix)
    # the union-find counts children from here on: the ids given out before (an earlier version) stay uncounted
    client.register_script(unionfind.SET_FLOOR)(keys=[keys.uf_floor, keys.id_seq, keys.uf_ring_floor])
    return spec, int(gen or 0)
