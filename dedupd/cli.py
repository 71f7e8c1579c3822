"""The ``dedupd`` command line."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar
from urllib.parse import unquote, urlsplit

import click

from dedupd import __version__
from dedupd.errors import ConfigError, DedupdError
from dedupd.index.keys import Keys
from dedupd.logs import setup_logging
from dedupd.ops.producer import FLUSH_S, FORMATS, BadLine, Item

if TYPE_CHECKING:  # redis and the settings (pydantic) are imported by the commands that use them: `dedupd
    # mine --input FILE` and `dedupd tune` start without them (a quarter of a second)
    from dedupd.settings import Settings

F = TypeVar("F", bound=Callable[..., Any])
log = logging.getLogger("dedupd.cli")

EXIT_USAGE = 2  # a usage or configuration error (including a Redis that cannot be reached or used)
EXIT_RUNTIME = 1  # something failed while working (bad input lines, a Redis error mid-way, a bug)
EXIT_INTERRUPTED = 130  # Ctrl-C
# Output cut short by the reader (`dedupd alerts | head -1`) is not an error: the reader has what it
# wanted. dedupd stops quietly with status 0 (not 141 = 128 + SIGPIPE, which `set -o pipefail` scripts
# would have to special-case).
EXIT_BROKEN_PIPE = 0


def plural(n: int, one: str, many: str | None = None) -> str:
    """``1 document``, ``2 documents`` (``many`` for irregular plurals)."""
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


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


def _quiet_stdout() -> None:
    """After EPIPE on stdout: point it at /dev/null so that the interpreter's last flush is silent."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def common_options(func: F) -> F:
    """Options every command that talks to Redis takes (each also has a DEDUPD_* variable)."""

    @click.option(
        "--config",
        "config_file",
        type=click.Path(exists=True, dir_okay=False),
        help="TOML settings file (also DEDUPD_CONFIG; else ./dedupd.toml, else /etc/dedupd/dedupd.toml); "
        "see config/dedupd.toml.",
    )
    @click.option("--redis-url", help="redis:// or rediss:// URL (DEDUPD_REDIS_URL); unset: embedded Redis.")
    @click.option("--prefix", help="Key prefix (DEDUPD_PREFIX, default 'dedupd').")
    @click.option(
        "--log-level",
        type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
        help="Log level (DEDUPD_LOG_LEVEL, any case).",
    )
    @functools.wraps(func)
    def wrapper(*args: Any, config_file: str | None, **kwargs: Any) -> Any:
        if config_file:
            os.environ["DEDUPD_CONFIG"] = config_file
        return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def settings_from(**overrides: Any) -> Settings:
    """The settings for a command (flags over DEDUPD_* over the TOML file), with logging set up and the
    warnings about them (unknown DEDUPD_* variables) logged."""
    from dedupd.settings import load_settings

    if overrides.get("log_level"):
        overrides["log_level"] = overrides["log_level"].upper()
    settings = load_settings(**overrides)
    setup_logging(settings.log_level, settings.log_json)
    for warning in settings.warnings:
        logging.getLogger("dedupd.settings").warning("%s", warning)
    return settings


def connect_to(settings: Settings, **kwargs: Any) -> Any:
    """``connection.connect`` with the Redis URL's database checked first, and a database the server
    does not have reported as one line."""
    import redis

    from dedupd.server.connection import connect

    database = _url_database(settings.redis_url)
    try:
        return connect(settings, **kwargs)
    except redis.ResponseError as exc:
        if "DB index" in str(exc) or "out of range" in str(exc):
            raise ConfigError(
                f"Redis at {settings.redacted_url()} has no database {database}: {exc} (a server has "
                "databases 0 to 15 unless its `databases` setting says otherwise)"
            ) from None
        raise


