"""End to end: syndicated stories through a real `dedupd serve` (baskets = "sources"), then `dedupd mine`.

The stream comes from ``scripts/gen_syndicated.py`` (fixed seed): feeds B, C, D, E republish stories of
A, A, B, C with planted probabilities 0.6, 0.3, 0.5, 0.4 (a few words edited); F and G are independent.
Mining the duplicate clusters' sources must give each planted edge as a rule {followed} -> {follower}
whose confidence is the planted probability within sampling error, and no rule that joins F or G to
any other feed.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from blackbox import Procs, procs_fixture, run_cli

ROOT = Path(__file__).resolve().parents[2]
TOLERANCE = 0.08  # about three standard errors for the smallest planted sample (240 clusters at p = 0.4)
NOISE = 0.02


@pytest.fixture
def procs(redis_url: str, tmp_path: Path) -> Iterator[Procs]:
    """Background dedupd processes of one test, all killed when it ends."""
    yield from procs_fixture(redis_url, tmp_path)


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_syndicated", ROOT / "scripts" / "gen_syndicated.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_syndicated"] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_planted_copying_comes_out_as_rules(procs: Procs, redis_url: str, tmp_path: Path) -> None:
    gen = _generator()
    stories = gen.generate(seed=16)
    stream = tmp_path / "syndicated.jsonl"
    stream.write_text(
        "".join(json.dumps({"id": s.id, "source": s.source, "text": s.text}) + "\n" for s in stories)
    )
    procs.serve(DEDUPD_BASKETS="sources")
    pushed = run_cli(redis_url, "push", str(stream), "--wait", "--timeout", "60", timeout=90)
    assert pushed.returncode == 0, pushed.stderr
    mined = run_cli(
        redis_url, "mine", "--support", "0.01", "--confidence", "0.0", "--format", "json", timeout=60
    )
    assert mined.returncode == 0, mined.stderr
    own = sum(gen.OWN.values())
    # every copy found, no two stories merged: one cluster per story written by its feed
    assert f"{len(stories):,} documents with links grouped into {own:,} duplicate clusters" in mined.stderr
    rules = {(tuple(r["antecedent"]), tuple(r["consequent"])): r for r in json.loads(mined.stdout)["rules"]}
    found = {}
    for follower, (followed, p) in gen.PLAN.items():
        rule = rules.get(((followed,), (follower,)))
        assert rule is not None, f"no rule {followed} -> {follower}"
        found[f"{followed}->{follower}"] = (p, round(rule["confidence"], 3))
        assert abs(rule["confidence"] - p) <= TOLERANCE, found
    print("planted vs found confidence:", found)
    for (ante, cons), rule in rules.items():
        if set(gen.INDEPENDENT) & set(ante + cons):
            assert rule["confidence"] <= NOISE, (ante, cons, rule)
