"""The daemon's upkeep between batches: periodic clocks, the garbage collector's settings, the output
streams' bounds and redelivery markers, and the progress line."""

from __future__ import annotations

import gc
import logging
import time
from typing import Any

from dedupd.daemon.monitor import group_state
from dedupd.index.keys import Keys
from dedupd.settings import Settings

log = logging.getLogger("dedupd.daemon")  # (named as before the layers: log lines and filters show it)

GC_YOUNG = 50_000  # allocations between collections of the youngest generation (tune_gc)


class Every:
    """A periodic task's clock: :meth:`due` is true at most once per ``seconds``."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.last = float("-inf")

    def due(self) -> bool:
        now = time.monotonic()
        if now - self.last < self.seconds:
            return False
        self.last = now
        return True

    def now(self) -> None:
        """Make the next :meth:`due` true."""
        self.last = float("-inf")


def kept_length(length: int, used_bytes: int, max_bytes: int) -> int | None:
    """How many of a stream's ``length`` newest entries to keep so that it holds at most about 90 % of
    ``max_bytes`` (entries of the average size); None when it is within its bound.

    >>> kept_length(1000, 2_000_000, 1_000_000), kept_length(1000, 900_000, 1_000_000)
    (450, None)
    """
    if used_bytes <= max_bytes or length == 0:
        return None
    return int(length * 0.9 * max_bytes / used_bytes)


def tune_gc() -> None:
    """Python's cyclic garbage collector, set for a batch loop: what start-up made (modules, compiled kernels,
    tables) is frozen out of every later collection, and the youngest generation is collected every
    ``GC_YOUNG`` allocations instead of 700 (a batch allocates tens of thousands of short-lived objects,
    few of them in cycles: at 700 the collections cost 12 % of a flood's processing)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG, 20, 20)


def prune_seen(client: Any, keys: Keys, seen_ttl_s: int) -> None:
    """Forget redelivery markers older than ``seen_ttl_s`` on every output stream (a stream not written for
    a while keeps them otherwise)."""
    floor = int(time.time() * 1000) - seen_ttl_s * 1000
    for stream in (keys.alerts, keys.baskets, keys.dead):
        client.zremrangebyscore(keys.seen(stream), "-inf", floor)


def bound_outputs(client: Any, keys: Keys, settings: Settings) -> None:
    """Trim the output streams to their byte bounds (alerts_max_bytes, dead_max_bytes, baskets_max_bytes):
    the oldest entries go, as with the count bounds."""
    s = settings
    for stream, bound in (
        (keys.alerts, s.alerts_max_bytes),
        (keys.dead, s.dead_max_bytes),
        (keys.baskets, s.baskets_max_bytes),
    ):
        used = client.memory_usage(stream)
        keep = kept_length(int(client.xlen(stream)), int(used or 0), bound)
        if keep is not None:
            client.xtrim(stream, maxlen=keep, approximate=True)
            log.info("trimmed %s to %d entries (%d bytes over its bound of %d)", stream, keep, used, bound)


def summary_line(totals: dict[str, int]) -> str:
    """The line serve ends with: what this daemon did, in words.

    >>> summary_line({"processed": 1200, "alerts": 1, "dead": 0, "batches": 5})
    '1,200 documents processed in 5 batches: 1 duplicate, 0 dead letters'
    """

    def count(n: int, one: str, many: str) -> str:
        return f"{n:,} {one if n == 1 else many}"

    return (
        f"{count(totals['processed'], 'document', 'documents')} processed in "
        f"{count(totals['batches'], 'batch', 'batches')}: {count(totals['alerts'], 'duplicate', 'duplicates')}, "
        f"{count(totals['dead'], 'dead letter', 'dead letters')}"
        + (f", {count(totals['expired'], 'document', 'documents')} expired" if totals.get("expired") else "")
    )


def progress_line(client: Any, keys: Keys, totals: dict[str, int], rate: float, waiting: int) -> str:
    """The progress line serve logs: totals, the rate, the entries waiting, the group's lag."""
    state = group_state(client, keys)
    lag = "?" if state is None or state["lag"] is None else f"{state['lag']:,}"
    return (
        f"{totals['processed']:,} documents processed ({rate:.0f}/s), {totals['alerts']:,} duplicates, "
        f"{totals['dead']:,} dead letters, {waiting} waiting, lag {lag}"
    )
