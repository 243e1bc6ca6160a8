"""How one operator takes part in its dataflow's snapshots: every snapshot hook of an operator, in one object.

An operator of a recoverable dataflow (one built with a state store) keeps values
across a crash (:meth:`OperatorRecovery.keep`), says how far its kept state has
applied its input (:meth:`~OperatorRecovery.cut`), and, as a source that keeps its
position, what times it sent at (:meth:`~OperatorRecovery.sent`,
:meth:`~OperatorRecovery.downgraded`). All of it goes to its
:class:`~aiotimely.dataflow.state.Participant` in the worker's
:class:`~aiotimely.dataflow.state.Snapshotter`, joined the first time it keeps state;
in a dataflow without recovery every hook does nothing (and ``keep`` only makes the
initial value). The operator's runtime, its ports and its capabilities reach
snapshots only through this object.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence, TypeVar

from .roles import Member, ParticipantRole, SnapshotterRole

if TYPE_CHECKING:
    from ..progress import TimestampType

__all__ = ["OperatorRecovery", "Recoverable"]

T = TypeVar("T")


class _Tracked(Protocol):
    tracked: bool


class Recoverable(Member, Protocol):
    """What the recovery hooks use of their operator (:class:`~aiotimely.dataflow.operator.OperatorRuntime`)."""

    @property
    def snapshotter(self) -> SnapshotterRole | None: ...

    @property
    def ttype(self) -> TimestampType[Any, Any]: ...

    @property
    def inputs(self) -> Sequence[object]: ...

    @property
    def outputs(self) -> Sequence[_Tracked]: ...


class OperatorRecovery:
    """One operator's share in its dataflow's snapshots (see the module)."""

    __slots__ = ("_op", "participant")

    def __init__(self, op: Recoverable) -> None:
        self._op = op
        self.participant: ParticipantRole | None = None
        """The operator's participant in snapshots, once it keeps state (and the dataflow is recoverable)."""

    def keep(self, name: str, initial: Callable[[], T], *, keyed: bool = False) -> T:
        """A value the operator keeps across times: saved at every snapshot of a recoverable dataflow and
        restored on resume (else just ``initial()``). See :mod:`aiotimely.dataflow.state`."""
        op = self._op
        snapshotter = op.snapshotter
        if snapshotter is None:
            return initial()
        if self.participant is None:
            self.participant = snapshotter.join(op)
            if not op.inputs:
                for out in op.outputs:
                    out.tracked = True
        return self.participant.keep(name, initial, keyed=keyed)

    def keep_alongside(self, name: str, value: Callable[[], Any]) -> None:
        """Part of the operator's snapshots when it keeps state: ``value()`` as ``name`` (per worker, as
        :meth:`restored_alongside` gives it back). A notificator keeps its pending times so."""
        snapshotter = self._op.snapshotter
        if snapshotter is not None:
            snapshotter.keep_alongside(self._op, name, value)

    def restored_alongside(self, name: str) -> list[Any]:
        """What :meth:`keep_alongside` kept as ``name`` in the snapshot resumed from: this worker's, or every
        worker's together when the number of workers changed."""
        snapshotter = self._op.snapshotter
        if snapshotter is None:
            return []
        return snapshotter.restored_alongside(self._op, name)

    def resume_time(self) -> Any:
        """The time a resumed dataflow restarts at (its snapshot's): a source with kept state starts sending
        there. The minimum time when the dataflow starts afresh."""
        op = self._op
        snapshotter = op.snapshotter
        return snapshotter.start_time if snapshotter is not None else op.ttype.minimum

    def sent(self, time: Any) -> None:
        """A source keeping its position sent at ``time``."""
        assert self.participant is not None
        self.participant.sent(time)

    def downgraded(self, time: Any) -> None:
        """A capability moved to ``time``. A source keeping its position (a participant with no inputs) sent
        everything so far before ``time`` and sends nothing before it from now: its position stands for every
        snapshot up to ``time``."""
        participant = self.participant
        if participant is not None and not self._op.inputs:
            participant.cut_source(time)

    def cut(self, upto: Any) -> None:
        """Every time before ``upto`` is applied, none after: the state stands for the snapshots up to it."""
        if self.participant is not None:
            self.participant.cut(upto)

    def finish(self) -> None:
        """Nothing more will change the kept state: it stands for every later snapshot."""
        if self.participant is not None:
            self.participant.finish()
