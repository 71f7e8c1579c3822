"""The examples in the docstrings of every dedupd module run and hold (pure: no server).

``dedupd.client``'s examples need a server (tests/test_client.py runs them); the mining package has its
own (tests/mining/test_mining_doctests.py).
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import dedupd

ELSEWHERE = ("dedupd.client", "dedupd.mining", "dedupd.__main__")
MODULES = [
    m.name for m in pkgutil.walk_packages(dedupd.__path__, "dedupd.") if not m.name.startswith(ELSEWHERE)
]


@pytest.mark.parametrize("module", MODULES)
def test_the_examples_of_a_module_hold(module: str) -> None:
    failures, _ = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert not failures


def test_the_modules_with_examples_are_all_found() -> None:
    assert {
        "dedupd.similarity.bounds",
        "dedupd.similarity.lsh",
        "dedupd.index.record_cache",
        "dedupd.daemon.dead_letters",
    } <= set(MODULES)
