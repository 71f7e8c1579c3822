"""The ``dedupd`` command line: the :func:`cli` group, its commands, and :func:`main`, the console script.

Each family of commands lives in its own module (:mod:`~dedupd.cli.serve`, :mod:`~dedupd.cli.documents`,
:mod:`~dedupd.cli.streams`, :mod:`~dedupd.cli.health`, :mod:`~dedupd.cli.index`, :mod:`~dedupd.cli.clusters`,
:mod:`~dedupd.cli.deletes`; ``mine`` in
:mod:`dedupd.mining.cli`) and is added to the group here; :mod:`~dedupd.cli.common` holds what they share and
:mod:`~dedupd.cli.failures` how they fail.
"""

from __future__ import annotations

import logging
import sys
import time

import click

from dedupd import __version__
from dedupd.cli.clusters import cluster
from dedupd.cli.dedup import dedup
from dedupd.cli.deletes import delete
from dedupd.cli.documents import push, query
from dedupd.cli.failures import (
    EXIT_BROKEN_PIPE,
    EXIT_INTERRUPTED,
    EXIT_RUNTIME,
    DedupdGroup,
    fail,
    quiet_stdout,
)
from dedupd.cli.health import check, stats
from dedupd.cli.index import rebuild, tune
from dedupd.cli.serve import serve
from dedupd.cli.streams import alerts, dead
from dedupd.mining.cli import mine

log = logging.getLogger("dedupd.cli")  # (named as before the layers: log lines and filters show it)


@click.group(
    cls=DedupdGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110}
)
@click.version_option(__version__, prog_name="dedupd")
def cli() -> None:
    """dedupd: streaming near-duplicate detection on Redis.

    Producers XADD documents (fields id, text, op, source, items, meta) to the stream dedupd:docs;
    `dedupd serve` shingles and MinHashes each one, looks up earlier documents through LSH bands,
    verifies them against the threshold, and writes an alert to dedupd:alerts for every document
    that has near-duplicates. Malformed entries go to dedupd:dead with a reason.

    Settings come from flags, DEDUPD_* variables, a TOML file (--config or DEDUPD_CONFIG, else
    ./dedupd.toml, else /etc/dedupd/dedupd.toml), then defaults. With no DEDUPD_REDIS_URL, an embedded
    Redis is started with its data in DEDUPD_DATA_DIR, shared by every dedupd command until the last one
    exits; its socket is DEDUPD_DATA_DIR/redis.sock (redis-cli -s ...).

    Errors are one line on stderr: exit status 2 for usage and configuration errors (Redis unreachable
    included), 1 for failures while working, 130 when interrupted. Output cut short by its reader
    (`dedupd alerts | head -1`) ends quietly with status 0.
    """


for _command in (serve, push, query, alerts, dead, check, stats, tune, rebuild, mine, cluster, delete, dedup):
    cli.add_command(_command)


def main() -> None:
    """Console-script entry point: the command line, with a last guard so that nothing ends in a
    traceback (the commands' own errors are handled by :class:`DedupdGroup`)."""
    logging.captureWarnings(True)
    started = time.monotonic()
    try:
        cli(prog_name="dedupd")
    except BrokenPipeError:
        quiet_stdout()
        sys.exit(EXIT_BROKEN_PIPE)
    except KeyboardInterrupt:
        click.echo("dedupd: interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except Exception as exc:  # outside any command (settings of the group itself, click internals)
        log.debug("unexpected error", exc_info=True)
        fail(f"{type(exc).__name__}: {exc} (run with --log-level DEBUG for details)", EXIT_RUNTIME)
    finally:
        log.debug("done in %.2fs", time.monotonic() - started)
