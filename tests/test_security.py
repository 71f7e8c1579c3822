"""Security: a least-privilege ACL user (the line in README.md), a user without it, TLS, no secrets leaked."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
import redis
from conftest import free_port, private_redis
from procs import DEDUPD, RedisProc, Served, pairs_corpus, wait_for

from dedupd.daemon.monitor import wait_drained
from dedupd.index.keys import Keys

README = Path(__file__).resolve().parents[1] / "README.md"
PASSWORD = "pw-Zq8#not/in-logs"
QUOTED = quote(PASSWORD, safe="")  # how it goes in a URL


def readme_acl() -> list[str]:
    """The ACL SETUSER rules documented in README.md (the password placeholder replaced)."""
    m = re.search(r"^\s*ACL SETUSER dedupd (.+)$", README.read_text(), re.M)
    assert m, "README.md lost its ACL line"
    return [f">{PASSWORD}" if rule == ">CHANGE-ME" else rule for rule in m.group(1).split()]


@pytest.fixture
def acl_redis(tmp_path: Path) -> Iterator[RedisProc]:
    with private_redis(tmp_path) as server:
        admin = redis.Redis(port=server.port)
        admin.execute_command("ACL", "SETUSER", "dedupd", *readme_acl())
        admin.execute_command("ACL", "SETUSER", "weak", "on", f">{PASSWORD}", "~*", "-@all", "+ping")
        admin.close()
        yield server


def run(url: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DEDUPD_REDIS_URL": url}
    return subprocess.run([*DEDUPD, *args], env=env, input=stdin, capture_output=True, text=True, timeout=120)


def corpus_file(tmp_path: Path) -> tuple[Path, set[tuple[str, str]]]:
    import json

    docs, expected = pairs_corpus(20, 81)
    docs.append({"id": "x", "text": "some text", "items": '["a"]', "meta": '{"k": 1}'})
    docs.append({"id": "", "text": "dead letter"})
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return src, expected


def serve_push_alerts_check(url: str, tmp_path: Path, admin: redis.Redis) -> str:
    """serve + push --wait + alerts + check + stats with ``url``; returns everything they printed."""
    src, expected = corpus_file(tmp_path)
    daemon = Served(url, tmp_path / "serve.log", DEDUPD_DOCS_RETENTION_S="0")
    try:
        wait_for(lambda: run(url, "check").returncode == 0, 30, "a healthy daemon", poll=0.3)
        pushed = run(url, "push", str(src), "--wait", "--max-lag", "10", "--timeout", "60")
        assert pushed.returncode == 0, pushed.stderr + daemon.stderr
        shown = run(url, "alerts", "--json")
        assert shown.returncode == 0, shown.stderr
        assert {(a, b) for a, b in expected} <= {
            (x["id"], x["duplicate_of"]) for x in map(_json, shown.stdout.split("\n")) if x
        }
        stats = run(url, "stats", "--interval", "0")
        assert stats.returncode == 0, stats.stderr
    finally:
        assert daemon.stop() == 0, daemon.stderr
    assert wait_drained(admin, Keys(), 5)
    assert admin.xlen(Keys().dead) == 1
    assert "Traceback" not in daemon.stderr
    return daemon.stderr + pushed.stderr + shown.stdout + shown.stderr + stats.stdout + stats.stderr


def _json(line: str) -> dict[str, str] | None:
    import json

    return json.loads(line) if line.strip() else None


def no_secret_anywhere(admin: redis.Redis, printed: str) -> None:
    assert PASSWORD not in printed and QUOTED not in printed and "Zq8" not in printed
    for key in admin.scan_iter(count=1000):
        if key.startswith((b"dedupd", b"{dedupd")):
            dump = admin.dump(key)
            assert dump is None or PASSWORD.encode() not in dump, key


def test_least_privilege_acl_user_runs_serve_push_alerts(acl_redis: RedisProc, tmp_path: Path) -> None:
    admin = redis.Redis(port=acl_redis.port)
    url = f"redis://dedupd:{QUOTED}@127.0.0.1:{acl_redis.port}/0"
    printed = serve_push_alerts_check(url, tmp_path, admin)
    assert "redis://dedupd:***@127.0.0.1" in printed
    no_secret_anywhere(admin, printed)
    denied = admin.execute_command("ACL", "LOG")
    assert denied == [], denied  # nothing dedupd did was refused


def test_user_without_the_acl_gets_a_clear_message(acl_redis: RedisProc, tmp_path: Path) -> None:
    base = f"127.0.0.1:{acl_redis.port}/0"
    for args in (("serve",), ("push", "-"), ("alerts",)):
        res = run(f"redis://weak:{QUOTED}@{base}", *args, stdin='{"id": "a", "text": "b"}\n')
        assert res.returncode == 2, res.stderr
        assert "dedupd: error: Redis refused a command to this user" in res.stderr and "README" in res.stderr
        assert "Traceback" not in res.stderr and "Zq8" not in res.stderr
    res = run(f"redis://dedupd:wrong-{QUOTED}@{base}", "serve")
    assert res.returncode == 2 and "refused the credentials" in res.stderr
    assert "Traceback" not in res.stderr and "Zq8" not in res.stderr
    # the password not percent-encoded: the URL cannot be parsed; the message hides it and says what to do
    res = run(f"redis://dedupd:{PASSWORD}@{base}", "serve")
    assert res.returncode == 2 and "must be percent-encoded" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and "Zq8" not in res.stderr


def _tls_supported() -> bool:
    out = subprocess.run(["redis-server", "--help"], capture_output=True, text=True).stdout
    exe = shutil.which("redis-server") or ""
    linked = subprocess.run(["ldd", exe], capture_output=True, text=True).stdout if exe else ""
    return "libssl" in linked or "tls" in out


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")
def test_tls_on_loopback_with_a_self_signed_certificate(tmp_path: Path) -> None:
    if not _tls_supported():
        pytest.skip("this redis-server is built without TLS (BUILD_TLS=no)")
    ca, crt, key = tmp_path / "ca.pem", tmp_path / "server.pem", tmp_path / "server.key"
    cakey = tmp_path / "ca.key"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=dedupd test CA",
            "-keyout",
            str(cakey),
            "-out",
            str(ca),
        ],
        check=True,
        capture_output=True,
    )
    csr = tmp_path / "server.csr"
    subprocess.run(
        [
            "openssl",
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=localhost",
            "-keyout",
            str(key),
            "-out",
            str(csr),
        ],
        check=True,
        capture_output=True,
    )
    ext = tmp_path / "san.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    subprocess.run(
        [
            "openssl",
            "x509",
            "-req",
            "-in",
            str(csr),
            "-CA",
            str(ca),
            "-CAkey",
            str(cakey),
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            str(ext),
            "-out",
            str(crt),
        ],
        check=True,
        capture_output=True,
    )
    port = free_port()
    server = RedisProc(
        tmp_path / "redis",
        0,
        "--tls-port",
        str(port),
        "--tls-cert-file",
        str(crt),
        "--tls-key-file",
        str(key),
        "--tls-ca-cert-file",
        str(ca),
        "--tls-auth-clients",
        "no",
    )
    server.start(wait=False)
    tls = {"ssl": True, "ssl_ca_certs": str(ca)}
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                admin = redis.Redis(port=port, **tls)  # type: ignore[arg-type]
                admin.ping()
                break
            except redis.ConnectionError:
                assert time.monotonic() < deadline and server.proc is not None and server.proc.poll() is None
                time.sleep(0.1)
        admin.execute_command("ACL", "SETUSER", "dedupd", *readme_acl())
        url = f"rediss://dedupd:{QUOTED}@127.0.0.1:{port}/0?ssl_ca_certs={ca}"
        printed = serve_push_alerts_check(url, tmp_path, admin)
        assert "rediss://dedupd:***@127.0.0.1" in printed
        no_secret_anywhere(admin, printed)
        # a client that does not trust the CA is refused: the traffic really is TLS with verification
        res = run(f"rediss://dedupd:{QUOTED}@127.0.0.1:{port}/0", "alerts")
        assert res.returncode == 2 and "certificate verify failed" in res.stderr, res.stderr
        assert "Zq8" not in res.stderr
    finally:
        server.kill()
