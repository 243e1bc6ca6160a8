"""The runtime of one operator on one worker: its ports, capabilities, and how its logic is resumed.

An operator's logic is either a coroutine (the user's ``async def``), resumed by
the worker with ``send(None)`` each time the operator is activated, or a plain
function over batches (the built-in stateless operators), called instead. A
coroutine waits for its next activation by yielding a sentinel; if it awaits a real
asyncio future instead, the operator is parked until the future is done, while
the worker goes on running everything else.

Everything an activation does to progress (records consumed and produced,
capabilities taken or dropped) lands in the operator's :class:`SharedProgress`,
which the scope collects right after the operator yields: one atomic batch.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Callable, Coroutine, Sequence

from ..comm.local import Mailbox
from ..errors import AiotimelyError, CapabilityError, DataflowError, GraphError
from ..progress import FrontierInterest, OperatorProgress, Target
from .capability import Capability
from .ports import ACTIVATION, Activator, BroadcastPusher, ExchangePusher, OperatorInput, OutputPort

if TYPE_CHECKING:
    from .scope import Scope
    from .stream import Stream

__all__ = ["OperatorRuntime", "BACKLOG_HIGH", "BACKLOG_LOW"]

BACKLOG_HIGH = 256
"""Batches waiting at an input of an operator that awaits I/O, past which the process stops
reading records from other processes until it is down to ``BACKLOG_LOW``."""
BACKLOG_LOW = 64


class OperatorRuntime:
    """One operator on one worker."""

    __slots__ = (
        "scope", "worker", "name", "ttype", "progress", "index", "path", "outputs", "inputs", "mailboxes",
        "epoch", "current_time", "done", "_held", "_coro", "_function", "_waiting", "_dirty_ports",
        "_drop_initial", "externally_driven", "frontier_changes", "__weakref__",
    )

    def __init__(
        self,
        scope: Scope,
        name: str,
        inputs: int,
        outputs: int,
        *,
        connectivity: Sequence[dict[int, Any]] | None = None,
        interest: FrontierInterest | Sequence[FrontierInterest] = FrontierInterest.NEVER,
    ) -> None:
        scope._check_building()
        self.scope = scope
        self.worker = scope.worker
        self.name = name
        self.ttype = scope.ttype
        self.progress = OperatorProgress(name, inputs, outputs, connectivity=connectivity, interest=interest)
        self.index = scope._builder.add_child(self.progress)
        self.path = scope.path + (self.index,)
        scope.children[self.index] = self
        shared = self.progress.shared
        self.outputs = [OutputPort(self, o, shared.produceds[o]) for o in range(outputs)]
        self.inputs: list[OperatorInput | None] = [None] * inputs
        self.mailboxes: list[Mailbox | None] = [None] * inputs
        self.epoch = 0
        self.current_time: Any = None
        self.done = False
        self._held: dict[tuple[int, Any], int] = {}
        self._coro: Coroutine | None = None
        self._function: Callable[[], None] | None = None
        self._waiting: asyncio.Future | None = None
        self._dirty_ports: list[OutputPort] = []
        self._drop_initial = False
        self.externally_driven = False
        self.frontier_changes: list[list] | None = None
        for o in range(outputs):  # this worker's share of the initial capabilities
            self._held[(o, self.ttype.minimum)] = 1

    # -- building -------------------------------------------------------------------

    def connect(self, port: int, stream: Stream, *, exchange: Callable[[Any], Any] | None = None,
                broadcast: bool = False) -> OperatorInput:
        """Feed input ``port`` from ``stream``: on this worker, by a key over all workers, or to all."""
        scope = self.scope
        if stream.scope is not scope:
            raise GraphError(
                f"{self.describe()}: input {port} comes from a stream of scope {stream.scope.name!r}; "
                f"bring it into scope {scope.name!r} with enter() or leave() first"
            )
        if self.inputs[port] is not None:
            raise GraphError(f"{self.describe()}: input {port} is already connected")
        scope._check_building()
        scope._builder.add_edge(stream.source, Target(self.index, port))
        worker = self.worker
        channel = scope.dataflow.allocate_channel()
        if (exchange is None and not broadcast) or worker.peers == 1:
            mailbox = Mailbox()
            pusher: Callable[[Any, list], None] = _MailboxPusher(mailbox)
        else:
            worker.fabric.register(channel, self.ttype)
            boxes = worker.fabric.mailboxes(channel, source=worker.index)
            mailbox = boxes[worker.index]
            pusher = BroadcastPusher(boxes) if broadcast else ExchangePusher(exchange, boxes)
        stream._port.pushers.append(pusher)
        self.mailboxes[port] = mailbox
        inp = self.inputs[port] = OperatorInput(self, port, mailbox, self.progress.shared.consumeds[port])
        return inp

    def run_coroutine(self, coro: Coroutine) -> None:
        """Resume ``coro`` at each activation; it waits for the next with the inputs' ``activations()``."""
        self._coro = coro

    def run_function(self, function: Callable[[], None], *, keep_capabilities: bool = False) -> None:
        """Call ``function()`` at each activation (built-in operators). Drops the initial capabilities
        at the first activation unless ``keep_capabilities``."""
        self._function = function
        self._drop_initial = not keep_capabilities

    def mint(self, output: int = 0) -> Capability:
        """The operator's initial capability for ``output`` (at the minimum time), as an object."""
        return Capability(self, output, self.ttype.minimum, minted=True)

    def activator(self) -> Activator:
        """An activator for this operator; the worker then never takes it for stuck while it waits."""
        self.externally_driven = True
        return Activator(self.worker, self.path, self)

    def _start(self) -> None:
        """Called once the dataflow is built: listen to the input mailboxes."""
        for i, box in enumerate(self.mailboxes):
            if box is None:
                raise GraphError(f"{self.describe()}: input {i} was never connected")
            box.listen(self._on_data)
        self.worker.activate(self.path)

    def _on_data(self) -> None:
        self.worker.activate(self.path)

    # -- capabilities -------------------------------------------------------------------

    def _capability_changed(self, output: int, time: Any, diff: int) -> None:
        self.progress.shared.internals[output].update(time, diff)
        held = self._held
        key = (output, time)
        count = held.get(key, 0) + diff
        if count:
            held[key] = count
        else:
            held.pop(key, None)

    def _release_all(self) -> None:
        for (output, time), n in list(self._held.items()):
            self._capability_changed(output, time, -n)

    def _release_from_gc(self, output: int, time: Any) -> None:
        if not self.done:
            self._capability_changed(output, time, -1)
            self.worker.activate(self.path)

    def held_capabilities(self) -> list[tuple[int, Any]]:
        """``(output, time)`` of every capability the operator holds."""
        return [key for key, n in self._held.items() if n > 0]

    def reaches(self, input: int, output: int, from_time: Any, to_time: Any) -> bool:
        """True if some path from ``input`` to ``output`` takes ``from_time`` to ``to_time`` or earlier."""
        connectivity = self.scope.progress_connectivity(self, input)
        ttype = self.ttype
        for summary in connectivity.get(output, ()):
            t = ttype.results_in(summary, from_time)
            if t is not None and ttype.less_equal(t, to_time):
                return True
        return False

    def passes_unchanged(self, input: int, output: int) -> bool:
        """True if ``input`` reaches ``output`` with exactly the identity summary."""
        chain = self.scope.progress_connectivity(self, input).get(output)
        return chain is not None and list(chain) == [self.ttype.identity]

    # -- running ----------------------------------------------------------------------

    def inputs_complete(self) -> bool:
        """True when every input's frontier is empty and nothing waits to be drained."""
        return all(inp.is_complete() for inp in self.inputs)

    def _accept_frontiers(self) -> None:
        frontiers = self.progress.shared.frontiers
        record = self.frontier_changes is not None
        for i, changes in enumerate(frontiers):
            if changes:
                drained = changes.drain()
                self.inputs[i]._frontier.update_iter(drained)
                if record:
                    self.frontier_changes[i].extend(drained)

    def schedule(self) -> bool:
        """Run one activation; return whether the operator is still incomplete."""
        if self.done:
            self._discard_input()
            return False
        if self._waiting is not None:
            return True
        self._accept_frontiers()
        self.epoch += 1
        try:
            if self._coro is not None:
                self._resume()
            else:
                if self._drop_initial:
                    self._drop_initial = False
                    self._release_all()
                self._function()
                if not self._held and self.inputs_complete():
                    self.done = True
        except AiotimelyError as exc:
            if isinstance(exc, (DataflowError, CapabilityError)) and getattr(exc, "_located", False):
                raise
            raise self._failure(exc) from exc
        except Exception as exc:
            raise self._failure(exc) from exc
        finally:
            if self._dirty_ports:
                ports, self._dirty_ports = self._dirty_ports, []
                for port in ports:
                    port.release()
        return not self.done

    def _resume(self) -> None:
        try:
            signal = self._coro.send(None)
        except StopIteration:
            self._finish()
            return
        if signal is ACTIVATION:
            return
        if signal is None:  # a bare yield, as asyncio.sleep(0) does: run again next round
            self.worker.activate(self.path)
            return
        if getattr(signal, "_asyncio_future_blocking", None) is not None:
            signal._asyncio_future_blocking = False
            self._waiting = signal
            signal.add_done_callback(self._future_done)
            if any(len(box.queue) > BACKLOG_HIGH for box in self.mailboxes):
                self.worker.computation.backlog.add(self)  # reading from the network pauses meanwhile
            return
        raise RuntimeError(f"operator logic awaited {signal!r}, which is not an asyncio awaitable")

    def _future_done(self, future: asyncio.Future) -> None:
        if self._waiting is future:
            self._waiting = None
            self.worker.activate(self.path)

    def _finish(self) -> None:
        """The logic returned: give up whatever it still holds, and discard later input."""
        self._release_all()
        self.done = True
        self._coro = None
        self._discard_input()

    def _discard_input(self) -> None:
        for inp in self.inputs:
            for _ in inp.drain():
                pass

    def backlogged(self) -> bool:
        """True while an input holds more than ``BACKLOG_LOW`` batches."""
        return not self.done and any(len(box.queue) > BACKLOG_LOW for box in self.mailboxes)

    def is_waiting(self) -> bool:
        """True while the logic awaits an asyncio future."""
        return self._waiting is not None

    def close(self) -> None:
        """Stop the logic (the computation is shutting down)."""
        if self._waiting is not None:
            self._waiting.remove_done_callback(self._future_done)
            if not self._waiting.done():
                self._waiting.cancel()
            self._waiting = None
        if self._coro is not None:
            self._coro.close()
            self._coro = None
        self.done = True

    # -- errors ------------------------------------------------------------------------

    def describe(self) -> str:
        return (f"operator {self.name!r} (#{self.index} at {'/'.join(map(str, self.path))}) "
                f"in dataflow {self.scope.dataflow.name!r} on worker {self.worker.index}")

    def _failure(self, exc: BaseException) -> AiotimelyError:
        where = self.describe()
        at = f" at time {self.current_time!r}" if self.current_time is not None else ""
        kind = CapabilityError if isinstance(exc, CapabilityError) else DataflowError
        message = str(exc)
        if isinstance(exc, AiotimelyError) and message.startswith(where):
            message = message[len(where):].lstrip(": ")
        error = kind(f"{where} failed{at}: {type(exc).__name__}: {message}")
        error._located = True  # type: ignore[attr-defined]
        return error

    def __repr__(self) -> str:
        return f"OperatorRuntime({self.name!r}, path={self.path})"


class _MailboxPusher:
    """Pushes batches into one mailbox on this worker."""

    __slots__ = ("_box",)

    def __init__(self, box: Mailbox) -> None:
        self._box = box

    def __call__(self, time: Any, batch: list) -> None:
        self._box.push((time, batch))

