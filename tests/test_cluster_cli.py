"""`dedupd cluster ID` and `dedupd delete ID...` (cli/clusters.py, cli/deletes.py) through click's runner, against
a real redis-server and an in-process daemon: the members as text and JSON, paged with the cursor it prints;
unknown ids and bad arguments as one line with the documented exit status; deletes from arguments, standard
input and a file, and --wait."""

from __future__ import annotations

import json
import logging
import random
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner, Result
from helpers import drain, make_daemon, push, text, variant

from dedupd.cli import cli
from dedupd.client import Client
from dedupd.daemon.loop import Daemon
from dedupd.errors import ConfigError
from dedupd.index.keys import Keys

DOCS = Keys().docs


@pytest.fixture
def run(redis_url: str):  # type: ignore[no-untyped-def]
    runner = CliRunner()

    def invoke(*args: str, input: str | bytes | None = None) -> Result:
        return runner.invoke(
            cli, list(args), input=input, env={"DEDUPD_REDIS_URL": redis_url}, catch_exceptions=False
        )

    return invoke


@pytest.fixture
def daemon(redis_url: str) -> Daemon:
    return make_daemon(redis_url, batch_size=8)


@pytest.fixture
def client(redis_url: str) -> Iterator[Client]:
    with Client.connect(redis_url) as c:
        yield c


def five_copies(r: redis.Redis, daemon: Daemon) -> list[dict[str, str]]:
    """a0 and four near-copies of it, indexed."""
    rng = random.Random(1)
    base = text(rng, 60)
    docs = [{"id": f"a{i}", "text": base if i == 0 else variant(rng, base, 1)} for i in range(5)]
    push(r, docs)
    drain(daemon)
    return docs


def test_cluster_prints_the_members_and_the_clusters_name(run, r: redis.Redis, daemon: Daemon) -> None:  # type: ignore[no-untyped-def]
    five_copies(r, daemon)
    res = run("cluster", "a3")
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0] == "a3" and sorted(lines) == ["a0", "a1", "a2", "a3", "a4"]
    assert res.stderr == "cluster a0: 5 members\n"


def test_cluster_pages_follow_the_cursor_it_prints(run, r: redis.Redis, daemon: Daemon) -> None:  # type: ignore[no-untyped-def]
    five_copies(r, daemon)
    res = run("cluster", "a0", "--limit", "2")
    seen = res.stdout.splitlines()
    assert res.exit_code == 0 and len(seen) == 2
    while "more: add --cursor" in res.stderr:
        assert res.stderr.startswith("cluster a0: 2 members shown; more: add --cursor ")
        cursor = res.stderr.split("--cursor ")[1].strip()
        res = run("cluster", "a0", "--limit", "2", "--cursor", cursor)
        assert res.exit_code == 0, res.output
        seen += res.stdout.splitlines()
    assert res.stderr == "cluster a0: 1 member shown; that was the last page\n"
    assert sorted(seen) == ["a0", "a1", "a2", "a3", "a4"]


def test_cluster_json(run, r: redis.Redis, daemon: Daemon) -> None:  # type: ignore[no-untyped-def]
    five_copies(r, daemon)
    page = json.loads(run("cluster", "a1", "--json", "-n", "3").stdout)
    assert page["id"] == "a1" and page["cluster"] == "a0" and page["complete"] is True
    assert page["members"][0] == "a1" and len(page["members"]) == 3 and page["next"] is not None
    last = json.loads(run("cluster", "a1", "--json", "-n", "3", "--cursor", page["next"]).stdout)
    assert last["next"] is None and sorted(page["members"] + last["members"]) == [f"a{i}" for i in range(5)]
    alone = run("cluster", "a1", "--json", "--limit", "10")
    assert json.loads(alone.stdout)["next"] is None and alone.stderr == "cluster a0: 5 members\n"


