"""The ``dedupd`` command line."""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from redis.exceptions import NoPermissionError

from dedupd import __version__
from dedupd.errors import DedupdError
from dedupd.keys import Keys
from dedupd.logs import setup_logging
from dedupd.settings import Settings, load_settings

F = TypeVar("F", bound=Callable[..., Any])


def common_options(func: F) -> F:
    """Options every command that talks to Redis takes (each also has a DEDUPD_* variable)."""

    @click.option(
        "--config",
        "config_file",
        type=click.Path(exists=True, dir_okay=False),
        help="TOML settings file (also DEDUPD_CONFIG); see config/dedupd.toml.",
    )
    @click.option("--redis-url", help="redis:// or rediss:// URL (DEDUPD_REDIS_URL); unset: embedded Redis.")
    @click.option("--prefix", help="Key prefix (DEDUPD_PREFIX, default 'dedupd').")
    @click.option(
        "--log-level",
        type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
        help="Log level (DEDUPD_LOG_LEVEL).",
    )
    @functools.wraps(func)
    def wrapper(*args: Any, config_file: str | None, **kwargs: Any) -> Any:
        if config_file:
            os.environ["DEDUPD_CONFIG"] = config_file
        return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def settings_from(**overrides: Any) -> Settings:
    if overrides.get("log_level"):
        overrides["log_level"] = overrides["log_level"].upper()
    settings = load_settings(**overrides)
    setup_logging(settings.log_level, settings.log_json)
    return settings


class DedupdGroup(click.Group):
    """Turns DedupdError into a one-line message and exit status 2, instead of a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except DedupdError as exc:
            click.echo(f"dedupd: error: {exc}", err=True)
            sys.exit(2)
        except NoPermissionError as exc:
            click.echo(
                f"dedupd: error: Redis refused a command to this user: {exc}. Give the user the ACL "
                "shown in README.md (Operations, Security).",
                err=True,
            )
            sys.exit(2)


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

    Settings come from flags, DEDUPD_* variables, a TOML file (--config), then defaults.
    With no DEDUPD_REDIS_URL, an embedded Redis is started with its data in DEDUPD_DATA_DIR.
    """


@cli.command()
@common_options
@click.option("--consumer", help="Consumer name in the group (DEDUPD_CONSUMER; default unique per process).")
@click.option("--shingle", help="word:K or char:K (DEDUPD_SHINGLE, default word:3).")
@click.option("--num-perm", type=int, help="MinHash length (DEDUPD_NUM_PERM, default 128).")
@click.option(
    "--threshold", type=float, help="Jaccard threshold for an alert (DEDUPD_THRESHOLD, default 0.8)."
)
@click.option("--bands", type=int, help="Explicit LSH bands (with --rows); else chosen from the threshold.")
@click.option("--rows", type=int, help="Explicit rows per band (with --bands).")
@click.option(
    "--verify",
    type=click.Choice(["signature", "exact"]),
    help="Verify candidates by signature agreement or exact Jaccard (DEDUPD_VERIFY, default exact).",
)
@click.option("--seed", type=int, help="MinHash seed (DEDUPD_SEED, default 1).")
@click.option("--minhash", type=click.Choice(["oph", "classic"]), help="Signature scheme (DEDUPD_MINHASH).")
@click.option("--capacity", type=int, help="Expected index size; sizes the buckets (DEDUPD_CAPACITY).")
@click.option("--batch-size", type=int, help="Entries per read (DEDUPD_BATCH_SIZE).")
@click.option("--block-ms", type=int, help="Blocking read timeout in ms (DEDUPD_BLOCK_MS).")
@click.option("--log-json/--no-log-json", default=None, help="JSON log lines (DEDUPD_LOG_JSON).")
def serve(**opts: Any) -> None:
    """Run the consumer daemon in the foreground.

    Reads the input stream in the consumer group 'dedupd' until SIGINT/SIGTERM, then finishes the
    batch in hand, acknowledges it and exits 0 (a second signal exits at once). Start one per core,
    on as many machines as you like: they share the work.
    """
    from dedupd.daemon import Daemon

    settings = settings_from(**opts)
    try:
        daemon = Daemon(settings)  # waits up to 60 s for Redis, logging each retry
    except KeyboardInterrupt:
        click.echo("dedupd: interrupted while connecting", err=True)
        sys.exit(130)
    daemon.install_signal_handlers()
    sys.exit(daemon.run())


