"""Secrets out of URLs (pure): the one function every log line and error uses to show a Redis URL.

>>> redact_url("rediss://app:s3cr%23t@redis.example:6380/0?ssl_password=k3y&ssl_ca_certs=/ca.pem")
'rediss://app:***@redis.example:6380/0?ssl_password=***&ssl_ca_certs=/ca.pem'
>>> redact_url("redis://127.0.0.1:6379/0?password=pw")
'redis://127.0.0.1:6379/0?password=***'
"""

from __future__ import annotations

import re

# query parameters whose values are secrets (redis-py reads password, ssl_password; anything alike is hidden too)
_SECRET_PARAM = re.compile(r"(?i)([?&;](?:[^=&;#]*(?:pass|secret|token|auth|key)[^=&;#]*)=)([^&;#]*)")
_USERINFO = re.compile(r"^([a-z][a-z0-9+.-]*://)([^?]*)@", re.I)


def redact_url(url: str) -> str:
    """``url`` with the password of its user info and the values of secret-like query parameters replaced by
    ``***``. The user info runs to the last '@' before the query, so a password holding '/', '@' or '#'
    unencoded is hidden whole; a URL without '://' is hidden whole if it holds an '@'."""
    if "://" not in url:
        return "***" if "@" in url else url
    out = _USERINFO.sub(lambda m: m.group(1) + _userinfo(m.group(2)) + "@", url, count=1)
    return _SECRET_PARAM.sub(lambda m: m.group(1) + "***", out)


def _userinfo(info: str) -> str:
    user, sep, _ = info.partition(":")
    return f"{user}:***" if sep else "***"
