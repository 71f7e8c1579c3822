"""connection.CommandPacker: byte for byte what redis-py packs, and the clients dedupd makes use it;
connection.ScriptPipeline on a single Redis: one round trip per execute, scripts loaded again when gone."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis
from hypothesis import given
from hypothesis import strategies as st
from redis.connection import HiredisRespSerializer

from dedupd.server.connection import CommandPacker, ScriptPipeline, connect
from dedupd.settings import load_settings

_ARG = st.one_of(
    st.binary(max_size=40),
    st.text(max_size=20),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.binary(max_size=20).map(memoryview),
    st.binary(max_size=20).map(bytearray),
)
_NAME = st.sampled_from(["GET", "XINFO GROUPS", b"EVALSHA", b"CLIENT SETNAME", "set"])


@given(_NAME, st.lists(_ARG, max_size=30))
def test_packs_what_redis_py_packs(name: str | bytes, args: list[object]) -> None:
    assert CommandPacker().pack(name, *args) == HiredisRespSerializer().pack(name, *args)


def test_an_argument_redis_cannot_take_is_a_data_error() -> None:
    with pytest.raises(redis.exceptions.DataError):
        CommandPacker().pack("SET", "k", {"a": 1})


def test_the_daemon_client_uses_it_and_talks_to_redis(redis_url: str) -> None:
    client = connect(load_settings(redis_url=redis_url))
    conn = client.connection_pool.get_connection()
    try:
        assert isinstance(conn._command_packer, CommandPacker)
    finally:
        client.connection_pool.release(conn)
    client.set("packed", memoryview(b"v\x00w"))
    pipe = client.pipeline(transaction=False)
    pipe.xadd("s", {"f": "é", "n": 7})
    pipe.get("packed")
    assert pipe.execute()[1] == b"v\x00w"


def test_the_embedded_client_uses_it_whatever_the_data_directory(tmp_path: Path) -> None:
    """The embedded server's socket path goes into a unix:// URL: spaces, '%', '?' and '#' stay as they are."""
    settings = load_settings(data_dir=str(tmp_path / "my data %41 ?x #y"))
    client = connect(settings)
    try:
        assert client.ping() and client.connection_pool.connection_kwargs["path"].endswith(".sock")
        conn = client.connection_pool.get_connection()
        assert isinstance(conn._command_packer, CommandPacker)
        client.connection_pool.release(conn)
    finally:
        client.close()


_APPEND = "redis.call('RPUSH', KEYS[1], ARGV[1]); return redis.call('LLEN', KEYS[1])"
_COUNT = "return redis.call('INCRBY', KEYS[1], ARGV[1])"


def test_a_script_pipeline_asks_nothing_before_its_calls(r: redis.Redis) -> None:
    """redis-py's pipeline of Script objects sends SCRIPT EXISTS before every execute (a round trip more
    per batch on the way of a flood's evictions); this one sends its EVALSHAs alone."""
    append, count = r.register_script(_APPEND), r.register_script(_COUNT)
    pipe = ScriptPipeline(r)
    pipe.script(append, ["l"], ["a"])  # the first time: NOSCRIPT, loaded, run again
    pipe.script(count, ["n"], [0])
    assert pipe.execute() == [1, 0]
    r.config_resetstat()
    pipe = ScriptPipeline(r)
    pipe.script(append, ["l"], ["b"])
    pipe.script(count, ["n"], [5])
    assert pipe.execute() == [2, 5]
    stats = r.info("commandstats")
    assert not any("script" in name for name in stats), sorted(stats)
    assert stats["cmdstat_evalsha"]["calls"] == 2


def test_a_script_pipeline_loads_scripts_again_after_a_flush_and_runs_each_call_once(r: redis.Redis) -> None:
    append, count = r.register_script(_APPEND), r.register_script(_COUNT)
    count(keys=["n"], args=[1])  # loaded
    r.script_flush()
    append(keys=["l"], args=["a"])  # loaded again: the pipeline below finds one of its two scripts
    pipe = ScriptPipeline(r)
    pipe.script(count, ["n"], [10])
    pipe.script(append, ["l"], ["b"])
    pipe.script(count, ["n"], [100])
    assert pipe.execute() == [11, 2, 111]
    assert r.lrange("l", 0, -1) == [b"a", b"b"] and r.get("n") == b"111"


def test_a_script_pipeline_raises_the_first_error_after_running_everything(r: redis.Redis) -> None:
    count = r.register_script(_COUNT)
    r.set("n", "not a number")
    pipe = ScriptPipeline(r)
    pipe.script(count, ["n"], [1])
    pipe.script(count, ["m"], [3])
    with pytest.raises(redis.ResponseError):
        pipe.execute()
    assert r.get("m") == b"3"
