"""Choosing bands x rows: error rates around the threshold, alternatives, the S-curve plot (pure, no Redis).

Course material: seeds/001 ("LSH: bands", the b=20, r=5 table), seeds/003 (AND-OR amplification),
seeds/004 (LSH probabilities). A pair of Jaccard similarity s is a candidate with probability
``P(s) = 1 - (1 - s**r)**b``. Pairs at or above the threshold t should be found, so ``1 - P(s)`` is the
false-negative rate there; below t, ``P(s)`` is the false-positive rate (the pair costs a verification,
never a wrong alert, because candidates are verified). The S-curve is steepest near ``(1/b)**(1/r)``.

    >>> report = tune(0.8, 128, bands=20, rows=5)
    >>> [round(row.probability, 3) for row in report.table if row.similarity in (0.5, 0.8)]
    [0.47, 1.0]
    >>> report.used, report.wasted
    (100, 28)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dedupd.errors import ConfigError, DedupdError
from dedupd.similarity.lsh import (
    DEFAULT_FN_WEIGHT,
    DEFAULT_FP_WEIGHT,
    LSHParams,
    candidate_probability,
    error_rates,
)

PLOT_HINT = "pip install 'dedupd[plot]'"


class PlotUnavailableError(DedupdError):
    """matplotlib is not installed (it is an optional extra)."""


@dataclass(frozen=True, slots=True)
class Banding:
    """One bands x rows choice and how it does at the threshold."""

    label: str
    bands: int
    rows: int
    fp_area: float  # integral of P(s) for s below the threshold
    fn_area: float  # integral of 1 - P(s) for s above it
    cost: float  # fp_weight * fp_area + fn_weight * fn_area
    p_at_threshold: float
    midpoint: float  # (1/b)**(1/r): where the S-curve is steepest

    @property
    def used(self) -> int:
        return self.bands * self.rows


@dataclass(frozen=True, slots=True)
class RateRow:
    """P(candidate) at one similarity, and what it means there."""

    similarity: float
    probability: float
    kind: str  # "false negative" (similarity >= threshold) or "false positive"
    rate: float  # 1 - P for a false negative, P for a false positive


@dataclass(frozen=True, slots=True)
class TuneReport:
    """Everything `dedupd tune` shows."""

    threshold: float
    num_perm: int
    fp_weight: float
    fn_weight: float
    chosen_by: str  # "chooser" or "explicit"
    chosen: Banding
    table: tuple[RateRow, ...]
    alternatives: tuple[Banding, ...] = field(default=())

    @property
    def used(self) -> int:
        return self.chosen.used

    @property
    def wasted(self) -> int:
        return self.num_perm - self.chosen.used

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (used by ``dedupd tune --json``)."""
        out = asdict(self)
        out["used"], out["wasted"] = self.used, self.wasted
        return out


def banding(
    label: str, threshold: float, bands: int, rows: int, fp_weight: float, fn_weight: float
) -> Banding:
    """Describe one banding at ``threshold``."""
    fp, fn = error_rates(threshold, bands, rows)
    return Banding(
        label,
        bands,
        rows,
        fp,
        fn,
        fp_weight * fp + fn_weight * fn,
        float(candidate_probability(threshold, bands, rows)),
        (1.0 / bands) ** (1.0 / rows),
    )


def similarity_grid(threshold: float, span: float = 0.3, step: float = 0.05) -> list[float]:
    """Similarities ``threshold - span .. threshold + span`` in ``step``s, kept within [0, 1]."""
    if step <= 0 or span < 0:
        raise ConfigError("step must be positive and span non-negative")
    n = round(span / step)
    grid = (round(threshold + k * step, 6) for k in range(-n, n + 1))
    return [s for s in grid if 0.0 <= s <= 1.0]


def rate_table(threshold: float, bands: int, rows: int, similarities: list[float]) -> tuple[RateRow, ...]:
    """False-negative rate (1 - P) at and above the threshold, false-positive rate (P) below it."""
    out = []
    for s in similarities:
        p = float(candidate_probability(s, bands, rows))
        if s >= threshold - 1e-12:
            out.append(RateRow(s, p, "false negative", 1.0 - p))
        else:
            out.append(RateRow(s, p, "false positive", p))
    return tuple(out)


