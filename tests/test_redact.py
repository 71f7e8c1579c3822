"""No password in any output, in any URL form (issue: hardening, item 6): the redaction function, and real
commands given such URLs."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import free_port

from dedupd.redact import redact_url

SECRET = "Zq9-s3cr3t"


@pytest.mark.parametrize(
    "url",
    [
        f"redis://:{SECRET}@127.0.0.1:6379/0",
        f"redis://user:{SECRET}@127.0.0.1:6379/0",
        f"rediss://user:{SECRET}/with@odd#chars@host:6380/0",
        f"redis://127.0.0.1:6379/0?password={SECRET}",
        f"redis://user@127.0.0.1:6379/0?db=1&password={SECRET}&socket_timeout=5",
        f"rediss://h:6380/0?ssl_password={SECRET}&ssl_ca_certs=/etc/ca.pem",
        f"redis://u:{SECRET}@h1:7000,h2:7001/0",
        f"unix://:{SECRET}@/run/redis.sock?db=0",
        f"redis://127.0.0.1/0?PASSWORD={SECRET}",
    ],
)
def test_redact_url_hides_the_secret_and_keeps_the_rest(url: str) -> None:
    shown = redact_url(url)
    assert SECRET not in shown and "***" in shown
    assert shown.split("://")[0] == url.split("://")[0]  # the scheme stays


def test_redact_url_leaves_a_url_without_secret_alone() -> None:
    url = "rediss://redis.example:6380/2?ssl_ca_certs=/etc/ca.pem&socket_timeout=5"
    assert redact_url(url) == url


@pytest.mark.parametrize("command", [["check"], ["stats"], ["push", "-"], ["alerts"]])
@pytest.mark.parametrize("form", ["?password={s}", "?ssl_password={s}"])
def test_commands_never_print_a_query_string_password(command: list[str], form: str) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0" + form.format(s=SECRET)
    env = {**os.environ, "DEDUPD_REDIS_URL": url, "DEDUPD_METRICS_PORT": "0"}
    res = subprocess.run(
        [sys.executable, "-m", "dedupd", *command],
        env=env,
        input="x\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode != 0
    assert SECRET not in res.stdout + res.stderr and "Traceback" not in res.stderr


def test_worked_examples() -> None:
    import doctest

    import dedupd.redact

    failures, tried = doctest.testmod(dedupd.redact)
    assert tried > 0 and failures == 0
