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

Rules, as whole commands (``--commands``, on by default): ``dedupd mine --input FILE --format json``
(its output to a file) against a pyfim command (``python -c``: read the file with ``str.split``,
``fim.fpgrowth`` for the itemsets and again with ``target="r", mode="o"`` for the rules with
one-item consequents, ``mode="o"`` counting a rule's support as that of body and head together, as
dedupd does), each started as a process, alternating, ``--runs`` times; the best and the median
wall times are printed with the ratio. Before timing, one untimed run of each writes its itemsets
and rules, and the two are compared: same itemsets with the same counts, same rules with the same
counts and confidences. ``--baseline DIR`` times another dedupd checkout's ``python -m dedupd mine``
in the same rotation (an older commit, to check that nothing got slower).

    python scripts/bench_mining.py                     # everything
    python scripts/bench_mining.py --datasets debian --no-itemsets --runs 7
    python scripts/bench_mining.py --no-itemsets --baseline /tmp/dedupd-26d575c
    python scripts/bench_mining.py --datasets debian --repeat 5
    python scripts/bench_mining.py --skip mlxtend-apriori --timeout 600
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
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


# ----------------------------------------------------------------------------- whole commands (rules)
PYFIM_COMMAND = """
import json, math, sys
import fim
path, support, confidence = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
with open(path) as f:
    lists = [line.split() for line in f if line.strip()]
n = len(lists)
min_count = max(1, math.ceil(support * n - 1e-9)) if support < 1 else int(support)
itemsets = fim.fpgrowth(lists, target="s", supp=-min_count, zmin=1, report="a")
rules = fim.fpgrowth(lists, target="r", supp=-min_count, conf=confidence * 100, zmin=2, mode="o", report="ac")
print(len(itemsets), len(rules))
if len(sys.argv) > 4:
    with open(sys.argv[4], "w") as out:
        json.dump({"itemsets": itemsets, "rules": rules}, out)
"""


def _dedupd_cmd(
    checkout: Path | None, path: Path, support: float, confidence: float
) -> tuple[list[str], Path]:
    """``dedupd mine`` of this checkout (the console script) or of another one (``python -m dedupd``)."""
    args = ["mine", "--input", str(path), "--support", str(support), "--confidence", str(confidence)]
    args += ["--format", "json", "-q"]
    if checkout is None:
        return [str(Path(sys.executable).with_name("dedupd")), *args], ROOT
    return [sys.executable, "-m", "dedupd", *args], checkout


def _compiled(checkout: Path) -> None:
    """Byte-compile a checkout's ``dedupd`` package, as ``pip install`` of a wheel does: an editable
    install compiles nothing, and with ``PYTHONDONTWRITEBYTECODE`` set (as on the CI machine) every
    run would compile the sources again (about 0.1 s), which a user's install never pays."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", "dedupd"], cwd=checkout, check=True)


def _timed(cmd: list[str], cwd: Path, out: Path, timeout: float) -> float:
    """Wall time of one run of ``cmd`` (a new process), its stdout written to ``out``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    with out.open("w") as f:
        t0 = time.perf_counter()
        subprocess.run(cmd, cwd=cwd, stdout=f, check=True, timeout=timeout, env=env)
        return time.perf_counter() - t0


def _dedupd_answer(
    out: Path,
) -> tuple[dict[frozenset[str], int], dict[tuple[frozenset[str], str], tuple[int, float]]]:
    doc = json.loads(out.read_text())
    itemsets = {frozenset(x["items"]): x["count"] for x in doc["itemsets"]}
    rules = {
        (frozenset(r["antecedent"]), r["consequent"][0]): (r["count"], r["confidence"]) for r in doc["rules"]
    }
    return itemsets, rules


def _pyfim_answer(
    out: Path,
) -> tuple[dict[frozenset[str], int], dict[tuple[frozenset[str], str], tuple[int, float]]]:
    doc = json.loads(out.read_text())
    itemsets = {frozenset(s): c for s, c in doc["itemsets"]}
    rules = {(frozenset(body), head): (c, conf) for head, body, c, conf in doc["rules"]}
    return itemsets, rules


