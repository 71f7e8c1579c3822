"""One background thread that runs the jobs given to it, one at a time, in order.

The daemon finishes a batch here (verification, unions, alerts, acknowledgement: mostly waiting for Redis)
while its main thread reads and indexes the next one. The thread is a daemon thread: a second signal exits at
once even when a job waits for a server that does not answer (what the job had not written is done again by
whoever reads the entries next, as after a kill -9).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")

_Job = tuple[Future[Any], Callable[[], Any]]


class Worker:
    """A thread started on the first :meth:`submit`; each job's outcome is a :class:`Future`.

    >>> w = Worker("example")
    >>> w.submit(lambda: 6 * 7).result()
    42
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def submit(self, job: Callable[[], T]) -> Future[T]:
        """Run ``job`` after the jobs before it; its result (or exception) comes through the future."""
        future: Future[T] = Future()
        self._jobs.put((future, job))
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()
        return future

    def _run(self) -> None:
        while True:
            future, job = self._jobs.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(job())
            except BaseException as exc:  # handed to whoever waits for the future
                future.set_exception(exc)
