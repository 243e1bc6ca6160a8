"""Operator fusion: a chain of stateless pipelined operators is one operator, run as plain function calls.

Stateless batch operators (map, filter, flat_map, inspect, ...) applied one after
another on the same worker, with no exchange between them, are built as the stages of
one :class:`FusedChain`: one operator, one location in the progress graph, one loop
over each batch, whatever the chain's length. Every stage passes times unchanged, so
the chain's one input and its outputs carry the progress of all of them exactly: what
enters the chain is counted consumed at its input, what a stage sends on is counted
produced at that stage's output. Only stages whose streams have consumers get an
output: the last stage usually, and a stage a stream is taken from (a tee), which gets
one of its own, since every consumer of an output must get the same batches.

A chain fed on the same worker by an operator of its scope does not get its batches
through a mailbox and an activation of its own either: the producer's push calls it
directly, and the scope collects the chain's progress right after it runs the producer
(so the producer's "produced" and the chain's "consumed" cancel before they reach the
tracker). Such a chain is *transparent* to the tracker: frontier changes hop over it
(see :class:`~aiotimely.progress.reachability.Tracker`). Errors name the stage that
raised them, or that made records its consumers could not take (a record an exchange
cannot encode). ``AIOTIMELY_FUSE=0`` turns fusion off (to compare, or to rule it out).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence

from ..errors import CapabilityError, DataflowError
from ..progress import Source
from ..worker.logging import MessagesEvent
from .channels import push_to_all
from .containers import copy_batch
from .failures import DeadLetterOutput, RecordFailures

if TYPE_CHECKING:
    from ..progress import OperatorProgress
    from ..worker import WorkerHandle
    from .channels import Pusher, Tee
    from .ports import InputPort, OutputPort

__all__ = ["FusedChain", "Stage", "ChainOwner", "fusion_enabled", "can_fuse", "chain_end"]


class Fed(Protocol):
    """A stream as fusion sees it (:class:`~aiotimely.dataflow.stream.StreamCore`): its output, its consumers."""

    @property
    def source(self) -> Source: ...

    @property
    def tee(self) -> Tee: ...


class ChainOwner(Protocol):
    """What a fused chain uses of the operator running it (:class:`~aiotimely.dataflow.operator.OperatorRuntime`)."""

    current_time: Any

    @property
    def index(self) -> int: ...

    @property
    def worker(self) -> WorkerHandle: ...

    @property
    def progress(self) -> OperatorProgress | None: ...

    @property
    def outputs(self) -> Sequence[OutputPort]: ...

    @property
    def channels(self) -> Sequence[tuple[int, int]]: ...

    def add_output(self) -> OutputPort: ...

    def describe(self, stage: str | None = None, label: str | None = None) -> str: ...

    def failure(self, exc: BaseException, stage: str | None = None,
                label: str | None = None) -> DataflowError | CapabilityError: ...

Transform = Callable[[Any, list[Any]], "list[Any] | None"]


def fusion_enabled() -> bool:
    """Whether stateless operators fuse (``AIOTIMELY_FUSE=0`` says no)."""
    return os.environ.get("AIOTIMELY_FUSE", "1") != "0"


def can_fuse(stream: Fed) -> bool:
    """A chain can run inside the pushes of ``stream``'s producer: an operator (or nested scope) of the
    same scope, whose pushes all happen while the scope runs it."""
    return fusion_enabled() and stream.source.node != 0


def chain_end(stream: Fed) -> FusedChain | None:
    """The chain whose last stage makes ``stream``, if there is one: a new stage can join it."""
    stage = stream.tee
    if type(stage) is Stage and fusion_enabled():
        chain = stage.chain
        if chain.stages[-1] is stage:
            return chain
    return None


class Stage:
    """One operator of a fused chain: its name, its function over batches, and the consumers of what it sends
    (the stream it makes: a :class:`~aiotimely.dataflow.stream.Tee`), fed from an output of the chain's own."""

    __slots__ = ("chain", "name", "transform", "passes", "pushers", "output", "failures", "dead")

    def __init__(self, chain: FusedChain, name: str, transform: Transform, passes: bool = False) -> None:
        self.chain = chain
        self.name = name
        self.transform = transform
        self.passes = passes
        """The stage sends on records it got, unchanged (a filter, an inspect): it makes none of its own."""
        self.pushers: list[Pusher] = []
        self.output: OutputPort | None = None
        """The chain's output that counts what the stage sends, once its stream has consumers."""
        self.failures: RecordFailures | None = None
        """The records that failed in the stage, under a policy that does not fail the dataflow."""
        self.dead: DeadLetterOutput | None = None
        """Where the stage's dead letters go, under ``errors="dead_letter"``."""

    def claim_source(self) -> Source:
        """The chain's output this stage's stream comes from, taken when the stream is first consumed."""
        return self.chain.claim_output(self)


