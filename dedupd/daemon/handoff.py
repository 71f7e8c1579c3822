"""What a batch being finished tells the next one while the two overlap.

The daemon's loop (daemon/loop.py) starts a batch while the worker thread finishes the one before it. The
next batch may write its records and buckets once the batch before has written its evictions (it then reads
the buckets as one batch at a time would), and, when it deletes documents, once that batch's unions are
written too (a delete comes after them, and a root it deletes has its name read for their alerts first).

One :class:`Handoff` per batch handed to the worker, owned by the loop: the worker thread sets it (through
:meth:`Processor.finish`), the main thread waits on it (through :meth:`Processor.start`). Nothing else is
shared between the two threads but the gateway's caches (index/gateway.py says how each is kept safe).
"""

from __future__ import annotations

import threading


class Handoff:
    """The two moments a batch being finished passes that the next batch may wait for."""

    __slots__ = ("evicted", "unioned")

    def __init__(self) -> None:
        self.evicted = threading.Event()  # its evictions are written (or it ended without)
        self.unioned = threading.Event()  # its unions are written too (or it ended without)

    def wait(self, deletes: bool) -> None:
        """Wait until the next batch may write: after the evictions, or the unions too when it ``deletes``."""
        (self.unioned if deletes else self.evicted).wait()

    def release(self) -> None:
        """Let every next batch go (the batch ended, done or failed)."""
        self.evicted.set()
        self.unioned.set()
