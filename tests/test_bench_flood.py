"""scripts/bench_flood.py: its generated corpora (pure), and a small run end to end (real redis-server)."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "bench_flood.py"
sys.path.insert(0, str(REPO / "scripts"))

import bench_flood  # noqa: E402


def test_flood_copies_differ_from_the_base_by_exactly_the_edits() -> None:
    vocab = bench_flood.vocabulary(500, 7)
    assert len(vocab) == len(set(vocab)) == 500
    copies, base = bench_flood.flood_texts(50, 100, 3, vocab, 7)
    base_words = base.split()
    assert len(base_words) == 100
    for text in copies:
        words = text.split()
        assert len(words) == 100
        assert sum(a != b for a, b in zip(words, base_words, strict=True)) == 3
        assert set(words) <= set(vocab)
    # fixed seed: the same corpora every time
    assert bench_flood.flood_texts(50, 100, 3, vocab, 7) == (copies, base)
    others = bench_flood.different_texts(50, 100, vocab, 7)
    assert others == bench_flood.different_texts(50, 100, vocab, 7)
    assert all(len(t.split()) == 100 for t in others) and len(set(others)) == 50


def test_flood_shape_of_two_substitutions() -> None:
    vocab = bench_flood.vocabulary(1000, 1)
    copies, base = bench_flood.flood_texts(200, 100, 2, vocab, 1)
    shape = bench_flood.flood_shape(copies, base, "word:3", 0.8, 1)
    # 98 shingles; two substitutions away from both ends replace 6 of them: J = 92 / 104
    assert shape["j_to_base_median"] == pytest.approx(92 / 104)
    assert 0 < shape["sampled_pairs_at_or_above_threshold"] < 1
    assert bench_flood.flood_shape(copies, base, "char:5", 0.8, 1) == {}


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server")
@pytest.mark.skipif(
    not (REPO / ".venv" / "bin" / "dedupd").exists() and shutil.which("dedupd") is None,
    reason="needs the dedupd executable",
)
@pytest.mark.timeout(240)
def test_small_run_reports_every_figure() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEDUPD_")}
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "-n", "60", "--repeat", "2"],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=230,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    flood, different = report["runs"]["flood"], report["runs"]["different"]
    assert flood["docs"] == different["docs"] == 60
    assert flood["alerts"] > 0 and different["alerts"] == 0
    assert flood["largest_alert_bytes"] > 0 and flood["largest_alert"]["matches"] >= 1
    for run in (flood, different):
        assert run["docs_per_s"] > 0 and run["bytes_per_doc"] > 0
        assert run["daemon_exit_codes"] == [0]
        if sys.platform.startswith("linux"):
            assert run["peak_rss_kb"] > 0
    assert [len(report["rounds"][kind]) for kind in ("different", "flood")] == [2, 2]
    seconds = [60 / r for r in report["rounds"]["flood"]]
    assert flood["docs_per_s"] == pytest.approx(60 / statistics.median(seconds), rel=1e-3)
    assert sum(line.startswith("  round ") for line in proc.stdout.splitlines()) == 2
    assert len(report["bounds"]) == 5
    assert sum(line.startswith(("    PASS", "    FAIL")) for line in proc.stdout.splitlines()) == 5


def test_the_median_run_has_the_median_time() -> None:
    runs = [{"docs": 10, "seconds": s, "docs_per_s": 10 / s} for s in (2.0, 5.0, 1.0)]
    assert bench_flood.median_run(runs)["docs_per_s"] == 5.0
    assert (
        bench_flood.median_run(runs[:2])["docs_per_s"] == 10 / 3.5
    )  # an even number: the mean of the middle two
