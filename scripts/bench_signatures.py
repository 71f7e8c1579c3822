#!/usr/bin/env python3
"""Text -> MinHash signature, shingling included: dedupd vs datasketch vs rensa, same data, same run.

Each library gets what its users usually write: datasketch ``MinHash`` + ``update_batch`` and rensa
``RMinHash`` + ``update``, both fed word 3-shingles made in Python (``re.findall(r"\\w+")`` on the
lowercased text, joined in threes); dedupd gets its own batch API, the one the daemon calls
(``Shingler.batch`` + ``signatures``, compiled kernels inside; one-permutation hashing, and the classic
K-permutation scheme for reference), in batches of 256 (the daemon's default ``batch_size``); numba's
compilation is outside the timing (the warm-up run; it is cached on disk anyway). 128 permutations
everywhere. Corpora: the Debian package descriptions (short documents) and the Python source files of
this machine (long ones), built by ``scripts/corpora.py``. Prints docs/s and MB/s (medians of
``--repeat`` runs) and the ratios.

``--accuracy`` also measures, on real pairs of the corpus, how far each scheme's Jaccard estimate is
from the exact Jaccard (the table in the README comes from it).

Usage:
    .venv/bin/python scripts/bench_signatures.py [--docs-short 10000] [--docs-long 400] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dedupd.similarity.minhash import MinHasher, OnePermHasher, estimate  # noqa: E402
from dedupd.similarity.shingling import Shingler  # noqa: E402
from dedupd.similarity.spec import ShingleSpec  # noqa: E402

WORD = re.compile(r"\w+")
BATCH = 256  # the daemon's default batch_size


def python_shingles(text: str, k: int = 3) -> set[str]:
    """The word k-shingles a user of datasketch or rensa would write."""
    words = WORD.findall(text.lower())
    if len(words) < k:
        return {" ".join(words)}
    return {" ".join(words[i : i + k]) for i in range(len(words) - k + 1)}


def load(corpus: str, limit: int) -> list[str]:
    files = {"debian": ROOT / "data" / "debian.jsonl", "python": ROOT / "data" / "python.jsonl"}
    path = files[corpus]
    if not path.exists():
        args = [sys.executable, str(ROOT / "scripts" / "corpora.py"), corpus]
        if corpus == "python":
            args += ["--max-docs", "0", "--out", str(path)]
        subprocess.run(args, check=True)
    texts = []
    with path.open() as f:
        for line in f:
            texts.append(json.loads(line)["text"])
    rng = np.random.default_rng(7)
    pick = rng.choice(len(texts), size=min(limit, len(texts)), replace=False)
    return [texts[i] for i in sorted(pick.tolist())]


def dedupd_runner(scheme: str) -> Callable[[list[str]], int]:
    shingler = Shingler(ShingleSpec("word", 3))
    hasher = OnePermHasher(128, 1) if scheme == "oph" else MinHasher(128, 1)

    def run(texts: list[str]) -> int:
        n = 0
        for i in range(0, len(texts), BATCH):
            batch = shingler.batch(texts[i : i + BATCH], tails=False)
            n += hasher.signatures(batch.hashes, batch.offsets).shape[0]
        return n

    return run


def datasketch_run(texts: list[str]) -> int:
    from datasketch import MinHash

    for t in texts:
        m = MinHash(num_perm=128)
        m.update_batch([s.encode("utf-8") for s in python_shingles(t)])
        m.digest()
    return len(texts)


def rensa_run(texts: list[str]) -> int:
    from rensa import RMinHash

    for t in texts:
        m = RMinHash(num_perm=128, seed=42)
        m.update(list(python_shingles(t)))
        m.digest()
    return len(texts)


def shingling_only(texts: list[str]) -> int:
    for t in texts:
        python_shingles(t)
    return len(texts)


def timed(fn: Callable[[list[str]], int], texts: list[str], repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn(texts)
        runs.append(time.perf_counter() - t)
    return statistics.median(runs)


def accuracy(texts: list[str], pairs: int = 3000) -> dict[str, dict[str, float]]:
    """RMSE and bias of each scheme's estimate against exact Jaccard, on real pairs binned by J."""
    shingler = Shingler(ShingleSpec("word", 3))
    sets = [shingler.hash_set(t) for t in texts]
    # real pairs: documents sharing their rarest shingle (near-duplicates) plus random pairs
    rng = np.random.default_rng(1)
    index: dict[int, list[int]] = {}
    for i, s in enumerate(sets):
        for h in s[:3].tolist():
            index.setdefault(h, []).append(i)
    cand = {(a, b) for ids in index.values() if 1 < len(ids) < 50 for a in ids for b in ids if a < b}
    chosen = list(cand)[:pairs] + [
        tuple(sorted(rng.choice(len(sets), 2, replace=False).tolist())) for _ in range(pairs // 3)
    ]
    out: dict[str, dict[str, float]] = {}
    for name, hasher in (("classic", MinHasher(128, 1)), ("oph", OnePermHasher(128, 1))):
        sigs = [hasher.signature(s) if s.size else None for s in sets]
        bins: dict[str, list[float]] = {}
        for a, b in chosen:
            if sigs[a] is None or sigs[b] is None or a == b:
                continue
            inter = np.intersect1d(sets[a], sets[b]).size
            j = inter / (sets[a].size + sets[b].size - inter)
            err = estimate(sigs[a], sigs[b]) - j
            key = "J<0.5" if j < 0.5 else ("0.5<=J<0.8" if j < 0.8 else "J>=0.8")
            bins.setdefault(key, []).append(err)
        out[name] = {}
        for key, errs in sorted(bins.items()):
            e = np.array(errs)
            out[name][f"{key} rmse"] = round(float(np.sqrt((e**2).mean())), 4)
            out[name][f"{key} bias"] = round(float(e.mean()), 4)
            out[name][f"{key} pairs"] = len(errs)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs-short", type=int, default=10000, help="Debian descriptions to use")
    ap.add_argument("--docs-long", type=int, default=400, help="Python source files to use")
    ap.add_argument("--repeat", type=int, default=3, help="runs per library; the median is reported")
    ap.add_argument("--accuracy", action="store_true", help="also measure estimate error on real pairs")
    args = ap.parse_args()

    contenders = [
        ("dedupd oph", dedupd_runner("oph")),
        ("dedupd classic", dedupd_runner("classic")),
        ("rensa RMinHash", rensa_run),
        ("datasketch MinHash", datasketch_run),
        ("(python shingling alone)", shingling_only),
    ]
    report: dict[str, dict[str, dict[str, float]]] = {}
    for corpus, limit in (("debian", args.docs_short), ("python", args.docs_long)):
        texts = load(corpus, limit)
        mb = sum(len(t.encode()) for t in texts) / 1e6
        print(f"\n== {corpus}: {len(texts)} documents, {mb:.1f} MB, word:3 shingles, 128 permutations")
        rows = {}
        for name, fn in contenders:
            fn(texts[: min(50, len(texts))])  # warm up (imports, memo tables)
            secs = timed(fn, texts, args.repeat)
            rows[name] = {"docs_per_s": len(texts) / secs, "mb_per_s": mb / secs, "seconds": secs}
            print(
                f"  {name:26s} {len(texts) / secs:10.0f} docs/s {mb / secs:8.2f} MB/s  ({secs:.2f}s median)"
            )
        for scheme in ("dedupd oph", "dedupd classic"):
            ours = rows[scheme]["docs_per_s"]
            for peer in ("rensa RMinHash", "datasketch MinHash"):
                print(f"  ratio {scheme} / {peer}: {ours / rows[peer]['docs_per_s']:.1f}x")
        report[corpus] = rows
        if args.accuracy:
            acc = accuracy(texts)
            print("  estimate error vs exact Jaccard on real pairs:")
            for name, stats in acc.items():
                print(f"    {name:8s} " + "  ".join(f"{k}={v}" for k, v in stats.items()))
            report[corpus]["accuracy"] = acc  # type: ignore[assignment]
    print(json.dumps(report))


if __name__ == "__main__":
    main()
