"""scripts/quality.py --shuffle SEED: the same corpus pushed in a fixed-seed order from a temporary copy."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
try:
    import quality
finally:
    sys.path.remove(str(REPO / "scripts"))


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_shuffled_copy_permutes_documents_and_keeps_an_ids_lines_in_order(tmp_path: Path) -> None:
    """Every non-blank line once; the lines of one id together and in their order (the last text still
    counts); a line without an id is a document of its own; the same seed, the same order."""
    corpus = tmp_path / "c.jsonl"
    rows = [json.dumps({"id": f"d{i}", "text": f"text {i}"}) for i in range(40)]
    rows[10:10] = [json.dumps({"id": "d3", "text": "second text of d3"}), "", "not json"]
    corpus.write_text("\n".join(rows) + "\n", encoding="utf-8")
    got = quality.shuffled_copy(corpus, 7)
    try:
        lines = _lines(got)
        assert sorted(lines) == sorted(r for r in rows if r)
        assert lines != [r for r in rows if r]
        at = lines.index(rows[3])
        assert lines[at + 1] == json.dumps({"id": "d3", "text": "second text of d3"})
        again = quality.shuffled_copy(corpus, 7)
        other = quality.shuffled_copy(corpus, 8)
        assert _lines(again) == lines and _lines(other) != lines
        again.unlink()
        other.unlink()
    finally:
        got.unlink()


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server")
@pytest.mark.timeout(300)
def test_quality_shuffle_reports_the_seed_and_removes_its_copy(tmp_path: Path) -> None:
    """A real run (redis-server, dedupd serve, dedupd push) with --shuffle: the summary and the JSON say the
    seed, the figures are those of the same documents, and no shuffled copy is left behind."""
    corpus = tmp_path / "corpus.jsonl"
    base = " ".join(f"word{k}" for k in range(40))
    docs = [{"id": f"d{i}", "text": f"{base} end{i}"} for i in range(20)]  # J = 38/40 to one another
    docs += [{"id": f"u{i}", "text": f"alpha{i} beta{i} gamma{i} delta{i} epsilon{i}"} for i in range(20)]
    corpus.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEDUPD_")}
    env["TMPDIR"] = str(temp)
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "quality.py"),
            "--corpus",
            str(corpus),
            "--shuffle",
            "3",
            "--min-recall",
            "0",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=280,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["shuffle"] == 3 and result["docs"] == 40 and result["ok"]
    assert result["true_pairs"] == 190 and result["named_share"] == 1.0 and result["cluster_recall"] == 1.0
    assert "shuffled with seed 3" in proc.stdout
    assert list(temp.iterdir()) == []