class FusedChain:
    """The logic of a chain operator: ``transform(time, batch)`` of each stage in turn, each stage's result
    sent to that stage's consumers, counted at the chain's one input and at that stage's output.

    The chain has one output for each stage that has consumers (every consumer of an output must get the
    same batches: counts are per edge); the first such stage takes output 0. It is also the pusher that feeds
    the chain from its producer when the chain is fused into it, and what back-pressure looks through
    (:attr:`pushers`) for the mailboxes the chain feeds."""

    __slots__ = ("op", "stages", "_input", "_ran", "_claimed")

    def __init__(self, op: ChainOwner, input: InputPort, ran: Callable[[int], None]) -> None:
        self.op = op
        self.stages: list[Stage] = []
        self._input = input
        self._ran = ran
        """Tells the scope the chain ran inside its producer (:meth:`~.scope.Scope.ran_inside`): the scope collects
        its progress with the producer's."""
        self._claimed = 0
        """How many of the chain's outputs stages have taken."""

    def add(self, name: str, transform: Transform, passes: bool = False) -> Stage:
        """A new last stage; its pushers are its stream's consumers; ``passes``: it makes no records of its own."""
        stage = Stage(self, name, transform, passes)
        self.stages.append(stage)
        return stage

    def claim_output(self, stage: Stage) -> Source:
        port = stage.output
        if port is None:
            op = self.op
            if self._claimed:
                port = op.add_output()
                assert op.progress is not None
                op.progress.transparent = False  # (only a one-input, one-output operator can be)
            else:
                port = op.outputs[0]
            self._claimed += 1
            stage.output = port
        return Source(self.op.index, port.index)

    @property
    def pushers(self) -> list[Pusher]:
        """Every consumer of every stage."""
        return [p for stage in self.stages for p in stage.pushers]

    def __call__(self, time: Any, batch: list[Any]) -> None:
        """A batch from the producer the chain is fused into."""
        n = len(batch)
        self._input.count_fed(time, n)
        self._ran(self.op.index)
        if self.op.worker.logging is not None:
            self._log_passed(time, n)
        self.run(time, batch)

    def _log_passed(self, time: Any, length: int) -> None:
        """Log the batch handed to the chain by its producer as sent and received on the chain's input channel
        (no mailbox and no activation of the chain's own logged it)."""
        op = self.op
        log, worker = op.worker.logging, op.worker.index
        if log is not None and op.channels:
            channel = op.channels[0]
            log.log(MessagesEvent(True, channel, worker, worker, time, length))
            log.log(MessagesEvent(False, channel, None, worker, time, length))

    def run_mailbox(self) -> None:
        """An activation of a chain fed through a mailbox: every batch waiting there."""
        run = self.run
        for time, batch in self._input.batches():
            run(time, batch)

    def run(self, time: Any, batch: list[Any]) -> None:
        """Run ``batch`` at ``time`` through every stage."""
        self.op.current_time = time
        stages = self.stages
        last = stages[-1]
        for stage in stages:
            try:
                batch = stage.transform(time, batch)  # type: ignore[assignment]
            except Exception as exc:
                error = self._failure(stage, exc)
                if error is exc:
                    raise
                raise error from exc
            if stage.dead is not None:
                stage.dead.send(time)
            if not batch:
                return
            pushers = stage.pushers
            if pushers:
                output = stage.output
                assert output is not None
                n = len(batch)
                output.produced.update(time, n)
                output.records += n
                try:
                    if stage is last:
                        push_to_all(pushers, time, batch)
                    else:  # the next stage goes on with this batch: consumers get their own copies
                        for push in pushers:
                            push(time, copy_batch(batch))
                except Exception as exc:  # a consumer could not take the records: the stage that made them is
                    error = self._failure(self._maker(stage), exc)  # blamed (an exchange cannot encode one)
                    if error is exc:
                        raise
                    raise error from exc

    def _maker(self, stage: Stage) -> Stage:
        """The stage that made the records ``stage`` sends: itself, or the last one before it that is not a
        filter or an inspect (``stage`` if every one before it only passes records on: they came from upstream)."""
        stages = self.stages
        i = stages.index(stage)
        while i >= 0 and stages[i].passes:
            i -= 1
        return stages[i] if i >= 0 else stage

    def add_dead_letters(self, stage: Stage, failures: RecordFailures) -> DeadLetterOutput:
        """An output of the chain's own for the dead letters of ``stage``."""
        op = self.op
        port = op.add_output()
        assert op.progress is not None
        op.progress.transparent = False  # (only a one-input, one-output operator can be)
        stage.dead = DeadLetterOutput(port, failures)
        return stage.dead

    def describe(self, stage: Stage) -> str:
        """Where ``stage`` is, in words: the operator, or the stage of a chain of more than one."""
        if len(self.stages) == 1:
            return self.op.describe()
        return self.op.describe(stage.name, self._label(stage))

    def _label(self, stage: Stage) -> str:
        return f"#{self.op.index}, stage {self.stages.index(stage) + 1} of a fused chain"

    def _failure(self, stage: Stage, exc: Exception) -> BaseException:
        if isinstance(exc, (DataflowError, CapabilityError)) and exc.operator is not None:
            return exc  # already located (by the operator that raised it)
        if len(self.stages) == 1:
            return self.op.failure(exc)
        return self.op.failure(exc, stage=stage.name, label=self._label(stage))
