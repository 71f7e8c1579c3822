"""connection.CommandPacker: byte for byte what redis-py packs, and the clients dedupd makes use it."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis
from hypothesis import given
from hypothesis import strategies as st
from redis.connection import HiredisRespSerializer

from dedupd.connection import CommandPacker, connect
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
