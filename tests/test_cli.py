"""The command line: push formats and bad lines, alerts output, check exit codes, help texts."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner
from helpers import drain, make_daemon, text, variant

from dedupd.cli import cli
from dedupd.index.keys import Keys


@pytest.fixture
def run(redis_url: str):  # type: ignore[no-untyped-def]
    runner = CliRunner()

    def invoke(*args: str, input: str | None = None):  # type: ignore[no-untyped-def]
        return runner.invoke(
            cli, list(args), input=input, env={"DEDUPD_REDIS_URL": redis_url}, catch_exceptions=False
        )

    return invoke


def entries(r: redis.Redis) -> list[dict[str, str]]:
    return [{k.decode(): v.decode() for k, v in f.items()} for _, f in r.xrange(Keys().docs)]


def test_push_jsonl_and_text(run, r: redis.Redis, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "mixed.txt"
    f.write_text(
        '{"id": 7, "text": "seven", "items": ["a"], "meta": {"k": 1}, "source": "s"}\n'
        "\n"
        "just a line of text\n"
        '{"id": "x", "op": "delete"}\n'
    )
    res = run("push", str(f))
    assert res.exit_code == 0, res.output
    assert entries(r) == [
        {"id": "7", "text": "seven", "items": '["a"]', "meta": '{"k": 1}', "source": "s"},
        {"id": "mixed.txt:3", "text": "just a line of text"},
        {"id": "x", "op": "delete"},
    ]


def test_push_strict_jsonl_reports_bad_lines_and_keeps_the_rest(run, r: redis.Redis) -> None:  # type: ignore[no-untyped-def]
    res = run("push", "-", "--format", "jsonl", input='{"id": "a", "text": "t"}\n{broken\nplain\n')
    assert res.exit_code == 1
    assert (
        "stdin:2: skipped: invalid JSON" in res.output and "stdin:3: skipped: not a JSON object" in res.output
    )
    assert [e["id"] for e in entries(r)] == ["a"]


def test_push_empty_object_is_a_bad_line_and_chunks_keep_order(run, r: redis.Redis) -> None:  # type: ignore[no-untyped-def]
    lines = [json.dumps({"id": f"d{i}", "text": f"text {i} é", "source": "s" * (i % 3)}) for i in range(1203)]
    lines.insert(600, "{}")
    res = run("push", "-", "--format", "jsonl", input="\n".join(lines) + "\n")
    assert res.exit_code == 1 and "stdin:601: skipped: a JSON object without fields" in res.output
    got = entries(r)
    assert [e["id"] for e in got] == [f"d{i}" for i in range(1203)]  # three script calls of up to 500
    assert got[5] == {"id": "d5", "text": "text 5 é", "source": "ss"}
    assert got[6] == {"id": "d6", "text": "text 6 é", "source": ""}


def test_push_text_format_and_id_prefix(run, r: redis.Redis) -> None:  # type: ignore[no-untyped-def]
    res = run("push", "-", "--format", "text", "--id-prefix", "mail-", input='{"not": "json mode"}\nhello\n')
    assert res.exit_code == 0
    assert [(e["id"], e["text"]) for e in entries(r)] == [
        ("mail-1", '{"not": "json mode"}'),
        ("mail-2", "hello"),
    ]


def test_alerts_text_and_json(run, r: redis.Redis, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(3)
    base = text(rng)
    run(
        "push",
        "-",
        input=json.dumps({"id": "a", "text": base})
        + "\n"
        + json.dumps({"id": "b", "text": variant(rng, base), "meta": {"n": 1}})
        + "\n",
    )
    drain(make_daemon(redis_url))
    res = run("alerts")
    assert res.exit_code == 0 and res.output.startswith("b ~ a  similarity 0.") and "cluster a" in res.output
    res = run("alerts", "--json")
    got = [json.loads(line) for line in res.output.splitlines()]
    assert len(got) == 1 and got[0]["id"] == "b" and got[0]["meta"] == {"n": 1}
    assert got[0]["matches"][0][0] == "a" and got[0]["verify"] == "exact"
    assert run("alerts", "--count", "0").output == ""


def test_check_exit_codes(run, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    res = run("check")
    assert res.exit_code == 1 and "no daemon is heartbeating" in res.output
    daemon = make_daemon(redis_url, consumer="probe")
    daemon.iteration()
    res = run("check")
    assert res.exit_code == 0 and "probe" in res.output
    daemon._farewell()
    assert run("check").exit_code == 1


def test_push_says_one_document() -> None:
    from dedupd.cli.common import plural

    assert plural(1, "document") == "1 document" and plural(2, "document") == "2 documents"
    assert plural(1_000, "entry", "entries") == "1,000 entries"


def test_check_unreachable_redis() -> None:
    from conftest import free_port

    res = CliRunner().invoke(cli, ["check"], env={"DEDUPD_REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"})
    assert res.exit_code == 1 and "cannot reach Redis" in res.output


def test_bad_settings_are_one_clear_line() -> None:
    res = CliRunner().invoke(cli, ["alerts"], env={"DEDUPD_THRESHOLD": "2"})
    assert res.exit_code == 2
    assert "threshold (DEDUPD_THRESHOLD)" in res.output and "Traceback" not in res.output


@pytest.mark.parametrize("command", ["serve", "push", "alerts", "check", "rebuild", "mine"])
def test_every_command_explains_itself(command: str) -> None:
    res = CliRunner().invoke(cli, [command, "--help"])
    assert res.exit_code == 0 and "Usage: cli " + command in res.output and "--redis-url" in res.output


def test_check_named_consumer(run, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    """--consumer: healthy only when that daemon heartbeats (a per-instance systemd probe)."""
    daemon = make_daemon(redis_url, consumer="node-1")
    daemon.iteration()
    assert run("check", "--consumer", "node-1").exit_code == 0
    res = run("check", "--consumer", "node-1", "--consumer", "node-2")
    assert res.exit_code == 1 and "no heartbeat from node-2 (alive: node-1)" in res.output
    daemon._farewell()
    assert run("check", "--consumer", "node-1").exit_code == 1


@pytest.mark.parametrize("command", ["stats", "tune"])
def test_operations_commands_explain_themselves(command: str) -> None:
    res = CliRunner().invoke(cli, [command, "--help"])
    assert res.exit_code == 0 and "Usage: cli " + command in res.output and "--json" in res.output


@pytest.mark.parametrize("command", ["dead", "query"])
def test_new_commands_explain_themselves(command: str) -> None:
    res = CliRunner().invoke(cli, [command, "--help"])
    assert res.exit_code == 0 and "Usage: cli " + command in res.output and "--json" in res.output


def test_serve_has_a_metrics_port_flag() -> None:
    res = CliRunner().invoke(cli, ["serve", "--help"])
    assert "--metrics-port" in res.output and "DEDUPD_METRICS_PORT" in res.output


def test_stats_names_the_config_file(redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Config discovery: ./dedupd.toml when neither --config nor DEDUPD_CONFIG is given; stats says which."""
    monkeypatch.chdir(tmp_path)
    env = {"DEDUPD_REDIS_URL": redis_url}
    res = CliRunner().invoke(cli, ["stats", "--interval", "0"], env=env)
    assert res.exit_code == 0 and res.output.startswith("config file: none")
    (tmp_path / "dedupd.toml").write_text("batch_size = 7\n")
    res = CliRunner().invoke(cli, ["stats", "--interval", "0"], env=env)
    assert res.output.startswith("config file: dedupd.toml\n")
    data = json.loads(CliRunner().invoke(cli, ["stats", "--json", "--interval", "0"], env=env).output)
    assert data["config_file"] == "dedupd.toml"
    other = tmp_path / "other.toml"
    other.write_text("batch_size = 8\n")
    data = json.loads(
        CliRunner()
        .invoke(cli, ["stats", "--json", "--interval", "0", "--config", str(other)], env=env)
        .output
    )
    assert data["config_file"] == str(other)


