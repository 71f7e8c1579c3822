"""scripts/soak.py in a tiny configuration: every fault once (a kill -9, a Redis restart with AOF, one
without persistence, a busy script from another client, a full server, a long BUSY state, malformed
entries of every kind, huge ones included), and its checks pass: nothing lost or doubled, every malformed entry dead-lettered once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

SOAK = Path(__file__).resolve().parent.parent / "scripts" / "soak.py"


@pytest.mark.slow
def test_soak_with_every_fault_once(tmp_path: Path) -> None:
    args = [
        *("--docs", "2000", "--consumers", "2", "--kills", "1", "--seed", "7"),
        *("--malformed", "110", "--huge", "3", "--huge-mb", "2", "--odd", "12", "--bad", "10"),
        *("--wipe-at", "0.3", "--wipe-when", "0.1"),  # the wipe while most of the first phase is unread
        *("--full-s", "3", "--long-s", "6"),  # (the soak's own defaults: 10 s full, 35 s BUSY)
        *("--batch-size", "50", "--max-lag", "400", "--timeout", "200", "--status-s", "10"),
        *("--workdir", str(tmp_path / "soak")),
    ]
    # smaller input bounds, so that the huge entries are a few MB (the soak reads the bounds it crafts to)
    env = {**os.environ, "DEDUPD_MAX_ENTRY_BYTES": "1500000", "DEDUPD_MAX_DOC_BYTES": "1000000"}
    proc = subprocess.Popen(
        [sys.executable, str(SOAK), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,  # its redis-server and daemons go with it if the test gives up
    )
    try:
        out, err = proc.communicate(timeout=260)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, out + err[-5000:]
    figures = json.loads(out.strip().splitlines()[-1])
    assert figures["ok"] and not figures["failed"]
    done = ("kills", "aof_restarts", "wipes", "busy_scripts", "full_servers", "long_states")
    assert [figures[k] for k in done] == [1, 1, 1, 1, 1, 1]
    assert figures["lost"] == 0 and figures["doubled"] == 0 and figures["missing_alerts"] == 0
    assert figures["dead_found"] == figures["dead_expected"] == figures["dead_in_stream"] > 100
    kinds = figures["dead_by_kind"]
    assert {"wide", "huge_field", "huge_text", "huge_doc", "binary_id", "deep_items", "deep_meta"} <= set(
        kinds
    )
    assert all(done == total for done, total in (v.split("/") for v in kinds.values()))
    assert figures["wiped_documents"] > 0 and figures["expected_pairs_checked"] > 0
    assert figures["wiped_unprocessed_at_wipe"] > 0
    assert figures["group_recreated_logged"] > 0 and figures["daemons_logging_busy"] > 0
    assert figures["exit_codes"] == [0, 0] and figures["alive_at_end"] == 2
    assert "soak OK" in out
    for fault in ("kill -9", "from its AOF", "WITHOUT its data", "Lua script", "maxmemory"):
        assert fault in err  # a progress line for each fault
