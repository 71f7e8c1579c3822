"""``dedupd tune`` and ``dedupd rebuild``: the index's parameters, chosen (with what they cost) and
changed while the daemons keep serving."""

from __future__ import annotations

import json
import logging
import math
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from dedupd.cli.common import (
    PhaseBar,
    common_options,
    connect_to,
    plural,
    retention_options,
    settings_from,
    verbose_option,
)
from dedupd.cli.sample import DEFAULT_LIMIT, LateProgress, Sample, read_sample, render_sample, sample_dict
from dedupd.index.keys import Keys
from dedupd.ops.producer import FORMATS

if TYPE_CHECKING:
    from dedupd.index.generations import OwedAlerts
    from dedupd.ops.existing_pairs import ExistingPairs
    from dedupd.settings import Settings
    from dedupd.similarity.pair_distribution import SampleReport

log = logging.getLogger("dedupd.cli")  # (the command line's logger: cli/failures.py)


@click.command()
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
    help="Write the S-curve to this PNG, with --sample its pairs per bin as bars (needs matplotlib: pip "
    "install 'dedupd[plot]').",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of the table.")
@click.option(
    "--sample",
    "sample_file",
    type=click.Path(exists=True, allow_dash=True),
    metavar="FILE",
    help="Documents of your own (read as `dedupd push` reads FILE; - for standard input): show how their "
    "pairs are distributed by exact Jaccard similarity and what each threshold would catch and cost.",
)
@click.option(
    "--limit",
    type=click.IntRange(min=2),
    default=DEFAULT_LIMIT,
    show_default=True,
    help="Read at most this many documents of --sample (the first ones).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="auto",
    show_default=True,
    help="Format of --sample, as for `dedupd push`.",
)
@click.option("--shingle", help="Shingling of --sample, word:K or char:K (DEDUPD_SHINGLE, default word:3).")
@verbose_option
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
    sample_file: str | None,
    limit: int,
    fmt: str,
    shingle: str | None,
    verbose: bool,
) -> None:
    """Choose LSH bands x rows for a threshold and num_perm, and show what they cost.

    Prints the banding the daemon would choose (or the one given by --bands/--rows), how many
    signature positions it uses, the false-negative rate (1 - P(candidate)) at and above the
    threshold and the false-positive rate (P(candidate)) below it, the areas the chooser weighs,
    and a comparison with neighbouring bandings. Needs no Redis.

    A false positive here is a candidate, not an alert: the daemon verifies every candidate against
    the threshold (verify = exact or signature) before it alerts, so false positives cost a
    verification each, while false negatives are pairs never compared at all.

    With --sample FILE, first: the pairs of those documents counted by exact Jaccard similarity of their
    shingles in bins from 0.3 up (pairs below 0.3 are not counted), with an example pair of each bin and
    where its texts differ, so that you can see what a similarity means in your data; then, for the
    thresholds 0.3 to 0.9 and the configured one, the pairs and documents each would catch and the alerts
    the daemon would write, and what it costs: the banding chosen for it, its false-negative rate at
    t + 0.05, its false-positive rate at t - 0.1, and the Redis memory of a document's band buckets.
    To lower the threshold of a running index: `dedupd rebuild --threshold T`.
    """
    from dedupd.similarity.tuning import plot, render
    from dedupd.similarity.tuning import tune as make_report

    if config_file:
        os.environ["DEDUPD_CONFIG"] = config_file
    settings = settings_from(threshold=threshold, num_perm=num_perm, shingle=shingle, verbose=verbose)
    log.info(
        "config file: %s", settings.config_file or "none (built-in defaults, DEDUPD_* variables and flags)"
    )
    sampled = _sample_report(settings, sample_file, fmt, limit) if sample_file else None
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
    histogram = [(b.low, b.high, b.pairs) for b in sampled[0].bins] if sampled else None
    written = str(plot(report, plot_file, histogram)) if plot_file else None
    if as_json:
        extra = {"sample": sample_dict(*sampled)} if sampled else {}
        click.echo(json.dumps({**report.to_dict(), "plot": written, **extra}))
    else:
        if sampled:
            click.echo(render_sample(*sampled, settings.shingle) + "\n")
        click.echo(render(report))
        click.echo(
            "\nfalse positives are LSH candidates below the threshold: every candidate is verified "
            f"(verify = {settings.verify}) before an alert, so they cost a verification, not a wrong alert; "
            "false negatives are pairs at or above the threshold that are never compared"
        )
        if written:
            click.echo(f"\nS-curve written to {written}")


