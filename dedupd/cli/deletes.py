"""``dedupd delete ID...``: delete documents by pushing ``op = delete`` entries into the input stream, as any
producer does (the ids read and checked by :mod:`dedupd.ops.deletes`)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any, BinaryIO

import click

from dedupd.cli.common import common_options, connect_to, plural, settings_from
from dedupd.cli.failures import EXIT_INTERRUPTED, EXIT_RUNTIME
from dedupd.cli.waiting import wait_for_daemons, wait_options
from dedupd.errors import ConfigError
from dedupd.index.keys import Keys

_SHOWN_BAD = 20  # bad lines reported one by one; the rest are only counted


@click.command()
@common_options
@click.argument("ids", nargs=-1, metavar="[ID]...")
@click.option(
    "--from",
    "from_file",
    type=click.Path(exists=True, dir_okay=False, allow_dash=True),
    default=None,
    help="Also delete the ids of FILE, one per line ('-': standard input, as an ID of '-' is).",
)
@wait_options
def delete(ids: tuple[str, ...], from_file: str | None, wait: bool, timeout: float, **opts: Any) -> None:
    """Delete documents: push one `op=delete` entry per ID into the input stream.

    The daemons remove each document from the index when they reach its entry, as they do for any
    producer's delete (a delete leaves a tombstone: an older entry of that id that arrives late does not
    bring it back); --wait waits until they have. Ids come from the arguments, and one per line from
    standard input (an ID of '-') or from --from FILE: the whole line is the id, blank lines are skipped.

    A bad ID argument (empty, longer than max_id_bytes, not UTF-8) stops the command before anything is
    pushed (exit 2); a bad line of a file is reported with its line number and skipped, and the run exits
    1. Prints how many deletes were pushed.

    \b
    Examples:
      dedupd delete doc-17 doc-42
      dedupd delete --from stale-ids.txt --wait
      dedupd cluster doc-17 | dedupd delete -     (a whole cluster, up to --limit of it)
    """
    from dedupd.ops.deletes import delete_entry
    from dedupd.ops.producer import BadLine, Producer

    files = list(dict.fromkeys((["-"] if "-" in ids else []) + ([from_file] if from_file else [])))
    named = [doc_id for doc_id in ids if doc_id != "-"]
    if not named and not files:
        raise click.UsageError(
            "give the ids to delete: ID..., '-' to read them from standard input, or --from FILE"
        )
    settings = settings_from(**opts)
    entries = []
    for doc_id in named:
        entry = delete_entry(doc_id, settings.max_id_bytes)
        if isinstance(entry, BadLine):
            raise ConfigError(f"ID {ascii(doc_id)[:80]}: {entry.reason}; nothing was pushed")
        entries.append(entry)
    client = connect_to(settings)
    keys = Keys(settings.prefix)
    producer = Producer(client, keys)
    bad = 0
    try:
        for entry in entries:
            producer.add(entry)
        for name in files:
            bad += _push_lines(producer, name, settings.max_id_bytes)
        producer.flush()
    except KeyboardInterrupt:
        at_least = "at least " if producer.sending else ""  # cut off while sending: it may have arrived
        pushed = plural(producer.pushed, "delete")
        click.echo(f"\ninterrupted: pushed {at_least}{pushed} to {keys.docs}", err=True)
        sys.exit(EXIT_INTERRUPTED)
    skipped = f"; skipped {plural(bad, 'bad line')}" if bad else ""
    click.echo(f"pushed {plural(producer.pushed, 'delete')} to {keys.docs}{skipped}", err=True)
    if wait:
        wait_for_daemons(client, keys, timeout)
        click.echo("the daemons have processed them: the documents are deleted", err=True)
    sys.exit(EXIT_RUNTIME if bad else 0)


@contextlib.contextmanager
def _opened(name: str) -> Iterator[BinaryIO]:
    if name == "-":
        yield sys.stdin.buffer
    else:
        with open(name, "rb") as stream:
            yield stream


def _push_lines(producer: Any, name: str, max_id_bytes: int) -> int:
    """Add the delete of each id of file ``name`` (``-``: standard input) to ``producer``, sending what is
    buffered when the input pauses or 100 ms after the last send; report bad lines. Returns how many."""
    from dedupd.ops.deletes import id_lines
    from dedupd.ops.producer import FLUSH_S, BadLine

    shown = "stdin" if name == "-" else name
    bad = 0
    with _opened(name) as stream:
        for item in id_lines(stream, max_id_bytes, FLUSH_S):
            if item is None:
                producer.flush()
            elif isinstance(item, BadLine):
                bad += 1
                if bad <= _SHOWN_BAD:
                    click.echo(f"{shown}:{item.line_no}: skipped: {item.reason}", err=True)
                elif bad == _SHOWN_BAD + 1:
                    click.echo(f"{shown}: more bad lines; only counting from here", err=True)
            else:
                producer.add(item)
                producer.flush_due()
    return bad
