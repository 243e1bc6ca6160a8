"""Random dataflow graphs for property tests: DAGs, loops through feedback, nested scopes.

A graph is described by plain specs (:class:`ScopeSpec`, :class:`OpSpec`) so that the
same description can be built into aiotimely's subgraphs (:mod:`.driver`) and read by
the brute-force reference (:mod:`.reference`). Generation draws from a
``random.Random`` (hypothesis' ``st.randoms()`` makes it reproducible and shrinkable).

Every cycle passes through a feedback operator whose summary strictly advances time:
an ordinary operator's inputs are fed only by scope inputs, by earlier operators, or
by feedback operators, while a feedback operator's input may be fed from anywhere.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Union

from aiotimely.progress import INT, Product, ProductType, Refinement, Source, Target, TimestampType


@dataclass
class OpSpec:
    name: str
    inputs: int
    outputs: int
    connectivity: list[dict[int, list[Any]]]
    feedback: bool = False


@dataclass
class ScopeSpec:
    name: str
    kind: str  # "root", "region" or "iterative"
    ttype: TimestampType
    inputs: int
    outputs: int
    children: list[Union[OpSpec, "ScopeSpec"]] = field(default_factory=list)
    edges: list[tuple[Source, Target]] = field(default_factory=list)

    def refinement(self, outer: TimestampType) -> Refinement:
        if self.kind == "iterative":
            return Refinement.iterative(outer)
        return Refinement.region(self.ttype)

    def walk(self, path: tuple[int, ...] = (0,)):
        """Yield ``(path, scope)`` for this scope and every nested one."""
        yield path, self
        for c, child in enumerate(self.children, 1):
            if isinstance(child, ScopeSpec):
                yield from child.walk(path + (c,))


def random_time(rng: random.Random, ttype: TimestampType, high: int = 3) -> Any:
    if isinstance(ttype, ProductType):
        return Product(random_time(rng, ttype.outer, high), random_time(rng, ttype.inner, high))
    return rng.randint(0, high)


def random_summary(rng: random.Random, ttype: TimestampType) -> Any:
    if isinstance(ttype, ProductType):
        return Product(random_summary(rng, ttype.outer), random_summary(rng, ttype.inner))
    return rng.choice((0, 0, 0, 1, 2))


def advancing_summary(rng: random.Random, ttype: TimestampType) -> Any:
    """A summary that strictly advances every time (what a feedback edge carries)."""
    if isinstance(ttype, ProductType):
        if rng.random() < 0.8:  # the usual loop: inner coordinate + k
            return Product(ttype.outer.identity, advancing_summary(rng, ttype.inner))
        return Product(advancing_summary(rng, ttype.outer), random_summary(rng, ttype.inner))
    return rng.choice((1, 1, 2))


def random_op(rng: random.Random, ttype: TimestampType, name: str) -> OpSpec:
    inputs, outputs = rng.choice(((1, 1), (1, 1), (2, 1), (1, 2), (0, 1), (1, 0), (2, 2)))
    connectivity = []
    for _ in range(inputs):
        row: dict[int, list[Any]] = {}
        for o in range(outputs):
            if rng.random() < 0.8:
                row[o] = [ttype.identity] if rng.random() < 0.6 else [
                    random_summary(rng, ttype) for _ in range(rng.randint(1, 2))
                ]
        connectivity.append(row)
    return OpSpec(name, inputs, outputs, connectivity)


def random_scope(
    rng: random.Random,
    *,
    ttype: TimestampType = INT,
    kind: str = "root",
    inputs: int = 0,
    outputs: int = 0,
    depth: int = 2,
    max_children: int = 6,
    name: str = "root",
) -> ScopeSpec:
    scope = ScopeSpec(name, kind, ttype, inputs, outputs)
    n = rng.randint(1, max_children)
    for c in range(1, n + 1):
        roll = rng.random()
        if depth > 0 and roll < 0.2:
            sub_kind = rng.choice(("iterative", "iterative", "region"))
            sub_ttype = ProductType(ttype, INT) if sub_kind == "iterative" else ttype
            scope.children.append(random_scope(
                rng, ttype=sub_ttype, kind=sub_kind, inputs=rng.randint(0, 2), outputs=rng.randint(0, 2),
                depth=depth - 1, max_children=max(2, max_children - 2), name=f"{name}.{c}",
            ))
        elif roll < 0.4:
            scope.children.append(OpSpec(f"{name}.{c}:feedback", 1, 1,
                                         [{0: [advancing_summary(rng, ttype)]}], feedback=True))
        else:
            scope.children.append(random_op(rng, ttype, f"{name}.{c}"))

    def sources(upto: int | None) -> list[Source]:
        found = [Source(0, i) for i in range(inputs)]
        for c, child in enumerate(scope.children, 1):
            is_feedback = isinstance(child, OpSpec) and child.feedback
            if upto is None or c < upto or is_feedback:
                found.extend(Source(c, o) for o in range(child.outputs))
        return found

    for c, child in enumerate(scope.children, 1):
        candidates = sources(None if isinstance(child, OpSpec) and child.feedback else c)
        for i in range(child.inputs):
            if candidates and rng.random() < 0.95:
                scope.edges.append((rng.choice(candidates), Target(c, i)))
    everything = sources(None)
    for o in range(outputs):
        if everything:
            scope.edges.append((rng.choice(everything), Target(0, o)))
    return scope


def loop_graph(summary: int = 1) -> ScopeSpec:
    """input -> concat <-> feedback(+summary), concat -> sink: the smallest loop."""
    scope = ScopeSpec("loop", "root", INT, 0, 0)
    scope.children = [
        OpSpec("input", 0, 1, []),
        OpSpec("concat", 2, 1, [{0: [0]}, {0: [0]}]),
        OpSpec("feedback", 1, 1, [{0: [summary]}], feedback=True),
        OpSpec("sink", 1, 0, [{}]),
    ]
    scope.edges = [
        (Source(1, 0), Target(2, 0)),
        (Source(2, 0), Target(3, 0)),
        (Source(3, 0), Target(2, 1)),
        (Source(2, 0), Target(4, 0)),
    ]
    return scope
