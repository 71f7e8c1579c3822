"""``dedupd check`` and ``dedupd stats``: whether the daemons are alive, and how the index and the streams
are doing."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from dedupd.cli.common import common_options, connect_to, plural, settings_from
from dedupd.cli.failures import one_line
from dedupd.errors import DedupdError
from dedupd.index.keys import Keys


@click.command()
@common_options
@click.option(
    "--max-age", type=float, default=None, help="Seconds a heartbeat may be old (default: its TTL)."
)
@click.option(
    "--consumer",
    "wanted",
    multiple=True,
    help="Healthy only when this consumer heartbeats (repeatable); e.g. a systemd instance's own name.",
)
def check(max_age: float | None, wanted: tuple[str, ...], **opts: Any) -> None:
    """Health check: exit 0 when Redis answers, evicts no keys and a daemon is heartbeating, else 1.

    Fit for systemd and Kubernetes probes; prints one line saying why. A server whose maxmemory-policy
    is not noeviction is unhealthy (it loses the index's keys in silence). With --consumer, the named
    daemon(s) must be the ones heartbeating (a per-instance probe); without, any daemon will do.
    """
    import redis

    from dedupd.daemon.monitor import live_consumers
    from dedupd.server.eviction import first_refusal, read_memory

    settings = settings_from(**opts)
    try:
        client = connect_to(settings, start_embedded=False)
        evicting = first_refusal(read_memory(client))
        live = live_consumers(client, Keys(settings.prefix), max_age)
    except (DedupdError, redis.RedisError) as exc:
        click.echo(f"unhealthy: {one_line(exc)}")
        sys.exit(1)
    if evicting is not None:
        click.echo(f"unhealthy: {evicting}")
        sys.exit(1)
    if not live:
        click.echo("unhealthy: Redis answers but no daemon is heartbeating")
        sys.exit(1)
    missing = sorted(set(wanted) - set(live))
    if missing:
        click.echo(f"unhealthy: no heartbeat from {', '.join(missing)} (alive: {', '.join(sorted(live))})")
        sys.exit(1)
    click.echo(f"healthy: {plural(len(live), 'daemon')} alive: {', '.join(sorted(live))}")
    sys.exit(0)


@click.command()
@common_options
@click.option(
    "--interval",
    type=float,
    default=1.0,
    show_default=True,
    help="Seconds between two samples of the counters for the throughput (0: skip it).",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of the table.")
def stats(interval: float, as_json: bool, **opts: Any) -> None:
    """Index size, Redis memory and eviction policy, stream lag, pending entries, daemons, throughput.

    Documents indexed, the parameters stored with the index, Redis memory (whole server) and per
    document, the server's maxmemory, headroom and eviction policy (with a warning when it is not
    noeviction, or when the headroom is under 10 % of maxmemory or 64 MiB, whichever is smaller), the
    input stream's length, the consumer group's lag and pending entries, each consumer's pending
    entries and idle time (and the stale ones: idle over 10 x claim_idle_ms, nothing pending, no
    heartbeat), live daemons from their heartbeats, the alerts and dead-letter streams, the running
    totals, and the throughput over --interval seconds.
    """
    from dedupd.ops.stats import collect, render

    settings = settings_from(**opts)
    client = connect_to(settings)
    stale_ms = 10 * settings.claim_idle_ms
    snapshot = collect(client, Keys(settings.prefix), interval=max(0.0, interval), stale_idle_ms=stale_ms)
    config = str(settings.config_file) if settings.config_file is not None else None
    if as_json:
        click.echo(json.dumps({**snapshot.to_dict(), "config_file": config}))
        return
    click.echo(f"config file: {config or 'none (built-in defaults, DEDUPD_* variables and flags)'}")
    click.echo(render(snapshot))
