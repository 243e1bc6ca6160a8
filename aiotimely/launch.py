"""Starting processes of a computation on this machine: the build function named on a command line, and free
loopback ports for the processes to listen on (shared by ``aiotimely run`` and :mod:`aiotimely.testing`)."""

from __future__ import annotations

import importlib.util
import os
import pkgutil
import socket
import sys
from pathlib import Path
from typing import Any, Callable

__all__ = ["free_ports", "load_target"]


def load_target(target: str, who: str = "aiotimely") -> Callable[..., Any]:
    """The function named by ``module:function`` or ``path/to/file.py:function``; a ``SystemExit`` saying what
    is wrong (prefixed by ``who``) if there is none."""
    where, sep, name = target.rpartition(":")
    if not sep or not where or not name:
        raise SystemExit(f"{who}: {target!r} is not module:function or file.py:function")
    if where.endswith(".py"):
        path = Path(where).resolve()
        spec = importlib.util.spec_from_file_location(path.stem, path)
        if spec is None or spec.loader is None:
            raise SystemExit(f"{who}: cannot load {where}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = module  # so that what it defines can be pickled by name
        sys.path.insert(0, str(path.parent))
        spec.loader.exec_module(module)
        try:
            fn: Callable[..., Any] = getattr(module, name)
        except AttributeError:
            raise SystemExit(f"{who}: {where} has no {name!r}") from None
        return fn
    sys.path.insert(0, os.getcwd())
    try:
        found: Callable[..., Any] = pkgutil.resolve_name(target)
    except (ImportError, AttributeError, ValueError) as e:
        raise SystemExit(f"{who}: cannot find {target!r}: {e}") from None
    return found


def free_ports(n: int) -> list[int]:
    """``n`` distinct loopback ports free right now (each bound once, then released)."""
    sockets = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()
