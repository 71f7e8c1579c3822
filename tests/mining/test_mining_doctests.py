"""The worked examples in the mining modules' docstrings run and hold."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "apriori",
    "baskets",
    "bitmaps",
    "candidates",
    "clusters",
    "counting",
    "family",
    "memory",
    "pcy",
    "rules",
    "sampling",
    "son",
    "support",
    "toivonen",
]


@pytest.mark.parametrize("name", MODULES)
def test_worked_examples(name: str) -> None:
    module = importlib.import_module(f"dedupd.mining.{name}")
    failures, tried = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert tried > 0 and failures == 0
