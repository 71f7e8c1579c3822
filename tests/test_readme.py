"""The README's Python snippets run as written, in order, against a real Redis (a daemon drains between them)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import drain, make_daemon

README = Path(__file__).resolve().parent.parent / "README.md"


def python_snippets() -> list[str]:
    section = README.read_text(encoding="utf-8").split("\n## Python\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_the_python_section_has_producer_query_and_consumer_snippets() -> None:
    snippets = python_snippets()
    assert len(snippets) == 3
    assert (
        "client.push(" in snippets[0] and "client.query(" in snippets[1] and "client.alerts(" in snippets[2]
    )


def test_readme_python_snippets_run(
    redis_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DEDUPD_REDIS_URL", redis_url)
    daemon = make_daemon(redis_url)
    namespace: dict[str, object] = {}
    for snippet in python_snippets():
        exec(compile(snippet, str(README), "exec"), namespace)  # our own README
        drain(daemon)  # as a running `dedupd serve` would
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("True story-1 1.0 story-1")  # duplicate, of what, how similar, which cluster
    assert out[1] == "(128,)"
    assert out[2].startswith("story-2 ~ story-1 1.0") and len(out) == 3  # one alert, no dead letter


def test_the_readme_stays_short_enough_to_read() -> None:
    """A newcomer's README: measurement history belongs in scripts/README.md, not here."""
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 460
