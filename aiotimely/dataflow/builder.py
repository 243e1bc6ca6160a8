"""Building an operator, in timely's layers: its shape first, then its logic.

``OperatorBuilder`` declares the operator's inputs (each a counted
:class:`~aiotimely.dataflow.ports.InputPort` fed by a channel) and outputs (each an
:class:`~aiotimely.dataflow.ports.OutputPort` and the stream it feeds), then builds it:

* :meth:`~OperatorBuilder.build_raw` (timely's ``builder_raw``): a function run at
  each activation; the operator holds its initial capabilities as counts and
  changes them with :meth:`~aiotimely.dataflow.operator.OperatorRuntime.adjust_held`;
* :meth:`~OperatorBuilder.build` (``builder_rc``): the initial capabilities as
  :class:`~aiotimely.dataflow.capability.Capability` objects, handed to a
  constructor that returns the logic (a function or a coroutine);
* :meth:`~OperatorBuilder.build_function`: a function over batches that holds no
  capability of its own (the built-in map, filter, ...).

Every operator, built-in or user-written (``unary``, ``binary``, ... in
:mod:`.operators.generic`), is made here.
"""

from __future__ import annotations

import functools
import inspect
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ..errors import GraphError
from ..progress import FrontierInterest, Source, Target
from .capability import Capability
from .channels import Blame, BroadcastPusher, DataCodec, ExchangePusher, MailboxPusher, Pusher
from ..comm.local import UNFED, Mailbox
from ..worker.logging import ChannelsEvent
from .failures import RecordFailures
from .fusion import FusedChain, Stage, Transform, can_fuse, chain_end
from .operator import Logic, OperatorRuntime
from .ports import InputPort, OutputPort
from .stream import StreamCore

if TYPE_CHECKING:
    from ..comm.fabric import Channel
    from .scope import ScopeCore

__all__ = ["OperatorBuilder", "check_function", "routed_by_key", "fused_stage", "open_channel"]

AWAIT_INSTEAD = ("await it in the logic of an operator of your own (stream.unary(logic): an async def logic may "
                 "await), or hand the records to it with aiotimely.connectors.to_async(stream, {fn}, per=\"record\"), "
                 "which awaits {fn}(record) for each record and passes the records on once it completed")
"""Where an async function ``{fn}`` goes instead of a synchronous operator (map, filter, a key, ...)."""


def _is_async(fn: Any) -> bool:
    """Whether calling ``fn`` makes a coroutine or an async generator instead of doing the work: an ``async def``
    (a method, a ``functools.partial`` of one too), or an object whose ``__call__`` is one."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
        return True
    call = None if inspect.isroutine(fn) else inspect.getattr_static(type(fn), "__call__", None)
    return inspect.iscoroutinefunction(call) or inspect.isasyncgenfunction(call)


def _name(fn: Any) -> str:
    while isinstance(fn, functools.partial):
        fn = fn.func
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    return str(name) if name is not None else type(fn).__name__


def check_function(fn: Any, scope: ScopeCore[Any], operator: str, what: str, example: str, *,
                   instead: str = AWAIT_INSTEAD, optional: bool = False) -> None:
    """Refuse, as the dataflow is built, a function an operator calls synchronously on records that would fail or
    do nothing on every record: ``fn`` not callable (``exchange(0)``, which one worker never calls), or an async
    function (each call would only make a coroutine, never run). ``what`` names it (``"the key"``), ``example``
    shows a good one, ``instead`` says where an async function ``{fn}`` goes; ``optional``: ``None`` is fine."""
    if fn is None and optional:
        return
    where = f"operator {operator!r} in {scope.describe()} on worker {scope.worker.index}"
    if not callable(fn):
        raise TypeError(f"{where}: {what} must be a function, e.g. {example}; got "
                        f"{type(fn).__name__} {fn!r:.100}")
    if _is_async(fn):
        name = _name(fn)
        raise TypeError(f"{where}: {what} {name} is an async function, and {operator} calls it synchronously: each "
                        f"call would only make a coroutine (never run, never awaited). Make it a plain def, or "
                        f"{instead.format(fn=name)}")


def routed_by_key(stream: StreamCore) -> bool:
    """Whether each record of ``stream`` is on the worker its key routes to, as far as the graph shows: the stream
    comes from an exchange through operators that keep records on their worker and pass them on (the stages of a
    fused chain, a concatenation, a scope boundary). What only an operator's logic could tell counts as not."""
    tee = stream.tee
    op = tee.chain.op if type(tee) is Stage else getattr(tee, "op", None)
    if isinstance(op, OperatorRuntime):
        return (op.chain is not None or op.keeps_routing) and bool(op.routed) and all(op.routed)
    return getattr(tee, "routed", False) is True


