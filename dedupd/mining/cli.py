"""The ``dedupd mine`` command: frequent itemsets and association rules from a file or the Redis baskets."""

from __future__ import annotations

import os
import sys
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast

import click

from dedupd.errors import ConfigError, DedupdError, InputError
from dedupd.mining.apriori import apriori
from dedupd.mining.baskets import Baskets, load_baskets
from dedupd.mining.memory import mine_within, parse_bytes
from dedupd.mining.output import json_chunks, params, payload, render_csv, render_table
from dedupd.mining.pcy import DEFAULT_BUCKETS, multihash, multistage, pcy
from dedupd.mining.result import MiningResult, PassReport
from dedupd.mining.rules import RuleTable, SortKey, rule_table
from dedupd.mining.sampling import MAX_CANDIDATES, random_sampling
from dedupd.mining.son import Engine, son
from dedupd.mining.support import resolve_support
from dedupd.mining.toivonen import toivonen

if TYPE_CHECKING:
    from dedupd.index.keys import Keys
    from dedupd.server.connection import RedisClient

ALGORITHMS = ("apriori", "pcy", "multistage", "multihash", "sample", "son", "toivonen")


class UsageProblem(click.ClickException):
    """A usage or input-file problem (bad options, an unreadable or malformed basket file, bad settings, a
    Redis that cannot be reached): exit status 2, as in every dedupd command; failures while mining exit 1."""

    exit_code = 2


def _positive_support(ctx: click.Context, param: click.Parameter, value: float) -> float:
    if value <= 0:
        raise click.BadParameter("give a fraction 0 < s < 1 or a count of baskets >= 1")
    if value >= 1 and value != int(value):
        raise click.BadParameter(f"{value} >= 1 is read as a count of baskets and must be a whole number")
    return value


