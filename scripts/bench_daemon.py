#!/usr/bin/env python3
"""CPU per document of the daemon's own processing and of the redis-server it talks to, in one process.

The corpus (``data/debian.jsonl`` from ``scripts/corpora.py`` by default) is pushed into a fresh
redis-server, then one in-process :class:`dedupd.daemon.loop.Daemon` drains it. Printed: the daemon's CPU
(``time.process_time``) and the server's (``INFO cpu``) per document, and the wall time. Less noisy than
``bench_stream.py`` (no push process, no CLI start-up) and meant for A/B runs of two checkouts: with
``--against DIR`` (another checkout with its own ``.venv``) the two are run alternately ``--rounds`` times
and the minimum and median of each are printed side by side. With ``--together`` the two run at the same
time instead (each its own redis-server; the first of a round started half a second before the other, which
one alternating), so that both meet the same phase of a VM whose speed drifts, and each round's ratios of
this checkout to the other are printed.

    .venv/bin/python scripts/bench_daemon.py --docs 40000 --against /tmp/before --rounds 5
    .venv/bin/python scripts/bench_daemon.py --docs 63436 --against /tmp/before --rounds 4 --together
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def measure(corpus: Path, docs: int) -> dict[str, float]:
    """One drain in this process; returns us/doc of the daemon and of redis-server, and seconds."""
    import redis

    sys.path.insert(0, str(HERE.parent / "tests"))
    from conftest import start_redis_server

    from dedupd.daemon.loop import Daemon
    from dedupd.daemon.upkeep import tune_gc
    from dedupd.server.connection import connect
    from dedupd.settings import load_settings

    with tempfile.TemporaryDirectory() as tmp:
        proc, port = start_redis_server(Path(tmp))
        try:
            r = redis.Redis(port=port)
            pipe = r.pipeline(transaction=False)
            with corpus.open(encoding="utf-8") as f:
                for line, _ in zip(f, range(docs), strict=False):
                    pipe.xadd(
                        "dedupd:docs", {k: v for k, v in json.loads(line).items() if isinstance(v, str)}
                    )
            pipe.execute()
            url = f"redis://127.0.0.1:{port}/0"
            settings = load_settings(redis_url=url, metrics_port=0, consumer="bench", block_ms=50)
            daemon = Daemon(settings, client=connect(settings))  # (as `dedupd serve` connects: its packer)
            daemon.processor.warm_up()
            tune_gc()  # as Daemon.run does
            server0 = _server_cpu(r)
            cpu0, wall0 = time.process_time(), time.monotonic()
            while iterate(daemon) is not None:
                pass
            cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
            server = _server_cpu(r) - server0
        finally:
            proc.terminate()
            proc.wait()
    return {"daemon_us": 1e6 * cpu / docs, "redis_us": 1e6 * server / docs, "seconds": wall}


def iterate(daemon: object) -> object:
    """One iteration as ``dedupd serve`` runs it (overlapping batches when this checkout's daemon can)."""
    overlaps = getattr(daemon, "overlaps", None)
    if overlaps is None:  # an older checkout
        return daemon.iteration()  # type: ignore[attr-defined]
    return daemon.iteration(overlap=overlaps)  # type: ignore[attr-defined]


def _server_cpu(r: object) -> float:
    info = r.info("cpu")  # type: ignore[attr-defined]
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, default=HERE.parent / "data" / "debian.jsonl")
    ap.add_argument("--docs", type=int, default=40_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--against", type=Path, help="another checkout (with .venv) to run alternately")
    ap.add_argument("--together", action="store_true", help="run the two checkouts at once, not alternately")
    ap.add_argument("--once", action="store_true", help=argparse.SUPPRESS)  # one measurement, as JSON
    args = ap.parse_args()
    if not args.corpus.exists():
        print(f"no corpus at {args.corpus}: run scripts/corpora.py first", file=sys.stderr)
        return 2
    if args.once:
        print(json.dumps(measure(args.corpus, args.docs)))
        return 0
    if args.together and not args.against:
        print("--together needs --against DIR (the other checkout)", file=sys.stderr)
        return 2
    sides = {"this": HERE.parent} | ({"against": args.against} if args.against else {})
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
    for round_ in range(args.rounds):
        if args.together:  # both at once, the first started alternately
            order = list(sides) if round_ % 2 == 0 else list(sides)[::-1]
            procs = {}
            for name in order:
                procs[name] = subprocess.Popen(
                    _once(sides[name], args), cwd=sides[name], stdout=subprocess.PIPE, text=True
                )
                time.sleep(0.5)
            for name in sides:
                out, _ = procs[name].communicate()
                if procs[name].returncode:
                    raise SystemExit(f"{name}: the measurement exited with {procs[name].returncode}")
                runs[name].append(json.loads(out.strip().splitlines()[-1]))
            this, other = runs["this"][-1], runs["against"][-1]
            ratios = ", ".join(
                f"{key} {this[key] / other[key]:.3f}x" for key in ("daemon_us", "redis_us", "seconds")
            )
            print(f"round {round_ + 1} (first: {order[0]}): this / against {ratios}", flush=True)
            continue
        for name, root in sides.items():
            out = subprocess.run(
                _once(root, args), cwd=root, capture_output=True, text=True, check=True
            ).stdout
            runs[name].append(json.loads(out.strip().splitlines()[-1]))
            print(f"{name:8s} {runs[name][-1]}", flush=True)
    for name, got in runs.items():
        cells = [
            f"{key} min {min(r[key] for r in got):.1f} median {statistics.median(r[key] for r in got):.1f}"
            for key in ("daemon_us", "redis_us", "seconds")
        ]
        print(f"{name:8s} " + "; ".join(cells))
    return 0


def _once(root: Path, args: argparse.Namespace) -> list[str]:
    """The command of one measurement by the checkout at ``root`` (an older checkout without this script
    runs this file with its venv)."""
    script = root / "scripts" / "bench_daemon.py"
    return [
        str(root / ".venv" / "bin" / "python"),
        str(script if script.exists() else Path(__file__).resolve()),
        "--once",
        "--corpus",
        str(args.corpus.resolve()),
        "--docs",
        str(args.docs),
    ]


if __name__ == "__main__":
    sys.exit(main())