def _url_database(url: str | None) -> str:
    """The database named by a redis:// URL's path ('0' when none); ConfigError when it is no number."""
    if not url or not url.startswith(("redis://", "rediss://")):
        return "0"
    try:
        path = unquote(urlsplit(url).path).strip("/")
    except ValueError:
        return "?"  # connect() explains unparsable URLs
    if "@" in path or ":" in path:
        return "?"  # an unencoded '/' in the password: connect() says to percent-encode it
    if path and not path.isdigit():
        raise ConfigError(
            f"the Redis URL {_redact_path(url)} names database {path[:20]!r}: it must be a number, as in "
            "redis://host:6379/0"
        )
    return path or "0"


def _redact_path(url: str) -> str:
    scheme, _, rest = url.partition("://")
    host = rest.rpartition("@")[2].split("/")[0]
    return f"{scheme}://{'***@' if '@' in rest else ''}{host}/..."


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
            _quiet_stdout()
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
    try:
        daemon = Daemon(settings)  # waits up to 60 s for Redis, logging each retry
    except KeyboardInterrupt:
        click.echo("dedupd: interrupted while connecting", err=True)
        sys.exit(130)
    daemon.install_signal_handlers()
    sys.exit(daemon.run())


_FORMAT_HELP = (
    "jsonl: one JSON object per line with the stream fields; text: one document per line; json-array: "
    "FILE is one JSON array of such objects (or of strings); files: FILE is a directory, one document per "
    "file (id = its path inside the directory; hidden files skipped); auto: a directory is files, a file "
    "starting with a JSON array is json-array, else each line starting with '{' is JSONL and any other "
    "text (a guess is said on stderr)."
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


class _BadLines:
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

    def summary(self) -> str:
        return f"; skipped {plural(self.count, 'bad line')}" if self.count else ""


@contextlib.contextmanager
def _documents(
    file: str, fmt: str, id_prefix: str | None, settings: Settings, on_bytes: Callable[[int], None] | None
) -> Iterator[tuple[Iterator[Item | None], str]]:
    """The documents of FILE (``-``: standard input) as they arrive, and the input's name; None items
    when a pipe pauses for 100 ms."""
    from dedupd.ops.producer import directory_items, read_items

    name = "stdin" if file == "-" else os.path.basename(os.path.normpath(file)) or file
    prefix = id_prefix if id_prefix is not None else f"{name}:"
    if file != "-" and os.path.isdir(file):
        if fmt not in ("auto", "files"):
            raise ConfigError(f"{file} is a directory: use --format files (one document per file)")
        yield directory_items(Path(file), settings.max_doc_bytes), name
        return
    if fmt == "files":
        raise ConfigError(f"--format files reads a directory; {file} is not one")

    def warn(message: str) -> None:
        click.echo(f"dedupd: warning: {message}", err=True)

    with contextlib.ExitStack() as stack:
        stream = sys.stdin.buffer if file == "-" else stack.enter_context(open(file, "rb"))
        yield read_items(stream, fmt, prefix, name, idle_s=FLUSH_S, warn=warn, on_bytes=on_bytes), name


@cli.command()
@common_options
@input_options
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
    what was read is sent at least every 100 ms. Bad lines (invalid JSON, not UTF-8, ...) are reported
    with their line number and skipped, and the run exits 1; everything else is pushed. Ctrl-C stops and
    says how many documents were pushed (exit 130).
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
        bad = _BadLines(name, "\n" if bar else "")
        try:
            _push_all(docs, producer, bad, client, keys, max_lag)
        except KeyboardInterrupt:
            _interrupted(producer, bad)
    click.echo(f"pushed {plural(producer.pushed, 'document')} to {keys.docs}{bad.summary()}", err=True)
    if wait:
        from dedupd.daemon.monitor import wait_drained

        if not wait_drained(client, keys, timeout):
            raise DedupdError(f"the daemons did not finish within {timeout:.0f}s; is `dedupd serve` running?")
        click.echo("all pushed documents are processed", err=True)
    sys.exit(EXIT_RUNTIME if bad.count else 0)


def _interrupted(producer: Any, bad: _BadLines) -> NoReturn:
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


def _push_all(
    docs: Iterator[Item | None],
    producer: Any,
    bad: _BadLines,
    client: Any,
    keys: Keys,
    max_lag: int | None,
) -> None:
    """Add every document to the producer; send what is buffered when the input pauses or 100 ms after
    the last send; with ``max_lag``, wait for room after each send."""
    sent = producer.pushed
    for doc in docs:
        if doc is None:
            producer.flush()
        elif isinstance(doc, BadLine):
            bad.report(doc)
        else:
            producer.add(doc)
            producer.flush_due()
        if max_lag is not None and producer.pushed != sent:
            sent = producer.pushed
            _wait_for_room(client, keys, max_lag)
    producer.flush()


def _wait_for_room(client: Any, keys: Keys, max_lag: int) -> None:
    """Sleep while the consumer group has more than ``max_lag`` unread entries (no group yet: the stream length)."""
    from dedupd.daemon.monitor import group_state

    delay = 0.01
    while True:
        state = group_state(client, keys)
        backlog = client.xlen(keys.docs) if state is None else state["lag"]
        if backlog is None or backlog <= max_lag:  # None: Redis cannot tell (entries were deleted); go on
            return
        time.sleep(delay)
        delay = min(delay * 2, 0.5)


@cli.command()
@common_options
@input_options
@click.option("--json", "as_json", is_flag=True, help="One JSON object per verdict and line.")
def query(file: str, fmt: str, id_prefix: str | None, as_json: bool, **opts: Any) -> None:
    """Is each document of FILE (or - for standard input) a near-duplicate of something indexed?

    Reads documents as `dedupd push` does (same formats) and compares each with the live index, the way
    an upsert would be verified, but inserts nothing and emits no alert. Prints one verdict per document:
    `ID: duplicate of X (0.93) [+2 more]` or `ID: unique`; --json prints the verdict as a JSON object
    (id, duplicate, matches, duplicate_of, similarity, cluster, verify). Needs no running daemon; before
    any index exists nothing is a duplicate.
    """
    from dedupd.client import Client

    settings = settings_from(**opts)
    client = Client(connect_to(settings), settings)
    with _documents(file, fmt, id_prefix, settings, None) as (docs, name):
        bad = _BadLines(name)
        _query_all(client, docs, bad, as_json)
    sys.exit(EXIT_RUNTIME if bad.count else 0)


def _query_all(client: Any, docs: Iterator[Item | None], bad: _BadLines, as_json: bool) -> None:
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
        if as_json:
            click.echo(json.dumps(verdict.to_dict(), ensure_ascii=False))
        elif verdict.duplicate:
            more = len(verdict.matches) - 1
            click.echo(
                f"{verdict.id}: duplicate of {verdict.duplicate_of} ({verdict.similarity:.2f})"
                + (f" [+{more} more]" if more > 0 else "")
            )
        else:
            click.echo(f"{verdict.id}: unique")


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
    decode: Callable[[str, dict[bytes, bytes]], dict[str, Any]],
    render: Callable[[dict[str, Any]], str],
    opts: dict[str, Any],
) -> None:
    """Print the newest ``count`` entries of ``stream`` since ``since``, then follow it if asked."""
    from dedupd.ops.alerts import follow_stream, parse_since, read_stream, window

    follow, as_json, count, since = (opts.pop(k) for k in ("follow", "as_json", "count", "since"))
    parse_since(since)  # a bad --since is a usage error before anything connects
    settings = settings_from(**opts)
    client = connect_to(settings)
    stream_key = getattr(Keys(settings.prefix), stream)

    def show(entry_id: str, fields: dict[bytes, bytes]) -> None:
        decoded = decode(entry_id, fields)
        click.echo(json.dumps(decoded, ensure_ascii=False) if as_json else render(decoded))

    span = window(client, stream_key, since, follow)
    for entry in read_stream(client, stream_key, span.since, count, newest=True, until=span.until):
        show(*entry)
    if follow:
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how following ends: exit 0
            for new in follow_stream(client, stream_key, span.follow_from):
                if new is not None:
                    show(*new)


