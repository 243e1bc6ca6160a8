"""Capabilities: an operator's permission to send records at a time (timestamp tokens).

A :class:`Capability` is held by an operator for one of its outputs. While it is
held, the output's consumers' frontiers cannot pass its time; dropping it (or
downgrading it to a later time) is what lets time advance downstream. Nothing is
sent when a capability changes: the change is counted in the operator's progress
report, which the worker publishes, as one atomic batch, after the operator yields.

A :class:`CapabilityRef` is the time of a batch an operator received. It is valid
only until the operator next yields to the worker; ``retain()`` turns it into a
:class:`Capability` that lasts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, Sequence

from ..errors import CapabilityError

if TYPE_CHECKING:
    from ..progress import TimestampType
    from ..worker import WorkerHandle
    from .bookkeeping import ProgressBooks
    from .recovering import OperatorRecovery

__all__ = ["Capability", "CapabilityRef", "CapabilityOwner"]


class _Output(Protocol):
    def retire(self, cap: Capability) -> None: ...


class CapabilityOwner(Protocol):
    """What a capability uses of its operator (:class:`~aiotimely.dataflow.operator.OperatorRuntime`)."""

    @property
    def name(self) -> str: ...

    @property
    def ttype(self) -> TimestampType[Any, Any]: ...

    @property
    def worker(self) -> WorkerHandle: ...

    @property
    def books(self) -> ProgressBooks: ...

    @property
    def recovery(self) -> OperatorRecovery: ...

    @property
    def outputs(self) -> Sequence[_Output]: ...

    @property
    def done(self) -> bool: ...

    @property
    def epoch(self) -> int: ...

    def describe(self, stage: str | None = None, label: str | None = None) -> str: ...

    def collected(self, output: int, time: Any) -> None: ...

    def reaches(self, input: int, output: int, from_time: Any, to_time: Any) -> bool: ...


def _check_time(op: CapabilityOwner, time: Any, action: str) -> None:
    """Refuse a time that is not of the operator's timestamp type, naming the operator."""
    try:
        op.ttype.check_time(time)
    except (TypeError, ValueError) as e:
        raise CapabilityError(f"{op.describe()}: cannot {action} to {time!r}: {e}") from None


class Capability:
    """Permission to send records at :attr:`time` on one output of an operator.

    Use it with ``output.session(cap)``; ``delayed(t)`` makes another at a later
    time, ``downgrade(t)`` moves this one later, ``drop()`` gives it up. It is a
    (sync or async) context manager that drops it on exit. A capability that is
    garbage-collected while held is dropped, as in Rust's timely.
    """

    __slots__ = ("_time", "_op", "_output", "_live", "__weakref__")

    def __init__(self, op: CapabilityOwner, output: int, time: Any, *, minted: bool = False) -> None:
        self._op = op
        self._output = output
        self._time = time
        self._live = True
        if not minted:
            op.books.hold(output, time, 1)

    @property
    def time(self) -> Any:
        """The time at which this capability lets its operator send."""
        return self._time

    @property
    def output(self) -> int:
        """The output port this capability is for."""
        return self._output

    def _check_live(self, action: str) -> None:
        if not self._live:
            raise CapabilityError(
                f"{self._op.describe()}: cannot {action} a capability at time {self._time!r}: it was already dropped"
            )
        if self._op.done:
            raise CapabilityError(f"{self._op.describe()}: cannot {action} a capability after the operator finished")

    def _check_later(self, time: Any, action: str) -> None:
        _check_time(self._op, time, action)
        if not self._op.ttype.less_equal(self._time, time):
            raise CapabilityError(
                f"{self._op.describe()}: cannot {action} a capability at time {self._time!r} to {time!r}: "
                f"the new time must not be earlier than (or incomparable to) {self._time!r}"
            )

    def delayed(self, time: Any, output: int | None = None) -> Capability:
        """A new capability at ``time`` (not earlier than this one's), for this or another output."""
        self._check_live("delay")
        self._check_later(time, "delay")
        return Capability(self._op, self._output if output is None else output, time)

    def downgrade(self, time: Any) -> None:
        """Move this capability to the later ``time``."""
        op = self._op
        if not self._live or op.done:
            self._check_live("downgrade")
        self._check_later(time, "downgrade")
        if time != self._time:
            output = self._output
            op.outputs[output].retire(self)
            op.books.hold(output, time, 1)
            op.books.hold(output, self._time, -1)
            self._time = time
            recovery = op.recovery
            if recovery.participant is not None:
                recovery.downgraded(time)

    def drop(self) -> None:
        """Give the capability up: the operator no longer holds back its time."""
        op = self._op
        if not self._live or op.done:
            self._check_live("drop")
        op.outputs[self._output].retire(self)
        self._live = False
        op.books.hold(self._output, self._time, -1)

    @property
    def dropped(self) -> bool:
        return not self._live

    def __enter__(self) -> Capability:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live and not self._op.done:
            self.drop()

    async def __aenter__(self) -> Capability:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.__exit__()

    def __del__(self) -> None:
        try:
            if self._live and not self._op.done:
                self._live = False
                op = self._op
                op.worker.call_in_worker_thread(op.collected, self._output, self._time)
        except Exception:  # pragma: no cover - interpreter shutdown
            pass

    def __repr__(self) -> str:
        state = "" if self._live else ", dropped"
        return f"Capability(time={self._time!r}, operator={self._op.name!r}, output={self._output}{state})"


class CapabilityRef:
    """The time of a batch an operator received; valid until the operator next yields.

    ``retain()`` keeps it as a :class:`Capability`; ``delayed(t)`` makes one at a later
    time. It can open an output session directly only if the input reaches that
    output unchanged (the identity summary).
    """

    __slots__ = ("_time", "_op", "_input", "_epoch")

    def __init__(self, op: CapabilityOwner, input: int, time: Any) -> None:
        self._op = op
        self._input = input
        self._time = time
        self._epoch = op.epoch

    @property
    def time(self) -> Any:
        return self._time

    def _check_valid(self) -> None:
        if self._epoch != self._op.epoch:
            raise CapabilityError(
                f"{self._op.describe()}: the time {self._time!r} of a received batch was used after the "
                "operator yielded; call retain() on it before awaiting to keep it"
            )

    def delayed(self, time: Any, output: int = 0) -> Capability:
        """A capability at ``time`` for ``output``: allowed if some path from this input gets there by ``time``."""
        self._check_valid()
        op = self._op
        _check_time(op, time, "delay")
        if not op.reaches(self._input, output, self._time, time):
            raise CapabilityError(
                f"{op.describe()}: a record at time {self._time!r} on input {self._input} cannot justify a "
                f"capability at {time!r} on output {output}"
            )
        return Capability(op, output, time)

    def retain(self, output: int = 0) -> Capability:
        """Keep this time as a :class:`Capability` for ``output`` (output 0 by default)."""
        return self.delayed(self._time, output)

    def __repr__(self) -> str:
        return f"CapabilityRef(time={self._time!r}, operator={self._op.name!r})"
