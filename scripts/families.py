#!/usr/bin/env python3
"""Document families (floods, stars, hubs, chains, templates) in several orders, with exact truth; ``--check``
runs each through a real ``dedupd serve`` and says which duplicated documents no alert names.

The shapes and orders are ``scripts/family_shapes.py``'s (fixed seeds: the same arguments, the same files).
For each shape it writes, under ``--out``:

- ``SHAPE-ORDER.jsonl``: the shape's ``--docs`` documents as ``{"id", "text"}`` lines, in each order
  (``first``: family after family, base first; ``last``: base last; ``interleaved``: round robin over the
  families; ``shuffled``: a fixed-seed permutation). An id says its family and its part in it
  (``star0003-base``, ``star0003-variant0012``, ``hub0001-spoke0040``, ``filler0002``).
- ``SHAPE.truth.jsonl``: every pair with exact Jaccard >= ``--threshold`` on the package's own word
  3-shingles (``scripts/oracle.py``, brute force), one ``{"a", "b", "inter", "union"}`` per line; the truth
  does not depend on the order.

With ``--check``, each SHAPE-ORDER file goes through ``scripts/quality.py`` (a private ``redis-server``,
``dedupd serve`` started first, ``dedupd push`` of the whole file, every alert read; its output in
``--out``/logs) and one line per run says: pair precision, co-membership recall, and how many of the
documents with a true duplicate no alert names (as its id or among its matches), by part (base, variant,
...); then the first ``--show`` of those, each with its true duplicates. The last line of output is one JSON
object with every figure.

Exit status: 0 when every run's pair precision is at least ``--min-precision``, its co-membership recall at
least ``--min-recall`` and every document with a true duplicate is named (or without ``--check``, once the
files are written); 1 otherwise; 2 on bad arguments or when a run could not be set up.

Examples::

    .venv/bin/python scripts/families.py --docs 2000                        # write the files only
    .venv/bin/python scripts/families.py --docs 1000 --shapes star,hub --check
    .venv/bin/python scripts/families.py --docs 10000 --check --env DEDUPD_BUCKET_MEMBERS=64
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCRIPTS = Path(__file__).resolve().parent
REPO = SCRIPTS.parent
for p in (str(SCRIPTS), str(REPO)):
    if p not in sys.path:
        sys.path.insert(0, p)

import family_shapes as shapes  # noqa: E402
import oracle  # noqa: E402

Pair = tuple[str, str]


def log(msg: str) -> None:
    print(f"[families {time.strftime('%H:%M:%S')}] {msg}", flush=True)


@dataclass(frozen=True)
class ShapeCorpus:
    """One shape's documents (generation order), their roles, and the truth: each true pair's exact
    (intersection, union)."""

    shape: str
    families: list[shapes.Family]
    truth: dict[Pair, tuple[int, int]]

    @property
    def docs(self) -> list[shapes.Doc]:
        return [d for f in self.families for d in f.docs]

    def duplicated(self) -> set[str]:
        """The documents with at least one true duplicate."""
        return {x for pair in self.truth for x in pair}


def build(shape: str, docs: int, seed: int, threshold: str) -> ShapeCorpus:
    """A shape's families and their exact truth."""
    families = shapes.generate(shape, docs, seed, threshold)
    all_docs = [d for f in families for d in f.docs]
    sets = oracle.shingle_sets([d.text for d in all_docs], "word:3")
    found = oracle.similar_pairs(sets, threshold)
    truth = {
        (all_docs[i].id, all_docs[j].id): (a, u)
        for i, j, a, u in zip(
            found.i.tolist(), found.j.tolist(), found.inter.tolist(), found.union.tolist(), strict=True
        )
    }
    return ShapeCorpus(shape, families, truth)


