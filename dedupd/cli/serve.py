"""``dedupd serve``: the consumer daemon in the foreground."""

from __future__ import annotations

import logging
import signal
import sys
from types import FrameType
from typing import Any

import click

from dedupd.cli.common import common_options, settings_from, similarity_options


@click.command()
@common_options
@click.option("--consumer", help="Consumer name in the group (DEDUPD_CONSUMER; default unique per process).")
@similarity_options
@click.option("--batch-size", type=int, help="Entries per read (DEDUPD_BATCH_SIZE).")
@click.option("--block-ms", type=int, help="Blocking read timeout in ms (DEDUPD_BLOCK_MS).")
@click.option("--log-json/--no-log-json", default=None, help="JSON log lines (DEDUPD_LOG_JSON).")
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    help="Port of the Prometheus endpoint (DEDUPD_METRICS_PORT, default 9464; 0 turns it off).",
)
def serve(**opts: Any) -> None:
    """Run the consumer daemon in the foreground.

    Reads the input stream in the consumer group 'dedupd' until SIGINT/SIGTERM, then finishes the
    batch in hand, acknowledges it and exits 0 (a second signal exits at once). Start one per core,
    on as many machines as you like: they share the work.
    """
    from dedupd.daemon.loop import Daemon

    settings = settings_from(**opts)
    # a SIGTERM while starting (connecting, checking the server, joining the group) stops it cleanly: nothing
    # has been read yet, so nothing is left to finish (the daemon's own handlers take over once it serves)
    signal.signal(signal.SIGTERM, _stop_while_starting)
    try:
        daemon = Daemon(settings)  # waits up to 60 s for Redis, logging each retry
    except KeyboardInterrupt:
        click.echo("dedupd: interrupted while connecting", err=True)
        sys.exit(130)
    daemon.install_signal_handlers()
    sys.exit(daemon.run())


def _stop_while_starting(signum: int, frame: FrameType | None) -> None:
    logging.getLogger("dedupd.daemon").info("signal SIGTERM while starting: exiting before serving")
    raise SystemExit(0)
