"""``dedupd cluster ID``: the members of a document's duplicate cluster, a page at a time
(:meth:`dedupd.Client.cluster`; how the members are kept: :mod:`dedupd.index.unionfind`)."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from dedupd.cli.common import common_options, connect_to, plural, settings_from
from dedupd.cli.failures import EXIT_RUNTIME, fail

#: Said after the warning about a cluster older than the members' rings when it is shown over several pages:
#: only a page that walks the whole ring can show that no member is missing (unionfind.CLUSTER_PAGE).
_ONE_PAGE = " (only a cluster shown on one page can be checked: a larger --limit, up to 1,000)"


@click.command()
@common_options
@click.argument("doc_id", metavar="ID")
@click.option(
    "--limit",
    "-n",
    # cluster_page.PAGE_LIMIT and DEFAULT_LIMIT (not imported here: the index's modules load numba's kernels);
    # checked by click, so that a bad limit is a usage error before anything is looked up
    type=click.IntRange(1, 1000),
    default=100,
    show_default=True,
    help="The most members to show (1 to 1,000); the work of one page is bounded by it, not by the "
    "size of the cluster.",
)
@click.option(
    "--cursor",
    default=None,
    help="Go on from where the page before stopped (the cursor it printed; --json: its `next`).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the page as one JSON object: id, cluster, members, next (the cursor, null on the last "
    "page), complete (false: the cluster began in an index made by an earlier version, and members "
    "may be missing).",
)
def cluster(doc_id: str, limit: int, cursor: str | None, as_json: bool, **opts: Any) -> None:
    """Show the members of the duplicate cluster of the document ID.

    Prints one member id per line, ID itself first, at most --limit of them (default 100), then, on
    stderr, the cluster's name as alerts show it (its first document's id, '#N' once that one is
    deleted) and how many members were shown. When there are more, it says so and gives the --cursor
    that shows the next page. A document with no near-duplicate is a cluster of one. Reads only; needs
    no running daemon. A cluster that began in an index made by an earlier version may lack members that
    joined it before dedupd kept them: a warning says so, unless the page shows that none is missing.

    Exit status 2 for a bad --limit or --cursor; 1 when ID is not in the index (never pushed, deleted,
    or not processed yet), or when the member a cursor points to was deleted meanwhile (list again
    without --cursor).
    """
    from dedupd.client import Client
    from dedupd.index.cluster_page import CursorError, NotIndexedError

    settings = settings_from(**opts)
    client = Client(connect_to(settings), settings)
    try:
        page = client.cluster(doc_id, limit=limit, cursor=cursor)
    except (NotIndexedError, CursorError) as exc:
        fail(exc, EXIT_RUNTIME)
    if as_json:
        click.echo(json.dumps(page.to_dict(), ensure_ascii=False))
    else:
        for member in page.members:
            click.echo(member)
    sys.stdout.flush()  # the members before the summary, when both go to a terminal
    shown = plural(len(page.members), "member")
    if page.next is not None:
        click.echo(f"cluster {page.cluster}: {shown} shown; more: add --cursor {page.next}", err=True)
    elif cursor is None:
        alone = " (no near-duplicate)" if len(page.members) == 1 else ""
        click.echo(f"cluster {page.cluster}: {shown}{alone}", err=True)
    else:
        click.echo(f"cluster {page.cluster}: {shown} shown; that was the last page", err=True)
    if not page.complete:
        paged = "" if page.next is None and cursor is None else _ONE_PAGE
        click.echo(
            "dedupd: warning: this cluster began before dedupd kept clusters' members (an index made by an "
            f"earlier version): members that joined it before may be missing{paged}",
            err=True,
        )
