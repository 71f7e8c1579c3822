"""``dedupd push`` and ``dedupd query``: documents read from a file or standard input, pushed into the
input stream or compared with the index.

Both read FILE the same way (:func:`input_options`, the formats of :mod:`dedupd.ops.producer`) and report
bad input the same way (:class:`BadLines`).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from dedupd.cli.common import F, common_options, connect_to, plural, settings_from
from dedupd.cli.failures import EXIT_INTERRUPTED, EXIT_RUNTIME
from dedupd.cli.waiting import Backpressure, wait_for_daemons, wait_options
from dedupd.errors import ConfigError
from dedupd.index.keys import Keys
from dedupd.ops.producer import FLUSH_S, FORMATS, BadLine, Item

if TYPE_CHECKING:
    from dedupd.index.verdict import Verdict
    from dedupd.settings import Settings

# how --format auto reads a file of lines (in push and query's help, and in dedup's)
AUTO_LINES_HELP = (
    "one whose first line is a JSON object is JSONL (a plain-text line in it is still a document, with a "
    "warning naming FILE:LINE; a line of JSON that is no object, such as an array or a number, is a bad "
    "line), else each line starting with '{' is JSONL and any other text (a guess is said on stderr)."
)
_FORMAT_HELP = (
    "jsonl: one JSON object per line with the stream fields (any other line is a bad line); text: one "
    "document per line; json-array: FILE is one JSON array of such objects (or of strings); files: FILE is "
    "a directory, one document per file (id = its path inside the directory; hidden files skipped); auto: "
    "a directory is files, a file starting with a JSON array is json-array, " + AUTO_LINES_HELP
)
_SHOWN_BAD = 20  # bad lines reported one by one; the rest are only counted


def input_options(func: F) -> F:
    """FILE and the input options that `push` and `query` share."""
    func = click.option(
        "--id-prefix",
        default=None,
        help="Id of a plain-text line: PREFIX + line number (default: the file name and ':').",
    )(func)
    func = click.option(
        "--format", "fmt", type=click.Choice(FORMATS), default="auto", show_default=True, help=_FORMAT_HELP
    )(func)
    return click.argument("file", type=click.Path(exists=True, allow_dash=True))(func)


class BadLines:
    """Reports bad input (``name:line: skipped: reason``), the first few one by one, and counts them."""

    def __init__(self, name: str, newline: str = "") -> None:
        self.name = name
        self.newline = newline  # "\n" while a progress bar holds the line
        self.count = 0

    def report(self, bad: BadLine) -> None:
        self.count += 1
        if self.count <= _SHOWN_BAD:
            where = bad.where if bad.where is not None else str(bad.line_no)
            click.echo(f"{self.newline}{self.name}:{where}: skipped: {bad.reason}", err=True)
        elif self.count == _SHOWN_BAD + 1:
            click.echo(f"{self.newline}{self.name}: more bad input; only counting from here", err=True)

    def say(self, message: str) -> None:
        """A line on stderr that does not land in the progress bar."""
        click.echo(f"{self.newline}{message}", err=True)

    def summary(self) -> str:
        return f"; skipped {plural(self.count, 'bad line')}" if self.count else ""


@contextlib.contextmanager
def _documents(
    file: str, fmt: str, id_prefix: str | None, settings: Settings, on_bytes: Callable[[int], None] | None
) -> Iterator[tuple[Iterator[Item | None], str]]:
    """The documents of FILE (``-``: standard input) as they arrive, and the input's name; None items
    when a pipe pauses for 100 ms."""
    from dedupd.daemon.entries import unsendable
    from dedupd.ops.producer import directory_items, read_items

    name = "stdin" if file == "-" else os.path.basename(os.path.normpath(file)) or file
    # a file name that is not UTF-8 (its bytes kept as surrogates) is shown, and names ids, as \xe9
    name = os.fsencode(name).decode("utf-8", "backslashreplace")
    if id_prefix is not None and unsendable({"--id-prefix": id_prefix}):
        raise ConfigError(f"--id-prefix {id_prefix!a} is not UTF-8 (ids must be)")
    prefix = id_prefix if id_prefix is not None else f"{name}:"
    if file != "-" and os.path.isdir(file):
        if fmt not in ("auto", "files"):
            raise ConfigError(f"{file} is a directory: use --format files (one document per file)")
        yield directory_items(Path(file), settings.max_doc_bytes, max_id_bytes=settings.max_id_bytes), name
        return
    if fmt == "files":
        raise ConfigError(f"--format files reads a directory; {file} is not one")

    newline = "\n" if on_bytes is not None else ""  # a progress bar holds the line (as in BadLines)

    def warn(message: str) -> None:
        click.echo(f"{newline}dedupd: warning: {message}", err=True)

    with contextlib.ExitStack() as stack:
        stream = sys.stdin.buffer if file == "-" else stack.enter_context(open(file, "rb"))
        yield (
            read_items(
                stream,
                fmt,
                prefix,
                name,
                idle_s=FLUSH_S,
                warn=warn,
                on_bytes=on_bytes,
                max_id_bytes=settings.max_id_bytes,
            ),
            name,
        )


@click.command()
@common_options
@input_options
@wait_options
@click.option(
    "--max-lag",
    type=click.IntRange(min=1),
    default=None,
    help="Backpressure: pause while more than this many pushed entries wait for the daemons "
    "(unread by the consumer group), so the input stream stays bounded. Default: no limit.",
)
def push(
    file: str,
    fmt: str,
    id_prefix: str | None,
    wait: bool,
    timeout: float,
    max_lag: int | None,
    **opts: Any,
) -> None:
    """Push documents from FILE (or - for standard input) into the input stream.

    JSONL lines carry the stream fields: {"id": "42", "text": "...", "op": "upsert", "source": "...",
    "items": [...], "meta": {...}}. Input is read as it arrives: from a pipe (tail -F log | dedupd push -)
    what was read is sent at least every 100 ms. Bad lines (invalid JSON, a JSON array, string or number
    where a JSONL object belongs, not UTF-8, a field holding a lone surrogate such as a \\ud800 escape,
    an id longer than max_id_bytes, ...) are reported with their line number and skipped, and the run
    exits 1; everything else is pushed. Ctrl-C stops and says how many documents were pushed (exit 130).
    """
    from dedupd.ops.producer import Producer

    settings = settings_from(**opts)
    size = os.path.getsize(file) if file != "-" and os.path.isfile(file) else None
    bar = (
        click.progressbar(length=size, label=f"pushing {file}", file=sys.stderr)
        if size and sys.stderr.isatty()
        else None
    )
    with (
        _documents(file, fmt, id_prefix, settings, bar.update if bar else None) as (docs, name),
        bar or contextlib.nullcontext(),
    ):
        client = connect_to(settings)
        keys = Keys(settings.prefix)
        producer = Producer(client, keys)
        bad = BadLines(name, "\n" if bar else "")
        room = Backpressure(client, keys, max_lag, bad.say) if max_lag is not None else None
        try:
            _push_all(docs, producer, bad, room)
        except KeyboardInterrupt:
            _interrupted(producer, bad)
    click.echo(f"pushed {plural(producer.pushed, 'document')} to {keys.docs}{bad.summary()}", err=True)
    if wait:
        wait_for_daemons(client, keys, timeout)
        click.echo("all pushed documents are processed", err=True)
    sys.exit(EXIT_RUNTIME if bad.count else 0)


def _interrupted(producer: Any, bad: BadLines) -> NoReturn:
    """Ctrl-C during a push: send what was read (at most 100 ms of input), say how many, exit 130."""
    at_least = ""
    import redis

    if producer.sending:  # cut off in the middle of a send: it may or may not have arrived; not resent
        at_least = "at least "
    else:
        with contextlib.suppress(KeyboardInterrupt, redis.RedisError):
            producer.flush()
    newline = "\n" if sys.stderr.isatty() else ""  # after the terminal's ^C
    pushed = plural(producer.pushed, "document")
    click.echo(
        f"{newline}interrupted: pushed {at_least}{pushed} to {producer.keys.docs}{bad.summary()}", err=True
    )
    sys.exit(EXIT_INTERRUPTED)


def _push_all(docs: Iterator[Item | None], producer: Any, bad: BadLines, room: Backpressure | None) -> None:
    """Add every document to the producer; send what is buffered when the input pauses or 100 ms after
    the last send; with ``room`` (--max-lag), wait for room after each send."""
    sent = producer.pushed
    for doc in docs:
        if doc is None:
            producer.flush()
        elif isinstance(doc, BadLine):
            bad.report(doc)
        else:
            producer.add(doc)
            producer.flush_due()
        if room is not None and producer.pushed != sent:
            sent = producer.pushed
            room.wait_for_room()
    producer.flush()


@click.command()
@common_options
@input_options
@click.option("--json", "as_json", is_flag=True, help="One JSON object per verdict and line.")
def query(file: str, fmt: str, id_prefix: str | None, as_json: bool, **opts: Any) -> None:
    """Is each document of FILE (or - for standard input) a near-duplicate of something indexed?

    Reads documents as `dedupd push` does (same formats) and compares each with the live index, the way
    an upsert would be verified, but inserts nothing and emits no alert. Prints one verdict per document:
    `ID: duplicate of X (0.93) [+2 more]` or `ID: unique`. A document indexed under the same ID is left
    out of the comparison (an upsert of ID would replace it), and the verdict says so: `ID: indexed under
    this id; duplicate of X (0.93)` or `ID: indexed under this id; no other document matches`. --json
    prints the verdict as a JSON object (id, duplicate, matches, duplicate_of, similarity, cluster,
    verify, indexed). Needs no running daemon; before any index exists nothing is a duplicate.
    """
    from dedupd.client import Client

    settings = settings_from(**opts)
    client = Client(connect_to(settings), settings)
    with _documents(file, fmt, id_prefix, settings, None) as (docs, name):
        bad = BadLines(name)
        _query_all(client, docs, bad, as_json)
    sys.exit(EXIT_RUNTIME if bad.count else 0)


def _query_all(client: Any, docs: Iterator[Item | None], bad: BadLines, as_json: bool) -> None:
    """Verdicts in batches of up to 64 documents, a batch as soon as the input pauses."""
    batch: list[tuple[str | None, str]] = []
    seen = 0
    for doc in docs:
        if isinstance(doc, BadLine):
            bad.report(doc)
        elif doc is not None:
            seen += 1
            if doc.get("text"):
                batch.append((doc.get("id") or f"#{seen}", doc["text"]))
            else:
                bad.report(BadLine(0, "no text to compare", doc.get("id") or f"#{seen}"))
        if batch and (doc is None or len(batch) >= 64):
            _print_verdicts(client, batch, as_json)
            batch = []
    if batch:
        _print_verdicts(client, batch, as_json)


def _print_verdicts(client: Any, batch: list[tuple[str | None, str]], as_json: bool) -> None:
    verdicts = client.query_many([text for _, text in batch], [doc_id for doc_id, _ in batch])
    for verdict in verdicts:
        click.echo(json.dumps(verdict.to_dict(), ensure_ascii=False) if as_json else _verdict_line(verdict))


def _verdict_line(verdict: Verdict) -> str:
    """``ID: duplicate of X (0.93) [+2 more]`` or ``ID: unique``; for an ID that is indexed (and so left
    out of the comparison), ``ID: indexed under this id; duplicate of X ...`` or ``...; no other document
    matches``."""
    if verdict.duplicate:
        more = len(verdict.matches) - 1
        said = f"duplicate of {verdict.duplicate_of} ({verdict.similarity or 0.0:.2f})" + (
            f" [+{more} more]" if more > 0 else ""
        )
    else:
        said = "no other document matches" if verdict.indexed else "unique"
    return f"{verdict.id}: indexed under this id; {said}" if verdict.indexed else f"{verdict.id}: {said}"
