"""dedupd: streaming near-duplicate detection on Redis (shingling, MinHash, LSH), plus itemset mining.

The public Python API::

    from dedupd import Client

    with Client.connect("redis://localhost:6379/0") as client:
        client.push("doc-1", "the text of a document")   # a producer
        verdict = client.query("the text of another")    # read only: is it a near-duplicate?
        for alert in client.alerts(since="now", follow=True):
            ...                                          # a consumer of the alerts

The names below load on first use, so that ``import dedupd.<module>`` of the pure algorithms stays light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dedupd.client import Client
    from dedupd.errors import (
        ConfigError,
        DedupdError,
        DocumentError,
        InputError,
        ParameterMismatchError,
        RedisUnavailableError,
    )
    from dedupd.index.cluster_page import ClusterPage, CursorError, NotIndexedError
    from dedupd.index.verdict import Match, Verdict
    from dedupd.similarity.spec import IndexSpec

__version__ = "0.1.0"

_WHERE = {
    "Client": "dedupd.client",
    "ClusterPage": "dedupd.index.cluster_page",
    "CursorError": "dedupd.index.cluster_page",
    "NotIndexedError": "dedupd.index.cluster_page",
    "ConfigError": "dedupd.errors",
    "DedupdError": "dedupd.errors",
    "DocumentError": "dedupd.errors",
    "InputError": "dedupd.errors",
    "ParameterMismatchError": "dedupd.errors",
    "RedisUnavailableError": "dedupd.errors",
    "IndexSpec": "dedupd.similarity.spec",
    "Match": "dedupd.index.verdict",
    "Verdict": "dedupd.index.verdict",
}

__all__ = [
    "Client",
    "ClusterPage",
    "ConfigError",
    "CursorError",
    "DedupdError",
    "DocumentError",
    "IndexSpec",
    "InputError",
    "Match",
    "NotIndexedError",
    "ParameterMismatchError",
    "RedisUnavailableError",
    "Verdict",
    "__version__",
]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'dedupd' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
