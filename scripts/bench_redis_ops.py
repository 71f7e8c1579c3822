#!/usr/bin/env python3
"""What one LSH bucket write costs the Redis server: the floor under end-to-end throughput.

Every indexed document joins ``bands`` buckets (25 at the default 0.8 / 128). Whatever the client does,
the single-threaded redis-server executes those joins, so its CPU time per join times the number of
bands bounds documents per second from above. This script measures that CPU time (``INFO cpu`` of a
fresh ``redis-server``, before and after) for the ways a join can be sent:

- ``lua-hsetnx``: dedupd's layout and way: one script call per batch, one ``HSETNX`` per join on
  listpack-encoded bucket hashes (25 x 4,096 keys, ~15 fields each, as after 63k documents);
- ``pipelined-hsetnx``: the same joins as native commands in one pipeline (no script);
- ``multi-hsetnx``: the same, wrapped in ``MULTI``/``EXEC`` (atomic like a script, but no branching);
- ``lua-loop-only``: the script's own loop without the ``redis.call`` (what Lua costs by itself);
- ``bitfield-set``: a fixed table per band written with ``BITFIELD ... SET u32 #slot id``, 256 joins per
  command (the cheapest bulk write Redis has; it cannot hold more than one id per slot, so it is an
  unreachable lower bound for a real bucket store, not a design).

Each way first runs one unmeasured warm-up batch, then is measured; the ways are measured ``--rounds``
times, interleaved (the first round's script figure is often higher: compare rounds, not single figures). Prints microseconds of server
CPU per join and the documents-per-second ceiling that implies for ``--bands`` joins per document, with
Redis doing nothing else.

dedupd's real script does more per join than ``lua-hsetnx`` (it decodes the op, reads and extends the buckets
that exist, checks records): replayed from a Debian run it costs ~2.3-2.6 us of server CPU per join in all,
of which ~1.0 us is the ``HSETNX`` itself (``INFO commandstats``).

Usage:
    .venv/bin/python scripts/bench_redis_ops.py [--joins 128000] [--bands 25]
"""

from __future__ import annotations

import argparse
import shutil
import struct
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))
from quality import server_cpu, start_redis

BATCH = 6400  # joins per script call / pipeline: 256 documents x 25 bands, as the daemon sends

LUA = """
local blob, ends, fields, call_it = ARGV[1], ARGV[2], ARGV[3], ARGV[4] == '1'
local unpack4, sub, call = struct.unpack, string.sub, redis.call
local n = 0
for j = 1, #fields / 4 do
  local a, b = unpack4('<I4I4', ends, 4 * j - 3)
  local key, field = sub(blob, a + 1, b), sub(fields, 4 * j - 3, 4 * j)
  if call_it then
    if call('HSETNX', key, field, 'abcd') == 1 then n = n + 1 end
  else
    n = n + #key + #field
  end
end
return n
"""


def measure(client: redis.Redis, joins: int, run: Callable[[int], None]) -> float:
    """Server CPU microseconds per join for ``joins`` joins sent by ``run(batch_index)``, after one
    unmeasured warm-up batch."""
    batches = joins // BATCH
    run(batches)  # warm-up: a batch beyond the measured ones
    before = server_cpu(client)
    for b in range(batches):
        run(b)
    return (server_cpu(client) - before) / (batches * BATCH) * 1e6


def fill_buckets(client: redis.Redis, names: list[str], rng: np.random.Generator) -> None:
    """~15 fields per bucket hash, as after 63k documents."""
    pipe = client.pipeline(transaction=False)
    for i, name in enumerate(names):
        pipe.hset(
            name,
            mapping={struct.pack("<I", int(x)): b"\x07\0\0\0" for x in rng.integers(0, 2**32, 15)},
        )
        if i % 5000 == 4999:
            pipe.execute()
    pipe.execute()


