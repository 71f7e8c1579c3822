"""``dedupd serve``: the consumer daemon in the foreground."""

from __future__ import annotations

import logging
import signal
import sys
from types import FrameType
from typing import TYPE_CHECKING, Any

import click

from dedupd.cli.common import (
    common_options,
    connect_to,
    retention_options,
    settings_from,
    similarity_options,
)
from dedupd.errors import RedisUnavailableError

if TYPE_CHECKING:
    from dedupd.settings import Settings

_STARTING_S = 60.0  # how long a server loading its data or busy with a script is waited for as serve starts


@click.command()
@common_options
@click.option("--consumer", help="Consumer name in the group (DEDUPD_CONSUMER; default unique per process).")
@similarity_options
@retention_options
@click.option("--batch-size", type=int, help="Entries per read (DEDUPD_BATCH_SIZE).")
@click.option("--block-ms", type=int, help="Blocking read timeout in ms (DEDUPD_BLOCK_MS).")
@click.option("--log-json/--no-log-json", default=None, help="JSON log lines (DEDUPD_LOG_JSON).")
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    help="Port of the Prometheus endpoint (DEDUPD_METRICS_PORT, default 9464; 0 turns it off).",
)
@click.option(
    "--wait-for-redis",
    "wait_for_redis_s",
    type=click.FloatRange(min=0),
    default=0.0,
    show_default=True,
    help="Seconds to wait, as it starts, for a Redis that cannot be reached (refused, timed out), with a "
    "warning per retry; 0: fail at once with one line. Use e.g. 60 where Redis starts alongside (docker "
    "compose). A server loading its data or busy is waited for up to 60 s either way.",
)
def serve(wait_for_redis_s: float, **opts: Any) -> None:
    """Run the consumer daemon in the foreground.

    Reads the input stream in the consumer group 'dedupd' until SIGINT/SIGTERM, then finishes the
    batch in hand, acknowledges it and exits 0 (a second signal exits at once). Start one per core,
    on as many machines as you like: they share the work. Logs what it does at INFO (--log-level
    WARNING for less); ends with one line of totals.

    \b
    Retention (off by default; stored with the index): an endless stream in bounded memory.
    A document is touched by its own upsert or append and, unless --no-refresh-on-duplicate,
    by a later document's alert naming it; --retention-s forgets the documents not touched for
    that long, --max-documents keeps only the most recently touched ones (either or both). An
    expired document leaves the index as a delete does, with no tombstone: its id pushed again
    is a new document. Expiry runs after each batch and every 0.5 s when idle, shared by the
    daemons; `dedupd stats` shows the window, the oldest document's age and the backlog.
    Example, a news desk asking "seen in the last 7 days?":
      dedupd serve --retention-s 604800
    and a crawler frontier bounded to ten million pages:
      dedupd serve --max-documents 10000000
    Once stored, change the window with `dedupd rebuild --retention-s N` (0: none).
    """
    from dedupd.daemon.loop import Daemon

    settings = settings_from(serving=True, **opts)
    # a SIGTERM while starting (connecting, checking the server, joining the group) stops it cleanly: nothing
    # has been read yet, so nothing is left to finish (the daemon's own handlers take over once it serves)
    signal.signal(signal.SIGTERM, _stop_while_starting)
    try:
        daemon = Daemon(settings, _connect(settings, wait_for_redis_s))
    except KeyboardInterrupt:
        click.echo("dedupd: interrupted while connecting", err=True)
        sys.exit(130)
    daemon.install_signal_handlers()
    sys.exit(daemon.run())


def _connect(settings: Settings, wait_for_redis_s: float) -> Any:
    """The daemon's client: a Redis that cannot be reached fails at once unless --wait-for-redis says to
    wait; one loading its data or busy with a script is waited for up to 60 s (or --wait-for-redis)."""
    from dedupd.server.connection import UNREACHABLE

    try:
        return connect_to(
            settings,
            retry_for_s=max(_STARTING_S, wait_for_redis_s),
            unreachable_for_s=wait_for_redis_s,
        )
    except RedisUnavailableError as exc:
        if wait_for_redis_s or not str(exc).startswith(UNREACHABLE):
            raise
        raise RedisUnavailableError(
            f"{exc} To wait for it to come up: dedupd serve --wait-for-redis SECONDS"
        ) from None


def _stop_while_starting(signum: int, frame: FrameType | None) -> None:
    logging.getLogger("dedupd.daemon").info("signal SIGTERM while starting: exiting before serving")
    raise SystemExit(0)