def _agree(mine: Path, peer: Path) -> str:
    """``yes`` when dedupd's and pyfim's itemsets, rules, counts and confidences agree, else what differs."""
    (items_a, rules_a), (items_b, rules_b) = _dedupd_answer(mine), _pyfim_answer(peer)
    if items_a != items_b:
        return f"NO: itemsets differ ({len(items_a)} vs {len(items_b)})"
    if rules_a.keys() != rules_b.keys():
        return f"NO: rules differ ({len(rules_a)} vs {len(rules_b)})"
    bad = [k for k, (c, conf) in rules_a.items() if c != rules_b[k][0] or abs(conf - rules_b[k][1]) > 1e-9]
    return f"NO: {len(bad)} rules differ in count or confidence" if bad else "yes"


def bench_commands(
    name: str, path: Path, support: float, confidence: float, runs: int, baseline: Path | None, timeout: float
) -> dict[str, object]:
    """Whole commands, alternating: dedupd mine (and a baseline checkout's) vs pyfim itemsets + rules."""
    with tempfile.TemporaryDirectory() as tmp:
        out, peer_out = Path(tmp) / "dedupd.json", Path(tmp) / "pyfim.json"
        pyfim = [sys.executable, "-c", PYFIM_COMMAND, str(path), str(support), str(confidence)]
        commands = {"dedupd mine": _dedupd_cmd(None, path, support, confidence), "pyfim": (pyfim, ROOT)}
        if baseline is not None:
            commands["baseline dedupd mine"] = _dedupd_cmd(baseline, path, support, confidence)
        for checkout in {ROOT, baseline or ROOT}:
            _compiled(checkout)
        _timed(commands["dedupd mine"][0], ROOT, out, timeout)
        _timed([*pyfim, str(peer_out)], ROOT, Path(tmp) / "counts", timeout)
        agrees = _agree(out, peer_out)
        itemsets, rules = _dedupd_answer(out)
        times: dict[str, list[float]] = {k: [] for k in commands}
        for _ in range(runs):
            for label, (cmd, cwd) in commands.items():
                times[label].append(_timed(cmd, cwd, Path(tmp) / "out", timeout))
    row = {"itemsets": len(itemsets), "rules": len(rules), "agrees": agrees, "times": times}
    report_commands(name, support, confidence, row)
    return row


def report_commands(name: str, support: float, confidence: float, row: dict[str, object]) -> None:
    times: dict[str, list[float]] = row["times"]  # type: ignore[assignment]
    print(
        f"\n{name}: whole commands, support {support}, confidence {confidence}: {row['itemsets']} itemsets, "
        f"{row['rules']} rules (one-item consequents); dedupd and pyfim agree: {row['agrees']}"
    )
    print(f"{'command':<22}{'best s':>8}{'median s':>10}   runs (s)")
    for label, ts in times.items():
        print(
            f"{label:<22}{min(ts):>8.3f}{statistics.median(ts):>10.3f}   {' '.join(f'{t:.2f}' for t in ts)}"
        )
    best = {k: min(v) for k, v in times.items()}
    print(
        f"dedupd mine / pyfim: {best['dedupd mine'] / best['pyfim']:.2f}x (best of each; below 2 meets issue 16)"
    )
    if "baseline dedupd mine" in best:
        print(
            f"baseline / dedupd mine: {best['baseline dedupd mine'] / best['dedupd mine']:.2f}x (above 1: faster now)"
        )


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
    ap.add_argument(
        "--itemsets", action=argparse.BooleanOptionalAction, default=True, help="the itemset table"
    )
    ap.add_argument(
        "--commands",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="rules as whole commands vs pyfim",
    )
    ap.add_argument("--confidence", type=float, default=0.5, help="minimum confidence of the rules")
    ap.add_argument("--runs", type=int, default=5, help="alternating runs of each whole command")
    ap.add_argument("--baseline", type=Path, default=None, help="another dedupd checkout to time too")
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
        if args.itemsets:
            rows = []
            for tool in tools:
                print(f"  {name}: {tool} ...", file=sys.stderr, flush=True)
                rows.append(run_one(tool, path, support, args.repeat, args.timeout))
            everything[name] = rows
            report(name, support, rows)
        if args.commands:
            print(f"  {name}: whole commands ...", file=sys.stderr, flush=True)
            row = bench_commands(name, path, support, args.confidence, args.runs, args.baseline, args.timeout)
            everything[f"{name} commands"] = [row]
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
