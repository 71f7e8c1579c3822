"""Settings that were not given follow the stored index; only a value given explicitly (flag, ``DEDUPD_*``,
TOML file) that differs refuses, naming where it was given and the command that would change the index."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import redis
from helpers import alerts, drain, make_daemon, push
from procs import DEDUPD, Served, wait_for

from dedupd.errors import ParameterMismatchError
from dedupd.index.keys import Keys
from dedupd.settings import load_settings
from dedupd.similarity.normalization import NORMALIZATION
from dedupd.similarity.spec import IndexSpec

REBUILT = load_settings(threshold=0.6).index_spec()  # what `dedupd rebuild --threshold 0.6` stores


@pytest.fixture(autouse=True)
def _no_outside_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in list(os.environ):
        if var.upper().startswith("DEDUPD_"):
            monkeypatch.delenv(var)
    monkeypatch.chdir(tmp_path)  # no ./dedupd.toml


def test_settings_not_given_take_the_index_values() -> None:
    assert REBUILT.threshold == 0.6 and load_settings().index_spec() != REBUILT
    assert load_settings().serving_spec(REBUILT) == REBUILT
    assert load_settings(batch_size=10).serving_spec(REBUILT) == REBUILT  # not an index parameter
    assert load_settings(threshold=0.6).serving_spec(REBUILT) == REBUILT  # given, and the same


def test_a_flag_that_differs_refuses_naming_the_flag_and_the_rebuild() -> None:
    with pytest.raises(ParameterMismatchError) as caught:
        load_settings(threshold=0.8).serving_spec(REBUILT)
    message = str(caught.value)
    assert "was built with threshold 0.6, but --threshold gives 0.8." in message
    assert "leave out --threshold" in message and "`dedupd rebuild --threshold 0.8`" in message
    assert "DEDUPD_" not in message  # it blames no variable the user never set
    assert "bands" not in message  # nor bands chosen from the threshold


def test_a_variable_or_a_file_that_differs_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DEDUPD_NUM_PERM", "64")
    with pytest.raises(ParameterMismatchError, match="with num_perm 128, but DEDUPD_NUM_PERM gives 64"):
        load_settings().serving_spec(REBUILT)
    monkeypatch.delenv("DEDUPD_NUM_PERM")
    (tmp_path / "dedupd.toml").write_text('shingle = "char:5"\n')
    with pytest.raises(ParameterMismatchError) as caught:
        load_settings().serving_spec(REBUILT)
    assert f"shingle word:3, but {tmp_path / 'dedupd.toml'} gives char:5" in str(caught.value)
    assert "remove it from" in str(caught.value) and "`dedupd rebuild --shingle char:5`" in str(caught.value)


def test_explicit_banding_and_capacity_are_checked_only_when_given() -> None:
    banded = REBUILT.with_changes({"bands": 16, "rows": 8, "shard_bits": 4})
    assert load_settings().serving_spec(banded) == banded
    with pytest.raises(
        ParameterMismatchError, match="bands 16, but --bands gives 32, and rows 8, but --rows gives 4"
    ):
        load_settings(bands=32, rows=4).serving_spec(banded)
    with pytest.raises(ParameterMismatchError, match="shard_bits \\(capacity 1,024\\), but --capacity gives"):
        load_settings(capacity=10_000_000).serving_spec(banded)


def test_an_index_normalised_otherwise_still_takes_a_rebuild() -> None:
    old = REBUILT.with_changes({"normalization": NORMALIZATION - 1})
    with pytest.raises(ParameterMismatchError) as caught:
        load_settings().serving_spec(old)
    message = str(caught.value)
    assert "normalised by version 1, this dedupd normalises by version 2" in message
    assert "Run `dedupd rebuild` to reindex" in message and "Start with" not in message  # no flag helps


def test_serve_after_rebuild_to_a_lower_threshold_starts_without_flags(
    r: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    """The issue's case, with real processes: `dedupd rebuild --threshold 0.6`, then a plain `dedupd serve`
    starts (it refused with exit 2 before) and alerts at 0.6; `serve --threshold 0.8` refuses in one line."""
    base = " ".join(f"w{i}" for i in range(40))
    near = " ".join(f"w{i}" for i in range(40) if i % 20 != 3)  # J = 32/42 = 0.76 on word 3-shingles
    push(r, [{"id": "a", "text": base}])
    daemon = make_daemon(redis_url)
    drain(daemon)
    r.delete(Keys().heartbeat(daemon.consumer))  # not iterating: the rebuild need not wait for it
    env = {**os.environ, "DEDUPD_REDIS_URL": redis_url, "DEDUPD_METRICS_PORT": "0"}
    done = subprocess.run(
        [*DEDUPD, "rebuild", "--threshold", "0.6"], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert IndexSpec.from_json(r.hget("dedupd:meta", "spec") or b"").threshold == 0.6

    served = Served(redis_url, tmp_path / "serve.log")
    push(r, [{"id": "b", "text": near}])
    wait_for(lambda: len(alerts(r)) == 1 or served.proc.poll() is not None, 120, "the alert of b")
    assert served.proc.poll() is None, served.stderr
    assert alerts(r)[0]["id"] == "b" and alerts(r)[0]["duplicate_of"] == "a"
    assert served.stop() == 0

    refused = subprocess.run(
        [*DEDUPD, "serve", "--threshold", "0.8"], env=env, capture_output=True, text=True, timeout=120
    )
    assert refused.returncode == 2
    (error,) = [line for line in refused.stderr.splitlines() if line.startswith("dedupd: error: ")]
    assert refused.stderr.strip().endswith(error)  # one line that says what is wrong and what to do
    assert "was built with threshold 0.6, but --threshold gives 0.8" in error
    assert "--threshold gives 0.8" in refused.stderr and "dedupd rebuild --threshold 0.8" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_the_shipped_config_file_sets_no_index_parameter(monkeypatch: pytest.MonkeyPatch) -> None:
    """The systemd units point DEDUPD_CONFIG at a copy of config/dedupd.toml: it must not pin the index's
    parameters, or every daemon would refuse to start after a `dedupd rebuild --threshold 0.6`."""
    monkeypatch.setenv("DEDUPD_CONFIG", str(Path(__file__).resolve().parents[1] / "config" / "dedupd.toml"))
    settings = load_settings()
    assert settings.config_file is not None and settings.config_file.name == "dedupd.toml"
    assert settings.serving_spec(REBUILT) == REBUILT


def test_the_retention_window_is_stored_followed_and_refused_like_the_other_parameters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    windowed = load_settings(retention_s=3600, max_documents=1000).index_spec()
    assert (windowed.retention_s, windowed.max_documents, windowed.refresh_on_duplicate) == (3600, 1000, True)
    assert IndexSpec.from_json(windowed.to_json()) == windowed
    old = IndexSpec.from_json('{"shingle": "word:3", "num_perm": 8, "seed": 1, "bands": 2, "rows": 4}')
    assert not old.windowed  # an index stored before the window: no window
    assert load_settings().serving_spec(windowed) == windowed  # not given: follows the index
    assert load_settings(retention_s=3600).serving_spec(windowed) == windowed
    with pytest.raises(ParameterMismatchError) as caught:
        load_settings(retention_s=60).serving_spec(windowed)
    assert "retention_s 3600, but --retention-s gives 60" in str(caught.value)
    assert "`dedupd rebuild --retention-s 60`" in str(caught.value)
    monkeypatch.setenv("DEDUPD_MAX_DOCUMENTS", "0")  # 0: no bound
    with pytest.raises(ParameterMismatchError) as caught:
        load_settings().serving_spec(windowed)
    assert "max_documents 1000, but DEDUPD_MAX_DOCUMENTS gives unset (no bound)" in str(caught.value)
    assert "`dedupd rebuild --max-documents 0`" in str(caught.value)
    monkeypatch.delenv("DEDUPD_MAX_DOCUMENTS")
    with pytest.raises(ParameterMismatchError, match="--no-refresh-on-duplicate"):
        load_settings(refresh_on_duplicate=False).serving_spec(windowed)


def test_a_rebuild_keeps_the_window_unless_given() -> None:
    windowed = load_settings(retention_s=3600).index_spec()
    assert load_settings(threshold=0.7).rebuild_target(windowed).retention_s == 3600
    assert load_settings(retention_s=60).rebuild_target(windowed).retention_s == 60
    assert load_settings(retention_s=0).rebuild_target(windowed).retention_s is None
    assert load_settings(max_documents=5).rebuild_target(windowed).max_documents == 5