class OperatorBuilder:
    """An operator under construction in ``scope``: declare its ports, then build it once."""

    def __init__(self, scope: ScopeCore[Any], name: str) -> None:
        scope.check_building()
        self.scope = scope
        self.op = OperatorRuntime(scope, name)
        self._connections: list[dict[int, Any] | None] = []
        self._interest: list[FrontierInterest] = []
        self._built = False

    @property
    def index(self) -> int:
        return self.op.index

    def new_input(
        self,
        stream: StreamCore,
        *,
        exchange: Callable[[Any], Any] | None = None,
        broadcast: bool = False,
        interest: FrontierInterest = FrontierInterest.NEVER,
        connection: dict[int, Any] | None = None,
        attach: bool = True,
    ) -> InputPort:
        """An input fed by ``stream``: on this worker, by ``exchange`` (a key) over all workers, or to all.

        ``connection`` maps outputs to the summary of the path from this input to
        them (default: every output, unchanged). ``attach=False`` leaves the channel's
        pusher off the stream: the caller feeds the input another way (a fused stage).
        """
        op, scope = self.op, self.scope
        port = len(op.inputs)
        if exchange is not None:
            check_function(exchange, scope, op.name, f"the exchange key of input {port}", "exchange=lambda r: r[0]")
        if stream.scope is not scope:
            raise GraphError(
                f"{op.describe()}: input {port} comes from a stream of {stream.scope.describe()}; "
                f"bring it into {scope.describe()} with enter() or leave() first"
            )
        self._check_open()
        target = Target(op.index, port)
        scope.add_edge(stream.source, target)
        pusher, mailbox, channel = open_channel(scope, exchange=exchange, broadcast=broadcast, blame=op.blame,
                                                source=stream.source, target=target)
        op.channels.append(channel)
        op.pacts.append("broadcast" if broadcast else "exchange" if exchange is not None else "pipeline")
        op.routed.append(not broadcast and (exchange is not None or routed_by_key(stream)))
        if attach:
            stream.attach(pusher)
        else:  # (its producer's pushes feed it: every such input shares one always empty mailbox)
            mailbox = UNFED
        inp = InputPort(op, port, mailbox)
        op.inputs.append(inp)
        self._connections.append(connection)
        self._interest.append(interest if type(interest) is FrontierInterest else FrontierInterest(interest))
        return inp

    def new_output(self) -> tuple[OutputPort, Any]:
        """An output, and the stream of what it sends (of the scope's stream class)."""
        self._check_open()
        op = self.op
        out = OutputPort(op, len(op.outputs))
        op.outputs.append(out)
        return out, self.scope.new_stream(Source(op.index, out.index), out)

    def _check_open(self) -> None:
        if self._built:
            raise GraphError(f"{self.op.describe()} is already built: it cannot get more ports")
        self.scope.check_building()

    def _install(self) -> OperatorRuntime:
        self._check_open()
        self._built = True
        op = self.op
        outputs = len(op.outputs)
        connectivity: Sequence[dict[int, Any]] | None = None
        if any(c is not None for c in self._connections):
            identity = op.ttype.identity
            connectivity = [c if c is not None else {o: identity for o in range(outputs)}
                            for c in self._connections]
        op.install(connectivity, self._interest)
        return op

    # -- the three ways to build ------------------------------------------------------

    def build_raw(self, schedule: Callable[[], None]) -> OperatorRuntime:
        """Call ``schedule()`` at each activation. The operator holds one capability per output at the
        minimum time, as counts, until it changes them with ``op.adjust_held``; it is complete once it
        holds none and its inputs are complete."""
        op = self._install()
        op.set_logic(schedule)
        return op

    def build(self, constructor: Callable[[list[Capability]], Logic]) -> OperatorRuntime:
        """Hand the initial capabilities (one per output, at the minimum time) to ``constructor``, which
        returns the logic: a function called, or a coroutine resumed, at each activation."""
        op = self._install()
        minimum = op.ttype.minimum
        capabilities = [Capability(op, o, minimum, minted=True) for o in range(len(op.outputs))]
        op.set_logic(constructor(capabilities))
        return op

    def build_function(self, run: Callable[[], None]) -> OperatorRuntime:
        """Call ``run()`` at each activation; the operator drops its initial capabilities (it sends only
        at the times of what it receives, or with capabilities it takes from received times)."""
        op = self._install()
        minimum = op.ttype.minimum
        for output in range(len(op.outputs)):
            op.adjust_held(output, minimum, -1)
        op.set_logic(run)
        return op