@click.command()
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
@retention_options
@click.option(
    "--from",
    "source",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="JSONL file with the documents' texts (default: the input stream's retained history).",
)
@click.option("--allow-missing", is_flag=True, help="Switch even if the source lacks some indexed documents.")
@click.option("--abort", is_flag=True, help="Forget an unfinished rebuild and delete what it had built.")
@click.option(
    "--alert-existing",
    is_flag=True,
    help="With a lower --threshold: also alert the pairs of documents already indexed that the new "
    "threshold makes duplicates (similarity between the new and the old one); these alerts have by = rebuild.",
)
@click.option(
    "--wait",
    "wait_s",
    type=float,
    default=60.0,
    show_default=True,
    help="Seconds to wait for running daemons to start (or stop) writing into both generations.",
)
def rebuild(
    source: Path | None, allow_missing: bool, abort: bool, wait_s: float, alert_existing: bool, **opts: Any
) -> None:
    """Reindex with new parameters while `dedupd serve` keeps serving.

    Only the parameters given (as flags, DEDUPD_* variables or in --config) change; the others keep the
    index's values. When only the banding, threshold or bucket sizing changes the stored signatures are
    re-banded; when shingling, num_perm, seed, scheme or verification change, the texts are re-indexed from
    the input stream's retained history or --from FILE. An index whose texts an older dedupd normalised is
    re-indexed with this version's normalisation (`dedupd rebuild` without flags). The rebuild replays every
    entry that arrives meanwhile; at the switch the daemons pause for a moment, then follow the new
    generation, and the old one is deleted. Interrupted, a rerun with the same flags resumes; --abort stops
    and cleans up.

    Documents already indexed were verified at the old threshold: after `--threshold` lowers it, a pair of
    them between the two thresholds gets no alert unless --alert-existing is given. With it, once the new
    generation serves, each document indexed before the switch is compared with the earlier documents in its
    new buckets, and a document with a match between the new and the old threshold gets an alert when that
    match is in another cluster or the document was never alerted (all its matches listed, best first, bounded
    as the daemon bounds them; its cluster united with theirs), with by = rebuild and input = the entry that
    last changed it. Interrupted, the same command run again writes the rest.
    """
    from dedupd.index.generations import Generations
    from dedupd.ops.existing_pairs import ExistingPairs, check_lowering
    from dedupd.ops.rebuild import Rebuild, RebuildError

    if abort and alert_existing:
        raise click.UsageError("--alert-existing goes with a rebuild, not with --abort")
    settings = settings_from(**opts)
    client = connect_to(settings)
    bar = PhaseBar()
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
    payer = ExistingPairs(client, settings, bar.update) if alert_existing else None
    if payer is not None:
        if target == stored.spec and stored.next_spec is None and (owed := payer.owed()) is not None:
            click.echo("resuming the alerts of the pairs of existing documents", err=True)
            _pay(payer, owed, bar)  # (the rebuild switched, then was interrupted)
            return
        check_lowering(stored.spec, target, source)
    elif target.threshold < stored.spec.threshold:
        click.echo(
            f"note: documents already indexed are not compared again: their pairs with a similarity from "
            f"{target.threshold:g} to {stored.spec.threshold:g} get no alert (--alert-existing alerts them)",
            err=True,
        )
    rb = Rebuild(
        client,
        settings,
        target,
        bar.update,
        source=source,
        allow_missing=allow_missing,
        wait_s=wait_s,
        alert_existing=alert_existing,
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
    if payer is not None and (owed := payer.owed()) is not None:
        _pay(payer, owed, bar)


def _pay(payer: ExistingPairs, owed: OwedAlerts, bar: PhaseBar) -> None:
    """Write the alerts a rebuild that lowered the threshold owes, and say how many."""
    paid = payer.pay(owed)
    bar.finish()
    click.echo(
        f"alerted {plural(paid.alerts, 'document')} with a match among the {plural(paid.documents, 'document')} "
        f"indexed before the switch, at a similarity from {paid.new_threshold:g} up to {owed.old_threshold:g} "
        "(these alerts have by = rebuild)",
        err=True,
    )


def _sample_report(settings: Settings, file: str, fmt: str, limit: int) -> tuple[SampleReport, Sample]:
    """The report of ``tune --sample``: the pairs of FILE's documents, the bins and the thresholds."""
    from dedupd.similarity.near_pairs import near_pairs
    from dedupd.similarity.pair_distribution import BIN_WIDTH, LOWEST, distribution

    started = time.monotonic()
    sample = read_sample(file, fmt, limit, settings.max_doc_bytes, settings.max_id_bytes)
    log.info(
        "read %s of %s in %.1f s",
        plural(len(sample.texts), "document"),
        sample.name,
        time.monotonic() - started,
    )
    t = settings.threshold  # (below LOWEST: from the tenth below it, so that the bins stay tenths)
    lowest = LOWEST if t >= LOWEST else math.floor(t * 10 + 1e-9) / 10 or t
    progress = LateProgress()
    started = time.monotonic()
    pairs = near_pairs(list(sample.texts.values()), settings.shingle, lowest, progress=progress)
    log.info("their pairs at a similarity of %g or more found in %.1f s", lowest, time.monotonic() - started)
    grid = [round(lowest + k * BIN_WIDTH, 6) for k in range(int((1.0 - lowest) / BIN_WIDTH + 1e-9))]
    report = distribution(
        pairs,
        sorted({*grid, settings.threshold}),
        settings.num_perm,
        settings.fp_weight,
        settings.fn_weight,
        configured=settings.threshold,
    )
    progress.finish()
    return report, sample
