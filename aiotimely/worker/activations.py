"""Which operators and scopes asked to run: one set per worker, by path (timely's ``Activations``).

A path names an operator or a nested scope: ``(dataflow, child, grandchild, ...)``.
Activating a path marks each scope on the way down, so the worker runs the
dataflow, the dataflow's root scope runs the child, and so on: a scope only looks
at the children that asked. It is sans-IO: ``wake`` is called after each
activation, and the worker turns that into resuming its scheduler task.
"""

from __future__ import annotations

from typing import Callable

__all__ = ["Activations"]

Path = tuple[int, ...]


class Activations:
    """The pending activations of one worker: dataflows at the top, then each scope's children."""

    __slots__ = ("_roots", "_scopes", "_wake", "_later")

    def __init__(self, wake: Callable[[], None] = lambda: None) -> None:
        self._roots: set[int] = set()
        self._scopes: dict[int, dict[Path, set[int]]] = {}
        self._wake = wake
        self._later: list[Path] = []

    def children(self, scope: Path) -> set[int]:
        """The live set of ``scope``'s children that asked to run; the scope takes from it as it runs them."""
        per_dataflow = self._scopes.setdefault(scope[0], {})
        pending = per_dataflow.get(scope)
        if pending is None:
            pending = per_dataflow[scope] = set()
        return pending

    def activate(self, path: Path) -> None:
        """Ask for the operator or scope at ``path`` (and the scopes around it) to run."""
        self._roots.add(path[0])
        scopes = self._scopes.get(path[0])
        if scopes is not None:
            for depth in range(1, len(path)):
                pending = scopes.get(path[:depth])
                if pending is None:
                    break
                pending.add(path[depth])
        self._wake()

    def activate_later(self, path: Path) -> None:
        """Ask for ``path`` to run in the next round, not again in this one (an operator that yielded to let
        the others run: what it sent is handled, and frontiers move, before it runs again)."""
        self._later.append(path)
        self._wake()

    def activator(self, path: Path) -> Callable[[], None]:
        """A function that activates ``path``: cheaper than :meth:`activate` for one path used often."""
        chain = tuple([(self.children(path[:depth]), path[depth]) for depth in range(1, len(path))])
        return _Activator(self._roots, path[0], chain, self._wake)

    def take_dataflows(self) -> list[int]:
        """The dataflows that asked to run since the last call, ascending."""
        if self._later:
            later, self._later = self._later, []
            for path in later:
                self.activate(path)
        roots = sorted(self._roots)
        self._roots.clear()
        return roots

    def forget(self, dataflow: int) -> None:
        """The dataflow is complete: drop what is pending in it."""
        self._roots.discard(dataflow)
        self._scopes.pop(dataflow, None)

    def __bool__(self) -> bool:
        """True if some dataflow asked to run."""
        return bool(self._roots) or bool(self._later)


class _Activator:
    """:meth:`Activations.activate` for one path, its scopes' sets looked up once."""

    __slots__ = ("_roots", "_dataflow", "_chain", "_wake")

    def __init__(self, roots: set[int], dataflow: int, chain: tuple[tuple[set[int], int], ...],
                 wake: Callable[[], None]) -> None:
        self._roots = roots
        self._dataflow = dataflow
        self._chain = chain
        self._wake = wake

    def __call__(self) -> None:
        self._roots.add(self._dataflow)
        for pending, index in self._chain:
            pending.add(index)
        self._wake()
