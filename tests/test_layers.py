"""The import-layer gate (scripts/check_layers.py): the package as it is passes; a planted violation of each
rule fails, naming the file and line."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "check_layers.py"


def _checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_layers", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def package(tmp_path: Path) -> Path:
    """A copy of the package's sources to plant violations in."""
    return Path(
        shutil.copytree(ROOT / "dedupd", tmp_path / "dedupd", ignore=shutil.ignore_patterns("__pycache__"))
    )


def _plant(path: Path, line: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + f"\n{line}\n", encoding="utf-8")


def test_the_package_keeps_its_layers() -> None:
    run = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout
    assert "no violation" in run.stdout


def test_the_index_importing_the_daemon_fails(package: Path) -> None:
    _plant(package / "index" / "keys.py", "from dedupd.daemon.planner import plan  # planted")
    problems = _checker().check(package)
    assert any("index/keys.py" in p and "dedupd.daemon.planner" in p for p in problems), problems
    run = subprocess.run(
        [sys.executable, str(SCRIPT), str(package)], capture_output=True, text=True, check=False
    )
    assert run.returncode == 1 and "a layer above it" in run.stdout


def test_an_import_for_types_only_counts(package: Path) -> None:
    _plant(
        package / "similarity" / "lsh.py", "if TYPE_CHECKING:\n    from dedupd.index.gateway import Gateway"
    )
    assert any("similarity/lsh.py" in p for p in _checker().check(package))


def test_the_pure_layer_importing_redis_fails(package: Path) -> None:
    _plant(package / "similarity" / "hashing.py", "import redis  # planted")
    problems = _checker().check(package)
    assert any("similarity/hashing.py" in p and "imports redis" in p for p in problems), problems


def test_layers_of_one_rank_do_not_import_each_other(package: Path) -> None:
    _plant(package / "mining" / "result.py", "from dedupd.ops import stats  # planted")
    assert any("mining/result.py" in p for p in _checker().check(package))


def test_a_name_of_the_root_taken_below_it_fails(package: Path) -> None:
    _plant(package / "daemon" / "loop.py", "from dedupd import Client  # planted")
    assert any("daemon/loop.py" in p for p in _checker().check(package))


def test_a_cycle_inside_one_layer_fails(package: Path) -> None:
    _plant(package / "index" / "keys.py", "from dedupd.index import gateway  # planted")
    problems = _checker().check(package)
    assert any(p.startswith("import cycle:") and "dedupd.index.keys" in p for p in problems), problems


def test_a_module_outside_every_layer_fails(package: Path) -> None:
    (package / "extras").mkdir()
    (package / "extras" / "__init__.py").write_text('"""Planted."""\n')
    assert any("'extras' is in no layer" in p for p in _checker().check(package))
