#!/usr/bin/env python3
"""Frequent-itemset benchmark: dedupd vs mlxtend, efficient-apriori and pyfim on the same baskets.

Every (tool, dataset) runs in its own fresh Python process, one after the other, so that the peak
memory (``ru_maxrss`` of that process) is its own. Each run reads the basket file with the same
parser, then times two things:

- ``mine``: from the parsed baskets (lists of item strings) to the frequent itemsets with their
  counts, whatever conversion the tool needs included (dedupd's ``Baskets.from_lists``, mlxtend's
  ``TransactionEncoder`` and sparse frame, pyfim's internal conversion);
- ``total``: from the basket file to the itemsets (reading + ``mine``).

``dedupd-file`` is dedupd's own path from the file (what ``dedupd mine --input`` does): a streaming
loader straight into numpy arrays, so its ``read`` column is its loading and ``mine`` starts from
the loaded arrays; its peak memory is the one that matters for the one-million-basket target.

The itemsets of every tool are compared with dedupd's (as sets of (items, count)); the table
prints the time, the peak memory, the itemset count, agreement, and each peer's time divided by
dedupd's. Datasets (made on demand): the Debian Depends baskets (``scripts/debian_baskets.py``),
T10I4D100K and T10I4D1M (``scripts/gen_quest.py``).

    python scripts/bench_mining.py                     # everything
    python scripts/bench_mining.py --datasets debian --repeat 5
    python scripts/bench_mining.py --skip mlxtend-apriori --timeout 600
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATASETS = {
    "debian": (ROOT / "data/debian_depends.txt", 0.002, [sys.executable, "scripts/debian_baskets.py"]),
    "T10I4D100K": (ROOT / "data/T10I4D100K.txt", 0.002, [sys.executable, "scripts/gen_quest.py"]),
    "T10I4D1M": (
        ROOT / "data/T10I4D1M.txt",
        0.002,
        [sys.executable, "scripts/gen_quest.py", "--baskets", "1000000"],
    ),
}
TOOLS = [
    "dedupd-apriori",
    "dedupd-file",
    "dedupd-pcy",
    "pyfim-fpgrowth",
    "pyfim-eclat",
    "efficient-apriori",
    "mlxtend-fpgrowth",
    "mlxtend-apriori",
]
REFERENCE = "dedupd-apriori"


# ----------------------------------------------------------------------------- child side
def _mine(tool: str, lists: list[list[str]], min_count: int) -> dict[frozenset[str], int]:
    n = len(lists)
    if tool.startswith("dedupd-"):
        from dedupd.mining.apriori import apriori
        from dedupd.mining.baskets import Baskets
        from dedupd.mining.pcy import pcy

        b = Baskets.from_lists(lists)
        r = apriori(b, min_count) if tool == "dedupd-apriori" else pcy(b, min_count)
        return r.counts_by_names()
    if tool.startswith("pyfim-"):
        import fim

        fn = fim.fpgrowth if tool == "pyfim-fpgrowth" else fim.eclat
        return {frozenset(s): int(c) for s, c in fn(lists, target="s", supp=-min_count, zmin=1, report="a")}
    if tool == "efficient-apriori":
        from efficient_apriori.itemsets import itemsets_from_transactions

        found, _ = itemsets_from_transactions(
            [tuple(x) for x in lists], min_support=(min_count - 0.5) / n, max_length=1000
        )
        return {frozenset(s): int(c) for level in found.values() for s, c in level.items()}
    if tool.startswith("mlxtend-"):
        import pandas as pd
        from mlxtend.frequent_patterns import apriori, fpgrowth
        from mlxtend.preprocessing import TransactionEncoder

        te = TransactionEncoder()
        onehot = te.fit(lists).transform(lists, sparse=True)
        df = pd.DataFrame.sparse.from_spmatrix(onehot, columns=te.columns_)
        fn = fpgrowth if tool == "mlxtend-fpgrowth" else apriori
        # (min_count - 0.5) / n: mlxtend's fpgrowth takes ceil(min_support * n), and 112 / 55792 * 55792
        # is 112.00000000000001 in floating point, which would silently raise the threshold to 113
        res = fn(df, min_support=(min_count - 0.5) / n, use_colnames=True)
        return {frozenset(s): round(x * n) for s, x in zip(res["itemsets"], res["support"], strict=True)}
    raise SystemExit(f"unknown tool {tool}")


def child_file(path: str, support: float, repeat: int) -> None:
    """dedupd's own path from the file (``dedupd mine --input``): streaming load, no Python lists."""
    sys.path.insert(0, str(ROOT))
    from dedupd.mining.apriori import apriori
    from dedupd.mining.baskets import load_baskets
    from dedupd.mining.support import resolve_support

    best = (math.inf, 0.0, 0.0)
    result: dict[frozenset[str], int] = {}
    n = min_count = 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        b = load_baskets(path)
        t1 = time.perf_counter()
        n, min_count = b.n_baskets, resolve_support(support, b.n_baskets)
        result = apriori(b, min_count).counts_by_names()
        t2 = time.perf_counter()
        if t2 - t0 < best[0]:
            best = (t2 - t0, t1 - t0, t2 - t1)
    _emit("dedupd-file", n, min_count, best[1], best[2], result)


