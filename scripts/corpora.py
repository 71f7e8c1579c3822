#!/usr/bin/env python3
"""Build real-data JSONL corpora for the detection-quality harness (``scripts/quality.py``).

Each corpus is a JSONL file under ``data/`` (gitignored; created on demand), one document a line:
``{"id": "...", "text": "..."}`` -- exactly what ``dedupd push FILE`` reads.

Corpora:

``debian``
    Debian package descriptions from the local apt lists (``/var/lib/apt/lists/*_Packages*``, read
    with ``/usr/lib/apt/apt-helper cat-file`` so any compression works). ``apt-get update`` is run
    first when no Packages list exists. The text is the full description available: the
    ``Description:`` line plus its continuation lines when the Packages file carries the long
    description; otherwise, when the ``*_Translation-en*`` lists are present, the long English
    description from there (matched by package name and ``Description-md5``); otherwise the short
    one-line description only. The id is the package name; the first entry of a name wins.

``python``
    The Python source files of the installed Pythons (``/usr/lib/python3*/**/*.py`` and
    ``/root/.pyenv/versions/*/lib/python3*/**/*.py``, site-packages included: vendored copies and
    the same module in several versions are real near-duplicates). The id is the file path. Files
    larger than 1,000,000 bytes (the daemon's default ``max_doc_bytes``), empty files, files that are
    not valid UTF-8, and second paths to an already-seen real file (symlinks) are skipped.

Sizing (deterministic): paths are sorted; ``--max-docs N`` then keeps a fixed-seed sample. For the
python corpus the sample is drawn by *module* (the path below ``lib/python3.X/``), so every copy of
a sampled module across the installed versions is kept together -- the near-duplicate pairs survive
the sampling instead of thinning out as p**2. ``--limit N`` simply keeps the first N documents in
sorted order (quick smoke runs). The output file name records the cap, so different caps coexist
and a built corpus is reused unless ``--force``.

Examples::

    .venv/bin/python scripts/corpora.py debian
    .venv/bin/python scripts/corpora.py python --max-docs 6000
    .venv/bin/python scripts/corpora.py python --limit 200 --out /tmp/small.jsonl
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import random
import re
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA_DIR = REPO / "data"
APT_LISTS = Path("/var/lib/apt/lists")
APT_HELPER = "/usr/lib/apt/apt-helper"
MAX_DOC_BYTES = 1_000_000  # the daemon's default max_doc_bytes
PYTHON_GLOBS = (
    "/usr/lib/python3*/**/*.py",
    "/root/.pyenv/versions/*/lib/python3*/**/*.py",
)
DEFAULT_SEED = 20240601
_LIB_RE = re.compile(r"/lib/python3[^/]*/(.*)$")


# ----------------------------------------------------------------------------- debian
def _apt_files(kind: str) -> list[Path]:
    """The apt list files of one kind (``Packages`` or ``Translation-en``), any compression."""
    pat = re.compile(rf"_{re.escape(kind)}(\.[a-z0-9]+)?$")
    return sorted(p for p in APT_LISTS.glob("*") if p.is_file() and pat.search(p.name))


def _cat(path: Path) -> Iterator[str]:
    """Lines of an apt list file, decompressed by apt itself."""
    proc = subprocess.Popen([APT_HELPER, "cat-file", str(path)], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    for raw in proc.stdout:
        yield raw.decode("utf-8", "replace").rstrip("\n")
    if proc.wait() != 0:
        raise RuntimeError(f"{APT_HELPER} cat-file {path} failed with code {proc.returncode}")


def _stanzas(lines: Iterable[str]) -> Iterator[list[tuple[str, list[str]]]]:
    """deb822 stanzas as lists of (field, [first line, continuation lines...])."""
    fields: list[tuple[str, list[str]]] = []
    for line in lines:
        if not line.strip():
            if fields:
                yield fields
            fields = []
        elif line[0] in " \t":
            if fields:
                fields[-1][1].append(line)
        else:
            name, _, value = line.partition(":")
            fields.append((name, [value.strip()]))
    if fields:
        yield fields


def _description_text(value: list[str]) -> str:
    """Short line plus long description; the deb822 ' .' paragraph marker becomes a blank line."""
    out = [value[0]]
    for cont in value[1:]:
        cont = cont[1:] if cont.startswith(" ") else cont.lstrip("\t")
        out.append("" if cont.strip() == "." else cont)
    return "\n".join(out).strip()


def _translations() -> dict[tuple[str, str], str]:
    """(package, Description-md5) -> long English description, from the Translation-en lists."""
    table: dict[tuple[str, str], str] = {}
    for path in _apt_files("Translation-en"):
        for st in _stanzas(_cat(path)):
            f = dict(st)
            if "Package" in f and "Description-en" in f:
                key = (f["Package"][0], f.get("Description-md5", [""])[0])
                table.setdefault(key, _description_text(f["Description-en"]))
    return table


def debian_docs(report: dict[str, object]) -> Iterator[dict[str, str]]:
    """Package descriptions (see the module docstring for where the text comes from)."""
    packages = _apt_files("Packages")
    if not packages:
        print("no apt Packages lists: running apt-get update", file=sys.stderr)
        subprocess.run(["apt-get", "update"], check=True, stdout=subprocess.DEVNULL)
        packages = _apt_files("Packages")
    if not packages:
        raise SystemExit("no /var/lib/apt/lists/*_Packages* even after apt-get update")
    translations = _translations()
    report["packages_files"] = [p.name for p in packages]
    report["translation_entries"] = len(translations)
    seen: set[str] = set()
    n_long_inline = n_long_translation = n_short = n_dup = 0
    for path in packages:
        for st in _stanzas(_cat(path)):
            f = dict(st)
            name = f.get("Package", [""])[0]
            desc = f.get("Description")
            if not name or desc is None:
                continue
            if name in seen:
                n_dup += 1
                continue
            seen.add(name)
            if len(desc) > 1:
                n_long_inline += 1
                text = _description_text(desc)
            else:
                md5 = f.get("Description-md5", [""])[0]
                long = translations.get((name, md5)) or translations.get((name, ""))
                if long:
                    n_long_translation += 1
                    text = long
                else:
                    n_short += 1
                    text = desc[0]
            yield {"id": name, "text": text}
    report["long_from_packages"] = n_long_inline
    report["long_from_translation_en"] = n_long_translation
    report["short_only"] = n_short
    report["duplicate_names_skipped"] = n_dup


# ----------------------------------------------------------------------------- python
def python_paths() -> list[str]:
    """Sorted .py paths of the installed Pythons, one path per real file."""
    found: set[str] = set()
    for pattern in PYTHON_GLOBS:
        found.update(glob.glob(pattern, recursive=True))
    out: list[str] = []
    real_seen: set[str] = set()
    for path in sorted(found):
        if not os.path.isfile(path):
            continue
        real = os.path.realpath(path)
        if real in real_seen:
            continue
        real_seen.add(real)
        out.append(path)
    return out


def module_key(path: str) -> str:
    """The path below ``lib/python3.X/`` (site-/dist-packages prefix removed): same across versions."""
    m = _LIB_RE.search(path)
    rel = m.group(1) if m else path
    for prefix in ("site-packages/", "dist-packages/"):
        if rel.startswith(prefix):
            rel = rel[len(prefix) :]
    return rel


def python_docs(paths: list[str], report: dict[str, object]) -> Iterator[dict[str, str]]:
    """Readable, non-empty, UTF-8 source files of at most MAX_DOC_BYTES."""
    skipped = {"too_large": 0, "not_utf8": 0, "empty": 0, "unreadable": 0}
    for path in paths:
        try:
            if os.path.getsize(path) > MAX_DOC_BYTES:
                skipped["too_large"] += 1
                continue
            with open(path, "rb") as fh:
                raw = fh.read()
        except OSError:
            skipped["unreadable"] += 1
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            skipped["not_utf8"] += 1
            continue
        if not text.strip():
            skipped["empty"] += 1
            continue
        yield {"id": path, "text": text}
    report["skipped"] = skipped


def sample_python(paths: list[str], max_docs: int, seed: int) -> list[str]:
    """Fixed-seed sample of whole modules (all their versions) until max_docs paths; sorted."""
    groups: dict[str, list[str]] = {}
    for p in paths:
        groups.setdefault(module_key(p), []).append(p)
    keys = sorted(groups)
    random.Random(seed).shuffle(keys)
    chosen: list[str] = []
    for k in keys:
        if len(chosen) + len(groups[k]) > max_docs:
            continue
        chosen.extend(groups[k])
        if len(chosen) >= max_docs:
            break
    return sorted(chosen)


# ----------------------------------------------------------------------------- main
def default_out(corpus: str, max_docs: int | None, limit: int | None, seed: int) -> Path:
    name = corpus
    if max_docs:
        name += f"-max{max_docs}-seed{seed}"
    if limit:
        name += f"-limit{limit}"
    return DATA_DIR / f"{name}.jsonl"


def build(
    corpus: str, out: Path, *, max_docs: int | None = None, limit: int | None = None, seed: int = DEFAULT_SEED
) -> dict[str, object]:
    """Write the corpus to ``out`` (atomically) and return facts about it."""
    report: dict[str, object] = {"corpus": corpus, "path": str(out)}
    if corpus == "debian":
        docs: list[dict[str, str]] = list(debian_docs(report))
        docs.sort(key=lambda d: d["id"])
        if max_docs and len(docs) > max_docs:
            docs = sorted(random.Random(seed).sample(docs, max_docs), key=lambda d: d["id"])
    elif corpus == "python":
        paths = python_paths()
        report["paths_found"] = len(paths)
        if max_docs and len(paths) > max_docs:
            paths = sample_python(paths, max_docs, seed)
        docs = list(python_docs(paths, report))
    else:
        raise SystemExit(f"unknown corpus {corpus!r}: choose debian or python")
    if limit:
        docs = docs[:limit]
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    n_bytes = 0
    with open(tmp, "w", encoding="utf-8") as fh:
        for d in docs:
            line = json.dumps(d, ensure_ascii=False)
            n_bytes += len(d["text"].encode("utf-8"))
            fh.write(line + "\n")
    os.replace(tmp, out)
    report["docs"] = len(docs)
    report["text_mb"] = round(n_bytes / 1e6, 2)
    report["file_mb"] = round(out.stat().st_size / 1e6, 2)
    return report


def ensure(
    corpus: str,
    *,
    max_docs: int | None = None,
    limit: int | None = None,
    seed: int = DEFAULT_SEED,
    out: Path | None = None,
    force: bool = False,
) -> Path:
    """The corpus file, built if missing (used by scripts/quality.py)."""
    path = out or default_out(corpus, max_docs, limit, seed)
    if force or not path.exists():
        report = build(corpus, path, max_docs=max_docs, limit=limit, seed=seed)
        print("corpus built: " + json.dumps(report), file=sys.stderr)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus", choices=["debian", "python"], help="which corpus to build")
    ap.add_argument(
        "--max-docs",
        type=int,
        default=None,
        help="cap the corpus with a fixed-seed sample (python: whole modules at a time)",
    )
    ap.add_argument("--limit", type=int, default=None, help="keep only the first N documents (sorted)")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED, help="sampling seed (default %(default)s)")
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output file (default data/<corpus>[-max<N>-seed<S>][-limit<N>].jsonl)",
    )
    ap.add_argument("--force", action="store_true", help="rebuild even if the output file exists")
    args = ap.parse_args(argv)
    path = args.out or default_out(args.corpus, args.max_docs, args.limit, args.seed)
    if path.exists() and not args.force:
        with open(path, encoding="utf-8") as f:
            n = sum(1 for _ in f)
        print(
            json.dumps(
                {
                    "corpus": args.corpus,
                    "path": str(path),
                    "docs": n,
                    "file_mb": round(path.stat().st_size / 1e6, 2),
                    "cached": True,
                }
            )
        )
        return 0
    report = build(args.corpus, path, max_docs=args.max_docs, limit=args.limit, seed=args.seed)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
