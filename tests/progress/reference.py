"""A brute-force reference for frontiers: explore every path from every positive pointstamp.

Independent of the tracker: no counts of frontier changes, no summaries to scope
outputs, no hierarchy of trackers. The nested graph is flattened into locations
``(scope_path, Location)``; a time moves along edges unchanged, across an ordinary
operator by each of its internal summaries, into a nested scope by ``to_inner`` and
out of it by ``to_outer``. The frontier at a location is the set of minimal times
reachable there from a positive pointstamp (Naiad's could-result-in).

The search keeps, per location, the antichain of times found so far and explores
onward from a time only if it was not already dominated there; since every step is
monotone, a dominated time can reach nothing that is not dominated too. (Plain
simple-path enumeration is not enough across nested scopes: leaving, going round an
outer loop and re-entering resets the inner coordinate, giving a time incomparable
with the first visit.)
"""

from __future__ import annotations

from collections import deque
from typing import Any, Iterable

from aiotimely.progress import Antichain, Location, Source, Target

from .graphs import OpSpec, ScopeSpec

Key = tuple[tuple[int, ...], Location]


class FlatGraph:
    """The nested spec as one graph of ``(scope_path, location)`` keys."""

    def __init__(self, root: ScopeSpec, root_path: tuple[int, ...] = (0,)) -> None:
        self.scopes: dict[tuple[int, ...], ScopeSpec] = {}
        self.refinements: dict[tuple[int, ...], Any] = {}
        for path, scope in root.walk(root_path):
            self.scopes[path] = scope
            if len(path) > len(root_path):
                parent = self.scopes[path[:-1]]
                self.refinements[path] = scope.refinement(parent.ttype)
        self.edges: dict[tuple[tuple[int, ...], Source], list[Target]] = {}
        for path, scope in self.scopes.items():
            for source, target in scope.edges:
                self.edges.setdefault((path, source), []).append(target)
        self.root_path = root_path

    def keys(self) -> Iterable[Key]:
        for path, scope in self.scopes.items():
            shapes = [(scope.outputs, scope.inputs)] + [(c.inputs, c.outputs) for c in scope.children]
            for node, (inputs, outputs) in enumerate(shapes):
                for p in range(inputs):
                    yield path, Target(node, p)
                for p in range(outputs):
                    yield path, Source(node, p)

    def successors(self, key: Key, time: Any) -> list[tuple[Key, Any]]:
        path, loc = key
        scope = self.scopes[path]
        out: list[tuple[Key, Any]] = []
        if type(loc) is Source:
            for target in self.edges.get((path, loc), ()):
                out.append(((path, target), time))
        elif loc.node == 0:
            if path != self.root_path:  # leave the scope
                out.append(((path[:-1], Source(path[-1], loc.port)), self.refinements[path].to_outer(time)))
        else:
            child = scope.children[loc.node - 1]
            if isinstance(child, ScopeSpec):  # enter the nested scope
                inner = path + (loc.node,)
                out.append(((inner, Source(0, loc.port)), self.refinements[inner].to_inner(time)))
            else:
                assert isinstance(child, OpSpec)
                for o, summaries in child.connectivity[loc.port].items():
                    for s in summaries:
                        t2 = scope.ttype.results_in(s, time)
                        if t2 is not None:
                            out.append(((path, Source(loc.node, o)), t2))
        return out

    def frontiers(self, positive: Iterable[tuple[Key, Any]]) -> dict[Key, Antichain]:
        """Per location, the minimal times that the given pointstamps could result in there."""
        found: dict[Key, Antichain] = {}
        work = deque(positive)
        steps = 0
        while work:
            steps += 1
            assert steps < 1_000_000, "reference search does not terminate"
            key, time = work.popleft()
            chain = found.get(key)
            if chain is None:
                chain = found[key] = Antichain(less_equal=self.scopes[key[0]].ttype.less_equal)
            if chain.insert(time):
                work.extend(self.successors(key, time))
        return found
