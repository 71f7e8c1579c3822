#!/usr/bin/env python3
"""Server states under a backlog, tried as a user would (issue 29): a full Redis, a long BUSY, a long LOADING.

For each scenario: a fresh ``redis-server`` (noeviction, no persistence) gets ``--docs`` entries (pairs of
near-duplicates, fixed seed) pushed, one ``dedupd serve`` starts, and once it has processed ``--start-after``
documents the server is put in the state, held, then let go; the script waits until the group has read
everything, has lag 0 and nothing pending, and checks:

- dead letters: none (a server state never counts against an entry);
- every document indexed once (the id map holds every id), every pair alerted once (no alert doubled);
- the daemon's log names no dead letter and holds no traceback, and it exits 0 on SIGTERM.

Scenarios (``--scenario``, default all):

full
    ``maxmemory`` set ``--headroom-mb`` (8) above the used memory (noeviction: writes are refused with OOM as
    soon as the daemon has written that much), held ``--full-s`` (12) seconds, then lifted.
busy
    another client's Lua script spins ``--busy-s`` (15) seconds with ``busy-reply-threshold`` at 100 ms:
    every other client gets BUSY that long.
loading
    ``--filler`` (10,000,000) small keys are added (``DEBUG POPULATE``: the server is started with
    ``--enable-debug-command yes``); at the moment, the server is shut down with SAVE and started again on
    the same port and files: while it loads its data, every client gets LOADING (how long depends on the
    machine: the script reports the server's own figure, from its log).

Prints one line per scenario and a JSON line with every figure; exits 1 when a check fails.

    .venv/bin/python scripts/trial_server_states.py                       # all three, 30,000 documents
    .venv/bin/python scripts/trial_server_states.py --scenario full --docs 10000 --full-s 5
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))
from quality import find_dedupd, free_port, spawn_serve, wait_drained

from dedupd.index.keys import GROUP, Keys

SPIN = (
    "local t = redis.call('TIME') while true do local n = redis.call('TIME') "
    "if (n[1] - t[1]) * 1000000 + (n[2] - t[2]) > tonumber(ARGV[1]) then break end end return 1"
)
SCENARIOS = ("full", "busy", "loading")


def pairs(n_pairs: int, seed: int, words: int = 40) -> list[dict[str, str]]:
    """``n_pairs`` pairs of near-duplicates (one word of ``words`` changed), the pairs far apart."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(20000)]
    out = []
    for i in range(n_pairs):
        base = [rng.choice(vocab) for _ in range(words)]
        copy = list(base)
        copy[rng.randrange(words)] = rng.choice(vocab)
        out += [{"id": f"p{i}a", "text": " ".join(base)}, {"id": f"p{i}b", "text": " ".join(copy)}]
    return out


