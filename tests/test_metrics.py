"""Prometheus metrics: a daemon in-process serves /metrics, counters move, 127.0.0.1 by default."""

from __future__ import annotations

import logging
import random
import re
import socket
import threading
import time
import urllib.request

import pytest
import redis
from conftest import free_port
from helpers import make_daemon, push, text, variant

from dedupd.daemon.metrics import Metrics
from dedupd.index.keys import Keys
from dedupd.settings import Settings


def scrape(port: int) -> dict[str, float]:
    """The unlabelled samples of /metrics as {name: value}."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        body = resp.read().decode()
    out = {}
    for line in body.splitlines():
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*) ([-+0-9.eEinfNa]+)$", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def wait_for(predicate, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_daemon_serves_metrics_and_the_counters_move(r: redis.Redis, redis_url: str) -> None:
    """Documents, duplicates, dead letters, batches, latency and lag as the daemon works."""
    port = free_port()
    daemon = make_daemon(redis_url, consumer="metrics-probe", metrics_port=port)
    thread = threading.Thread(target=daemon.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: _answers(port))
        before = scrape(port)
        assert before["dedupd_documents_processed_total"] == 0 and before["dedupd_duplicates_total"] == 0
        assert "process_resident_memory_bytes" in before

        rng = random.Random(5)
        docs = []
        for i in range(10):
            base = text(rng)
            docs += [{"id": f"m{i}", "text": base}, {"id": f"m{i}-v", "text": variant(rng, base)}]
        docs.append({"id": "bad", "op": "nope", "text": "x"})
        push(r, docs)
        wait_for(lambda: scrape(port)["dedupd_documents_processed_total"] >= 20)
        wait_for(lambda: scrape(port)["dedupd_dead_letters_total"] >= 1)
        after = scrape(port)
        assert after["dedupd_documents_processed_total"] == 20
        assert after["dedupd_duplicates_total"] == 10
        assert after["dedupd_dead_letters_total"] == 1
        assert after["dedupd_batch_seconds_count"] == after["dedupd_batches_total"] >= 1
        assert after["dedupd_batch_size_sum"] == 21 and after["dedupd_batch_seconds_sum"] > 0
        assert after["dedupd_pending_entries"] == 0
    finally:
        daemon.stopping.set()
        thread.join(timeout=20)
    assert not thread.is_alive()
    assert not _answers(port), "the endpoint stops with the daemon"


def test_lag_and_pending_gauges(r: redis.Redis, redis_url: str) -> None:
    """refresh_group reads the group's lag and pending count, at most every few seconds."""
    push(r, [{"id": f"x{i}", "text": f"doc {i}"} for i in range(6)])
    daemon = make_daemon(redis_url, consumer="gauges")
    r.xreadgroup("dedupd", "gauges", {Keys().docs: ">"}, count=2)
    m = Metrics()

    def gauges() -> tuple[float | None, float | None]:
        get = m.registry.get_sample_value
        return get("dedupd_consumer_lag"), get("dedupd_pending_entries")

    m.refresh_group(r, Keys())
    assert gauges() == (4, 2)
    r.xreadgroup("dedupd", "gauges", {Keys().docs: ">"}, count=4)
    m.refresh_group(r, Keys())  # too soon: unchanged
    assert gauges() == (4, 2)
    m.refresh_group(r, Keys(), every_s=0)
    assert gauges() == (0, 6)
    daemon.client.close()


def test_binds_loopback_by_default() -> None:
    """The default host is 127.0.0.1 and the server listens there only."""
    assert Settings.model_fields["metrics_host"].default == "127.0.0.1"
    assert Settings.model_fields["metrics_port"].default == 9464
    m = Metrics()
    address = m.serve(Settings.model_fields["metrics_host"].default, free_port())
    try:
        assert address is not None and address[0] == "127.0.0.1"
        assert m._server.server_address[0] == "127.0.0.1"
        assert m._server.socket.getsockname()[0] == "127.0.0.1"
        assert "dedupd_documents_processed_total 0.0" in _body(address[1])
    finally:
        m.close()


def test_port_zero_is_off_and_a_busy_port_is_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    m = Metrics()
    assert m.serve("127.0.0.1", 0) is None and m._server is None
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with caplog.at_level(logging.WARNING, logger="dedupd.metrics"):
            assert m.serve("127.0.0.1", port) is None
    assert "DEDUPD_METRICS_PORT" in caplog.text
    m.close()


def test_two_daemons_in_one_process_have_their_own_registries() -> None:
    a, b = Metrics(), Metrics()
    a.observe_batch(0.01, 3, 3, 1, 0)
    assert a.registry.get_sample_value("dedupd_documents_processed_total") == 3
    assert b.registry.get_sample_value("dedupd_documents_processed_total") == 0


def _body(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        return resp.read().decode()


def _answers(port: int) -> bool:
    try:
        _body(port)
        return True
    except OSError:
        return False
