"""The house review, as numbers: what issue 32 measures before and after a renovation of the dataflow floor.

    python tools/review.py [PACKAGE_DIR]      (default: aiotimely/ next to this folder)

It prints the largest functions and classes, the reads and writes of other objects' private fields
("reach-throughs": ``other._field``, not ``self._field``), the import knots (strongly connected groups of
modules; the type checker's, with ``TYPE_CHECKING`` imports, and the interpreter's, without), and the modules
a record crosses from ``InputHandle.send`` to a probe seeing its time complete (traced on a tiny dataflow,
only when reviewing the package this script sits beside). Standard library only.
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def modules(package: Path) -> dict[str, Path]:
    """Every module of the package, by dotted name."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def largest(trees: dict[str, ast.Module], kind: type, most: int = 5) -> list[tuple[int, str]]:
    sizes = []
    for name, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, kind):
                assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                sizes.append((size, f"{name}.{node.name}"))
    return sorted(sizes, reverse=True)[:most]


def class_methods(trees: dict[str, ast.Module], most: int = 5) -> list[tuple[int, str]]:
    counts = []
    for name, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                n = sum(isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)) for b in node.body)
                counts.append((n, f"{name}.{node.name}"))
    return sorted(counts, reverse=True)[:most]


def reach_throughs(trees: dict[str, ast.Module]) -> Counter[str]:
    """Per module, the ``x._field`` where ``x`` is not ``self``/``cls`` and ``_field`` is not a dunder, nor a
    private name of another module (``module._name`` counts: it is reaching in too)."""
    found: Counter[str] = Counter()
    for name, tree in trees.items():
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
                found[name] += 1
    return found


def imports(name: str, tree: ast.Module, known: set[str], typing_too: bool) -> set[str]:
    """The package's modules ``name`` imports (with or without those imported only for type checking)."""
    package = name if name in known and any(k.startswith(name + ".") for k in known) else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(body: list[ast.stmt], typing_only: bool) -> None:
        for node in body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                if typing_too:
                    visit(node.body, True)
                continue
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    up = parts[: len(parts) - (node.level - 1)] if node.level > 1 else parts
                    base = ".".join(up + ([base] if base else []))
                for alias in node.names:
                    target = f"{base}.{alias.name}"
                    found.add(target if target in known else base)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)

    visit(tree.body, False)
    return {m for m in found if m in known and m != name}


def knots(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    groups: list[list[str]] = []
    sys.setrecursionlimit(10000)

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
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in graph:
        if v not in index:
            visit(v)
    return sorted(groups, key=len, reverse=True)


def record_walk() -> list[str]:
    """The package's modules whose functions run from ``InputHandle.send`` to the probe seeing the time complete,
    in order of first call."""
    import asyncio

    sys.path.insert(0, str(ROOT))
    import aiotimely as at

    seen: dict[str, None] = {}

    def profile(frame, event, arg):  # type: ignore[no-untyped-def]
        if event == "call":
            module = frame.f_globals.get("__name__", "")
            if module.startswith("aiotimely"):
                seen.setdefault(module, None)

    async def main() -> None:
        async with at.Worker() as worker:
            inp: at.InputHandle[int] = at.InputHandle()
            probe = worker.dataflow(lambda s: inp.to_stream(s).map(lambda x: x + 1).exchange(lambda x: x)
                                    .filter(lambda x: x > 0).probe(), name="walk")
            await worker.step()
            sys.setprofile(profile)
            inp.send(1)
            inp.advance_to(1)
            await worker.step_while(lambda: probe.less_than(1))
            sys.setprofile(None)
            inp.close()

    asyncio.run(main())
    return list(seen)


def main(argv: list[str]) -> None:
    package = Path(argv[0]) if argv else ROOT / "aiotimely"
    found = modules(package)
    trees = {name: ast.parse(path.read_text()) for name, path in found.items()}
    lines = sum(len(path.read_text().splitlines()) for path in found.values())
    print(f"{package}: {len(found)} modules, {lines} lines")
    print("largest functions:", ", ".join(f"{n} ({s})" for s, n in
                                         largest(trees, (ast.FunctionDef, ast.AsyncFunctionDef))))  # type: ignore
    print("largest classes (lines):", ", ".join(f"{n} ({s})" for s, n in largest(trees, ast.ClassDef)))
    print("largest classes (methods):", ", ".join(f"{n} ({s})" for s, n in class_methods(trees)))
    reach = reach_throughs(trees)
    print(f"private reach-throughs: {sum(reach.values())};", ", ".join(f"{m} {n}" for m, n in reach.most_common(6)))
    for typing_too, what in ((True, "type checker"), (False, "interpreter")):
        graph = {name: imports(name, tree, set(found), typing_too) for name, tree in trees.items()}
        groups = knots(graph)
        sizes = [len(g) for g in groups]
        print(f"import knots ({what}): {sizes or 'none'}; largest: {', '.join(groups[0]) if groups else '-'}")
    if package.resolve() == (ROOT / "aiotimely").resolve():
        walk = record_walk()
        print(f"a record's walk, send to probe: {len(walk)} modules: {' > '.join(m[10:] for m in walk)}")


if __name__ == "__main__":
    main(sys.argv[1:])
