"""`python -m bench.rooms [checkout]`: the package-level shape of the code (docs/architecture.md).

A room is a package (a folder of sundry/); an arrow is one room importing another (counted
once per pair). A knot is a set of rooms that import each other in a cycle; inside a knot
some arrows must run back up whatever order the rooms are read in, and this prints the fewest
that must (a minimum feedback arc set, exact: dynamic programming over the knot's subsets).
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path


def _modules(root: Path) -> dict[str, Path]:
    out = {}
    for path in root.rglob("*.py"):
        if "migrations" in path.parts:
            continue
        parts = path.relative_to(root.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def arrows(root: Path) -> tuple[list[str], dict[tuple[str, str], int]]:
    modules = _modules(root)

    def room(module: str) -> str:
        return module if modules[module].name == "__init__.py" else module.rpartition(".")[0]

    edges: dict[tuple[str, str], int] = defaultdict(int)
    for module, path in modules.items():
        package = room(module)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                    base = f"{parent}.{base}" if base else parent
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            else:
                continue
            for target in targets:
                if not target.startswith("sundry"):
                    continue
                while target not in modules and "." in target:
                    target = target.rpartition(".")[0]
                if target in modules and room(target) != package:
                    edges[(package, room(target))] += 1
    return sorted({room(m) for m in modules}), dict(edges)


def knots(rooms: list[str], edges: dict) -> list[list[str]]:
    """Strongly connected sets of more than one room (Tarjan)."""
    graph = defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for r in rooms:
        if r not in index:
            visit(r)
    return found


def fewest_back_up(knot: list[str], edges: dict) -> int:
    at = {r: i for i, r in enumerate(knot)}
    importers = [0] * len(knot)  # bit i of importers[j]: room i imports room j
    for a, b in edges:
        if a in at and b in at:
            importers[at[b]] |= 1 << at[a]
    best = [len(edges) + 1] * (1 << len(knot))
    best[0] = 0
    for placed in range(1 << len(knot)):  # `placed`: the lowest rooms so far; the next one goes above them
        for v in range(len(knot)):
            if not placed >> v & 1:
                cost = best[placed] + bin(importers[v] & placed).count("1")
                best[placed | 1 << v] = min(best[placed | 1 << v], cost)
    return best[-1]


def main() -> None:
    checkout = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[1])
    rooms, edges = arrows(checkout / "sundry")
    found = knots(rooms, edges)
    print(f"rooms {len(rooms)}, arrows {len(edges)}, rooms in knots {sum(len(k) for k in found)}")
    print(f"fewest arrows back up under any order: {sum(fewest_back_up(k, edges) for k in found)}")
    for knot in found:
        print(f"  knot of {len(knot)}: {' '.join(knot)}")


if __name__ == "__main__":
    main()
