"""Tuning: the rate table against candidate_probability, the chosen banding, the CLI, the S-curve PNG."""

from __future__ import annotations

import builtins
import json
import struct
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dedupd.cli import cli
from dedupd.errors import ConfigError
from dedupd.similarity import tuning
from dedupd.similarity.lsh import LSHParams, candidate_probability, error_rates
from dedupd.similarity.tuning import PlotUnavailableError, render, similarity_grid, tune


def test_grid_is_centred_on_the_threshold_and_clipped() -> None:
    """threshold +- 0.3 in steps of 0.05, kept within [0, 1]."""
    assert similarity_grid(0.5) == [round(0.2 + 0.05 * k, 6) for k in range(13)]
    assert similarity_grid(0.8) == [0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0]
    with pytest.raises(ConfigError):
        similarity_grid(0.8, step=0)


def test_table_values_are_candidate_probabilities() -> None:
    """False negatives (1 - P) at and above the threshold, false positives (P) below it."""
    report = tune(0.8, 128)
    b, r = report.chosen.bands, report.chosen.rows
    assert len(report.table) == 11
    for row in report.table:
        p = float(candidate_probability(row.similarity, b, r))
        assert row.probability == pytest.approx(p, abs=1e-15)
        if row.similarity >= 0.8:
            assert row.kind == "false negative" and row.rate == pytest.approx(1 - p, abs=1e-15)
        else:
            assert row.kind == "false positive" and row.rate == pytest.approx(p, abs=1e-15)


def test_chosen_banding_is_the_daemons() -> None:
    """The default report shows what LSHParams.choose picks with the settings' weights."""
    report = tune(0.8, 128, 0.001, 0.999)
    chosen = LSHParams.choose(0.8, 128, 0.001, 0.999)
    assert (report.chosen.bands, report.chosen.rows) == (chosen.bands, chosen.rows)
    assert report.chosen_by == "chooser"
    assert report.used + report.wasted == 128 and report.used == chosen.bands * chosen.rows
    fp, fn = error_rates(0.8, chosen.bands, chosen.rows)
    assert (report.chosen.fp_area, report.chosen.fn_area) == (fp, fn)
    assert report.chosen.cost == pytest.approx(0.001 * fp + 0.999 * fn)
    labels = {a.label: (a.bands, a.rows) for a in report.alternatives}
    equal = LSHParams.choose(0.8, 128, 0.5, 0.5)
    assert labels["equal weights"] == (equal.bands, equal.rows)
    assert labels[f"rows {chosen.rows - 1}"] == (128 // (chosen.rows - 1), chosen.rows - 1)
    # the chooser's choice has the least weighted cost among the ones shown
    assert all(report.chosen.cost <= a.cost for a in report.alternatives)


def test_explicit_banding_is_described_and_compared_with_the_chooser() -> None:
    """The course's b=20, r=5 example: P(.5) = .470; 28 positions are not banded."""
    report = tune(0.8, 128, bands=20, rows=5)
    assert report.chosen_by == "explicit" and report.wasted == 28
    assert any(a.label == "chooser" for a in report.alternatives)
    assert [round(row.probability, 3) for row in report.table if row.similarity == 0.5] == [0.47]
    with pytest.raises(ConfigError, match="exceeds num_perm"):
        tune(0.8, 64, bands=20, rows=5)
    with pytest.raises(ConfigError, match="both"):
        tune(0.8, 64, bands=20)


def test_render_marks_the_threshold_and_waste() -> None:
    text = render(tune(0.8, 128))
    assert "25 bands x 5 rows" in text and "125 used for banding, 3 not banded" in text
    assert "<- threshold" in text and "compared with:" in text
    assert all(line == line.rstrip() for line in text.splitlines())


def test_cli_json_and_table() -> None:
    runner = CliRunner()
    res = runner.invoke(cli, ["tune", "--threshold", "0.8", "--num-perm", "128", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert (data["chosen"]["bands"], data["chosen"]["rows"], data["wasted"]) == (25, 5, 3)
    assert data["plot"] is None and len(data["table"]) == 11
    res = runner.invoke(cli, ["tune", "--bands", "20", "--rows", "5", "--num-perm", "64"])
    assert res.exit_code == 2 and "exceeds num_perm" in res.output
    res = runner.invoke(cli, ["tune", "--help"])
    assert res.exit_code == 0 and "--plot" in res.output


def test_cli_uses_configured_banding(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEDUPD_BANDS", "16")
    monkeypatch.setenv("DEDUPD_ROWS", "8")
    res = CliRunner().invoke(cli, ["tune", "--json"])
    data = json.loads(res.output)
    assert (data["chosen"]["bands"], data["chosen"]["rows"], data["chosen_by"]) == (16, 8, "explicit")


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR"
    return struct.unpack(">II", head[16:24])


def test_plot_writes_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "s-curve.png"
    res = CliRunner().invoke(cli, ["tune", "--threshold", "0.8", "--num-perm", "128", "--plot", str(out)])
    assert res.exit_code == 0, res.output
    assert f"S-curve written to {out}" in res.output
    width, height = _png_size(out)
    assert 600 <= width <= 2000 and 400 <= height <= 1500
    assert 20_000 < out.stat().st_size < 2_000_000


def test_plot_without_matplotlib_says_how_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    real_import = builtins.__import__

    def no_matplotlib(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with pytest.raises(PlotUnavailableError, match=r"pip install 'dedupd\[plot\]'"):
        tuning.plot(tune(0.8, 128), tmp_path / "x.png")
    res = CliRunner().invoke(cli, ["tune", "--plot", str(tmp_path / "x.png")])
    assert res.exit_code == 2 and "pip install 'dedupd[plot]'" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "x.png").exists()
