"""``dedupd dedup``: the near-duplicates of a file removed in one command (the work: dedupd/ops/dedup.py)."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, BinaryIO, TextIO, cast

import click

from dedupd.cli.common import settings_from, similarity_options, verbose_option
from dedupd.cli.documents import AUTO_LINES_HELP, BadLines
from dedupd.cli.failures import EXIT_RUNTIME, sigterm_unwinds
from dedupd.errors import ConfigError


@contextlib.contextmanager
def _written(path: str, mode: str) -> Iterator[IO[Any]]:
    """The file to write ``path`` (``-``: standard output) through: a temporary file beside it, put in its
    place only when the block ends without an error, so that a failed or interrupted run leaves ``path``
    as it was (and ``-o`` may name the input file itself)."""
    if path == "-":
        yield sys.stdout.buffer if "b" in mode else sys.stdout
        return
    target = Path(path)
    try:
        fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent or ".")
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        os.fchmod(fd, _file_mode(target))
        with open(fd, mode, encoding=None if "b" in mode else "utf-8") as out:
            yield out
        os.replace(temporary, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)


@contextlib.contextmanager
def _quiet_dead_letters(level: str) -> Iterator[None]:
    """Unless at DEBUG, the processor's log line per dead letter is left out while dedup runs: each is
    told as a bad line with its line number (the engine's entry ids mean nothing to the user). Its other
    lines are shown as at any time."""
    logger = logging.getLogger("dedupd.processor")
    quiet = _NoDeadLetterLines()
    if level != "DEBUG":
        logger.addFilter(quiet)
    try:
        yield
    finally:
        logger.removeFilter(quiet)


class _NoDeadLetterLines(logging.Filter):
    """Drops the processor's line per dead letter (:data:`~dedupd.daemon.dead_letters.DEAD_LETTERED`),
    and nothing else."""

    def __init__(self) -> None:
        super().__init__()
        from dedupd.daemon.dead_letters import DEAD_LETTERED  # (the settings load only when dedup runs)

        self.dropped = DEAD_LETTERED

    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg != self.dropped


def _file_mode(target: Path) -> int:
    """The permissions ``target`` has, or a new file would have (mkstemp's file is private)."""
    with contextlib.suppress(OSError):
        return target.stat().st_mode & 0o7777
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


@click.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option(
    "-o",
    "--output",
    default="-",
    show_default=True,
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Where to write the documents to keep (- is standard output). Written when the run ends; it may "
    "be FILE itself.",
)
@click.option(
    "--keep",
    type=click.Choice(["first", "longest"]),
    default="first",
    show_default=True,
    help="Which document of a cluster to keep: the first in FILE, or the one with the longest text (the "
    "first of those on a tie).",
)
@click.option(
    "--clusters",
    "clusters_file",
    type=click.Path(dir_okay=False, allow_dash=True),
    help='Also write one JSON line per cluster of two or more documents: {"cluster": NAME, "kept": ID, '
    '"members": [ID, ...]} (members in FILE order; the name is the first member\'s id).',
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["auto", "jsonl", "text"]),
    default="auto",
    show_default=True,
    help="jsonl: one JSON object per line with the fields `dedupd push` takes (id, text, ...; any other line "
    "is a bad line); text: one document per line; auto, as `dedupd push` reads a file: a file starting "
    "with a JSON array is refused (write it as JSONL), " + AUTO_LINES_HELP,
)
@click.option(
    "--id-prefix",
    default=None,
    help="Id of a line without one (plain text, or JSONL without 'id'): PREFIX + line number (default: the "
    "file name and ':').",
)
@similarity_options
@click.option(
    "--batch-size",
    type=click.IntRange(1, 10_000),
    help="Documents per batch of the engine (DEDUPD_BATCH_SIZE; default 1000 here).",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(exists=True, dir_okay=False),
    help="TOML settings file (also DEDUPD_CONFIG; else ./dedupd.toml, else /etc/dedupd/dedupd.toml).",
)
@click.option(
    "--log-level",
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    help="Log level (DEDUPD_LOG_LEVEL, any case; unset: WARNING).",
)
@verbose_option
def dedup(
    file: str,
    output: str,
    keep: str,
    clusters_file: str | None,
    fmt: str,
    id_prefix: str | None,
    config_file: str | None,
    verbose: bool,
    **opts: Any,
) -> None:
    """Remove the near-duplicates of FILE (or - for standard input): one command, no server to run.

    Runs the engine of `dedupd serve` on a private Redis that it starts in a temporary directory and
    removes afterwards (DEDUPD_REDIS_URL and DEDUPD_DATA_DIR are not touched), with the same similarity
    settings (flags, DEDUPD_* variables, the TOML file). Documents whose Jaccard similarity reaches the
    threshold form clusters, merged when a later document joins two; every line is a document, even
    when two lines share an id.

    Writes the documents to keep, each line exactly as it was, in FILE's order: the first of each
    cluster (or, with --keep longest, the longest), and every document without a near-duplicate. A
    one-line summary goes to stderr, with a progress bar for a file when stderr is a terminal.

    Bad lines (invalid JSON, not UTF-8, no text, an op other than upsert, over the size bounds) are
    reported with their line number and left out, and the run exits 1; it exits 2 for a usage or input
    file problem. Stopped by Ctrl-C (exit 130) or SIGTERM (exit 143), it leaves -o's file as it was and
    nothing behind; the directory of a run killed with kill -9 is removed by the next one. Memory: the private Redis holds the index, about 1 KB per document plus 5 bytes per
    word with --verify exact (the default).

    \b
    Examples:
      dedupd dedup corpus.jsonl -o deduped.jsonl --clusters clusters.jsonl
      zcat lines.txt.gz | dedupd dedup - --format text --threshold 0.9 > unique.txt
    """
    from dedupd.ops.dedup import dedup as run_dedup

    if config_file:
        os.environ["DEDUPD_CONFIG"] = config_file
    if clusters_file is not None and clusters_file == output:
        raise click.UsageError("--clusters and -o name the same file: give each its own")
    settings = settings_from(verbose=verbose, **opts)
    name = "stdin" if file == "-" else os.fsencode(os.path.basename(file)).decode("utf-8", "backslashreplace")
    bad = BadLines(name)
    size = os.path.getsize(file) if file != "-" and os.path.isfile(file) else None
    bar = (
        click.progressbar(length=size, label=f"dedup {name}", file=sys.stderr)
        if size and sys.stderr.isatty()
        else None
    )
    bad.newline = "\n" if bar else ""
    with (
        sigterm_unwinds() as checkpoint,
        _quiet_dead_letters(settings.log_level),
        _written(output, "wb") as out,
        _written(clusters_file, "w") if clusters_file else contextlib.nullcontext() as clusters,
        bar or contextlib.nullcontext(),
    ):
        summary = run_dedup(
            Path(file) if file != "-" else sys.stdin.buffer,
            cast(BinaryIO, out),
            settings,
            keep=keep,
            fmt=fmt,
            id_prefix=id_prefix,
            name=name,
            clusters=cast(TextIO | None, clusters),
            on_bad=bad.report,
            on_bytes=bar.update if bar else None,
            warn=functools.partial(_warn, bar is not None),
            checkpoint=checkpoint,
        )
        checkpoint()  # (a SIGTERM after the last line read: -o's file is left as it was all the same)
    click.echo(f"{summary.line()}{bad.summary()}", err=True)
    sys.exit(EXIT_RUNTIME if bad.count else 0)


def _warn(under_bar: bool, message: str) -> None:
    click.echo(f"{chr(10) if under_bar else ''}dedupd: warning: {message}", err=True)