def write_jsonl(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as f:
        f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def write_shape(corpus: ShapeCorpus, orders: Sequence[str], out: Path, seed: int) -> dict[str, Path]:
    """The shape's truth file and one corpus file per order; the corpus files by order."""
    write_jsonl(
        out / f"{corpus.shape}.truth.jsonl",
        [{"a": a, "b": b, "inter": i, "union": u} for (a, b), (i, u) in corpus.truth.items()],
    )
    files = {}
    for order in orders:
        path = out / f"{corpus.shape}-{order}.jsonl"
        write_jsonl(
            path, [{"id": d.id, "text": d.text} for d in shapes.ordered(corpus.families, order, seed)]
        )
        files[order] = path
    return files


# ----------------------------------------------------------------------------- --check
class SetupError(Exception):
    """A run could not be set up (exit status 2)."""


def run_quality(corpus_file: Path, args: argparse.Namespace, logs: Path) -> tuple[dict[str, Any], set[Pair]]:
    """scripts/quality.py on one file: its JSON figures and the pairs the alerts reported.

    Raises:
        SetupError: when quality.py could not set the run up (its first error line).
    """
    pairs_file = logs / f"{corpus_file.stem}.pairs.jsonl"
    cmd = [
        sys.executable,
        str(SCRIPTS / "quality.py"),
        "--corpus",
        str(corpus_file),
        "--shingle",
        "word:3",
        "--threshold",
        args.threshold,
        "--min-recall",
        "0",
        "--min-precision",
        "0",
        "--show",
        "0",
        "--pairs",
        str(pairs_file),
        *(f"--env={e}" for e in args.env),
        *(["--dedupd", args.dedupd] if args.dedupd else []),
    ]
    log_file = logs / f"{corpus_file.stem}.quality.log"
    with log_file.open("wb") as fh:
        proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT)
    lines = log_file.read_text(errors="replace").strip().splitlines()
    try:
        result: dict[str, Any] = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        raise SetupError(
            f"quality.py exited with {proc.returncode} without figures (see {log_file})"
        ) from None
    if proc.returncode == 2 or "error" in result:
        raise SetupError(f"quality.py: {result.get('error', 'setup failed')} (see {log_file})")
    found = set()
    for line in pairs_file.read_text().splitlines():
        a, b = json.loads(line)
        found.add((a, b))
    pairs_file.unlink()
    return result, found


@dataclass(frozen=True)
class Outcome:
    """One shape and order through the daemon."""

    shape: str
    order: str
    figures: dict[str, Any]  # quality.py's
    unnamed: list[str]  # documents with a true duplicate that no alert names, in the file's order
    positions: dict[str, int]  # each document's line in the file (0-based)

    def row(self, corpus: ShapeCorpus) -> dict[str, Any]:
        roles = Counter(_role(d) for d in self.unnamed)
        families = {d.rsplit("-", 1)[0] for d in self.unnamed}
        f = self.figures
        return {
            "shape": self.shape,
            "order": self.order,
            "docs": f["docs"],
            "true_pairs": f["true_pairs"],
            "precision": f["precision"],
            "recall": f["recall"],
            "cluster_recall": f["cluster_recall"],
            "duplicated": len(corpus.duplicated()),
            "unnamed": len(self.unnamed),
            "unnamed_by_role": dict(sorted(roles.items())),
            "families_losing": len(families),
            "families": sum(1 for fam in corpus.families if fam.shape != "filler"),
            "seconds": f["push_to_drained_s"],
        }


def _role(doc_id: str) -> str:
    """A document's part in its family, from its id (``star0003-variant0012`` -> ``variant``)."""
    tail = doc_id.rsplit("-", 1)[-1]
    return tail.rstrip("0123456789") or tail


def check(corpus: ShapeCorpus, order: str, path: Path, args: argparse.Namespace, logs: Path) -> Outcome:
    """One file through the daemon: the figures and the duplicated documents that no alert names."""
    figures, found = run_quality(path, args, logs)
    named = {x for pair in found for x in pair}
    missing = corpus.duplicated() - named
    order_ids = [json.loads(line)["id"] for line in path.read_text().splitlines()]
    positions = {d: n for n, d in enumerate(order_ids)}
    return Outcome(corpus.shape, order, figures, [d for d in order_ids if d in missing], positions)


def print_row(row: dict[str, Any]) -> None:
    print(
        f"{row['shape']:9} {row['order']:12} {row['docs']:6} docs  precision {row['precision']:.4f}  "
        f"co-recall {row['cluster_recall']:.5f}  unnamed {row['unnamed']:4} of {row['duplicated']:5} "
        f"duplicated  {row['unnamed_by_role'] or ''}  "
        f"({row['families_losing']} of {row['families']} families; {row['seconds']}s)",
        flush=True,
    )


def show_unnamed(outcome: Outcome, corpus: ShapeCorpus, n: int) -> None:
    """The first ``n`` unnamed documents, each with its true duplicates (best first), and the line of each in
    the file (``@N``)."""
    if not outcome.unnamed or n <= 0:
        return
    partners: dict[str, list[tuple[float, str]]] = {}
    for (a, b), (i, u) in corpus.truth.items():
        partners.setdefault(a, []).append((i / u, b))
        partners.setdefault(b, []).append((i / u, a))
    at = outcome.positions
    for doc in outcome.unnamed[:n]:
        best = sorted(partners[doc], reverse=True)[:4]
        more = len(partners[doc]) - len(best)
        print(
            f"    {doc}@{at[doc]}: true duplicates "
            + ", ".join(f"{other}@{at[other]} {j:.3f}" for j, other in best)
            + (f" and {more} more" if more else "")
        )