def start_server(workdir: Path, *extra: str, port: int = 0) -> tuple[subprocess.Popen[bytes], int]:
    port = port or free_port()
    exe = shutil.which("redis-server") or "redis-server"
    args = [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    args += [
        "--dir",
        str(workdir),
        "--maxmemory-policy",
        "noeviction",
        "--logfile",
        str(workdir / "redis.log"),
    ]
    proc = subprocess.Popen([*args, *extra], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(port=port)
    for _ in range(300):
        try:
            client.ping()
            return proc, port
        except redis.exceptions.BusyLoadingError:  # started, loading its data
            return proc, port
        except redis.ConnectionError:
            time.sleep(0.05)
    raise SystemExit(f"redis-server did not start on port {port}")


def counter(client: redis.Redis, name: str) -> int:
    return int(client.hget(Keys().counters, name) or 0)


def hold(client: redis.Redis, scenario: str, a: argparse.Namespace, restart: Any = None) -> dict[str, Any]:
    """Put the server in the scenario's state, hold it, let it go (``restart``: start the server again, for
    loading); what was done."""
    t = time.monotonic()
    if scenario == "full":
        used = int(client.info("memory")["used_memory"])
        client.config_set("maxmemory", used + a.headroom_mb * (1 << 20))
        time.sleep(a.full_s)
        client.config_set("maxmemory", 0)
        return {"used_memory": used, "maxmemory": used + a.headroom_mb * (1 << 20), "held_s": a.full_s}
    if scenario == "busy":
        client.config_set("busy-reply-threshold", 100)
        spinner = redis.Redis(
            port=client.connection_pool.connection_kwargs["port"], socket_timeout=a.busy_s + 60
        )
        spinner.eval(SPIN, 0, int(a.busy_s * 1_000_000))
        return {"held_s": round(time.monotonic() - t, 1)}
    with contextlib.suppress(redis.ConnectionError):  # (the server closes the connection as it exits)
        client.shutdown(save=True)
    restart()
    return {"restart_s": round(time.monotonic() - t, 1), "filler_keys": a.filler}


def loaded_in(log: Path) -> float | None:
    """How long the server took to load its data at its last start, as its log says."""
    found = re.findall(r"DB loaded from disk: ([0-9.]+) seconds", log.read_text(errors="replace"))
    return float(found[-1]) if found else None


def run(scenario: str, a: argparse.Namespace, dedupd: str, work: Path) -> dict[str, Any]:
    workdir = work / scenario
    workdir.mkdir()
    extra = ("--enable-debug-command", "yes") if scenario == "loading" else ()
    proc, port = start_server(workdir, *extra)
    procs = [proc]

    def restart() -> None:
        procs[0].wait(timeout=600)
        procs[0] = start_server(workdir, *extra, port=port)[0]

    client = redis.Redis(port=port)
    try:
        if scenario == "loading":
            filler = redis.Redis(port=port, socket_timeout=900)
            filler.execute_command("DEBUG", "POPULATE", a.filler, "filler", 10)
            filler.close()
        docs = pairs(a.docs // 2, a.seed)
        pipe = client.pipeline(transaction=False)
        for d in docs:
            pipe.xadd(Keys().docs, d)
        pipe.execute()
        env = {k: v for k, v in os.environ.items() if not k.startswith("DEDUPD_")}
        env.update(DEDUPD_REDIS_URL=f"redis://127.0.0.1:{port}/0", DEDUPD_METRICS_PORT="0")
        daemon = spawn_serve(dedupd, env, workdir / "serve.log")
        deadline = time.monotonic() + 300
        while counter(client, "processed") < a.start_after:
            if time.monotonic() > deadline or daemon[0].poll() is not None:
                raise SystemExit(f"{scenario}: the daemon did not start processing:\n{daemon[1].read_text()}")
            time.sleep(0.05)
        at = counter(client, "processed")
        held = hold(client, scenario, a, restart)
        if scenario == "loading":  # until the server answers again
            while True:
                try:
                    client.ping()
                    break
                except (redis.exceptions.BusyLoadingError, redis.ConnectionError):
                    time.sleep(0.05)
        wait_drained(client, len(docs), [daemon], a.timeout, 0.05)
        daemon[0].terminate()
        code = daemon[0].wait(timeout=60)
        log = daemon[1].read_text(errors="replace")
        alerts = [f[b"input"] for _, f in client.xrange(Keys().alerts)]
        figures = {
            "scenario": scenario,
            "documents": len(docs),
            "processed_when_held": at,
            **held,
            "loading_s": loaded_in(workdir / "redis.log") if scenario == "loading" else None,
            "dead_letters": int(client.xlen(Keys().dead)),
            "indexed": int(client.hlen(Keys().id_forward)),
            "alerts": len(alerts),
            "alerts_doubled": len(alerts) - len(set(alerts)),
            "pending": int(client.xpending(Keys().docs, GROUP)["pending"]),
            "dead_lettered_logged": log.count("dead-lettered"),
            "tracebacks": log.count("Traceback"),
            "exit_code": code,
            "server_state_logged": any(w in log for w in ("maxmemory", "BUSY", "LOADING", "loading")),
        }
        figures["ok"] = (
            figures["dead_letters"] == 0
            and figures["indexed"] == len(docs)
            and figures["alerts"] == len(docs) // 2
            and figures["alerts_doubled"] == 0
            and figures["dead_lettered_logged"] == 0
            and figures["tracebacks"] == 0
            and code == 0
        )
        return figures
    finally:
        client.close()
        procs[0].kill()
        procs[0].wait()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", choices=[*SCENARIOS, "all"], default="all")
    p.add_argument("--docs", type=int, default=30_000, help="entries in the backlog (default 30000)")
    p.add_argument("--start-after", type=int, default=1000, help="processed documents before the state")
    p.add_argument("--headroom-mb", type=int, default=8, help="full: maxmemory above the used memory")
    p.add_argument("--full-s", type=float, default=12, help="full: how long the server is full")
    p.add_argument("--busy-s", type=float, default=15, help="busy: how long the script spins")
    p.add_argument("--filler", type=int, default=10_000_000, help="loading: keys the server reloads")
    p.add_argument("--seed", type=int, default=29)
    p.add_argument("--timeout", type=float, default=600, help="seconds to drain after the state")
    p.add_argument("--dedupd", help="dedupd executable (default .venv/bin/dedupd, then PATH)")
    a = p.parse_args()
    dedupd = find_dedupd(a.dedupd)
    results = []
    with tempfile.TemporaryDirectory(prefix="dedupd-trial-") as tmp:
        for scenario in SCENARIOS if a.scenario == "all" else (a.scenario,):
            f = run(scenario, a, dedupd, Path(tmp))
            results.append(f)
            print(
                f"{scenario}: {'OK' if f['ok'] else 'FAILED'}: dead letters {f['dead_letters']}, indexed "
                f"{f['indexed']}/{f['documents']}, alerts {f['alerts']} (doubled {f['alerts_doubled']}), "
                f"exit {f['exit_code']}",
                flush=True,
            )
    print(json.dumps(results))
    sys.exit(0 if all(f["ok"] for f in results) else 1)


if __name__ == "__main__":
    main()
