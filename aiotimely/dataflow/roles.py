"""The roles the upper modules of the dataflow layer play for the lower ones, as protocols.

A lower module (an operator's recovery hooks, its ports, its capabilities, a scope) names what it uses of
an object built above it by one of these protocols, typed with lower types only, instead of importing the
upper module: the dataflow layer's modules then import each other in one direction (see
``docs/architecture.md``). What is here imports nothing of the dataflow layer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Protocol, TypeVar

if TYPE_CHECKING:
    from ..worker import WorkerHandle

__all__ = ["Restored", "Member", "ParticipantRole", "SnapshotterRole"]

T = TypeVar("T")


@dataclass
class Restored:
    """What a resumed dataflow starts from: snapshot ``snapshot``, written by a run of ``peers`` workers."""

    snapshot: int
    peers: int
    shape: str
    """The fingerprint (:func:`~aiotimely.dataflow.state.shape_of`) of the dataflow that wrote it."""
    where: str
    """Where it was found, in words (for errors)."""
    pieces: list[dict[str, bytes]] = field(default_factory=list)
    """Per worker of that run: each operator's pieces (by participant key)."""


class Member(Protocol):
    """An operator as its dataflow's snapshots know it (:class:`~aiotimely.dataflow.operator.OperatorRuntime`)."""

    @property
    def name(self) -> str: ...

    @property
    def path(self) -> tuple[int, ...]: ...

    @property
    def worker(self) -> WorkerHandle: ...

    def describe(self, stage: str | None = None, label: str | None = None) -> str: ...


class ParticipantRole(Protocol):
    """One operator's share in its worker's snapshots (:class:`~aiotimely.dataflow.state.Participant`)."""

    manual: bool
    """The operator reports its pieces itself (:meth:`report`)."""

    @property
    def through(self) -> int: ...

    @property
    def finished(self) -> bool: ...

    def keep(self, name: str, initial: Callable[[], T], *, keyed: bool) -> T: ...

    def cut(self, upto: int) -> None: ...

    def sent(self, time: Any) -> None: ...

    def cut_source(self, upto: int) -> None: ...

    def finish(self) -> None: ...

    def report(self, lo: int, hi: int | None, data: bytes) -> None: ...


class SnapshotterRole(Protocol):
    """A recoverable dataflow's snapshots on one worker (:class:`~aiotimely.dataflow.state.Snapshotter`)."""

    @property
    def restored(self) -> Restored | None: ...

    @property
    def every(self) -> int: ...

    @property
    def start(self) -> int: ...

    @property
    def complete(self) -> int: ...

    @property
    def start_time(self) -> int: ...

    def join(self, op: Member) -> ParticipantRole: ...

    def keep_alongside(self, op: Member, name: str, value: Callable[[], Any]) -> None: ...

    def restored_alongside(self, op: Member, name: str) -> list[Any]: ...

    async def wait_complete(self, snapshot: int) -> None: ...
