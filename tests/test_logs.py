"""Logging: plain lines by default, one JSON object per line with --log-json (also for `dedupd serve`)."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time

import pytest
import redis

from dedupd.index.keys import Keys
from dedupd.logs import JsonFormatter, setup_logging


def test_json_formatter_fields_and_exception() -> None:
    """time (UTC, ms), level, logger, message; a traceback goes into 'exception'."""
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.getLogger("dedupd.x").makeRecord(
            "dedupd.x", logging.ERROR, __file__, 1, "failed %s", ("entry 1-0",), sys.exc_info()
        )
    out = json.loads(JsonFormatter().format(record))
    assert out["level"] == "ERROR" and out["logger"] == "dedupd.x" and out["message"] == "failed entry 1-0"
    assert out["time"].endswith("Z") and "ValueError: boom" in out["exception"]


def test_setup_logging_switches_format(capsys: pytest.CaptureFixture[str]) -> None:
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        setup_logging("INFO", as_json=True)
        logging.getLogger("dedupd.t").info("héllo %d", 1)
        assert json.loads(capsys.readouterr().err)["message"] == "héllo 1"
        setup_logging("INFO", as_json=False)
        logging.getLogger("dedupd.t").info("plain")
        assert capsys.readouterr().err.rstrip().endswith("INFO dedupd.t: plain")
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])


def test_serve_log_json_every_line_is_json(r: redis.Redis, redis_url: str) -> None:
    """A real `dedupd serve --log-json`: start, a document, SIGTERM; every stderr line parses."""
    env = {**os.environ, "DEDUPD_REDIS_URL": redis_url, "DEDUPD_BLOCK_MS": "100", "DEDUPD_METRICS_PORT": "0"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "dedupd", "serve", "--log-json", "--consumer", "json-logs"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        r.xadd(Keys().docs, {"id": "a", "text": "one two three four"})
        deadline = time.monotonic() + 30
        while int(r.hget(Keys().counters, "processed") or 0) < 1:
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    lines = [json.loads(line) for line in err.splitlines() if line.strip()]
    assert lines and all({"time", "level", "logger", "message"} <= set(x) for x in lines)
    messages = " | ".join(x["message"] for x in lines)
    assert "consumer json-logs serving" in messages and "stopped:" in messages
    # the last line is a summary in words, not a dict of totals
    assert lines[-1]["message"] == "stopped: 1 document processed in 1 batch: 0 duplicates, 0 dead letters"
