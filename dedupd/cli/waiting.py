"""``--wait`` of the commands that push entries (``push``, ``delete``): wait until the daemons have processed
everything in the input stream."""

from __future__ import annotations

from typing import Any

import click

from dedupd.cli.common import F
from dedupd.errors import DedupdError
from dedupd.index.keys import Keys


def wait_options(func: F) -> F:
    """``--wait/--no-wait`` and ``--timeout``."""
    func = click.option(
        "--timeout", type=float, default=600.0, show_default=True, help="Seconds --wait waits at most."
    )(func)
    return click.option(
        "--wait/--no-wait", default=False, help="Wait until the daemons have processed everything."
    )(func)


def wait_for_daemons(client: Any, keys: Keys, timeout: float) -> None:
    """Wait until the consumer group has read and acknowledged every entry of the input stream.

    Raises:
        DedupdError: when that takes longer than ``timeout`` seconds (no daemon running, or too slow).
    """
    from dedupd.daemon.monitor import wait_drained

    if not wait_drained(client, keys, timeout):
        raise DedupdError(f"the daemons did not finish within {timeout:.0f}s; is `dedupd serve` running?")
