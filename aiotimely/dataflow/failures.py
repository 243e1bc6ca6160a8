"""The per-record error policy: what a record whose function raises does to its operator.

``errors="raise"`` (the default) fails the dataflow at the first such record, located.
``"skip"`` drops the record, counts it (``OperatorStatistics.skipped``, the metric
``aiotimely_operator_records_skipped``) and logs it: the first with its traceback, then
a count at most every :data:`LOG_EVERY` seconds. ``"dead_letter"`` counts and logs it
the same way and sends a :class:`DeadLetter` at the record's time on the scope's
dead-letter stream (:meth:`~aiotimely.dataflow.scope.Scope.dead_letters`), which the
user routes to a sink: a dead letter is a record like any other, so its progress is
tracked, and snapshots and restarts treat it as they treat every record.

The policy is given per operator (``stream.map(f, errors="skip")``) or per dataflow
(``worker.dataflow(build, errors="skip")``: the default of every operator that takes
one). A record is all or nothing: a ``flat_map`` whose function fails sends none of
that record's results.
"""

from __future__ import annotations

import logging
import time as _time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Generic, Iterator, Literal, Protocol, TypeVar

from ..comm.codec import register_type
from ..errors import GraphError
from ..progress import Source
from .channels import Pusher, Tee, push_to_all

if TYPE_CHECKING:
    from .ports import OutputPort

__all__ = ["ErrorPolicy", "DeadLetter", "RecordFailures", "DeadLetterOutput", "DeadLetterStreams", "check_policy",
           "guard", "Apply"]

log = logging.getLogger("aiotimely")

ErrorPolicy = Literal["raise", "skip", "dead_letter"]
POLICIES: tuple[ErrorPolicy, ...] = ("raise", "skip", "dead_letter")
LOG_EVERY = 10.0
"""Seconds between two log lines of one operator's failing records (the first is logged at once)."""

