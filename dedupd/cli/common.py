"""What the commands that talk to Redis share: their options, their settings, their connection, and
:func:`plural` for the counts they print."""

from __future__ import annotations

import functools
import logging
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import unquote, urlsplit

import click

from dedupd.errors import ConfigError
from dedupd.logs import setup_logging

if TYPE_CHECKING:  # redis and the settings (pydantic) are imported by the commands that use them: `dedupd
    # mine --input FILE` and `dedupd tune` start without them (a quarter of a second)
    from dedupd.settings import Settings

F = TypeVar("F", bound=Callable[..., Any])  # a command function, as the option decorators return it


def plural(n: int, one: str, many: str | None = None) -> str:
    """``1 document``, ``2 documents`` (``many`` for irregular plurals)."""
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def verbose_option(func: F) -> F:
    """``-v/--verbose``: informational log lines on stderr too (every command that logs takes it; its
    function passes ``verbose`` on to :func:`settings_from`)."""
    return click.option(
        "-v", "--verbose", is_flag=True, help="Informational log lines too (as --log-level INFO)."
    )(func)


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
        help="Log level (DEDUPD_LOG_LEVEL, any case). Unset: INFO for `dedupd serve`, WARNING for the "
        "other commands.",
    )
    @verbose_option
    @functools.wraps(func)
    def wrapper(*args: Any, config_file: str | None, **kwargs: Any) -> Any:
        if config_file:
            os.environ["DEDUPD_CONFIG"] = config_file
        return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def similarity_options(func: F) -> F:
    """The similarity settings as flags (``serve`` and ``dedup``; each also has a DEDUPD_* variable)."""
    for option in reversed(
        (
            click.option("--shingle", help="word:K or char:K (DEDUPD_SHINGLE, default word:3)."),
            click.option("--num-perm", type=int, help="MinHash length (DEDUPD_NUM_PERM, default 128)."),
            click.option(
                "--threshold",
                type=float,
                help="Jaccard threshold for an alert (DEDUPD_THRESHOLD, default 0.8).",
            ),
            click.option(
                "--bands", type=int, help="Explicit LSH bands (with --rows); else chosen from the threshold."
            ),
            click.option("--rows", type=int, help="Explicit rows per band (with --bands)."),
            click.option(
                "--verify",
                type=click.Choice(["signature", "exact"]),
                help="Verify candidates by signature agreement or exact Jaccard (DEDUPD_VERIFY, default exact).",
            ),
            click.option("--seed", type=int, help="MinHash seed (DEDUPD_SEED, default 1)."),
            click.option(
                "--minhash", type=click.Choice(["oph", "classic"]), help="Signature scheme (DEDUPD_MINHASH)."
            ),
            click.option(
                "--capacity", type=int, help="Expected index size; sizes the buckets (DEDUPD_CAPACITY)."
            ),
        )
    ):
        func = option(func)
    return func


def retention_options(func: F) -> F:
    """The retention window as flags (``serve`` and ``rebuild``; stored with the index; each also has a
    DEDUPD_* variable)."""
    for option in reversed(
        (
            click.option(
                "--retention-s",
                type=click.IntRange(min=0),
                help="Forget a document this many seconds after it was last touched (DEDUPD_RETENTION_S; "
                "0 or unset: no bound).",
            ),
            click.option(
                "--max-documents",
                type=click.IntRange(min=0),
                help="Keep only this many documents, the most recently touched (DEDUPD_MAX_DOCUMENTS; 0 or "
                "unset: no bound).",
            ),
            click.option(
                "--refresh-on-duplicate/--no-refresh-on-duplicate",
                default=None,
                help="Whether a later document's alert naming a document restarts its age "
                "(DEDUPD_REFRESH_ON_DUPLICATE, default on).",
            ),
        )
    ):
        func = option(func)
    return func


def settings_from(*, serving: bool = False, verbose: bool = False, **overrides: Any) -> Settings:
    """The settings for a command (flags over DEDUPD_* over the TOML file), with logging set up and the
    warnings about them (unknown DEDUPD_* variables) logged.

    Args:
        serving: the command is the daemon, whose log is its output: INFO unless a level is set.
        verbose: ``-v``: informational lines too (at least INFO).
        overrides: the flags (None: not given).
    """
    from dedupd.settings import load_settings

    if overrides.get("log_level"):
        overrides["log_level"] = overrides["log_level"].upper()
    settings = load_settings(**overrides)
    setup_logging(log_level(settings, serving, verbose), settings.log_json)
    for warning in settings.warnings:
        logging.getLogger("dedupd.settings").warning("%s", warning)
    return settings


def log_level(settings: Settings, serving: bool, verbose: bool) -> str:
    """The level a command logs at: the one set (flag, DEDUPD_LOG_LEVEL, the TOML file), else INFO for the
    daemon and WARNING for one-shot commands (whose output is what they print: a line about the embedded
    Redis must not land in `push`'s progress bar); ``verbose`` makes it at least INFO."""
    chosen = settings.log_level if serving or "log_level" in settings.model_fields_set else "WARNING"
    if verbose and logging.getLevelName(chosen) > logging.INFO:
        return "INFO"
    return chosen


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


class PhaseBar:
    """One progress bar per phase of a long command, on standard error: ``update(phase, done, total)``
    (total None: a count with no end known), ``finish()`` when done."""

    def __init__(self) -> None:
        self.phase: str | None = None
        self.bar: Any = None

    def update(self, phase: str, done: int, total: int | None) -> None:
        if phase != self.phase or self.bar is None:
            self.finish()
            self.phase = phase
            self.bar = click.progressbar(
                length=max(total or 1, 1),
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
