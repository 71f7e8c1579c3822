"""SON: A-Priori on each chunk with a scaled threshold, then one pass counting the union of candidates.

Course material ``seeds/000`` ("SON Algorithm", "Pass 1", "Pass 2", "Why SON Works"): divide the
baskets into chunks; pass 1 finds the itemsets frequent in some chunk (threshold scaled to the
chunk), pass 2 counts that union on every chunk and sums. An itemset whose count is below
``s * n_i / n`` in every chunk has a total below s, so nothing frequent is missed; the false
positives of pass 1 disappear in pass 2. Both passes are map steps over chunks:

- ``engine="local"`` (default): a ``concurrent.futures.ProcessPoolExecutor`` on this machine
  (``workers=1`` runs in this process);
- ``engine="dask"``: Dask distributed, on the scheduler at ``scheduler`` (``tcp://host:8786``), or
  on a ``LocalCluster`` started for the run when no scheduler is given.

Worked example: 100 baskets in 4 chunks of 25, support 10: the chunk threshold is
``ceil(10 * 25 / 100) = 3``. An itemset with 2 occurrences in each chunk (8 in all) is never a
candidate, and indeed is not frequent.

    >>> from dedupd.mining.support import scaled_count
    >>> scaled_count(10, 25, 100)
    3
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from itertools import pairwise
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from dedupd.errors import ConfigError
from dedupd.mining.apriori import apriori
from dedupd.mining.baskets import Baskets
from dedupd.mining.family import count_family, union_levels
from dedupd.mining.result import MiningResult, PassReport, Progress
from dedupd.mining.support import scaled_count

I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]
Engine = Literal["local", "dask"]
MapFn = Callable[..., list[Any]]


def _chunks(baskets: Baskets, k: int, shuffle: int | None) -> list[Baskets]:
    if shuffle is None or k <= 1:
        return baskets.split(k)
    perm = np.random.default_rng(shuffle).permutation(baskets.n_baskets).astype(np.int64)
    bounds = np.linspace(0, baskets.n_baskets, k + 1).astype(np.int64)
    return [baskets.take(np.sort(perm[a:b])) for a, b in pairwise(bounds) if b > a]


def mine_chunk(chunk: Baskets, threshold: int, max_size: int | None) -> list[I32]:
    """Pass 1 on one chunk: its locally frequent itemsets, level by level."""
    return [sets for sets, _ in apriori(chunk, threshold, max_size).levels]


def count_chunk(chunk: Baskets, family: list[I32]) -> list[I64]:
    """Pass 2 on one chunk: counts of every candidate."""
    return count_family(chunk, family)


@contextmanager
def local_engine(workers: int) -> Iterator[MapFn]:
    """A map over processes of this machine (or in this process for one worker)."""
    if workers <= 1:
        yield lambda fn, *its: [fn(*args) for args in zip(*its, strict=True)]
        return
    import multiprocessing  # here: a command that runs no pool does not pay for importing it
    from concurrent.futures import ProcessPoolExecutor

    # fork is fastest and needs no importable __main__, but is unsafe once threads run
    methods = multiprocessing.get_all_start_methods()
    method = (
        "fork"
        if "fork" in methods and threading.active_count() == 1
        else ("forkserver" if "forkserver" in methods else "spawn")
    )
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context(method)) as pool:
        yield lambda fn, *its: list(pool.map(fn, *its))


@contextmanager
def dask_engine(scheduler: str | None, workers: int, processes: bool = True) -> Iterator[MapFn]:
    """A map over Dask distributed workers: at ``scheduler``, or on a LocalCluster started here."""
    try:
        from distributed import Client, LocalCluster
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConfigError("--engine dask needs dask.distributed: pip install 'dedupd[dask]'") from exc
    cluster = None
    try:
        if scheduler:
            client = Client(scheduler, timeout="10s")
        else:
            cluster = LocalCluster(
                n_workers=max(1, workers), threads_per_worker=1, processes=processes, dashboard_address=None
            )
            client = Client(cluster)
    except OSError as exc:
        raise ConfigError(
            f"cannot reach the Dask scheduler at {scheduler!r}: {exc}; start one with "
            "`dask scheduler` (and workers with `dask worker ADDRESS`), or omit --scheduler "
            "to run a local cluster"
        ) from exc
    try:

        def run(fn: Callable[..., Any], *its: Sequence[Any]) -> list[Any]:
            futures = client.map(fn, *its, pure=False)
            return list(client.gather(futures))

        yield run
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def son(
    baskets: Baskets,
    min_count: int,
    max_size: int | None = None,
    progress: Progress | None = None,
    chunks: int | None = None,
    engine: Engine = "local",
    workers: int | None = None,
    scheduler: str | None = None,
    processes: bool = True,
    shuffle: int | None = 0,
) -> MiningResult:
    """All frequent itemsets by SON (exact).

    Args:
        chunks: number of chunks (default: twice the workers, at least 2).
        engine: ``local`` (process pool) or ``dask``.
        workers: processes (local) or LocalCluster workers (dask); default: the CPU count.
        scheduler: Dask scheduler address; with ``engine="dask"`` and None, a LocalCluster is started.
        processes: for the LocalCluster, worker processes (True) or threads in this process.
        shuffle: deal the baskets into chunks by a random permutation with this seed (None: keep
            the input order). Representative chunks have far fewer local false positives when the
            input is sorted (the Debian lists are sorted by package name).
    """
    if engine not in ("local", "dask"):
        raise ConfigError(f"engine must be local or dask; got {engine!r}")
    if scheduler and engine != "dask":
        raise ConfigError("--scheduler needs --engine dask")
    workers = workers or os.cpu_count() or 1
    n_chunks = max(1, chunks if chunks is not None else max(2, 2 * workers))
    parts = _chunks(baskets, min(n_chunks, max(1, baskets.n_baskets)), shuffle)
    thresholds = [scaled_count(min_count, p.n_baskets, baskets.n_baskets) for p in parts]
    reports: list[PassReport] = []

    def emit(r: PassReport) -> None:
        reports.append(r)
        if progress:
            progress(r)

    ctx = dask_engine(scheduler, workers, processes) if engine == "dask" else local_engine(workers)
    with ctx as run:
        t0 = time.perf_counter()
        local = run(mine_chunk, parts, thresholds, [max_size] * len(parts))
        family = union_levels(local)
        n_cand = sum(f.shape[0] for f in family)
        emit(
            PassReport(
                1,
                f"{len(parts)} chunks, locally frequent",
                "A-Priori per chunk",
                max((p.nbytes() for p in parts), default=0),
                n_cand,
                n_cand,
                time.perf_counter() - t0,
                f"chunk thresholds {min(thresholds, default=0)}..{max(thresholds, default=0)}; "
                f"engine {engine}{' at ' + scheduler if scheduler else ''}",
            )
        )
        t0 = time.perf_counter()
        per_chunk = run(count_chunk, parts, [family] * len(parts)) if family else []
    levels: list[tuple[I32, I64]] = []
    for k, sets in enumerate(family):
        total = np.sum([c[k] for c in per_chunk], axis=0).astype(np.int64)
        f = total >= min_count
        if not f.any():
            break
        levels.append((sets[f], total[f]))
    emit(
        PassReport(
            2,
            "count candidates in every chunk",
            "candidate counts",
            4 * n_cand,
            n_cand,
            sum(s.shape[0] for s, _ in levels),
            time.perf_counter() - t0,
            f"{n_cand - sum(s.shape[0] for s, _ in levels)} false positives dropped",
        )
    )
    return MiningResult(baskets.vocab, baskets.n_baskets, min_count, levels, "son", reports)