def test_discovery_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dedupd.settings import find_config_file, load_settings

    monkeypatch.chdir(tmp_path)
    assert find_config_file({}) is None or str(find_config_file({})) == "/etc/dedupd/dedupd.toml"
    (tmp_path / "dedupd.toml").write_text("batch_size = 7\n")
    assert str(find_config_file({})) == "dedupd.toml"
    assert load_settings().batch_size == 7 and str(load_settings().config_file) == "dedupd.toml"
    given = tmp_path / "given.toml"
    given.write_text("batch_size = 9\n")
    monkeypatch.setenv("DEDUPD_CONFIG", str(given))
    assert load_settings().batch_size == 9 and load_settings().config_file == given


def test_env_log_level_any_case_and_unknown_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    from dedupd.settings import load_settings

    monkeypatch.setenv("DEDUPD_LOG_LEVEL", "debug")
    monkeypatch.setenv("DEDUPD_THRESHHOLD", "0.5")
    monkeypatch.setenv("DEDUPD_NOT_A_THING", "1")
    s = load_settings()
    assert s.log_level == "DEBUG" and s.threshold == 0.8
    assert s.warnings == (
        "ignoring the environment variable DEDUPD_NOT_A_THING: there is no such setting",
        "ignoring the environment variable DEDUPD_THRESHHOLD: there is no such setting "
        "(did you mean DEDUPD_THRESHOLD?)",
    )


def test_tune_says_false_positives_are_verified_away() -> None:
    res = CliRunner().invoke(cli, ["tune"])
    assert (
        res.exit_code == 0
        and "every candidate is verified" in res.output
        and "not a wrong alert" in res.output
    )


