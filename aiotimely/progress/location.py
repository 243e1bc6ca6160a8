"""Locations in a scope's dataflow graph: operator outputs (sources) and inputs (targets).

Inside a scope, node 0 is the scope's own boundary, seen from inside with its
roles swapped: ``Source(0, i)`` is where the scope's input ``i`` enters the inner
graph, and ``Target(0, o)`` is where records leave through the scope's output
``o``. Children are nodes ``1..n``.
"""

from __future__ import annotations

from typing import NamedTuple, Union, final

__all__ = ["Source", "Target", "Location"]


@final  # compared by exact type: `type(loc) is Target` tells a Source from a Target
class Source(NamedTuple):
    """An operator output port: where capabilities are held and records are produced."""

    node: int
    port: int

    def __repr__(self) -> str:
        return f"Source({self.node}, {self.port})"

    # Distinct from a Target (Source) with the same numbers, unlike plain tuples.
    def __eq__(self, other: object) -> bool:
        return type(other) is Source and tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash((0, self[0], self[1]))


@final
class Target(NamedTuple):
    """An operator input port: where records in flight wait to be consumed."""

    node: int
    port: int

    def __repr__(self) -> str:
        return f"Target({self.node}, {self.port})"

    # Distinct from a Target (Source) with the same numbers, unlike plain tuples.
    def __eq__(self, other: object) -> bool:
        return type(other) is Target and tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash((1, self[0], self[1]))


Location = Union[Source, Target]