Apply = Callable[[Any, Any, list[Any]], None]
"""An operator's work on one record: ``apply(time, record, out)`` appends what the record gives to ``out``."""


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A record an operator's function raised on, under ``errors="dead_letter"``: the record, the operator (its
    name), the error (``"ZeroDivisionError: division by zero"``) and the record's time. It unpacks as
    ``record, operator, error, time`` and crosses processes as records do."""

    record: Any
    operator: str
    error: str
    time: Any

    def __iter__(self) -> Iterator[Any]:
        return iter((self.record, self.operator, self.error, self.time))


register_type(DeadLetter, tuple, lambda fields: DeadLetter(*fields))


def check_policy(errors: object, where: str, *, default: bool = True) -> ErrorPolicy | None:
    """``errors`` as a policy (``None``: the dataflow's, where ``default`` allows it); a clear error naming
    ``where`` for anything else."""
    if errors is None and default:
        return None
    if errors in POLICIES:
        return errors
    raise ValueError(f"{where}: errors={errors!r} is not an error policy; give 'raise' (the default: the first "
                     f"record that fails fails the dataflow), 'skip' (count and log the records that fail, and go "
                     f"on) or 'dead_letter' (send them, as aiotimely.DeadLetter, on scope.dead_letters())")


class RecordFailures:
    """The records that failed in one operator under a ``"skip"`` or ``"dead_letter"`` policy: counted, logged
    (the first with its traceback, then a count at most every :data:`LOG_EVERY` seconds), and, as dead letters,
    held until the operator sends them on."""

    __slots__ = ("policy", "name", "describe", "failed", "letters", "_logged_at", "_unlogged")

    def __init__(self, policy: ErrorPolicy, name: str, describe: Callable[[], str]) -> None:
        self.policy = policy
        self.name = name
        self.describe = describe
        """Where the operator is, in words (for the log)."""
        self.failed = 0
        """Records that failed so far."""
        self.letters: list[DeadLetter] = []
        """Dead letters not sent yet."""
        self._logged_at: float | None = None
        self._unlogged = 0

    def record_failed(self, record: Any, exc: Exception, time: Any) -> None:
        """``record`` at ``time`` raised ``exc``: drop it, or keep it as a dead letter; count it and log it."""
        self.failed += 1
        error = f"{type(exc).__name__}: {exc}"
        if self.policy == "dead_letter":
            self.letters.append(DeadLetter(record, self.name, error, time))
        self._log(record, exc, error, time)

    def _log(self, record: Any, exc: Exception, error: str, time: Any) -> None:
        now = _time.monotonic()
        done = "skipped" if self.policy == "skip" else "sent to dead letters"
        if self._logged_at is None:
            log.warning("%s: record %.200r at time %r failed (%s) and is %s (errors=%r); later failures of this "
                        "operator are counted and logged at most every %g s", self.describe(), record, time, error,
                        done, self.policy, LOG_EVERY, exc_info=exc)
        elif now - self._logged_at >= LOG_EVERY:
            log.warning("%s: %d more records failed and were %s in the last %.0f s (%d in all; the last: record "
                        "%.200r at time %r: %s)", self.describe(), self._unlogged + 1, done, now - self._logged_at,
                        self.failed, record, time, error)
        else:
            self._unlogged += 1
            return
        self._logged_at = now
        self._unlogged = 0

    @property
    def skipped(self) -> int:
        """Records dropped (``"skip"``)."""
        return self.failed if self.policy == "skip" else 0

    @property
    def dead_letters(self) -> int:
        """Records sent to dead letters (``"dead_letter"``), counting those not sent yet."""
        return self.failed if self.policy == "dead_letter" else 0


def guard(apply: Apply, failures: RecordFailures) -> Callable[[Any, list[Any]], list[Any]]:
    """A transform of batches that runs ``apply`` on each record and hands each record that raises to
    ``failures`` instead of failing (one loop over the batch, resumed after each failure)."""

    def transform(time: Any, batch: list[Any]) -> list[Any]:
        out: list[Any] = []
        records = iter(batch)
        record = None
        while True:
            try:
                for record in records:
                    apply(time, record, out)
                return out
            except Exception as exc:
                failures.record_failed(record, exc, time)

    return transform


class DeadLetterOutput:
    """The output of an operator on which its dead letters go, with the consumers of the dead-letter stream."""

    __slots__ = ("port", "pushers", "failures")

    def __init__(self, port: OutputPort, failures: RecordFailures) -> None:
        self.port = port
        self.pushers: list[Pusher] = []
        self.failures = failures

    def send(self, time: Any) -> None:
        """Send the dead letters made at ``time``, counted as produced at the operator's output."""
        letters = self.failures.letters
        if letters:
            self.failures.letters = []
            port = self.port
            port.produced.update(time, len(letters))
            port.records += len(letters)
            push_to_all(self.pushers, time, letters)


S = TypeVar("S")
"""The stream class of a scope."""
S_co = TypeVar("S_co", covariant=True)


class DeadLetterScope(Protocol[S_co]):
    """What the dead-letter streams use of their scope (:class:`~aiotimely.dataflow.scope.ScopeCore`)."""

    def describe(self) -> str: ...

    def new_stream(self, source: Source | Callable[[], Source], tee: Tee) -> S_co: ...


Sc = TypeVar("Sc", bound=DeadLetterScope[Any])


class DeadLetterStreams(Generic[S]):
    """A scope's dead-letter streams, one per operator with a ``"dead_letter"`` policy, taken as one stream by
    :meth:`~aiotimely.dataflow.scope.Scope.dead_letters` once they are all built."""

    __slots__ = ("_streams", "_first", "_taken")

    def __init__(self) -> None:
        self._streams: list[S] = []
        self._first = ""
        """Where the first of them is, in words (what a refusal names)."""
        self._taken = False

    def add(self, scope: DeadLetterScope[S], output: DeadLetterOutput, where: str) -> None:
        """The dead letters of a new operator (described by ``where``), as a stream of ``scope``."""
        if self._taken:
            raise GraphError(f"{where} sends the records that fail to dead letters, but {scope.describe()}'s dead "
                             f"letters were taken already: call scope.dead_letters() after building every operator "
                             f"with errors='dead_letter'")
        port = output.port
        self._streams.append(scope.new_stream(Source(port.op.index, port.index), output))
        self._first = self._first or where

    def take(self, scope: Sc, concatenate: Callable[[Sc, list[S]], S]) -> S:
        """Every dead-letter stream of ``scope`` as one stream (taken once)."""
        if self._taken:
            raise GraphError(f"{scope.describe()}: scope.dead_letters() was taken already; take it once and use "
                             f"the stream it gave as many times as needed")
        if not self._streams:
            raise GraphError(f"{scope.describe()} has no operator that sends records to dead letters: give "
                             f"errors='dead_letter' to an operator (stream.map(f, errors='dead_letter')) or to "
                             f"worker.dataflow(..., errors='dead_letter'), and take scope.dead_letters() after "
                             f"building them")
        self._taken = True
        streams = self._streams
        return streams[0] if len(streams) == 1 else concatenate(scope, streams)

    def check_taken(self, scope: DeadLetterScope[Any]) -> None:
        """Refuse a scope whose dead letters nobody takes: they would be lost without a sign."""
        if self._streams and not self._taken:
            raise GraphError(f"{self._first} sends the records that fail to dead letters, but nothing takes "
                             f"them: route scope.dead_letters() to a sink (e.g. "
                             f"scope.dead_letters().inspect(print)) after building the operators of "
                             f"{scope.describe()}")
