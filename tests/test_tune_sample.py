"""``dedupd tune --sample FILE``: the table of pairs per bin, the example pairs, what each threshold catches
and costs, the JSON, the plot, and the sample read as ``dedupd push`` reads it."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from dedupd.cli import cli
from dedupd.cli.sample import LateProgress
from tests.test_near_pairs import WORDS, oracle

BASES = 40


def _feed(seed: int = 2) -> list[dict[str, str]]:
    """Articles of 60-100 words, a byline appended to some, a few words changed in others."""
    rng = random.Random(seed)
    docs = []
    for i in range(BASES):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(60, 100)))
        docs.append({"id": f"story-{i}", "text": text})
        if i % 4 == 0:
            docs.append({"id": f"story-{i}-byline", "text": text + " by Ann Example of the Wire"})
        if i % 5 == 0:
            words = text.split()
            for j in range(0, len(words), 8):
                words[j] = rng.choice(WORDS)
            docs.append({"id": f"story-{i}-rewrite", "text": " ".join(words)})
    return docs


@pytest.fixture
def feed(tmp_path: Path) -> tuple[Path, list[dict[str, str]]]:
    docs = _feed()
    path = tmp_path / "feed.jsonl"
    lines = [json.dumps(d) for d in docs]
    lines.insert(3, "{not json")  # a bad line: reported and skipped
    lines.insert(5, json.dumps({"id": "q", "text": docs[0]["text"], "op": "query"}))  # indexes nothing
    path.write_text("\n".join(lines) + "\n")
    return path, docs


def _rows(output: str) -> dict[str, list[str]]:
    """The table rows of the output by their first cell (a bin "0.9-1.0" or a threshold "0.8"); the first
    of each (the examples, after the table of bins, start with their bin too)."""
    rows: dict[str, list[str]] = {}
    for m in re.finditer(r"^ +(\d\.\d+(?:-\d\.\d)?) +(.*)$", output, re.M):
        rows.setdefault(m.group(1), m.group(2).split())
    return rows


def test_the_table_examples_and_thresholds(feed: tuple[Path, list[dict[str, str]]]) -> None:
    path, docs = feed
    res = CliRunner().invoke(cli, ["tune", "--sample", str(path)])
    assert res.exit_code == 0, res.output
    out = res.stdout
    texts = [d["text"] for d in docs]
    truth = oracle(texts, 0.3)
    assert f"sample: {len(docs)} documents of feed.jsonl, word:3 shingles" in out
    assert "pairs below 0.3 are not counted" in out
    assert "every pair of its" in out and "the counts are exact" in out
    rows = _rows(out)
    above = 0
    for low in (0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3):
        cells = rows[f"{low:.1f}-{low + 0.1:.1f}"]
        inside = [k for k, s in truth.items() if low <= s < low + 0.1 or (low == 0.9 and s == 1.0)]
        above += len(inside)
        assert cells[:2] == [str(len(inside)), str(above)], (low, cells)
        if inside:  # the example: two ids and their similarity, a pair of that bin
            a, _, b, sim = cells[2:6]
            i, j = (
                next(i for i, d in enumerate(docs) if d["id"] == a),
                next(i for i, d in enumerate(docs) if d["id"] == b),
            )
            assert truth[(i, j)] == pytest.approx(float(sim.strip("()")), abs=5e-4)
    bylines = BASES // 4
    assert rows["0.9-1.0"][:2] == [str(bylines), str(bylines)]  # each byline, and nothing else up there
    # where the example's texts differ: the byline
    assert re.search(r'story-\d+-byline +"\.\.\..* by Ann Example of the Wire"', out)
    # the thresholds: pairs, documents, alerts, then the banding the daemon would choose and its costs
    for t in ("0.3", "0.4", "0.5", "0.6", "0.7", "0.8", "0.9"):
        caught = [k for k, s in truth.items() if s >= float(t)]
        cells = rows[t]
        documents, alerts = len({i for k in caught for i in k}), len({j for _, j in caught})
        assert cells[:3] == [str(len(caught)), str(documents), str(alerts)], t
    assert rows["0.8"][3:6] == ["25", "x", "5"] and rows["0.8"][-1] == "configured"
    assert re.match(r"\d+(\.\d+)?(e-\d+)?%", rows["0.8"][6]) and rows["0.8"][9] == "B"
    assert rows["0.8"][8] == "450"  # 25 bands of about 18 bytes
    # then the S-curve report of the configured threshold, as `tune` prints it
    assert "threshold 0.8, num_perm 128: 25 bands x 5 rows" in out
    assert "feed.jsonl:4: skipped: invalid JSON" in res.stderr


def test_a_configured_threshold_between_the_bins_is_shown(feed: tuple[Path, list[dict[str, str]]]) -> None:
    path, _ = feed
    res = CliRunner().invoke(
        cli, ["tune", "--sample", str(path), "--threshold", "0.65", "--shingle", "word:2"]
    )
    assert res.exit_code == 0, res.output
    rows = _rows(res.stdout)
    assert rows["0.65"][-1] == "configured" and "configured" not in rows["0.8"]
    assert "word:2 shingles" in res.stdout and "threshold 0.65, num_perm 128" in res.stdout


def test_limit_cuts_the_sample_and_says_so(feed: tuple[Path, list[dict[str, str]]]) -> None:
    path, _ = feed
    res = CliRunner().invoke(cli, ["tune", "--sample", str(path), "--limit", "10"])
    assert res.exit_code == 0, res.output
    assert "sample: 10 documents of feed.jsonl" in res.stdout
    assert "(the first 10: the file holds more; --limit N reads more)" in res.stdout


def test_json_names_the_examples_by_id(feed: tuple[Path, list[dict[str, str]]]) -> None:
    path, docs = feed
    res = CliRunner().invoke(cli, ["tune", "--sample", str(path), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    sample = data["sample"]
    assert sample["documents"] == len(docs) and sample["bad"] == 1 and not sample["cut"]
    assert [b["low"] for b in sample["bins"]] == [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3]
    top = sample["bins"][0]["example"]
    assert top["ids"][1].endswith("-byline") and top["ids"][1].startswith(top["ids"][0])
    assert [t["threshold"] for t in sample["thresholds"]] == [0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
    assert data["chosen"]["bands"] == 25  # and the report `tune` prints without a sample


def test_the_plot_shows_the_sample(feed: tuple[Path, list[dict[str, str]]], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "curve.png"
    res = CliRunner().invoke(cli, ["tune", "--sample", str(feed[0]), "--plot", str(out)])
    assert res.exit_code == 0, res.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"S-curve written to {out}" in res.stdout


def test_plain_text_from_standard_input() -> None:
    """One document per line, as `push -` reads it; the ids are stdin:LINE."""
    lines = ["the quick brown fox jumps over the lazy dog"] * 2 + ["an entirely different line of text here"]
    res = CliRunner().invoke(cli, ["tune", "--sample", "-"], input="\n".join(lines) + "\n")
    assert res.exit_code == 0, res.output
    assert "stdin:1 ~ stdin:2 (1.000)" in res.stdout
    assert "(the same words, but for case or spacing)" in res.stdout


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("only one line of text\n", "holds 1 document with text: a sample needs at least two"),
        ("", "holds 0 documents with text"),
    ],
)
def test_too_small_a_sample_is_one_line_and_exit_2(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "small.txt"
    path.write_text(content)
    res = CliRunner().invoke(cli, ["tune", "--sample", str(path)])
    assert res.exit_code == 2 and message in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.output


def test_a_missing_sample_file_is_a_usage_error(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["tune", "--sample", str(tmp_path / "nope.jsonl")])
    assert res.exit_code == 2 and "does not exist" in res.stderr


def test_progress_after_a_second_names_each_phase(capsys: pytest.CaptureFixture[str]) -> None:
    """Off a terminal: one line per phase, and nothing before the delay."""
    late = LateProgress(after_s=3600)
    late("fingerprinting", 1, 2)
    assert capsys.readouterr().err == ""
    now = LateProgress(after_s=0)
    for phase in ("fingerprinting", "fingerprinting", "comparing pairs"):
        now(phase, 1, 2)
    now.finish()
    assert capsys.readouterr().err == "dedupd: fingerprinting...\ndedupd: comparing pairs...\n"


@pytest.mark.parametrize("flag", ["-v", "--verbose"])
def test_verbose_says_more_on_stderr(flag: str, feed: tuple[Path, list[dict[str, str]]]) -> None:
    """`tune -v` (as the README says of every one-shot command): informational lines on stderr, the
    report on stdout as without it; without -v no such line."""
    path, _ = feed
    quiet = CliRunner().invoke(cli, ["tune"])
    res = CliRunner().invoke(cli, ["tune", flag])
    assert res.exit_code == 0, res.output
    assert res.stdout == quiet.stdout
    assert " INFO dedupd.cli: config file: none (built-in defaults" in res.stderr
    assert " INFO " not in quiet.stderr
    res = CliRunner().invoke(cli, ["tune", "--sample", str(path), flag])
    assert res.exit_code == 0, res.output
    assert re.search(r" INFO dedupd.cli: read \d+ documents of feed.jsonl in ", res.stderr), res.stderr
    assert " INFO dedupd.cli: their pairs at a similarity of 0.3 or more found in " in res.stderr
