#!/usr/bin/env python3
"""Real market baskets: one per Debian binary package, its items the packages named in ``Depends:``.

Reads the apt lists (``/var/lib/apt/lists/*_Packages.lz4``, running ``apt-get update`` first if
there are none) through ``/usr/lib/apt/apt-helper cat-file`` and writes one basket per line,
items separated by spaces, to ``data/debian_depends.txt`` (``data/`` is git-ignored).

Choices (documented, and switchable):
- version constraints ``(>= 2.34)`` and architecture qualifiers ``:any`` are stripped;
- an alternative ``a | b`` keeps its first package ``a`` (``--alternatives first``, the default:
  the one apt installs when nothing else decides), or all of them (``all``), or the whole group
  as one item ``a|b`` (``group``);
- a package named twice (two constraints on one dependency) counts once; packages without a
  ``Depends:`` field make no basket; when a package appears in several lists, its first stanza wins.

    python scripts/debian_baskets.py [--alternatives first|all|group] [--out data/debian_depends.txt]
"""

from __future__ import annotations

import argparse
import glob
import re
import subprocess
import sys
from pathlib import Path

LISTS = "/var/lib/apt/lists/*_Packages.lz4"
HELPER = "/usr/lib/apt/apt-helper"
_CONSTRAINT = re.compile(r"\([^)]*\)|\[[^\]]*\]|<[^>]*>")


def package_lists() -> list[str]:
    """The apt list files, fetching them with ``apt-get update`` when there are none."""
    files = sorted(glob.glob(LISTS))
    if not files:
        print("no apt lists found: running apt-get update", file=sys.stderr)
        subprocess.run(["apt-get", "update"], check=True, stdout=subprocess.DEVNULL)
        files = sorted(glob.glob(LISTS))
    if not files:
        sys.exit(f"no {LISTS} even after apt-get update")
    return files


def stanzas(text: str) -> list[dict[str, str]]:
    """Parse deb822 stanzas (only the fields we need, continuation lines joined)."""
    out: list[dict[str, str]] = []
    for block in text.split("\n\n"):
        fields: dict[str, str] = {}
        key = ""
        for line in block.split("\n"):
            if line[:1] in (" ", "\t"):
                if key:
                    fields[key] += " " + line.strip()
                continue
            key, _, value = line.partition(":")
            fields[key] = value.strip()
        if "Package" in fields:
            out.append(fields)
    return out


def dependencies(field: str, alternatives: str) -> list[str]:
    """Package names of a ``Depends:`` value, per the alternatives choice."""
    items: list[str] = []
    for clause in _CONSTRAINT.sub("", field).split(","):
        names = [a.strip().split(":")[0] for a in clause.split("|")]
        names = [n for n in names if n]
        if not names:
            continue
        if alternatives == "first":
            items.append(names[0])
        elif alternatives == "all":
            items.extend(names)
        else:
            items.append("|".join(names))
    return list(dict.fromkeys(items))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--alternatives", choices=["first", "all", "group"], default="first")
    ap.add_argument("--out", default="data/debian_depends.txt")
    args = ap.parse_args()
    seen: set[str] = set()
    baskets: list[list[str]] = []
    for path in package_lists():
        text = subprocess.run([HELPER, "cat-file", path], check=True, capture_output=True).stdout.decode()
        for st in stanzas(text):
            name = st["Package"]
            if name in seen or "Depends" not in st:
                continue
            seen.add(name)
            deps = dependencies(st["Depends"], args.alternatives)
            if deps:
                baskets.append(deps)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(" ".join(b) + "\n" for b in baskets))
    n_items = sum(len(b) for b in baskets)
    print(
        f"{len(baskets)} baskets, {n_items} items ({n_items / max(1, len(baskets)):.1f} per basket) -> {out}"
    )


if __name__ == "__main__":
    main()