@cli.command()
@common_options
@click.argument("file", type=click.File("r", encoding="utf-8", errors="strict"))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["auto", "jsonl", "text"]),
    default="auto",
    show_default=True,
    help="jsonl: one JSON object per line with the stream fields; text: one document per line; "
    "auto: each line that is a JSON object is JSONL, others are text.",
)
@click.option(
    "--id-prefix",
    default=None,
    help="Id of a plain-text line: PREFIX + line number (default: the file name and ':').",
)
@click.option("--wait/--no-wait", default=False, help="Wait until the daemons have processed everything.")
@click.option("--timeout", type=float, default=600.0, show_default=True, help="Seconds --wait waits at most.")
@click.option(
    "--max-lag",
    type=click.IntRange(min=1),
    default=None,
    help="Backpressure: pause while more than this many pushed entries wait for the daemons "
    "(unread by the consumer group), so the input stream stays bounded. Default: no limit.",
)
def push(
    file: Any, fmt: str, id_prefix: str | None, wait: bool, timeout: float, max_lag: int | None, **opts: Any
) -> None:
    """Push documents from FILE (or - for standard input) into the input stream.

    JSONL lines carry the stream fields: {"id": "42", "text": "...", "op": "upsert", "source": "...",
    "items": [...], "meta": {...}}. Malformed JSONL lines are reported with their line number and
    skipped (exit status 1); everything else is pushed.
    """
    from dedupd.connection import connect
    from dedupd.producer import BadLine, Producer, parse_lines

    settings = settings_from(**opts)
    client = connect(settings)
    keys = Keys(settings.prefix)
    name = "stdin" if file.name in ("-", "<stdin>") else os.path.basename(file.name)
    prefix = id_prefix if id_prefix is not None else f"{name}:"
    size = _file_size(file)
    producer = Producer(client, keys)
    bad = 0
    flushed = 0

    def lines() -> Any:
        done = 0
        for no, line in enumerate(file):
            if size is not None:
                done += len(line) if line.isascii() else len(line.encode("utf-8", "surrogatepass"))
                if no % 256 == 255:  # the bar redraws at most a few times a second anyway
                    bar.update(done)
                    done = 0
            yield line
        if size is not None:
            bar.update(done)

    with click.progressbar(
        lines() if size is None else None, length=size, label=f"pushing {name}", file=sys.stderr
    ) as bar:
        source = bar if size is None else lines()
        for item in parse_lines(source, fmt, prefix):
            if isinstance(item, BadLine):
                bad += 1
                click.echo(f"\n{name}:{item.line_no}: skipped: {item.reason}", err=True)
                continue
            producer.add(item)
            if max_lag is not None and producer.pushed != flushed:
                flushed = producer.pushed
                _wait_for_room(client, keys, max_lag)
        producer.flush()
    click.echo(
        f"pushed {producer.pushed} documents to {keys.docs}" + (f"; skipped {bad} bad lines" if bad else ""),
        err=True,
    )
    if wait:
        from dedupd.monitor import wait_drained

        if not wait_drained(client, keys, timeout):
            raise DedupdError(f"the daemons did not finish within {timeout:.0f}s; is `dedupd serve` running?")
        click.echo("all pushed documents are processed", err=True)
    sys.exit(1 if bad else 0)


def _wait_for_room(client: Any, keys: Keys, max_lag: int) -> None:
    """Sleep while the consumer group has more than ``max_lag`` unread entries (no group yet: the stream length)."""
    from dedupd.monitor import group_state

    delay = 0.01
    while True:
        state = group_state(client, keys)
        backlog = client.xlen(keys.docs) if state is None else state["lag"]
        if backlog is None or backlog <= max_lag:  # None: Redis cannot tell (entries were deleted); go on
            return
        time.sleep(delay)
        delay = min(delay * 2, 0.5)


def _file_size(file: Any) -> int | None:
    try:
        return os.fstat(file.fileno()).st_size if os.path.isfile(file.name) else None
    except (OSError, ValueError, AttributeError):
        return None


@cli.command()
@common_options
@click.option("--follow", "-f", is_flag=True, help="Keep printing new alerts as they arrive (Ctrl-C stops).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per alert and line.")
@click.option("--count", "-n", type=int, default=None, help="At most this many (from the oldest kept).")
@click.option("--since", default="-", help="Start at this alerts-stream id.")
def alerts(follow: bool, as_json: bool, count: int | None, since: str, **opts: Any) -> None:
    """Show duplicate alerts: the document, its best match, the similarity, the cluster."""
    from dedupd.alerts import follow_alerts, read_alerts, render
    from dedupd.connection import connect

    settings = settings_from(**opts)
    client = connect(settings)
    keys = Keys(settings.prefix)

    def show(alert: dict[str, Any]) -> None:
        click.echo(json.dumps(alert, ensure_ascii=False) if as_json else render(alert))

    last = since if since != "-" else "0-0"
    for alert in read_alerts(client, keys, since, count):
        show(alert)
        last = alert["alert"]
    if follow:
        try:
            for new in follow_alerts(client, keys, last):
                if new is not None:
                    show(new)
        except KeyboardInterrupt:
            pass


