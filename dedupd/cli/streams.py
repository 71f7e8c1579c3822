"""``dedupd alerts`` and ``dedupd dead``: the output streams, printed and followed."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from typing import Any

import click

from dedupd.cli.common import F, common_options, connect_to, plural, settings_from
from dedupd.index.keys import Keys

_SINCE_OPTION_HELP = (
    "Start at this stream id (inclusive; '(ID' after it), '-' for the oldest kept (default), or 'now' "
    "(also '$'): only what arrives from now on, with --follow."
)


def stream_options(what: str) -> Callable[[F], F]:
    """The options `alerts` and `dead` share."""

    def decorate(func: F) -> F:
        for option in reversed(
            [
                click.option(
                    "--follow",
                    "-f",
                    is_flag=True,
                    help=f"Keep printing new {what} as they arrive (Ctrl-C stops).",
                ),
                click.option("--json", "as_json", is_flag=True, help="One JSON object per line, all fields."),
                click.option(
                    "--count",
                    "-n",
                    type=click.IntRange(min=0),
                    default=None,
                    help=f"Only the newest N {what} (of those at or after --since); with --follow, then new ones.",
                ),
                click.option("--since", default="-", show_default=True, help=_SINCE_OPTION_HELP),
            ]
        ):
            func = option(func)
        return func

    return decorate


def _show_stream(
    stream: str,
    noun: str,
    decode: Callable[[str, dict[bytes, bytes]], dict[str, Any]],
    render: Callable[[dict[str, Any]], str],
    opts: dict[str, Any],
) -> None:
    """Print the newest ``count`` entries of ``stream`` since ``since``, then follow it if asked; when
    there are none, say so on stderr (stdout stays clean for pipes)."""
    from dedupd.ops.alerts import follow_stream, parse_since, read_stream, window

    follow, as_json, count, since = (opts.pop(k) for k in ("follow", "as_json", "count", "since"))
    parse_since(since)  # a bad --since is a usage error before anything connects
    settings = settings_from(**opts)
    client = connect_to(settings)
    keys = Keys(settings.prefix)
    stream_key = getattr(keys, stream)

    def show(entry_id: str, fields: dict[bytes, bytes]) -> None:
        decoded = decode(entry_id, fields)
        click.echo(json.dumps(decoded, ensure_ascii=False) if as_json else render(decoded))

    span = window(client, stream_key, since, follow)
    shown = 0
    for entry in read_stream(client, stream_key, span.since, count, newest=True, until=span.until):
        show(*entry)
        shown += 1
    said = None if shown else _none_shown(client, keys, stream_key, noun, since, count, follow)
    if said is not None:
        click.echo(said, err=True)
    if follow:
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how following ends: exit 0
            for new in follow_stream(client, stream_key, span.follow_from):
                if new is not None:
                    show(*new)


def _none_shown(
    client: Any, keys: Keys, stream_key: str, noun: str, since: str, count: int | None, follow: bool
) -> str | None:
    """The line that says why nothing was printed: the stream is empty (and, for alerts, whether any daemon
    runs to write them), or holds nothing since --since; with --follow, that new entries are waited for.
    None when nothing was asked for (-n 0 without --follow)."""
    from dedupd.ops.alerts import NOW, parse_since

    held = int(client.xlen(stream_key) or 0)
    if held == 0:
        hint = _daemons_hint(client, keys) if stream_key == keys.alerts else ""
        waiting = "; waiting for new ones (Ctrl-C stops)" if follow else ""
        return f"no {noun} yet ({stream_key} is empty{hint}){waiting}"
    older = f"{stream_key} holds {plural(held, 'older one')}"
    if follow:
        return f"waiting for new {noun} (Ctrl-C stops); {older}"
    if count == 0:
        return None
    if parse_since(since) == NOW:
        return f"no new {noun}: --since now shows what arrives with --follow ({older})"
    return f"no {noun} since {since} ({older})"


def _daemons_hint(client: Any, keys: Keys) -> str:
    """``; no daemon is heartbeating...`` when none runs to write alerts, else nothing."""
    from dedupd.daemon.monitor import live_consumers

    if live_consumers(client, keys):
        return ""
    return "; no daemon is heartbeating: `dedupd serve` processes what `dedupd push` sends"


@click.command()
@common_options
@stream_options("alerts")
def alerts(**opts: Any) -> None:
    """Show duplicate alerts: the document, its best match, the similarity, the cluster.

    Oldest first; -n N shows only the newest N; --since now with --follow shows only new alerts.
    """
    from dedupd.ops.alerts import decode_alert, render

    _show_stream("alerts", "alerts", decode_alert, render, opts)


@click.command()
@common_options
@stream_options("dead letters")
def dead(**opts: Any) -> None:
    """Show dead letters: input entries the daemons could not process, and why.

    Each line: the input entry's id, the error code (missing_text, too_large, bad_json, bad_utf8,
    unknown_op, max_deliveries, ...), its detail, and the original fields shortened; --json prints
    them whole.
    """
    from dedupd.ops.alerts import decode_dead, render_dead

    _show_stream("dead", "dead letters", decode_dead, render_dead, opts)
