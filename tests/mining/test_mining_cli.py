"""``dedupd mine``: file input, the JSON contract, CSV/table, algorithm choice, errors, progress."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from click.testing import CliRunner
from mining_oracle import SEED_BASKETS

from dedupd.mining.cli import mine


@pytest.fixture
def seed_file(tmp_path: Path) -> Path:
    p = tmp_path / "seed.txt"
    p.write_text("".join(" ".join(b) + "\n" for b in SEED_BASKETS))
    return p


def run(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(mine, list(args))
    return res.exit_code, res.stdout, res.stderr


@pytest.mark.parametrize("algorithm", ["apriori", "pcy", "multistage", "multihash", "son", "toivonen"])
def test_json_contract_and_seed_rules(seed_file: Path, algorithm: str) -> None:
    """One JSON object: itemsets with counts, rules with the named measures; the seed's two rules."""
    code, out, err = run(
        "--input",
        str(seed_file),
        "--support",
        "0.4",
        "--confidence",
        "0.6",
        "--format",
        "json",
        "--algorithm",
        algorithm,
        "--workers",
        "1",
    )
    assert code == 0, err
    doc = json.loads(out)
    assert set(doc) == {"itemsets", "rules"}
    counts = {frozenset(x["items"]): x["count"] for x in doc["itemsets"]}
    assert counts[frozenset({"Beer", "Bread"})] == 2 and len(counts) == 14
    rules = {(tuple(r["antecedent"]), tuple(r["consequent"])): r for r in doc["rules"]}
    assert rules[(("Milk",), ("Coke",))]["confidence"] == pytest.approx(0.75)
    dmb = rules[(("Diaper", "Milk"), ("Beer",))]
    assert {"support", "confidence", "interest", "lift"} <= set(dmb)
    assert dmb["interest"] == pytest.approx(abs(2 / 3 - 0.6))
    assert "pass 1:" in err  # progress per pass on stderr


def test_absolute_support_equals_fraction(seed_file: Path) -> None:
    a = json.loads(run("--input", str(seed_file), "--support", "2", "--format", "json", "-q")[1])
    b = json.loads(run("--input", str(seed_file), "--support", "0.4", "--format", "json", "-q")[1])
    assert a["itemsets"] == b["itemsets"]


def test_csv_and_table(seed_file: Path) -> None:
    code, out, _ = run("--input", str(seed_file), "--support", "2", "--format", "csv", "-q")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("kind,items,antecedent,consequent,count")
    assert "itemset,Beer|Bread,,,2,0.4,,,,," in lines
    code, out, _ = run("--input", str(seed_file), "--support", "2", "-q", "--max-size", "2")
    assert code == 0 and "frequent itemsets in 5 baskets" in out and "Beer Bread" in out


def test_sampling_reports_possible_misses(tmp_path: Path) -> None:
    p = tmp_path / "b.txt"
    p.write_text("a b\n" * 30 + "c d\n" * 3 + "e\n" * 67)
    code, _, err = run(
        "--input",
        str(p),
        "--support",
        "3",
        "--algorithm",
        "sample",
        "--sample-fraction",
        "0.05",
        "--format",
        "json",
        "--seed",
        "1",
    )
    assert code == 0
    assert "warning: random sampling missed" in err


def test_memory_picks_and_reports(seed_file: Path) -> None:
    code, _, err = run("--input", str(seed_file), "--support", "2", "--memory", "1MiB", "--format", "json")
    assert code == 0 and "note: --memory 1048576: apriori" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--support", "0"], "fraction 0 < s < 1"),
        (["--support", "2.5"], "whole number"),
        (["--memory", "1MiB", "--algorithm", "pcy"], "leave out --algorithm"),
        (["--engine", "dask", "--algorithm", "pcy"], "--algorithm son"),
        (["--memory", "12"], "too small"),
    ],
)
def test_errors_say_how_to_fix(seed_file: Path, args: list[str], message: str) -> None:
    code, out, err = run("--input", str(seed_file), *args)
    assert code != 0 and message in err + out


def test_bad_file(tmp_path: Path) -> None:
    p = tmp_path / "bad.jsonl"
    p.write_text('{"items": [1, 2]}\n')
    code, _, err = run("--input", str(p))
    assert code == 2 and "bad.jsonl:1" in err  # an input-file problem, as in every command


def test_progress_in_plain_words_and_structures_with_verbose(seed_file: Path) -> None:
    """Progress says what was counted and found; the counting structures (the one-third rule's
    triangular matrix or triples) and their memory only with --verbose."""
    _, _, plain = run("--input", str(seed_file), "--support", "2", "--format", "json")
    assert "pass 2: pairs: 7 frequent of 10 counted" in plain
    assert "triangular" not in plain and "triples" not in plain and "KiB" not in plain
    _, _, verbose = run("--input", str(seed_file), "--support", "2", "--format", "json", "--verbose")
    assert "pass 2: pairs: 10 counted, 7 frequent, triangular matrix" in verbose and "1/3" in verbose


def test_sampling_candidate_guard_is_one_line(tmp_path: Path) -> None:
    """Toivonen or sampling on small wide baskets at a low threshold: exit 1 and one line naming
    --max-size and --support instead of minutes of counting; --max-size then gets an answer."""
    rng = random.Random(1)
    p = tmp_path / "wide.txt"
    p.write_text("".join(" ".join(rng.sample([f"i{i}" for i in range(40)], 14)) + "\n" for _ in range(200)))
    for algorithm in ("toivonen", "sample"):
        args = ("--input", str(p), "--support", "0.05", "--algorithm", algorithm, "-q")
        code, out, err = run(*args, "--max-candidates", "20000")
        assert code == 1 and out == ""
        assert err.count("\n") == 1 and "--max-size" in err and "--support" in err and "Traceback" not in err
        code, out, err = run(*args, "--max-candidates", "20000", "--max-size", "2", "--format", "json")
        assert code == 0, err
        assert json.loads(out)["itemsets"]