@cli.command()
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
    """Health check: exit 0 when Redis answers and a daemon is heartbeating, else 1.

    Fit for systemd and Kubernetes probes; prints one line saying why. With --consumer, the named
    daemon(s) must be the ones heartbeating (a per-instance probe); without, any daemon will do.
    """
    from dedupd.monitor import live_consumers

    settings = settings_from(**opts)
    try:
        from dedupd.connection import connect

        client = connect(settings, start_embedded=False)
        live = live_consumers(client, Keys(settings.prefix), max_age)
    except DedupdError as exc:
        click.echo(f"unhealthy: {exc}")
        sys.exit(1)
    if not live:
        click.echo("unhealthy: Redis answers but no daemon is heartbeating")
        sys.exit(1)
    missing = sorted(set(wanted) - set(live))
    if missing:
        click.echo(f"unhealthy: no heartbeat from {', '.join(missing)} (alive: {', '.join(sorted(live))})")
        sys.exit(1)
    click.echo(f"healthy: {len(live)} daemon(s) alive: {', '.join(sorted(live))}")
    sys.exit(0)


@cli.command()
@click.option(
    "--config",
    "config_file",
    type=click.Path(exists=True, dir_okay=False),
    help="TOML settings file (also DEDUPD_CONFIG): its threshold, num_perm and weights are the defaults.",
)
@click.option("--threshold", type=float, help="Jaccard threshold (DEDUPD_THRESHOLD, default 0.8).")
@click.option("--num-perm", type=int, help="MinHash length (DEDUPD_NUM_PERM, default 128).")
@click.option("--bands", type=int, help="Describe this banding (with --rows) instead of the chosen one.")
@click.option("--rows", type=int, help="Rows per band (with --bands).")
@click.option(
    "--span", type=float, default=0.3, show_default=True, help="Table from threshold-SPAN to +SPAN."
)
@click.option("--step", type=float, default=0.05, show_default=True, help="Table step in Jaccard similarity.")
@click.option(
    "--plot",
    "plot_file",
    type=click.Path(dir_okay=False, writable=True),
    help="Write the S-curve to this PNG (needs matplotlib: pip install 'dedupd[plot]').",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of the table.")
def tune(
    config_file: str | None,
    threshold: float | None,
    num_perm: int | None,
    bands: int | None,
    rows: int | None,
    span: float,
    step: float,
    plot_file: str | None,
    as_json: bool,
) -> None:
    """Choose LSH bands x rows for a threshold and num_perm, and show what they cost.

    Prints the banding the daemon would choose (or the one given by --bands/--rows), how many
    signature positions it uses, the false-negative rate (1 - P(candidate)) at and above the
    threshold and the false-positive rate (P(candidate)) below it, the areas the chooser weighs,
    and a comparison with neighbouring bandings. Needs no Redis.
    """
    from dedupd.tuning import plot, render
    from dedupd.tuning import tune as make_report

    if config_file:
        os.environ["DEDUPD_CONFIG"] = config_file
    settings = load_settings(threshold=threshold, num_perm=num_perm)
    if bands is None and rows is None and settings.bands is not None:
        bands, rows = settings.bands, settings.rows
    report = make_report(
        settings.threshold,
        settings.num_perm,
        settings.fp_weight,
        settings.fn_weight,
        bands=bands,
        rows=rows,
        span=span,
        step=step,
    )
    written = str(plot(report, plot_file)) if plot_file else None
    if as_json:
        click.echo(json.dumps({**report.to_dict(), "plot": written}))
    else:
        click.echo(render(report))
        if written:
            click.echo(f"\nS-curve written to {written}")


@cli.command()
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
    """Index size, Redis memory per document, stream lag, pending entries, daemons, throughput.

    Documents indexed, the parameters stored with the index, Redis memory (whole server) and per
    document, the input stream's length, the consumer group's lag and pending entries, each
    consumer's pending entries and idle time, live daemons from their heartbeats, the alerts and
    dead-letter streams, the running totals, and the throughput over --interval seconds.
    """
    from dedupd.connection import connect
    from dedupd.stats import collect, render

    settings = settings_from(**opts)
    client = connect(settings)
    snapshot = collect(client, Keys(settings.prefix), interval=max(0.0, interval))
    click.echo(json.dumps(snapshot.to_dict()) if as_json else render(snapshot))


@cli.command()
@common_options
@click.option("--shingle", help="New shingling, word:K or char:K (re-indexes the source texts).")
@click.option("--num-perm", type=int, help="New MinHash length (re-indexes the source texts).")
@click.option("--seed", type=int, help="New MinHash seed (re-indexes the source texts).")
@click.option(
    "--minhash", type=click.Choice(["oph", "classic"]), help="New signature scheme (re-indexes texts)."
)
@click.option("--threshold", type=float, help="Threshold the banding is chosen for (bands x rows).")
@click.option("--bands", type=int, help="New explicit bands (with --rows): re-bands the stored signatures.")
@click.option("--rows", type=int, help="New explicit rows per band (with --bands).")
@click.option("--capacity", type=int, help="New expected index size (re-sizes the bucket hashes).")
@click.option(
    "--verify",
    type=click.Choice(["signature", "exact"]),
    help="New verification (exact needs the texts: re-indexes them).",
)
@click.option(
    "--from",
    "source",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="JSONL file with the documents' texts (default: the input stream's retained history).",
)
@click.option("--allow-missing", is_flag=True, help="Switch even if the source lacks some indexed documents.")
@click.option("--abort", is_flag=True, help="Forget an unfinished rebuild and delete what it had built.")
@click.option(
    "--wait",
    "wait_s",
    type=float,
    default=60.0,
    show_default=True,
    help="Seconds to wait for running daemons to start (or stop) writing into both generations.",
)
def rebuild(source: Path | None, allow_missing: bool, abort: bool, wait_s: float, **opts: Any) -> None:
    """Reindex with new parameters while `dedupd serve` keeps serving.

    Only the parameters given (as flags, DEDUPD_* variables or in --config) change; the others keep the
    index's values. When only the banding, threshold or bucket sizing changes the stored signatures are
    re-banded; when shingling, num_perm, seed, scheme or verification change, the texts are re-indexed from
    the input stream's retained history or --from FILE. The rebuild replays every entry that arrives
    meanwhile; at the switch the daemons pause for a moment, then follow the new generation, and the old one
    is deleted. Interrupted, a rerun with the same flags resumes; --abort stops and cleans up.
    """
    from dedupd.connection import connect
    from dedupd.generations import Generations
    from dedupd.rebuild import Rebuild, RebuildError

    settings = settings_from(**opts)
    client = connect(settings)
    bar = _PhaseBar()
    stored = Generations(client, Keys(settings.prefix)).read()
    if abort:
        dropped = Rebuild(client, settings, settings.index_spec(), bar.update).abort()
        click.echo(f"rebuild aborted; deleted {dropped} keys of the unfinished generation", err=True)
        return
    if stored is None:
        raise RebuildError(
            f"there is no index under prefix {settings.prefix!r} yet: nothing to rebuild (start "
            "`dedupd serve` with the new settings instead)"
        )
    target = settings.rebuild_target(stored.spec)
    rb = Rebuild(
        client, settings, target, bar.update, source=source, allow_missing=allow_missing, wait_s=wait_s
    )
    state, resumed = rb.begin()
    assert state.next_spec is not None
    click.echo(
        f"{'resuming' if resumed else 'rebuilding'} generation {state.gen} -> {state.next_gen} "
        f"({state.next_mode}): {state.spec.describe_changes(state.next_spec)}",
        err=True,
    )
    report = rb.run(state)
    bar.finish()
    click.echo(
        f"switched to generation {state.next_gen}: {report.documents} documents ({report.before} before), "
        f"{report.processed} entries processed in {report.seconds:.1f}s; deleted generation {state.gen} "
        f"({report.dropped} keys)",
        err=True,
    )


class _PhaseBar:
    """One progress bar per phase of a long command, on standard error."""

    def __init__(self) -> None:
        self.phase: str | None = None
        self.bar: Any = None

    def update(self, phase: str, done: int, total: int | None) -> None:
        if phase != self.phase:
            self.finish()
            self.phase = phase
            self.bar = click.progressbar(
                length=total or 1,
                label=phase,
                file=sys.stderr,
                show_eta=total is not None,
                show_pos=True,
                show_percent=total is not None,
            )
            self.bar.render_progress()
        if total is not None:
            self.bar.length = max(total, 1)
        self.bar.update(done - self.bar.pos)

    def finish(self) -> None:
        if self.bar is not None:
            self.bar.render_finish()
            self.bar = None


def _register_mining() -> None:
    from dedupd.mining.cli import mine

    cli.add_command(mine)


_register_mining()


def main() -> None:
    """Console-script entry point."""
    logging.captureWarnings(True)
    started = time.monotonic()
    try:
        cli(prog_name="dedupd")
    finally:
        logging.getLogger(__name__).debug("done in %.2fs", time.monotonic() - started)