@click.command("mine")
@click.option(
    "--input",
    "input_path",
    type=click.Path(exists=True, dir_okay=False, allow_dash=True),
    help="Basket file: one basket per line (items separated by whitespace) or JSON lines "
    '({"items": [...]}); "-" for stdin. Without it: the baskets in Redis.',
)
@click.option(
    "--support",
    type=float,
    default=0.01,
    show_default=True,
    callback=_positive_support,
    help="Minimum support: a fraction of the baskets (0 < s < 1) or a count of baskets (>= 1).",
)
@click.option(
    "--confidence",
    type=click.FloatRange(0, 1),
    default=0.5,
    show_default=True,
    help="Minimum confidence of a rule.",
)
@click.option(
    "--algorithm",
    type=click.Choice(ALGORITHMS),
    default=None,
    help="Default: apriori (the fastest exact one here), or the one --memory picks.",
)
@click.option("--max-size", type=click.IntRange(min=1), default=None, help="Largest itemset size.")
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True
)
@click.option(
    "--memory",
    default=None,
    help="Byte budget for counting structures (e.g. 64MiB): picks A-Priori, PCY, Multistage or Multihash.",
)
@click.option(
    "--engine",
    type=click.Choice(["local", "dask"]),
    default="local",
    show_default=True,
    help="SON: local processes, or Dask distributed.",
)
@click.option(
    "--scheduler",
    default=None,
    help="SON on Dask: scheduler address (tcp://host:8786); without it --engine dask starts a local cluster.",
)
@click.option(
    "--workers", type=click.IntRange(min=1), default=None, help="SON: processes or local Dask workers."
)
@click.option("--chunks", type=click.IntRange(min=1), default=None, help="SON: number of chunks.")
@click.option(
    "--buckets",
    type=click.IntRange(min=2),
    default=DEFAULT_BUCKETS,
    show_default=True,
    help="PCY family: hash buckets (rounded down to a power of two).",
)
@click.option(
    "--sample-fraction",
    type=click.FloatRange(0, 1, min_open=True),
    default=0.1,
    show_default=True,
    help="sample/toivonen: share of the baskets in the sample.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="sample/toivonen/son: random seed.")
@click.option(
    "--max-candidates",
    type=click.IntRange(min=0),
    default=MAX_CANDIDATES,
    show_default=True,
    help="sample/toivonen: the most candidate itemsets the sample and the pass over all baskets may count "
    "(at a lowered sample threshold, every subset of a sampled basket can be one); 0: no limit.",
)
@click.option("--rules/--no-rules", "want_rules", default=True, show_default=True)
@click.option("--top-k", type=click.IntRange(min=1), default=None, help="Keep the best k rules.")
@click.option(
    "--sort-by",
    type=click.Choice(["confidence", "lift", "interest", "support", "leverage"]),
    default="confidence",
    show_default=True,
    help="Rule order (and what --top-k keeps).",
)
@click.option("--max-antecedent", type=click.IntRange(min=1), default=None, help="Largest rule antecedent.")
@click.option(
    "--max-consequent",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Largest rule consequent (the seed's rules I -> j have one item).",
)
@click.option("--min-lift", type=float, default=None, help="Drop rules with a lower lift.")
@click.option(
    "--min-interest", type=float, default=None, help="Drop rules with a lower interest |conf - Pr[j]|."
)
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=50,
    show_default=True,
    help="Table format: rows shown per section (0: all).",
)
@click.option(
    "--store/--no-store",
    default=True,
    show_default=True,
    help="When mining the Redis baskets, store the result back for other consumers.",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress on stderr.")
@click.option(
    "--verbose",
    "-v",
    is_flag=True,
    help="Progress with each pass's counting structure (triangular matrix, triples, bitmaps, hash "
    "buckets), its memory and the reasons for the choice.",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(exists=True, dir_okay=False),
    help="TOML settings file (also DEDUPD_CONFIG), for the Redis baskets.",
)
@click.option("--redis-url", help="redis:// or rediss:// URL (DEDUPD_REDIS_URL); unset: embedded Redis.")
@click.option("--prefix", help="Key prefix (DEDUPD_PREFIX, default 'dedupd').")
def mine(
    input_path: str | None,
    support: float,
    confidence: float,
    algorithm: str | None,
    max_size: int | None,
    fmt: str,
    memory: str | None,
    engine: str,
    scheduler: str | None,
    workers: int | None,
    chunks: int | None,
    buckets: int,
    sample_fraction: float,
    seed: int,
    max_candidates: int,
    want_rules: bool,
    top_k: int | None,
    sort_by: str,
    max_antecedent: int | None,
    max_consequent: int | None,
    min_lift: float | None,
    min_interest: float | None,
    limit: int,
    store: bool,
    quiet: bool,
    verbose: bool = False,
    config_file: str | None = None,
    redis_url: str | None = None,
    prefix: str | None = None,
) -> None:
    """Frequent itemsets and association rules over the baskets (A-Priori, PCY, SON, Toivonen, ...)."""

    def progress(r: PassReport) -> None:
        if not quiet:
            click.echo(r.line() if verbose else r.plain(), err=True)

    try:
        algorithm = _algorithm_of(algorithm, engine, scheduler, memory)
        budget = parse_bytes(memory) if memory is not None else None
        baskets, source, client, keys = _read_input(input_path, config_file, redis_url, prefix, quiet)
    except DedupdError as exc:  # the options, the input file, the settings or the Redis to read
        raise UsageProblem(exc.detail if isinstance(exc, InputError) else str(exc)) from exc
    try:
        if baskets.n_baskets == 0:
            hint = "" if client is None or keys is None else f" ({_how_to_get_baskets(client, keys)})"
            raise ConfigError(f"no baskets in {source}: nothing to mine{hint}")
        min_count = resolve_support(support, baskets.n_baskets)
        result = _run(
            baskets,
            min_count,
            algorithm,
            max_size,
            budget,
            engine,
            scheduler,
            workers,
            chunks,
            buckets,
            sample_fraction,
            seed,
            max_candidates or None,
            progress,
        )
        rules = (
            rule_table(
                result,
                confidence,
                max_antecedent,
                max_consequent,
                top_k,
                min_lift,
                min_interest,
                cast(SortKey, sort_by),
            )
            if want_rules
            else RuleTable.none(result.vocab)
        )
        _print(result, rules, fmt, limit, quiet)
        if client is not None and keys is not None and store:
            from dedupd.mining.redis_source import store_result

            doc: dict[str, Any] = payload(result, rules)
            doc["params"] = params(
                result,
                support=support,
                confidence=confidence,
                max_size=max_size,
                mined_at=datetime.now(UTC).isoformat(timespec="seconds"),
            )
            store_result(client, keys, doc)
            if not quiet:
                click.echo(f"stored the result at {keys.mined}", err=True)
    except DedupdError as exc:
        raise click.ClickException(str(exc)) from exc


def _algorithm_of(
    algorithm: str | None, engine: str, scheduler: str | None, memory: str | None
) -> str | None:
    """The algorithm the options ask for (None: --memory picks it, or the default)."""
    if (engine == "dask" or scheduler) and algorithm not in (None, "son"):
        raise ConfigError("--engine dask / --scheduler run SON: use --algorithm son (or leave it out)")
    if engine == "dask" or scheduler:
        algorithm = algorithm or "son"
    if memory is not None and algorithm is not None:
        raise ConfigError("--memory picks the algorithm itself: leave out --algorithm (or --memory)")
    return algorithm


def _read_input(
    input_path: str | None,
    config_file: str | None,
    redis_url: str | None,
    prefix: str | None,
    quiet: bool,
) -> tuple[Baskets, str, RedisClient | None, Keys | None]:
    """The baskets, from the file or from Redis: ``(baskets, source, client, keys)`` (the last two None
    for a file)."""
    client = keys = None
    t0 = time.perf_counter()
    if input_path:
        baskets = load_baskets(input_path)
        source = input_path
    else:
        from dedupd.index.keys import Keys
        from dedupd.mining.redis_source import read_baskets
        from dedupd.server.connection import connect
        from dedupd.settings import load_settings

        if config_file:
            os.environ["DEDUPD_CONFIG"] = config_file
        settings = load_settings(redis_url=redis_url, prefix=prefix)
        for warning in settings.warnings:
            click.echo(f"warning: {warning}", err=True)
        client = connect(settings)
        keys = Keys(settings.prefix)
        got = read_baskets(client, keys)
        baskets = Baskets.from_lists(got.baskets)
        source = f"redis stream {keys.baskets}"
        if got.clusters:
            source += (
                f" ({_plural(got.clustered, 'document')} with links grouped into "
                f"{_plural(got.clusters, 'duplicate cluster')}, one basket each)"
            )
        if got.malformed and not quiet:
            click.echo(
                f"warning: skipped {_plural(got.malformed, 'malformed basket entry', 'malformed basket entries')}",
                err=True,
            )
    if not quiet:
        click.echo(
            f"read {_plural(baskets.n_baskets, 'basket')}, {_plural(baskets.n_items, 'item')} from {source} "
            f"in {time.perf_counter() - t0:.3f}s",
            err=True,
        )
    return baskets, source, client, keys


def _how_to_get_baskets(client: RedisClient, keys: Keys) -> str:
    """Why the Redis basket stream is empty, and what to do about it."""
    from dedupd.settings import load_settings

    docs = int(client.xlen(keys.docs) or 0)
    if docs == 0:
        return f"{keys.docs} is empty too: push documents and run `dedupd serve`; or mine a file with --input FILE"
    mode = load_settings().baskets
    if mode in ("words", "sources", "phrases"):
        return (
            f"{keys.docs} holds {_plural(docs, 'entry', 'entries')}: is `dedupd serve` running, with "
            f"DEDUPD_BASKETS={mode}? Only documents processed with it make baskets"
            + (" (and only those with a `source`)" if mode == "sources" else "")
        )
    return (
        f"{keys.docs} holds {_plural(docs, 'entry', 'entries')}, but with baskets = {mode!r}"
        + (" (the default)" if mode == "items" else "")
        + " a document makes a basket only from its `items` field (a JSON array of strings). To mine the "
        'words of plain documents, start `dedupd serve` with DEDUPD_BASKETS=words (or baskets = "words" in '
        "the config file) and push them again; or push documents with items, e.g. "
        '{"id": "1", "items": ["bread", "milk"]}; or mine a file with --input FILE'
    )


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def _print(result: MiningResult, rules: RuleTable, fmt: str, limit: int, quiet: bool) -> None:
    """Notes and warnings on stderr, the result on stdout in the format asked for."""
    for note in result.notes:
        if not quiet:
            click.echo(f"note: {note}", err=True)
    for warning in result.warnings:
        click.echo(f"warning: {warning}", err=True)
    if fmt == "json":  # in pieces, straight to stdout: 128,248 rules make 46 MB of JSON
        out = sys.stdout
        for piece in json_chunks(result, rules):
            out.write(piece)
        out.write("\n")
        out.flush()
    elif fmt == "csv":
        click.echo(render_csv(result, rules), nl=False)
    else:
        click.echo(render_table(result, rules, limit or None), nl=False)


def _run(
    baskets: Baskets,
    min_count: int,
    algorithm: str | None,
    max_size: int | None,
    budget: int | None,
    engine: str,
    scheduler: str | None,
    workers: int | None,
    chunks: int | None,
    buckets: int,
    fraction: float,
    seed: int,
    max_candidates: int | None,
    progress: Any,
) -> MiningResult:
    if budget is not None:
        return mine_within(baskets, min_count, budget, max_size, progress)
    algorithm = algorithm or "apriori"
    if algorithm == "apriori":
        return apriori(baskets, min_count, max_size, progress)
    if algorithm == "pcy":
        return pcy(baskets, min_count, max_size, progress, buckets=buckets)
    if algorithm == "multistage":
        return multistage(baskets, min_count, max_size, progress, buckets=buckets)
    if algorithm == "multihash":
        return multihash(baskets, min_count, max_size, progress, buckets=buckets)
    if algorithm == "sample":
        return random_sampling(
            baskets,
            min_count,
            max_size,
            progress,
            fraction=fraction,
            seed=seed,
            max_candidates=max_candidates,
        )
    if algorithm == "toivonen":
        return toivonen(
            baskets,
            min_count,
            max_size,
            progress,
            fraction=fraction,
            seed=seed,
            max_candidates=max_candidates,
        )
    return son(
        baskets,
        min_count,
        max_size,
        progress,
        chunks=chunks,
        engine=cast(Engine, engine),
        workers=workers,
        scheduler=scheduler,
        shuffle=seed,
    )


if __name__ == "__main__":  # pragma: no cover - `python -m dedupd.mining.cli`
    sys.exit(mine())
