"""scripts/quickstart.sh as a user runs it: alerts, next steps that see its data, a second run that starts clean.

The quickstart runs as a real process with the virtualenv of this test session (so it installs nothing), with its
data in the repository's data/quickstart (its own directory) and a temporary directory of its own that must stay
empty.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "scripts" / "quickstart.sh"
# the planted near-duplicates of scripts/sample.jsonl
SAMPLE_DUPLICATES = {"news-1-syndicated", "news-1-reprint", "news-3-copy", "ticket-102"}
TIMEOUT_S = 300  # a generous deadline: the quickstart takes about 10 s


def user_env(tmpdir: Path, **extra: str) -> dict[str, str]:
    """A user's environment: no DEDUPD_* variable, this session's virtualenv active, a private TMPDIR."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEDUPD_")}
    env.update(VIRTUAL_ENV=sys.prefix, TMPDIR=str(tmpdir), **extra)
    return env


def run_quickstart(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(QUICKSTART)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S
    )


def alert_lines(out: str) -> list[str]:
    """The lines the quickstart prints between `== alerts` and its next `==` line."""
    assert "== alerts\n" in out, out
    return out.split("== alerts\n", 1)[1].split("\n==", 1)[0].splitlines()


def next_steps(out: str) -> list[str]:
    """The commands printed after `== next, try`, as a user would paste them."""
    assert "== next, try" in out, out
    return [line.strip() for line in out.split("== next, try", 1)[1].splitlines()[1:] if line.strip()]


@dataclass
class Runs:
    first: subprocess.CompletedProcess[str]
    steps: list[subprocess.CompletedProcess[str]]  # the first run's next steps, pasted into bash
    second: subprocess.CompletedProcess[str]
    tmpdir: Path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """Run the quickstart, then its next steps, then the quickstart again."""
    tmpdir = tmp_path_factory.mktemp("quickstart-tmpdir")
    env = user_env(tmpdir)
    first = run_quickstart(env)
    assert first.returncode == 0, first.stdout + first.stderr
    steps = [
        subprocess.run(
            ["bash", "-c", line], cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S
        )
        for line in next_steps(first.stdout)
    ]
    second = run_quickstart(env)
    return Runs(first, steps, second, tmpdir)


def test_the_quickstart_prints_the_sample_alerts_and_its_next_steps(runs: Runs) -> None:
    """Exit 0, one alert per planted near-duplicate, three commands to try next, no traceback."""
    assert runs.first.returncode == 0, runs.first.stderr
    alerted = {line.split()[0] for line in alert_lines(runs.first.stdout)}
    assert alerted == SAMPLE_DUPLICATES
    steps = next_steps(runs.first.stdout)
    assert len(steps) == 3
    assert [re.search(r"dedupd (\w+)", step).group(1) for step in steps] == ["alerts", "query", "stats"]  # type: ignore[union-attr]
    assert "Traceback" not in runs.first.stderr


def test_the_next_steps_see_the_quickstart_data(runs: Runs) -> None:
    """Pasted as printed, `dedupd alerts` shows the same alerts, `dedupd query` finds the copy, `stats` runs."""
    alerts, query, stats = runs.steps
    assert alerts.returncode == 0, alerts.stderr
    assert alerts.stdout.splitlines() == alert_lines(runs.first.stdout)
    assert query.returncode == 0, query.stderr
    assert "duplicate of news-3" in query.stdout
    assert stats.returncode == 0, stats.stderr
    assert re.search(r"documents indexed\s+12\b", stats.stdout), stats.stdout


def test_a_second_run_starts_clean(runs: Runs) -> None:
    """The second run's alerts are the first run's, not twice as many."""
    assert runs.second.returncode == 0, runs.second.stdout + runs.second.stderr
    assert alert_lines(runs.second.stdout) == alert_lines(runs.first.stdout)


def test_the_quickstart_leaves_no_directory_in_the_temporary_directory(runs: Runs) -> None:
    assert [p.name for p in runs.tmpdir.iterdir() if p.is_dir()] == []


def test_a_data_directory_the_quickstart_did_not_make_is_refused_and_kept(tmp_path: Path) -> None:
    """DEDUPD_DATA_DIR pointing at someone's data: exit 2 and one line, and nothing deleted."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "appendonly.aof").write_text("someone's index\n")
    res = run_quickstart(user_env(tmp_path, DEDUPD_DATA_DIR=str(data)))
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and "DEDUPD_DATA_DIR" in res.stderr
    assert (data / "appendonly.aof").read_text() == "someone's index\n"