def _emit(
    tool: str, n: int, min_count: int, t_read: float, t_mine: float, result: dict[frozenset[str], int]
) -> None:
    digest = hashlib.sha256(
        "\n".join(sorted("\t".join(sorted(s)) + f"\t{c}" for s, c in result.items())).encode()
    ).hexdigest()
    print(
        json.dumps(
            {
                "tool": tool,
                "n_baskets": n,
                "min_count": min_count,
                "read": t_read,
                "mine": t_mine,
                "itemsets": len(result),
                "digest": digest,
                "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            }
        )
    )


def child(tool: str, path: str, support: float, repeat: int) -> None:
    if tool == "dedupd-file":
        child_file(path, support, repeat)
        return
    sys.path.insert(0, str(ROOT))
    from dedupd.mining.baskets import read_basket_lists
    from dedupd.mining.support import resolve_support

    t0 = time.perf_counter()
    lists = read_basket_lists(path)
    t_read = time.perf_counter() - t0
    min_count = resolve_support(support, len(lists))
    times = []
    result: dict[frozenset[str], int] = {}
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = _mine(tool, lists, min_count)
        times.append(time.perf_counter() - t0)
    _emit(tool, len(lists), min_count, t_read, min(times), result)


# ----------------------------------------------------------------------------- parent side
def run_one(tool: str, path: Path, support: float, repeat: int, timeout: float) -> dict[str, object]:
    cmd = [sys.executable, __file__, "--child", tool, str(path), str(support), str(repeat)]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT, check=False)
    except subprocess.TimeoutExpired:
        return {"tool": tool, "error": f"timeout after {timeout:.0f}s"}
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["?"])[-1]
        return {"tool": tool, "error": last[:120]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5]))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    ap.add_argument("--tools", nargs="+", default=TOOLS, choices=TOOLS)
    ap.add_argument("--skip", nargs="*", default=[], help="tools to leave out")
    ap.add_argument("--support", type=float, default=None, help="override every dataset's support")
    ap.add_argument("--repeat", type=int, default=3, help="timed repetitions per run (the best is kept)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds before a run is abandoned")
    ap.add_argument("--json", default=None, help="also write all results to this file")
    args = ap.parse_args()
    tools = [t for t in args.tools if t not in args.skip]
    if REFERENCE not in tools:
        tools.insert(0, REFERENCE)
    everything: dict[str, list[dict[str, object]]] = {}
    for name in args.datasets:
        path, support, make = DATASETS[name]
        support = args.support or support
        if not path.exists():
            print(f"making {path.name}: {' '.join(make[1:])}", file=sys.stderr)
            subprocess.run(make, cwd=ROOT, check=True, stdout=sys.stderr)
        rows = []
        for tool in tools:
            print(f"  {name}: {tool} ...", file=sys.stderr, flush=True)
            rows.append(run_one(tool, path, support, args.repeat, args.timeout))
        everything[name] = rows
        report(name, support, rows)
    if args.json:
        Path(args.json).write_text(json.dumps(everything, indent=1))


def report(name: str, support: float, rows: list[dict[str, object]]) -> None:
    ref = next((r for r in rows if r["tool"] == REFERENCE and "error" not in r), None)
    head = f"{name}: support {support}"
    if ref:
        head += f" (min count {ref['min_count']}), {ref['n_baskets']} baskets, {ref['itemsets']} frequent itemsets"
    print(f"\n{head}")
    print(
        f"{'tool':<20}{'mine s':>9}{'total s':>9}{'peak MB':>9}{'itemsets':>10}  {'agrees':<7}"
        f"{'mine ratio':>11}{'total ratio':>12}"
    )
    for r in rows:
        if "error" in r:
            print(f"{r['tool']:<20}  {r['error']}")
            continue
        mine, total = float(r["mine"]), float(r["mine"]) + float(r["read"])  # type: ignore[arg-type]
        agrees = "-" if ref is None else ("yes" if r["digest"] == ref["digest"] else "NO")
        ratio = tratio = ""
        if ref:
            rm, rt = float(ref["mine"]), float(ref["mine"]) + float(ref["read"])  # type: ignore[arg-type]
            ratio = f"{mine / rm:.2f}x"
            tratio = f"{total / rt:.2f}x"
        print(
            f"{r['tool']:<20}{mine:>9.3f}{total:>9.3f}{float(r['peak_mb']):>9.0f}{r['itemsets']:>10}  "  # type: ignore[arg-type]
            f"{agrees:<7}{ratio:>11}{tratio:>12}"
        )
    print("ratios: the tool's time / dedupd-apriori's (above 1: dedupd is faster)")


if __name__ == "__main__":
    main()
