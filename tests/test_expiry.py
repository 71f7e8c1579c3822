"""daemon/expiry.py without a server (the in-memory gateway): a daemon's steps one at a time, here or in the
background, larger after a step that left a backlog."""

from __future__ import annotations

import random

from helpers import raw_entry, text

from dedupd.daemon.expiry import BACKLOG_FACTOR, Steps
from dedupd.daemon.processor import Processor
from dedupd.index.keys import Keys
from dedupd.index.memory import MemoryGateway
from dedupd.settings import load_settings


def _indexed(n: int, window: int) -> MemoryGateway:
    settings = load_settings(max_documents=window)
    gw = MemoryGateway(Keys(), settings.index_spec(), bounds=settings.bounds())
    rng = random.Random(9)
    batch = [raw_entry(f"{1000 + i}-0", {"id": f"d{i}", "text": text(rng)}) for i in range(n)]
    Processor(gw, settings).process(batch)
    return gw


def test_a_step_after_a_backlog_is_larger_and_the_next_one_is_not() -> None:
    gw = _indexed(20, 2)  # 18 documents past the window
    steps = Steps("test-expiry", 3, 60_000, None)
    first = steps.run(gw)
    assert (first.expired, first.backlog, steps.limit) == (3, 15, 3 * BACKLOG_FACTOR)
    steps.start(gw)  # in the background
    second = steps.settle()
    assert second is not None and (second.expired, second.backlog, steps.limit) == (12, 3, 12)
    third = steps.run(gw)
    assert (third.expired, third.backlog, steps.limit) == (3, 0, 3)
    assert steps.settle() is None and len(gw.store.ids) == 2 and gw.store.expired == 18


def test_a_step_in_the_background_raises_where_it_is_settled() -> None:
    class Broken(MemoryGateway):
        def claim_expiry(self, limit: int, lease_ms: int):  # type: ignore[no-untyped-def]
            raise RuntimeError("the claim failed")

    gw = _indexed(4, 2)
    broken = Broken(gw.keys, gw.spec, store=gw.store)
    steps = Steps("test-expiry", 3, 60_000, None)
    steps.start(broken)
    try:
        steps.settle()
    except RuntimeError as exc:
        assert str(exc) == "the claim failed"
    else:
        raise AssertionError("the step's error was lost")
    assert steps.run(gw).expired == 2  # the next step goes on