def test_cluster_of_an_unknown_id_or_with_bad_arguments_is_one_line(
    run, r: redis.Redis, redis_url: str
) -> None:  # type: ignore[no-untyped-def]
    res = run("cluster", "a0")  # no index yet
    assert res.exit_code == 1 and res.stdout == ""
    assert res.stderr.startswith(
        "dedupd: error: 'a0' is not in the index: there is no index under the prefix"
    )
    five_copies(r, make_daemon(redis_url))
    res = run("cluster", "nope")
    assert res.exit_code == 1 and res.stderr.count("\n") == 1 and "Traceback" not in res.output
    assert res.stderr.startswith("dedupd: error: 'nope' is not in the index (never pushed, deleted, or not")
    res = run("cluster", "a0", "--cursor", "somewhere")
    assert res.exit_code == 2 and "cursor 'somewhere' is not one a page gave" in res.stderr
    res = run("cluster", "a0", "--limit", "1001")
    assert res.exit_code == 2 and "Invalid value for '--limit' / '-n': 1001 is not in the range" in res.stderr
    res = run("cluster")
    assert res.exit_code == 2 and "Missing argument 'ID'" in res.stderr


def test_a_bad_limit_is_a_usage_error_before_any_lookup(run, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    """No index yet: a limit out of range or a bad cursor is said (exit 2), not that the id is not in the
    index; the CLI's range is the page's (cluster_page.PAGE_LIMIT), as the client's check is."""
    from dedupd.index.cluster_page import PAGE_LIMIT

    for bad in ("5000", str(PAGE_LIMIT + 1), "0"):
        res = run("cluster", "a0", "--limit", bad)
        assert res.exit_code == 2 and res.stdout == "", res.output
        assert f"{bad} is not in the range 1<=x<={PAGE_LIMIT}" in res.stderr and "index" not in res.stderr
    assert run("cluster", "a0", "-n", str(PAGE_LIMIT)).exit_code == 1  # in range: not in the index
    res = run("cluster", "a0", "--cursor", "somewhere")
    assert res.exit_code == 2 and "cursor 'somewhere' is not one a page gave" in res.stderr
    with Client.connect(redis_url) as c, pytest.raises(ConfigError, match="1 to 1,000 members, not 5000"):
        c.cluster("a0", limit=5000)


def test_a_document_indexed_before_the_rings_is_shown_without_a_warning(  # type: ignore[no-untyped-def]
    run, r: redis.Redis, redis_url: str
) -> None:
    """A document alone indexed before dedupd kept clusters' members is a cluster of one, no warning; so is
    an older document with a copy that came after; shown over several pages, that cluster warns that members
    may be missing, and how to check."""
    rng = random.Random(2)
    old = text(rng, 60)
    push(r, [{"id": "solo", "text": text(rng, 60)}, {"id": "a0", "text": old}])
    drain(make_daemon(redis_url))
    r.set(
        Keys().uf_ring_floor, 1000
    )  # an index of 1,000 ids when the first daemon that keeps rings opened it
    res = run("cluster", "solo")
    assert res.exit_code == 0 and res.stdout == "solo\n"
    assert res.stderr == "cluster solo: 1 member (no near-duplicate)\n"
    r.delete(Keys().uf_ring_floor)  # the next daemon sets it: solo and a0 are older than the rings
    daemon = make_daemon(redis_url)
    push(r, [{"id": "a1", "text": variant(rng, old, 1)}])
    drain(daemon)
    res = run("cluster", "a1", "--json")
    assert res.exit_code == 0 and json.loads(res.stdout)["complete"] is True
    assert res.stderr == "cluster a0: 2 members\n"
    res = run("cluster", "a1", "--limit", "1")
    assert res.exit_code == 0 and res.stdout == "a1\n"
    assert res.stderr.splitlines()[1] == (
        "dedupd: warning: this cluster began before dedupd kept clusters' members (an index made by an "
        "earlier version): members that joined it before may be missing (only a cluster shown on one page "
        "can be checked: a larger --limit, up to 1,000)"
    )


@pytest.mark.parametrize("command", [("cluster", "a0"), ("delete", "a0")])
def test_cluster_and_delete_take_verbose(run, command: tuple[str, ...]) -> None:  # type: ignore[no-untyped-def]
    """-v/--verbose, as every one-shot command: informational log lines too (the level INFO, not WARNING)."""
    for flags, level in (((), logging.WARNING), (("-v",), logging.INFO), (("--verbose",), logging.INFO)):
        res = run(*command, *flags)
        assert res.exit_code in (0, 1) and "No such option" not in res.stderr, res.output
        assert logging.getLogger().level == level, flags


def test_cluster_and_delete_explain_themselves() -> None:
    for command in ("cluster", "delete"):
        res = CliRunner().invoke(cli, [command, "--help"])
        assert res.exit_code == 0 and "Usage: cli " + command in res.output and "--redis-url" in res.output
    assert "--cursor" in CliRunner().invoke(cli, ["cluster", "--help"]).output
    assert "--wait" in CliRunner().invoke(cli, ["delete", "--help"]).output


def test_delete_three_ids_removes_them(  # type: ignore[no-untyped-def]
    run, r: redis.Redis, daemon: Daemon, client: Client
) -> None:
    """The deletes go through the stream as op=delete entries; once processed, no query finds the three
    and their cluster lists the other two."""
    docs = five_copies(r, daemon)
    assert {m.id for m in client.query(docs[1]["text"]).matches} >= {"a1", "a2", "a3"}
    before = r.xlen(DOCS)
    res = run("delete", "a1", "a2", "a3")
    assert res.exit_code == 0 and res.stderr == f"pushed 3 deletes to {DOCS}\n"
    assert [f for _, f in r.xrange(DOCS)][before:] == [
        {b"id": i, b"op": b"delete"} for i in (b"a1", b"a2", b"a3")
    ]
    drain(daemon)
    for doc in docs:
        assert not {m.id for m in client.query(doc["text"]).matches} & {"a1", "a2", "a3"}
    assert run("cluster", "a2").exit_code == 1
    assert sorted(run("cluster", "a4").stdout.splitlines()) == ["a0", "a4"]


def test_delete_reads_ids_from_standard_input_and_a_file(  # type: ignore[no-untyped-def]
    run, r: redis.Redis, tmp_path: Path
) -> None:
    """One id per line (the whole line; \\r\\n and a BOM removed, blank lines skipped); a bad line is reported
    with its number and skipped, the others pushed, and the run exits 1."""
    ids = tmp_path / "ids.txt"
    ids.write_bytes(b"\xef\xbb\xbff1\r\n\nf 2\n" + b"x" * 600 + b"\n\xff\n")
    res = run("delete", "x0", "-", "--from", str(ids), input="s1\ns2\n")
    assert res.exit_code == 1
    assert f"{ids}:4: skipped: field 'id' has 600 bytes, more than max_id_bytes = 256\n" in res.stderr
    assert f"{ids}:5: skipped: not UTF-8 (byte 0xff at byte 1 of the line)\n" in res.stderr
    assert res.stderr.endswith(f"pushed 5 deletes to {DOCS}; skipped 2 bad lines\n")
    assert [f[b"id"].decode() for _, f in r.xrange(DOCS)] == ["x0", "s1", "s2", "f1", "f 2"]
    assert {f[b"op"] for _, f in r.xrange(DOCS)} == {b"delete"}


def test_delete_refuses_bad_arguments_before_pushing(run, r: redis.Redis) -> None:  # type: ignore[no-untyped-def]
    res = run("delete")
    assert res.exit_code == 2 and "give the ids to delete" in res.stderr
    res = run("delete", "ok", "x" * 600)
    assert (
        res.exit_code == 2
        and "600 bytes, more than max_id_bytes" in res.stderr
        and "nothing was pushed" in res.stderr
    )
    res = run("delete", "ok", "")
    assert res.exit_code == 2 and "the 'id' field is missing or empty" in res.stderr
    assert r.xlen(DOCS) == 0


def test_delete_wait_returns_once_the_daemons_processed_them(  # type: ignore[no-untyped-def]
    run, r: redis.Redis, daemon: Daemon, client: Client
) -> None:
    five_copies(r, daemon)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            daemon.iteration()

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        res = run("delete", "a4", "--wait", "--timeout", "60")
    finally:
        stop.set()
        thread.join(timeout=30)
    assert res.exit_code == 0, res.output
    assert res.stderr.endswith("the daemons have processed them: the documents are deleted\n")
    assert "a4" not in client.cluster("a0").members


def test_delete_wait_without_a_daemon_says_so(run, r: redis.Redis) -> None:  # type: ignore[no-untyped-def]
    res = run("delete", "a4", "--wait", "--timeout", "1")
    assert res.exit_code == 1  # a failure while working: the deletes wait in the stream
    no_daemon = "no daemon is heartbeating, so nothing processes dedupd:docs: start one with `dedupd serve`"
    assert res.stderr.splitlines()[1].startswith(no_daemon)  # said at once, after what was pushed
    assert res.stderr.splitlines()[-1] == (
        "dedupd: error: the daemons did not process every entry of dedupd:docs within 1s: no daemon is "
        "heartbeating, so nothing processes dedupd:docs: start one with `dedupd serve`"
    )