def test_query_prints_one_verdict_per_document(run, r: redis.Redis, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    """`dedupd query -`: one line per document, same formats as push; nothing is inserted."""
    rng = random.Random(5)
    base = text(rng)
    run("push", "-", input=json.dumps({"id": "a", "text": base}) + "\n")
    drain(make_daemon(redis_url))
    before = r.xlen(Keys().docs), r.xlen(Keys().alerts)
    lines = json.dumps({"id": "q1", "text": variant(rng, base)}) + "\n" + text(rng) + "\n"
    res = run("query", "-", input=lines)
    assert res.exit_code == 0, res.output
    out = res.stdout.splitlines()
    assert len(out) == 2 and out[0].startswith("q1: duplicate of a (0.") and out[1] == "stdin:2: unique"
    res = run("query", "-", "--json", input=lines)
    got = [json.loads(line) for line in res.stdout.splitlines()]
    assert got[0]["duplicate"] is True and got[0]["duplicate_of"] == "a" and got[0]["matches"][0][0] == "a"
    assert got[1]["duplicate"] is False and got[1]["id"] == "stdin:2"
    assert (r.xlen(Keys().docs), r.xlen(Keys().alerts)) == before  # nothing pushed, nothing alerted
    res = run("query", "-", input='{"id": "x"}\n')
    assert res.exit_code == 1 and "stdin:x: skipped: no text to compare" in res.output


def test_query_of_an_indexed_id_says_it_is_indexed(run, r: redis.Redis, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    """`dedupd query` of a text indexed under the same id does not say `unique` (the document itself is
    left out of the comparison): it says the id is indexed and whether any other document matches."""
    rng = random.Random(12)
    base, other = text(rng), text(rng)
    docs = [
        {"id": "art-00000", "text": other},
        {"id": "a", "text": base},
        {"id": "b", "text": variant(rng, base)},
    ]
    run("push", "-", input="".join(json.dumps(d) + "\n" for d in docs))
    drain(make_daemon(redis_url))
    lines = "".join(json.dumps(d) + "\n" for d in docs[::2]) + json.dumps({"id": "new", "text": other}) + "\n"
    res = run("query", "-", input=lines)
    assert res.exit_code == 0, res.output
    out = res.stdout.splitlines()
    assert out[0] == "art-00000: indexed under this id; no other document matches"
    assert out[1].startswith("b: indexed under this id; duplicate of a (0.")
    assert out[2] == "new: duplicate of art-00000 (1.00)"
    got = [json.loads(line) for line in run("query", "-", "--json", input=lines).stdout.splitlines()]
    assert [(v["id"], v["indexed"], v["duplicate"]) for v in got] == [
        ("art-00000", True, False),
        ("b", True, True),
        ("new", False, True),
    ]


def test_push_auto_jsonl_warns_of_text_lines_and_refuses_json_that_is_no_object(  # type: ignore[no-untyped-def]
    run, r: redis.Redis, tmp_path: Path
) -> None:
    """In a file that --format auto reads as JSONL (its first line is a JSON object), a plain-text line is
    pushed as a document with a warning naming file:line, and a line of JSON that is no object (an array,
    a number, a string) is refused as a bad line naming file:line: the run says so and exits 1, and every
    other line is pushed. --format jsonl names the JSON value it refuses too."""
    f = tmp_path / "data.jsonl"
    f.write_text(
        '{"id": "a", "text": "first"}\n'
        "a line of plain text\n"
        '["an", "array"]\n'
        "42\n"
        '"a string"\n'
        '{"id": "b", "text": "last"}\n'
    )
    res = run("push", str(f))
    assert res.exit_code == 1
    err = res.stderr
    assert "dedupd: warning: data.jsonl:2: not JSON, in a JSONL input: taken as a plain-text document" in err
    assert "data.jsonl:3: skipped: a JSON array, not an object" in err
    assert "data.jsonl:4: skipped: a JSON number, not an object" in err
    assert "data.jsonl:5: skipped: a JSON string, not an object" in err
    assert "pushed 3 documents to dedupd:docs; skipped 3 bad lines" in err
    assert entries(r) == [
        {"id": "a", "text": "first"},
        {"id": "data.jsonl:2", "text": "a line of plain text"},
        {"id": "b", "text": "last"},
    ]
    res = run("push", str(f), "--format", "jsonl")
    assert res.exit_code == 1 and "data.jsonl:3: skipped: a JSON array, not an object" in res.stderr
    assert "data.jsonl:2: skipped: not a JSON object (use --format text" in res.stderr  # strict: text is bad


def test_push_auto_warns_of_many_text_lines_then_counts(run, r: redis.Redis) -> None:  # type: ignore[no-untyped-def]
    """A JSONL input with many plain-text lines: the first 20 warned of one by one, then a count at the end."""
    res = run("push", "-", input='{"id": "a", "text": "t"}\n' + "plain\n" * 30)
    assert res.exit_code == 0, res.output
    warned = [line for line in res.stderr.splitlines() if ": not JSON, in a JSONL input" in line]
    assert len(warned) == 20 and "stdin: 30 plain-text lines in all were taken as documents" in res.stderr
    assert r.xlen(Keys().docs) == 31