@cli.command()
@common_options
@stream_options("alerts")
def alerts(**opts: Any) -> None:
    """Show duplicate alerts: the document, its best match, the similarity, the cluster.

    Oldest first; -n N shows only the newest N; --since now with --follow shows only new alerts.
    """
    from dedupd.ops.alerts import decode_alert, render

    _show_stream("alerts", decode_alert, render, opts)


@cli.command()
@common_options
@stream_options("dead letters")
def dead(**opts: Any) -> None:
    """Show dead letters: input entries the daemons could not process, and why.

    Each line: the input entry's id, the error code (missing_text, too_large, bad_json, bad_utf8,
    unknown_op, max_deliveries, ...), its detail, and the original fields shortened; --json prints
    them whole.
    """
    from dedupd.ops.alerts import decode_dead, render_dead

    _show_stream("dead", decode_dead, render_dead, opts)


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
    import redis

    from dedupd.daemon.monitor import live_consumers

    settings = settings_from(**opts)
    try:
        client = connect_to(settings, start_embedded=False)
        live = live_consumers(client, Keys(settings.prefix), max_age)
    except (DedupdError, redis.RedisError) as exc:
        click.echo(f"unhealthy: {one_line(exc)}")
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


@cli.command()
@click.option(
    "--config",
    "config_file",
    type=click.Path(exists=True, dir_okay=False),
    help="TOML settings file (also DEDUPD_CONFIG; else ./dedupd.toml, else /etc/dedupd/dedupd.toml): its "
    "threshold, num_perm and weights are the defaults.",
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

    A false positive here is a candidate, not an alert: the daemon verifies every candidate against
    the threshold (verify = exact or signature) before it alerts, so false positives cost a
    verification each, while false negatives are pairs never compared at all.
    """
    from dedupd.similarity.tuning import plot, render
    from dedupd.similarity.tuning import tune as make_report

    if config_file:
        os.environ["DEDUPD_CONFIG"] = config_file
    settings = settings_from(threshold=threshold, num_perm=num_perm)
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
        click.echo(
            "\nfalse positives are LSH candidates below the threshold: every candidate is verified "
            f"(verify = {settings.verify}) before an alert, so they cost a verification, not a wrong alert; "
            "false negatives are pairs at or above the threshold that are never compared"
        )
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
    consumer's pending entries and idle time (and the stale ones: idle over 10 x claim_idle_ms, nothing
    pending, no heartbeat), live daemons from their heartbeats, the alerts and dead-letter streams, the
    running totals, and the throughput over --interval seconds.
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
    from dedupd.index.generations import Generations
    from dedupd.ops.rebuild import Rebuild, RebuildError

    settings = settings_from(**opts)
    client = connect_to(settings)
    bar = _PhaseBar()
    stored = Generations(client, Keys(settings.prefix)).read()
    if abort:
        dropped = Rebuild(client, settings, settings.index_spec(), bar.update).abort()
        click.echo(
            f"rebuild aborted; deleted {plural(dropped, 'key')} of the unfinished generation", err=True
        )
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
        f"switched to generation {state.next_gen}: {plural(report.documents, 'document')} ({report.before:,} "
        f"before), {plural(report.processed, 'entry', 'entries')} processed in {report.seconds:.1f}s; deleted "
        f"generation {state.gen} ({plural(report.dropped, 'key')})",
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
    """Console-script entry point: the command line, with a last guard so that nothing ends in a
    traceback (the commands' own errors are handled by :class:`DedupdGroup`)."""
    logging.captureWarnings(True)
    started = time.monotonic()
    try:
        cli(prog_name="dedupd")
    except BrokenPipeError:
        _quiet_stdout()
        sys.exit(EXIT_BROKEN_PIPE)
    except KeyboardInterrupt:
        click.echo("dedupd: interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except Exception as exc:  # outside any command (settings of the group itself, click internals)
        log.debug("unexpected error", exc_info=True)
        fail(f"{type(exc).__name__}: {exc} (run with --log-level DEBUG for details)", EXIT_RUNTIME)
    finally:
        log.debug("done in %.2fs", time.monotonic() - started)
