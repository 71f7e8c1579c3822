"""How the command line fails: one line on stderr and an exit status, never a traceback.

:class:`DedupdGroup` turns every error a command raises into ``dedupd: error: <one line>`` and the exit
status it stands for (:data:`EXIT_USAGE`, :data:`EXIT_RUNTIME`, :data:`EXIT_INTERRUPTED`); output cut short
by its reader ends quietly (:data:`EXIT_BROKEN_PIPE`). :func:`sigterm_unwinds` makes SIGTERM end a command
the way Ctrl-C does, its cleanup run (:data:`EXIT_TERMINATED`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any, NoReturn

import click

from dedupd.errors import DedupdError

log = logging.getLogger("dedupd.cli")  # the logger of the whole command line, as before its split

EXIT_USAGE = 2  # a usage or configuration error (including a Redis that cannot be reached or used)
EXIT_RUNTIME = 1  # something failed while working (bad input lines, a Redis error mid-way, a bug)
EXIT_INTERRUPTED = 130  # Ctrl-C
EXIT_TERMINATED = 143  # SIGTERM (128 + 15, as a shell reports a process the signal ended)
# Output cut short by the reader (`dedupd alerts | head -1`) is not an error: the reader has what it
# wanted. dedupd stops quietly with status 0 (not 141 = 128 + SIGPIPE, which `set -o pipefail` scripts
# would have to special-case).
EXIT_BROKEN_PIPE = 0


class Terminated(BaseException):
    """SIGTERM, raised in the main thread by :func:`sigterm_unwinds` (a BaseException, as KeyboardInterrupt
    is: no ``except Exception`` stops it on its way out)."""


@contextlib.contextmanager
def sigterm_unwinds() -> Iterator[Callable[[], None]]:
    """While the block runs, SIGTERM unwinds it as Ctrl-C would: every ``finally`` and ``with`` on the way
    runs (temporary files and servers removed), then ``dedupd: terminated`` and exit status 143. A
    further SIGTERM while it cleans up is ignored (``kill -9`` still ends it at once).

    The signal only marks the run; the block calls the checkpoint it is given (between input lines, and
    while it waits for input) and that raises :class:`Terminated`. An exception raised by the signal handler
    itself could land inside a C callback (numba's compiler calls Python back), which prints and swallows
    it: the run would go on, and the next SIGTERM would be ignored.
    """
    asked = threading.Event()

    def terminate(signum: int, frame: FrameType | None) -> None:
        asked.set()

    def checkpoint() -> None:
        if asked.is_set():
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            raise Terminated

    before = signal.signal(signal.SIGTERM, terminate)
    try:
        yield checkpoint
    except Terminated:
        click.echo("dedupd: terminated", err=True)
        sys.exit(EXIT_TERMINATED)
    finally:
        signal.signal(signal.SIGTERM, before)


def one_line(message: object) -> str:
    """An error message on one line: its lines joined, a doubled full stop (``refused.. Is``) made one."""
    parts = [p.strip() for p in str(message).splitlines() if p.strip()]
    out = parts[0] if parts else ""
    for part in parts[1:]:
        out += (" " if out.endswith(":") else "; ") + part
    return re.sub(r"(?<!\.)\.\.(?=\s|$)", ".", out)


def fail(message: object, code: int = EXIT_USAGE) -> NoReturn:
    """Print ``dedupd: error: <message>`` on one line of stderr and exit with ``code``."""
    click.echo(f"dedupd: error: {one_line(message)}", err=True)
    sys.exit(code)


def quiet_stdout() -> None:
    """After EPIPE on stdout: point it at /dev/null so that the interpreter's last flush is silent."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


class DedupdGroup(click.Group):
    """Every error as one line on stderr, never a traceback: exit 2 for usage and configuration errors
    (bad options, settings, Redis URL, unreachable Redis, refused permissions), 1 for failures while
    working, 130 on Ctrl-C; output cut short by the reader (``| head``) ends quietly with 0."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.exceptions.NoArgsIsHelpError:
            raise
        except click.UsageError as exc:
            _usage_error(exc)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort):
            raise
        except click.UsageError as exc:
            _usage_error(exc)
        except click.ClickException as exc:
            fail(exc.format_message(), exc.exit_code)
        except DedupdError as exc:
            fail(exc)
        except BrokenPipeError:
            quiet_stdout()
            sys.exit(EXIT_BROKEN_PIPE)
        except KeyboardInterrupt:
            click.echo("dedupd: interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)
        except Exception as exc:
            _redis_failure(exc)
            # a bug or an unforeseen failure: one line; the traceback at DEBUG
            log.debug("unexpected error", exc_info=True)
            fail(f"{type(exc).__name__}: {exc} (run with --log-level DEBUG for details)", EXIT_RUNTIME)


def _redis_failure(exc: Exception) -> None:
    """Fail with one line if ``exc`` is a Redis error (a command that never imported redis raised none)."""
    errors = sys.modules.get("redis.exceptions")
    if errors is None:
        return
    if isinstance(exc, errors.NoPermissionError):
        fail(
            f"Redis refused a command to this user: {exc}. Give the user the ACL shown in README.md "
            "(Operations, Security)."
        )
    if isinstance(exc, errors.RedisError):
        fail(f"Redis: {exc}", EXIT_RUNTIME)


def _usage_error(exc: click.UsageError) -> NoReturn:
    path = exc.ctx.command_path if exc.ctx is not None else "dedupd"
    fail(f"{exc.format_message().rstrip('.')} (see '{path} --help')", exc.exit_code)
