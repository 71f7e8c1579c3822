"""Settings: defaults, environment, TOML file, precedence, and readable errors."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from dedupd.errors import ConfigError
from dedupd.settings import Settings, ShingleSpec, load_settings

CONFIG = Path(__file__).resolve().parents[1] / "config" / "dedupd.toml"


def test_documented_defaults_equal_code_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    """config/dedupd.toml documents the defaults: each value in it is the built-in default."""
    monkeypatch.delenv("DEDUPD_METRICS_PORT", raising=False)
    documented = tomllib.loads(CONFIG.read_text())
    defaults = Settings()
    assert documented, "the config file documents no setting"
    for key, value in documented.items():
        assert getattr(defaults, key) == value, key
    commented = {
        line.lstrip("# ").split(" =")[0]
        for line in CONFIG.read_text().splitlines()
        if line.startswith("# ") and " = " in line
    }
    assert set(Settings.model_fields) <= set(documented) | commented


def test_env_and_file_and_flags_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    cfg = tmp_path / "d.toml"
    cfg.write_text('threshold = 0.7\nshingle = "char:5"\nbatch_size = 10\n')
    monkeypatch.setenv("DEDUPD_CONFIG", str(cfg))
    monkeypatch.setenv("DEDUPD_THRESHOLD", "0.9")
    s = load_settings(batch_size=None)
    assert (s.threshold, s.shingle, s.batch_size) == (0.9, "char:5", 10)  # env beats file
    assert load_settings(threshold=0.6).threshold == 0.6  # flag beats env


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        ({"threshold": 1.5}, "threshold (DEDUPD_THRESHOLD)"),
        ({"shingle": "words:3"}, "word:3"),
        ({"bands": 10}, "set both bands and rows"),
        ({"bands": 30, "rows": 5}, "exceeds num_perm"),
        ({"redis_url": "http://x"}, "redis://"),
        ({"prefix": "a b"}, "prefix"),
        ({"verify": "maybe"}, "verify"),
    ],
)
def test_errors_say_what_to_fix(overrides: dict[str, object], needle: str) -> None:
    with pytest.raises(ConfigError, match="invalid settings") as info:
        load_settings(**overrides)
    assert needle in str(info.value)
    assert "Value error" not in str(info.value)  # pydantic's prefix for a validator's ValueError


def test_missing_config_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEDUPD_CONFIG", "/nonexistent.toml")
    with pytest.raises(ConfigError, match="not a file"):
        load_settings()


def test_password_is_redacted() -> None:
    s = load_settings(redis_url="rediss://user:s3cret@host:6380/0")
    assert "s3cret" not in s.redacted_url() and "user:***@host" in s.redacted_url()
    assert "s3cret" not in load_settings(redis_url="redis://:s3cret@h/0").redacted_url()


def test_shingle_spec() -> None:
    assert ShingleSpec.parse("char:5") == ShingleSpec("char", 5)
    with pytest.raises(ConfigError):
        ShingleSpec.parse("word:0")
