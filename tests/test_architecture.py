"""The package's shape: its layers, its public names and their types.

Layers and cycles are checked by import-linter (contracts in pyproject.toml,
following DESIGN.md's order); the public names as trio checks its own (`test_exports`):
every package's ``__all__`` lists exactly what it offers, and everything a user can
call carries type annotations, as ``py.typed`` promises.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "aiotimely"
PACKAGES = ["aiotimely", "aiotimely.progress", "aiotimely.comm", "aiotimely.worker", "aiotimely.dataflow",
            "aiotimely.connectors", "aiotimely.testing"]


def test_imports_follow_the_layers_and_have_no_cycles():
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 kept, 0 broken" in done.stdout


def test_the_package_imports_nothing_from_the_repository_around_it():
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            for name in names:
                assert name.split(".")[0] not in ("benchmarks", "tests", "examples"), f"{path}: imports {name}"


@pytest.mark.parametrize("name", PACKAGES)
def test_all_lists_exactly_the_public_names(name):
    module = importlib.import_module(name)
    offered = {n for n, value in vars(module).items() if not n.startswith("_") and not inspect.ismodule(value)}
    assert sorted(module.__all__) == sorted(offered)
    for n in module.__all__:
        assert getattr(module, n) is not None


def _missing_annotations(fn: object, where: str) -> list[str]:
    try:
        signature = inspect.signature(fn)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return []
    missing = [f"{where}({p.name})" for p in signature.parameters.values()
               if p.name not in ("self", "cls") and p.annotation is inspect.Parameter.empty]
    if signature.return_annotation is inspect.Signature.empty and not where.endswith("__init__"):
        missing.append(f"{where} -> ?")
    return missing


def _ours(obj: object) -> bool:
    return getattr(obj, "__module__", "").startswith("aiotimely")


@pytest.mark.parametrize("name", PACKAGES)
def test_every_public_function_and_method_is_typed(name):
    module = importlib.import_module(name)
    missing: list[str] = []
    for n in module.__all__:
        value = getattr(module, n)
        if inspect.isfunction(value) and _ours(value):
            missing += _missing_annotations(value, f"{name}.{n}")
        elif inspect.isclass(value) and _ours(value):
            for attr, member in vars(value).items():
                if attr.startswith("_") and attr not in ("__init__", "__call__", "__aenter__", "__aexit__"):
                    continue
                if isinstance(member, property):
                    member = member.fget
                elif isinstance(member, (staticmethod, classmethod)):
                    member = member.__func__
                if inspect.isfunction(member) and _ours(member):
                    missing += _missing_annotations(member, f"{name}.{n}.{attr}")
    assert missing == []


def test_the_package_says_it_is_typed():
    assert (PACKAGE / "py.typed").exists()


def test_typed_program_runs():
    """``tests/typed_program.py`` is what mypy checks from a user's side (CI runs mypy on it); it must also run."""
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "typed_program.py")], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and done.stdout == "ok\n", done.stdout + done.stderr
