"""Helpers shared by the Redis-backed tests."""

from __future__ import annotations

import importlib.util
import json
import random
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

import redis

from dedupd.daemon.loop import Daemon
from dedupd.index.keys import Keys
from dedupd.settings import load_settings

VOCAB = [
    "market",
    "rising",
    "bank",
    "earnings",
    "report",
    "quarter",
    "profit",
    "shares",
    "investor",
    "growth",
    "company",
    "sales",
    "rate",
    "policy",
    "central",
    "inflation",
    "energy",
    "price",
    "oil",
    "demand",
    "supply",
    "chain",
    "retail",
    "consumer",
    "tech",
    "chip",
    "data",
    "cloud",
    "service",
    "network",
    "mobile",
    "device",
    "launch",
    "model",
    "research",
    "study",
    "climate",
    "weather",
    "storm",
]


def text(rng: random.Random, n: int = 60) -> str:
    return " ".join(rng.choice(VOCAB) for _ in range(n))


def variant(rng: random.Random, base: str, edits: int = 1) -> str:
    words = base.split()
    for _ in range(edits):
        words[rng.randrange(len(words))] = "edited"
    return " ".join(words)


def star(rng: random.Random, base: str, n: int, edits: int = 2) -> list[str]:
    """``n`` variants of ``base``, each with ``edits`` words replaced by words of its own, inside the text, at
    places no other variant edits: a star (word:3 on 80 words, 2 edits: about 0.86 to the base, 0.73 to one
    another; a test checks its own by hand)."""
    words = base.split()
    places = rng.sample(range(2, len(words) - 2), n * edits)
    out = []
    for i in range(n):
        mine = list(words)
        for j, at in enumerate(places[i * edits : (i + 1) * edits]):
            mine[at] = f"v{i}w{j}"
        out.append(" ".join(mine))
    return out


def make_daemon(url: str, **overrides: Any) -> Daemon:
    overrides.setdefault("block_ms", 50)
    settings = load_settings(redis_url=url, **overrides)
    daemon = Daemon(settings, client=redis.Redis.from_url(url))
    daemon.processor.warm_up()  # as Daemon.run does: the first batch does not load the compiled kernels
    return daemon


def entry_fields(doc: dict[str, Any]) -> dict[str, Any]:
    """A document's stream entry fields as a producer writes them (lists and objects as JSON)."""
    return {k: (json.dumps(v) if isinstance(v, (list, dict)) else v) for k, v in doc.items()}


def raw_entry(entry_id: str, doc: dict[str, Any]) -> tuple[str, dict[bytes, bytes]]:
    """A document as a stream entry read back: its id and its fields as bytes."""
    return entry_id, {k.encode(): v.encode() for k, v in entry_fields(doc).items()}


def push(r: redis.Redis, docs: list[dict[str, Any]], prefix: str = "dedupd") -> list[str]:
    return [r.xadd(Keys(prefix).docs, entry_fields(d)).decode() for d in docs]


def drain(daemon: Daemon, max_iterations: int = 1000) -> None:
    """Run iterations until a read returns nothing."""
    for _ in range(max_iterations):
        if daemon.iteration() is None:
            return
    raise AssertionError("the daemon did not drain")


def alerts(r: redis.Redis, prefix: str = "dedupd") -> list[dict[str, Any]]:
    out = []
    for _, fields in r.xrange(Keys(prefix).alerts):
        d = {k.decode(): v.decode() for k, v in fields.items()}
        d["matches"] = json.loads(d["matches"])
        out.append(d)
    return out


def dead(r: redis.Redis, prefix: str = "dedupd") -> list[dict[bytes, bytes]]:
    return [fields for _, fields in r.xrange(Keys(prefix).dead)]


def pending(r: redis.Redis, prefix: str = "dedupd") -> int:
    return int(r.xpending(Keys(prefix).docs, "dedupd")["pending"])


def handle_at_once(jobs: list[tuple[Daemon, list[Any]]]) -> None:
    """Each daemon handles its batch in its own thread; their first index writes wait for each other, so
    all of them have read the index before any of them writes (later writes run freely)."""
    barrier = threading.Barrier(len(jobs))
    for daemon, _ in jobs:
        real = daemon.gateway.apply
        first = [True]

        def synced(prepared, _real=real, _first=first):  # type: ignore[no-untyped-def]
            if _first and _first.pop():
                barrier.wait(timeout=10)
            return _real(prepared)

        daemon.gateway.apply = synced  # type: ignore[method-assign]
    threads = [threading.Thread(target=d.handle, args=(b, None)) for d, b in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)


class FailOnce:
    """A registered redis-py ``Script`` whose next use fails before anything is sent (a node down, a
    connection lost), then the real one: a call, or a call queued in a connection.ScriptPipeline (which reads
    the script's sha to send EVALSHA)."""

    def __init__(self, real: Any, message: str = "the node of these buckets is down") -> None:
        self.__dict__.update(real=real, armed=True, message=message)

    def _trip(self) -> None:
        if self.__dict__["armed"]:
            self.__dict__["armed"] = False
            raise redis.ConnectionError(self.__dict__["message"])

    def __getattr__(self, name: str) -> Any:
        if name == "sha":
            self._trip()
        return getattr(self.__dict__["real"], name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self.__dict__["real"], name, value)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self._trip()
        return self.__dict__["real"](*args, **kwargs)


SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


def load_script(name: str) -> ModuleType:
    """A module of scripts/ (``oracle``, ``family_shapes``, ...), loaded once under ``dedupd_scripts_<name>``
    (its dataclasses need it in sys.modules)."""
    key = f"dedupd_scripts_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, SCRIPTS / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return sys.modules[key]