def _nothing() -> None:
    pass


def fused_stage(stream: StreamCore, name: str, transform: Transform, *, passes: bool = False,
                exchange: Callable[[Any], Any] | None = None, broadcast: bool = False,
                failures: RecordFailures | None = None) -> Stage:
    """A stateless batch operator ``name`` on ``stream`` (see :mod:`.fusion`): without an exchange, the next stage
    of the fused chain that makes ``stream``, if one does; else the first stage of a new chain, run inside the
    pushes of ``stream``'s producer when it can be, through a mailbox when not. ``failures`` keeps the records
    ``transform`` fails on (a dead-letter policy gets the chain an output for them)."""
    scope = stream.scope
    local = exchange is None and not broadcast
    chain = chain_end(stream) if local else None
    if chain is None:
        chain = _new_chain(stream, name, exchange, broadcast)
    else:
        scope.check_building()
    stage = chain.add(name, transform, passes)
    if failures is not None:
        stage.failures = failures
        failures.describe = functools.partial(chain.describe, stage)
        if failures.policy == "dead_letter":
            scope.dead_letter_streams.add(scope, chain.add_dead_letters(stage, failures), chain.describe(stage))
    return stage


def _new_chain(stream: StreamCore, name: str, exchange: Callable[[Any], Any] | None, broadcast: bool) -> FusedChain:
    scope = stream.scope
    builder = OperatorBuilder(scope, name)
    fuse = exchange is None and not broadcast and can_fuse(stream)
    inp = builder.new_input(stream, exchange=exchange, broadcast=broadcast, attach=not fuse)
    out, _ = builder.new_output()
    op = builder.build_function(_nothing)
    chain = op.chain = FusedChain(op, inp, scope.ran_inside)
    op.set_logic(chain.run_mailbox)
    out.pushers.append(chain)  # (never pushed to: back-pressure looks through it for the chain's consumers)
    if fuse:  # the producer's pushes run the chain
        stream.attach(chain)
        assert op.progress is not None
        op.progress.transparent = True  # it never watches its frontier: progress may hop over it
    return chain


def open_channel(scope: ScopeCore[Any], *, exchange: Callable[[Any], Any] | None = None, broadcast: bool = False,
                 blame: Blame | None = None, source: Source | None = None,
                 target: Target | None = None) -> tuple[Pusher, Mailbox, Channel]:
    """A new channel of ``scope``'s dataflow: the pusher for the producing side, this worker's mailbox, and the
    channel's id (logged, with its ``source`` and ``target`` when given, as a :class:`ChannelsEvent`).

    Without ``exchange`` or ``broadcast`` (or with one worker), records stay on the
    worker that produced them.
    """
    worker = scope.worker
    channel = scope.dataflow.allocate_channel()
    log = worker.logging
    if log is not None and source is not None and target is not None:
        log.log(ChannelsEvent(channel, scope.path, (source.node, source.port), (target.node, target.port)))
    if (exchange is None and not broadcast) or worker.peers == 1:
        pressure = worker.fabric.pressure
        mailbox = Mailbox(pressure.mailbox_high, pressure.mailbox_high_bytes)
        return MailboxPusher(mailbox, worker, channel), mailbox, channel
    fabric = worker.fabric
    fabric.register(channel, DataCodec(scope.ttype, fabric.codec))
    boxes = fabric.mailboxes(channel, source=worker.index)
    pusher: Pusher = (BroadcastPusher(boxes, worker, channel) if broadcast or exchange is None
                      else ExchangePusher(exchange, boxes, worker, channel, blame))
    return pusher, fabric.mailbox(channel, worker.index), channel