def tune(
    threshold: float,
    num_perm: int,
    fp_weight: float = DEFAULT_FP_WEIGHT,
    fn_weight: float = DEFAULT_FN_WEIGHT,
    bands: int | None = None,
    rows: int | None = None,
    span: float = 0.3,
    step: float = 0.05,
) -> TuneReport:
    """Choose (or check) a banding and describe it with its neighbours.

    Args:
        threshold: Jaccard threshold in (0, 1).
        num_perm: signature length.
        fp_weight, fn_weight: the chooser's weights (settings ``fp_weight``/``fn_weight``).
        bands, rows: an explicit banding to describe instead of the chosen one (both or neither).
        span, step: the similarity grid of the table.

    Returns:
        The report: chosen banding, rate table, alternatives (the chooser's choice when explicit, the
        equal-weight choice, and one row fewer/more per band, each using as many bands as fit).

    Raises:
        ConfigError: on a bad threshold, num_perm, or banding.
    """
    if (bands is None) != (rows is None):
        raise ConfigError(
            "give both --bands and --rows, or neither (then they are chosen from the threshold)"
        )
    chosen_params = LSHParams.choose(threshold, num_perm, fp_weight, fn_weight)
    if bands is not None and rows is not None:
        explicit = LSHParams(bands, rows)
        explicit.check(num_perm)
        chosen = banding("explicit", threshold, explicit.bands, explicit.rows, fp_weight, fn_weight)
        chosen_by = "explicit"
    else:
        chosen = banding("chosen", threshold, chosen_params.bands, chosen_params.rows, fp_weight, fn_weight)
        chosen_by = "chooser"
    candidates: list[tuple[str, int, int]] = []
    if chosen_by == "explicit":
        candidates.append(("chooser", chosen_params.bands, chosen_params.rows))
    equal = LSHParams.choose(threshold, num_perm, 0.5, 0.5)
    candidates.append(("equal weights", equal.bands, equal.rows))
    for r in (chosen.rows - 1, chosen.rows + 1):
        if 1 <= r <= num_perm:
            candidates.append((f"rows {r}", num_perm // r, r))
    seen = {(chosen.bands, chosen.rows)}
    alternatives = []
    for label, b, r in candidates:
        if (b, r) in seen:
            continue
        seen.add((b, r))
        alternatives.append(banding(label, threshold, b, r, fp_weight, fn_weight))
    table = rate_table(threshold, chosen.bands, chosen.rows, similarity_grid(threshold, span, step))
    return TuneReport(
        threshold, num_perm, fp_weight, fn_weight, chosen_by, chosen, table, tuple(alternatives)
    )


def _pct(x: float) -> str:
    """A rate as a percentage that keeps small values visible."""
    if x == 0.0:
        return "0%"
    if x >= 0.001:
        return f"{100 * x:.2f}%"
    return f"{100 * x:.1e}%"


def render(report: TuneReport) -> str:
    """The human-readable report of ``dedupd tune``."""
    c = report.chosen
    how = (
        f"chosen to minimise {report.fp_weight:g} x FP area + {report.fn_weight:g} x FN area"
        if report.chosen_by == "chooser"
        else "given explicitly"
    )
    lines = [
        (
            f"threshold {report.threshold:g}, num_perm {report.num_perm}: {c.bands} bands x {c.rows} rows "
            f"({how})"
        ),
        f"signature positions: {report.used} used for banding, {report.wasted} not banded"
        + (" (all num_perm positions still verify candidates)" if report.wasted else ""),
        (
            f"P(candidate) at the threshold: {c.p_at_threshold:.4f}; S-curve steepest near (1/b)^(1/r) = "
            f"{c.midpoint:.3f}"
        ),
        (
            f"areas: false positives {c.fp_area:.4f} (below the threshold), false negatives {c.fn_area:.2e} "
            f"(above it), weighted cost {c.cost:.3e}"
        ),
        "",
        f"{'Jaccard':>8}  {'P(candidate)':>12}  {'false negatives':>15}  {'false positives':>15}",
    ]
    for row in report.table:
        fn = _pct(row.rate) if row.kind == "false negative" else ""
        fp = _pct(row.rate) if row.kind == "false positive" else ""
        mark = "  <- threshold" if abs(row.similarity - report.threshold) < 1e-9 else ""
        lines.append(f"{row.similarity:>8.2f}  {row.probability:>12.6f}  {fn:>15}  {fp:>15}{mark}".rstrip())
    if report.alternatives:
        lines += [
            "",
            "compared with:",
            f"  {'banding':<20} {'used':>4}  {'P(t)':>7}  {'FP area':>8}  {'FN area':>8}  {'cost':>9}",
        ]
        for b in (c, *report.alternatives):
            name = f"{b.bands}x{b.rows} ({b.label})"
            lines.append(
                f"  {name:<20} {b.used:>4}  {b.p_at_threshold:>7.4f}  {b.fp_area:>8.4f}  "
                f"{b.fn_area:>8.2e}  {b.cost:>9.3e}"
            )
    return "\n".join(lines)


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise PlotUnavailableError(f"--plot needs matplotlib, an optional extra: {PLOT_HINT}") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot(
    report: TuneReport, path: str | Path, histogram: Sequence[tuple[float, float, int]] | None = None
) -> Path:
    """Write the S-curve (P(candidate) against Jaccard) as a PNG; with ``histogram`` ((low, high, pairs)
    per bin of similarity: ``dedupd tune --sample``), the sample's pairs as bars behind it.

    Raises:
        PlotUnavailableError: when matplotlib is not installed.
    """
    import numpy as np

    plt = _pyplot()
    s = np.linspace(0.0, 1.0, 501, dtype=np.float64)
    c = report.chosen
    fig, ax = plt.subplots(figsize=(8, 5), dpi=120)
    try:
        colours = ("tab:purple", "tab:green", "tab:brown", "tab:gray")
        for alt, colour in zip(report.alternatives, colours * len(report.alternatives), strict=False):
            label = f"{alt.bands} x {alt.rows} ({alt.label}): P(t) = {alt.p_at_threshold:.3f}"
            ax.plot(
                s,
                candidate_probability(s, alt.bands, alt.rows),
                color=colour,
                linewidth=1.2,
                alpha=0.55,
                linestyle="--",
                label=label,
            )
        ax.plot(
            s,
            candidate_probability(s, c.bands, c.rows),
            color="tab:blue",
            linewidth=2.5,
            label=f"{c.bands} x {c.rows} ({c.label}): P(t) = {c.p_at_threshold:.3f}",
        )
        ax.axvline(report.threshold, color="tab:red", linewidth=1.5, label=f"threshold {report.threshold:g}")
        ax.fill_between(
            s,
            0,
            candidate_probability(s, c.bands, c.rows),
            where=s < report.threshold,
            color="tab:orange",
            alpha=0.15,
            label=f"false-positive area {c.fp_area:.3f} (verified away)",
        )
        ax.fill_between(
            s,
            candidate_probability(s, c.bands, c.rows),
            1,
            where=s >= report.threshold,
            color="tab:red",
            alpha=0.25,
            label=f"false-negative area {c.fn_area:.1e} (missed)",
        )
        if histogram:
            _bars(ax, histogram)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("Jaccard similarity of a pair")
        ax.set_ylabel("P(pair becomes an LSH candidate)")
        ax.set_title(
            f"LSH S-curve: b = {c.bands} bands x r = {c.rows} rows, num_perm = {report.num_perm} "
            f"({report.wasted} unbanded)"
        )
        ax.grid(True, alpha=0.3)
        # the curve hugs 0 well below the threshold and 1 well above it: put the legend where it is flat
        ax.legend(loc="upper left" if report.threshold >= 0.5 else "lower right", fontsize=8, framealpha=0.9)
        fig.tight_layout()
        out = Path(path)
        fig.savefig(out, format="png")
    finally:
        plt.close(fig)
    return out


def _bars(ax: Any, histogram: Sequence[tuple[float, float, int]]) -> None:
    """The sample's pairs per bin of similarity, as bars on a second axis behind the S-curve."""
    bars = ax.twinx()
    bars.bar(
        [low for low, _, _ in histogram],
        [n for _, _, n in histogram],
        width=[high - low for low, high, _ in histogram],
        align="edge",
        color="tab:gray",
        alpha=0.3,
        edgecolor="tab:gray",
        label="pairs of the sample per bin",
    )
    bars.set_ylabel("pairs of the sample (exact Jaccard)")
    bars.set_zorder(ax.get_zorder() - 1)
    ax.patch.set_visible(False)  # (the S-curve's axes in front of the bars)
    bars.legend(loc="center left", fontsize=8, framealpha=0.9)