def make_ways(
    client: redis.Redis, names: list[str], joins: int, rng: np.random.Generator
) -> list[tuple[str, Callable[[int], None]]]:
    """The ways of sending ``joins`` bucket joins (and one warm-up batch), by name."""
    script = client.register_script(LUA)
    keys = rng.integers(0, len(names), joins + BATCH)  # one more batch: the warm-up
    fields = rng.integers(0, 2**32, joins + BATCH, dtype=np.uint64).astype("<u4")

    def lua(call_it: str) -> Callable[[int], None]:
        def run(b: int) -> None:
            sel = [names[k] for k in keys[b * BATCH : (b + 1) * BATCH].tolist()]
            ends = np.zeros(len(sel) + 1, dtype="<u4")
            np.cumsum([len(s) for s in sel], out=ends[1:])
            script(
                args=[
                    "".join(sel),
                    ends.tobytes(),
                    fields[b * BATCH : (b + 1) * BATCH].tobytes(),
                    call_it,
                ]
            )

        return run

    def native(transaction: bool) -> Callable[[int], None]:
        def run(b: int) -> None:
            p = client.pipeline(transaction=transaction)
            for k, f in zip(
                keys[b * BATCH : (b + 1) * BATCH].tolist(),
                fields[b * BATCH : (b + 1) * BATCH].tolist(),
                strict=True,
            ):
                p.hsetnx(names[k], struct.pack("<I", f), b"abcd")
            p.execute()

        return run

    table_slots = 1 << 18
    for band in range(25):
        client.setrange(f"table:{band}", table_slots * 4 - 1, b"\0")

    def bitfield(b: int) -> None:
        p = client.pipeline(transaction=False)
        slots = rng.integers(0, table_slots, BATCH).tolist()
        for start in range(0, BATCH, 256):
            ops: list[object] = []
            for s in slots[start : start + 256]:
                ops += ["SET", "u32", f"#{s}", 12345]
            p.execute_command("BITFIELD", f"table:{(start // 256) % 25}", *ops)
        p.execute()

    return [
        ("lua-hsetnx", lua("1")),
        ("pipelined-hsetnx", native(False)),
        ("multi-hsetnx", native(True)),
        ("lua-loop-only", lua("0")),
        ("bitfield-set", bitfield),
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--joins", type=int, default=128_000, help="bucket joins per way (multiple of 6,400)")
    ap.add_argument("--bands", type=int, default=25, help="bands per document for the ceiling")
    ap.add_argument("--rounds", type=int, default=2, help="measure every way this many times, interleaved")
    ap.add_argument("--redis-server", default=shutil.which("redis-server"), help="redis-server binary")
    args = ap.parse_args()
    if not args.redis_server:
        print(
            "redis-server not found: install it (apt-get install -y redis-server) or pass --redis-server",
            file=sys.stderr,
        )
        return 2
    rng = np.random.default_rng(0)
    n_keys = 25 * 4096
    names = [f"dedupd:b:0:{{{k // 4096}.{k & 15}}}:{k % 4096:x}" for k in range(n_keys)]
    with tempfile.TemporaryDirectory(prefix="bench-redis-ops-") as tmp:
        proc, port = start_redis(args.redis_server, Path(tmp))
        try:
            client = redis.Redis(port=port)
            fill_buckets(client, names, rng)
            ways = make_ways(client, names, args.joins, rng)
            print(
                f"redis-server {client.info('server')['redis_version']}, {args.joins} joins per way, "
                f"{BATCH} per call"
            )
            for r in range(args.rounds):
                for name, run in ways:
                    us = measure(client, args.joins, run)
                    ceiling = 1e6 / (us * args.bands) if us > 0 else float("inf")
                    print(
                        f"  round {r + 1}  {name:18s} {us:6.2f} us of server CPU per join -> at most "
                        f"{ceiling:9,.0f} docs/s with {args.bands} bands and nothing else"
                    )
        finally:
            proc.terminate()
            proc.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