def ok(row: dict[str, Any], args: argparse.Namespace) -> bool:
    return bool(
        row["precision"] >= args.min_precision
        and row["cluster_recall"] >= args.min_recall
        and row["unnamed"] == 0
    )


# ----------------------------------------------------------------------------- main
def parse_list(text: str, allowed: Sequence[str], what: str) -> list[str]:
    items = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in items if x not in allowed]
    if bad or not items:
        raise argparse.ArgumentTypeError(f"{what} must be some of {','.join(allowed)}, got {text!r}")
    return items


def run(args: argparse.Namespace) -> int:
    args.out.mkdir(parents=True, exist_ok=True)
    logs = args.out / "logs"
    logs.mkdir(exist_ok=True)
    rows: list[dict[str, Any]] = []
    for shape in args.shapes:
        corpus = build(shape, args.docs, args.seed, args.threshold)
        files = write_shape(corpus, args.orders, args.out, args.seed)
        log(
            f"{shape}: {len(corpus.docs)} documents in {sum(1 for f in corpus.families if f.shape == shape)} "
            f"families, {len(corpus.truth)} true pairs, {len(corpus.duplicated())} documents with a true "
            f"duplicate -> {args.out}/{shape}-{{{','.join(args.orders)}}}.jsonl, {shape}.truth.jsonl"
        )
        if not args.check:
            continue
        for order, path in files.items():
            outcome = check(corpus, order, path, args, logs)
            rows.append(outcome.row(corpus))
            print_row(rows[-1])
            show_unnamed(outcome, corpus, args.show)
    if not args.check:
        print(json.dumps({"written": str(args.out), "shapes": args.shapes, "orders": args.orders}))
        return 0
    passed = all(ok(r, args) for r in rows)
    log(
        f"{'PASS' if passed else 'FAIL'}: {sum(ok(r, args) for r in rows)} of {len(rows)} runs name every duplicate"
    )
    print(json.dumps({"threshold": float(args.threshold), "seed": args.seed, "runs": rows, "ok": passed}))
    return 0 if passed else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--shapes",
        type=lambda s: parse_list(s, shapes.SHAPES, "--shapes"),
        default=list(shapes.SHAPES),
        help=f"comma-separated, of {','.join(shapes.SHAPES)} (default all)",
    )
    ap.add_argument(
        "--orders",
        type=lambda s: parse_list(s, shapes.ORDERS, "--orders"),
        default=list(shapes.ORDERS),
        help=f"comma-separated, of {','.join(shapes.ORDERS)} (default all)",
    )
    ap.add_argument("--docs", type=int, default=1000, help="documents per shape (default %(default)s)")
    ap.add_argument("--seed", type=int, default=28, help="generator seed (default %(default)s)")
    ap.add_argument(
        "--threshold",
        default="0.8",
        help="Jaccard threshold the shapes are sized for, the daemon's and the truth's (default %(default)s)",
    )
    ap.add_argument(
        "--out", type=Path, default=REPO / "data" / "families", help="where to write (default data/families)"
    )
    ap.add_argument("--check", action="store_true", help="run every file through dedupd serve (quality.py)")
    ap.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="DEDUPD_K=V",
        help="a daemon setting for --check (repeatable), e.g. --env DEDUPD_BUCKET_MEMBERS=64",
    )
    ap.add_argument("--dedupd", default=None, help="dedupd executable for --check (default .venv/bin/dedupd)")
    ap.add_argument(
        "--show", type=int, default=5, help="unnamed documents to print per run (default %(default)s)"
    )
    ap.add_argument("--min-recall", type=float, default=0.999, help="co-membership recall a run needs")
    ap.add_argument("--min-precision", type=float, default=1.0, help="pair precision a run needs")
    args = ap.parse_args(argv)
    try:
        t = oracle.threshold_fraction(args.threshold)
    except ValueError:
        ap.error(f"--threshold must be a number in (0, 1), got {args.threshold!r}")
    if not 0 < t < 1:
        ap.error(f"--threshold must be in (0, 1), got {args.threshold}")
    if args.docs < 1:
        ap.error("--docs must be at least 1")
    try:
        return run(args)
    except SetupError as exc:
        log(f"ERROR: {exc}")
        print(json.dumps({"ok": False, "error": str(exc)}), flush=True)
        return 2


if __name__ == "__main__":
    sys.exit(main())
