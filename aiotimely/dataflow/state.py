"""State that survives a crash: what operators keep, cut at times, written as snapshots, restored on resume.

**The cut.** Snapshot ``k`` (``k >= 1``) is the dataflow as if every record at a time
before ``k * every`` had been processed, and none at a later time: each stateful
operator's state after it applied exactly those times, and each source's position
from which every later record comes again. Frontiers make this cut cheap: an
operator that applies complete times in order (:meth:`InputPort.time_order
<aiotimely.dataflow.ports.InputPort.time_order>`) has, just before it applies time
``t``, its state as of every cut ``c <= t``; so it reports that state for the
snapshots between its last report and ``t`` (one piece covering a range of
snapshots: time may jump). Operators that keep nothing across times (map, count,
accumulate: their partial results are for times not yet complete, which a resumed
run reproduces) take no part.

**A snapshot** is written on a worker once every operator that keeps state there
reported a piece covering it; the worker's :class:`Snapshotter` writes it to the
:class:`StateStore` (off the event loop, in order). It is *complete* once it is
written on every worker and no operator on any worker holds a capability or has
records in flight at its times any more (everything before it was processed and
delivered: progress tracking knows this on every worker, and the store keeps it as
a "drained" mark). A small operator of the dataflow, ``Snapshots``, holds a
capability at the first snapshot not yet both written and drained: its frontier,
global by progress tracking, says which snapshots are complete everywhere. Only
those are resumed from, and only those let sources commit (Kafka offsets).

**Resume.** Started with the same store, a dataflow of the same shape finds the
latest snapshot complete everywhere; each operator's kept values come back as it
declares them, keyed state redistributed by key if the number of workers changed.
"""

from __future__ import annotations

import asyncio
import hashlib
import pickle
from collections import deque
from typing import TYPE_CHECKING, Any, Callable, Protocol, TypeVar

from ..comm.routing import route
from ..errors import RecoveryError
from ..progress import FrontierInterest
from .builder import OperatorBuilder
from .roles import Member, Restored

if TYPE_CHECKING:
    from .scope import ScopeCore

__all__ = ["StateStore", "Restored", "Participant", "Snapshotter", "shape_of"]

T = TypeVar("T")


class StateStore(Protocol):
    """Where snapshots go and come back from (:class:`aiotimely.recovery.Recovery` is one): bytes per
    operator, per worker, per range of snapshot ids."""

    every: int
    """Snapshots are cut every ``every`` units of the dataflow's (int) time."""

    def restore(self, dataflow: str, worker: int, peers: int) -> Restored | None:
        """The latest snapshot of ``dataflow`` complete on every worker, or ``None`` to start afresh; raise
        :class:`~aiotimely.errors.RecoveryError` if what is stored cannot be resumed from. Read before the
        dataflow is built, so that operators find their kept values as they are built."""
        ...

    def begin(self, dataflow: str, shape: str, worker: int, peers: int, snapshot: int | None) -> None:
        """The dataflow is built, of ``shape``, and resumes from ``snapshot`` (``None``: afresh): get ready
        to write this worker's snapshots from there on."""
        ...

    async def write(self, dataflow: str, worker: int, lo: int, hi: int | None, pieces: dict[str, bytes]) -> None:
        """Make durable this worker's snapshots ``lo..hi`` (``None``: every later one), all the same."""
        ...

    async def mark(self, dataflow: str, worker: int, drained: int | None) -> None:
        """No operator on any worker holds or receives anything at the times of snapshots up to ``drained``
        any more (``None``: at any time): they are complete wherever they are written."""
        ...

    async def prune(self, dataflow: str, worker: int, complete: int) -> None:
        """Snapshot ``complete`` is complete everywhere: what only older snapshots need may go."""
        ...


def shape_of(scope: ScopeCore[Any]) -> str:
    """A fingerprint of the dataflow's shape: its operators by path, name and ports."""
    parts = [f"{'/'.join(map(str, op.path[1:]))}:{op.name}:{len(op.inputs)}:{len(op.outputs)}"
             for op in scope.operators()]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


class _Kept:
    __slots__ = ("value", "keyed")

    def __init__(self, value: Any, keyed: bool) -> None:
        self.value = value
        self.keyed = keyed


_ALL = 1 << 62
"""Every snapshot id (as ``drained``): the dataflow is done."""


def _key(op: Member) -> str:
    """An operator's name in snapshots: its path in the dataflow and its name."""
    return f"{'/'.join(map(str, op.path[1:]))}:{op.name}"


def _kind(keyed: bool, value: Any) -> str:
    return f"{'keyed' if keyed else 'per-worker'} state of type {type(value).__name__}"


class Participant:
    """One operator's share in the snapshots of its worker: the values it keeps, the snapshots it covered."""

    def __init__(self, snapshotter: Snapshotter, op: Member) -> None:
        self.snapshotter = snapshotter
        self.op = op
        self.key = _key(op)
        self.kept: dict[str, _Kept] = {}
        self.through = snapshotter.start
        """The last snapshot id this operator reported."""
        self.finished = False
        self.sent_upto: Any = None
        """For a source: the latest time it sent at."""
        self.manual = False
        """The operator reports its pieces itself (:meth:`report`), as the Kafka source does."""

    # -- declaring ------------------------------------------------------------------

    def keep(self, name: str, initial: Callable[[], T], *, keyed: bool) -> T:
        """The value kept as ``name``: restored from the snapshot resumed from, else ``initial()``."""
        if name in self.kept:
            raise RecoveryError(f"{self.op.describe()} keeps two values named {name!r}")
        value = initial()
        restored = self.snapshotter.restored
        if restored is not None:
            value = self._restore(name, value, keyed, restored)
        self.kept[name] = _Kept(value, keyed)
        return value

    def restored_values(self) -> list[dict[str, tuple[bool, Any]]]:
        """What this operator kept on each worker of the run resumed from (empty when starting afresh)."""
        restored = self.snapshotter.restored
        if restored is None:
            return []
        return [pickle.loads(pieces[self.key]) for pieces in restored.pieces if self.key in pieces]

    def _restore(self, name: str, value: Any, keyed: bool, restored: Restored) -> Any:
        worker = self.op.worker
        olds = []
        for values in self.restored_values():
            if name in values:
                was_keyed, old = values[name]
                if was_keyed != keyed or type(old) is not type(value):
                    raise RecoveryError(
                        f"{self.op.describe()} keeps {name!r} as {_kind(keyed, value)}, and the snapshot in "
                        f"{restored.where} has it as {_kind(was_keyed, old)}: this program's dataflow changed; "
                        "use another directory (or move the old one away) to start afresh")
                olds.append(old)
        if keyed:
            peers, index = worker.peers, worker.index
            for old in olds:
                for key, item in old.items():
                    if route(key, peers) == index:
                        value[key] = item
            return value
        if restored.peers != worker.peers:
            if any(olds):
                raise RecoveryError(
                    f"{self.op.describe()} kept {name!r} per worker, and it cannot move from {restored.peers} "
                    f"workers to {worker.peers}: keep it by key (keyed_state) to change the number of workers, "
                    f"or resume with {restored.peers} workers")
            return value
        own = restored.pieces[worker.index].get(self.key)
        if own is None:
            return value
        values = pickle.loads(own)
        return values[name][1] if name in values else value

    # -- cutting --------------------------------------------------------------------

    def cut(self, upto: int) -> None:
        """Every time before ``upto`` is applied and none after: report the snapshots that ends."""
        hi = upto // self.snapshotter.every
        if hi > self.through and not self.finished:
            self.report(self.through + 1, hi, self.pickled())

    def sent(self, time: Any) -> None:
        if self.sent_upto is None or time > self.sent_upto:
            self.sent_upto = time

    def cut_source(self, upto: int) -> None:
        """A source moved its capability to ``upto``: its position stands for the snapshots up to there, as
        long as it sent nothing at their times or later (it sends at its capability's time, not ahead)."""
        every = self.snapshotter.every
        hi = upto // every
        if hi <= self.through or self.finished or self.manual:
            return
        if self.sent_upto is not None and self.sent_upto >= (self.through + 1) * every:
            raise RecoveryError(
                f"{self.op.describe()} keeps its position but sent at time {self.sent_upto!r}, ahead of snapshot "
                f"time {(self.through + 1) * every}: a source keeping its position sends at its capability's "
                "time and moves the capability before it sends at a later one")
        self.report(self.through + 1, hi, self.pickled())

    def finish(self) -> None:
        """Nothing more will change: the state now stands for every later snapshot too."""
        if not self.finished:
            self.report(self.through + 1, None, self.pickled())
            self.finished = True

    def pickled(self) -> bytes:
        values = {name: (kept.keyed, kept.value) for name, kept in self.kept.items()}
        for name, value in self.snapshotter.alongside.get(self.key, {}).items():
            values[name] = (False, value())
        return pickle.dumps(values, protocol=pickle.HIGHEST_PROTOCOL)

    def report(self, lo: int, hi: int | None, data: bytes) -> None:
        """This operator's state for snapshots ``lo..hi`` (``None``: all later ones) is ``data``."""
        if self.finished:
            return
        if lo != self.through + 1 or (hi is not None and hi < lo):
            raise RecoveryError(f"{self.op.describe()} reported snapshots {lo}..{hi} after {self.through}")
        self.through = hi if hi is not None else lo
        if hi is None:
            self.finished = True
        self.snapshotter.report(self, lo, hi, data)


class Snapshotter:
    """The snapshots of one dataflow on one worker: the operators taking part, their pieces merged into
    ranges every one of them covers, written in order; and which snapshots are complete everywhere."""

    def __init__(self, scope: ScopeCore[Any], store: StateStore) -> None:
        self.scope = scope
        self.store = store
        self.every = store.every
        self.restored: Restored | None = None
        self.start = 0
        self.participants: dict[str, Participant] = {}
        self.alongside: dict[str, dict[str, Callable[[], Any]]] = {}
        self._pieces: dict[Participant, deque[tuple[int, int | None, bytes]]] = {}
        self._sealed = False
        self._merged = 0          # the last snapshot id merged into a record
        self.durable = 0          # the last snapshot id written
        self.drained = 0          # the last snapshot id whose times nothing anywhere holds or receives any more
        self.marked = 0           # the last ``drained`` written
        self.complete = 0         # the last snapshot id complete on every worker
        self._done = False        # every participant reported its last piece, and it is written
        self._queue: deque[tuple[int, int | None, dict[str, bytes]]] = deque()
        self._writing = False
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._activate: Callable[[], None] = lambda: None
        self._held: int | None = 0
        self._own_nodes: frozenset[int] = frozenset()   # the Snapshots operators' (not waited for)
        self._everywhere = False  # the dataflow is complete on every worker: every snapshot is
        self._forget_final: Callable[[], None] = lambda: None
        if not scope.ttype.totally_ordered or scope.ttype.minimum != 0:
            raise RecoveryError(f"{scope.describe()} has {scope.ttype.name} times: snapshots need int times at "
                                "a dataflow's root")
        worker = scope.worker
        self.restored = store.restore(scope.dataflow.name, worker.index, worker.peers)
        if self.restored is not None:
            self.start = self._merged = self.durable = self.complete = self.restored.snapshot
            self.drained = self.marked = self.start
        scope.on_finish(self.build)
        scope.on_built(lambda: self.begin(shape_of(scope)))

    # -- starting -------------------------------------------------------------------

    def begin(self, shape: str) -> None:
        """The dataflow is built, of ``shape``: refuse a snapshot of another shape, and get the store ready."""
        restored, name, worker = self.restored, self.scope.dataflow.name, self.scope.worker
        if restored is not None and restored.shape != shape:
            raise RecoveryError(f"{restored.where} has snapshots of a dataflow {name!r} of another shape: it is "
                                "another program's, or this program's dataflow changed; use another directory "
                                "(or move the old one away) to start afresh")
        self.store.begin(name, shape, worker.index, worker.peers, restored.snapshot if restored else None)
        assert self.scope.progress is not None
        self.scope.progress.on_pointstamps = self._progressed
        self._forget_final = worker.on_final_snapshot(self.final_snapshot)

    @property
    def start_time(self) -> int:
        """The time a resumed dataflow's sources start at (0 afresh)."""
        return self.start * self.every

    def keep_alongside(self, op: Member, name: str, value: Callable[[], Any]) -> None:
        """``value()`` goes into ``op``'s snapshots as ``name`` whenever ``op`` keeps state of its own."""
        self.alongside.setdefault(_key(op), {})[name] = value

    def restored_alongside(self, op: Member, name: str) -> list[Any]:
        """The items of what ``op`` kept alongside as ``name``: its worker's, or every worker's when the number
        of workers changed."""
        restored = self.restored
        if restored is None:
            return []
        key, worker = _key(op), op.worker
        if restored.peers == worker.peers:
            own = restored.pieces[worker.index].get(key)
            values = pickle.loads(own) if own is not None else {}
            return list(values[name][1]) if name in values else []
        return [item for pieces in restored.pieces if key in pieces
                for item in pickle.loads(pieces[key]).get(name, (False, []))[1]]

    def join(self, op: Member) -> Participant:
        """``op`` keeps state: it takes part in every snapshot of its worker from now on."""
        if self._sealed:
            raise RecoveryError(f"{op.describe()} declared kept state after the dataflow started: declare it "
                                "at the start of the operator's logic, before its first await")
        participant = self.participants.get(op.name + repr(op.path))
        if participant is None:
            participant = self.participants[op.name + repr(op.path)] = Participant(self, op)
            self._pieces[participant] = deque()
        return participant

    def build(self) -> None:
        """Add the ``Snapshots`` operator (last in the root scope, so that it runs after every operator's first
        activation) and the one that watches its frontier."""
        scope = self.scope
        builder = OperatorBuilder(scope, "Snapshots")
        _, stream = builder.new_output()
        op = builder.op
        self._activate = lambda: op._activate()
        builder.build_raw(self._hold)
        watcher = OperatorBuilder(scope, "SnapshotsComplete")
        port = watcher.new_input(stream, interest=FrontierInterest.ALWAYS)

        def watch() -> None:
            port.discard()
            frontier = list(port.frontier)
            self._completed(frontier[0] // self.every - 1 if frontier else None)

        watcher.build_function(watch)
        self._op = builder.op
        self._own_nodes = frozenset((builder.op.index, watcher.op.index))

    def _hold(self) -> None:
        """The ``Snapshots`` operator: a capability at the first snapshot this worker has not written yet, or
        whose times some operator (on any worker) has not finished with yet."""
        self._sealed = True
        self._merge()
        self._progressed()
        op, old = self._op, self._held
        new = self._target()
        if old is not None and new != old:
            if new is not None:
                op.adjust_held(0, new, 1)
            op.adjust_held(0, old, -1)
            self._held = new

    def _target(self) -> int | None:
        """Where the ``Snapshots`` capability belongs (``None``: nowhere, all is written and done). A snapshot is
        complete once written on every worker and once no operator on any worker holds or receives anything at
        its times: then everything emitted before it was delivered, and nothing is in flight."""
        if self._done and self.marked == _ALL:
            return None
        return (min(self.durable, self.marked) + 1) * self.every

    def _progressed(self) -> None:
        """Pointstamps changed somewhere in the dataflow: snapshots written may have drained."""
        if self.drained < self.durable or (self._done and self.drained != _ALL):
            self._drain()

    def _drain(self) -> None:
        progress = self.scope.progress
        assert progress is not None
        least = progress.tracker.least_pointstamp(self._own_nodes)
        drained = _ALL if least is None else least // self.every
        if drained > self.drained:
            self.drained = drained
            self._write_soon()

    # -- pieces ---------------------------------------------------------------------

    def report(self, participant: Participant, lo: int, hi: int | None, data: bytes) -> None:
        self._pieces[participant].append((lo, hi, data))
        if self._sealed:
            self._merge()

    def _merge(self) -> None:
        """Turn pieces into records: each a range of snapshots that every participant covers with one piece."""
        pieces = self._pieces
        while True:
            if not pieces:
                if not self._done and not self._queue and not self._writing:
                    self._done = True
                    self._activate()
                return
            want = self._merged + 1
            chosen: dict[str, bytes] = {}
            hi: int | None = None
            infinite = True
            for participant, queue in pieces.items():
                while queue and queue[0][1] is not None and queue[0][1] < want:
                    queue.popleft()
                if not queue or queue[0][0] > want:
                    return  # some operator has not reached this snapshot yet
                lo_p, hi_p, data = queue[0]
                chosen[participant.key] = data
                if hi_p is not None:
                    hi = hi_p if infinite or hi is None else min(hi, hi_p)
                    infinite = False
            self._queue.append((want, None if infinite else hi, chosen))
            if infinite:
                self._pieces = {}
                pieces = self._pieces
            else:
                assert hi is not None
                self._merged = hi
            self._write_soon()

    def _write_soon(self) -> None:
        if not self._writing and (self._queue or self.drained > self.marked):
            self._writing = True
            self._op.externally_driven = True  # a write in flight will wake it: the dataflow is not stuck
            self.scope.worker.start_soon(self._write(), name=f"the snapshot writer of {self.scope.describe()}")

    async def _write(self) -> None:
        dataflow, worker = self.scope.dataflow.name, self.scope.worker.index
        try:
            while self._queue or self.drained > self.marked:
                if self._queue:
                    lo, hi, chosen = self._queue[0]
                    await self.store.write(dataflow, worker, lo, hi, chosen)
                    self._queue.popleft()
                    self.durable = hi if hi is not None else max(self.durable, lo)
                    if hi is None:
                        self._done = not self._pieces
                    self._drain()
                else:
                    drained = self.drained
                    await self.store.mark(dataflow, worker, None if drained == _ALL else drained)
                    self.marked = drained
                self._activate()
        finally:
            self._writing = False
            self._op.externally_driven = False

    # -- complete everywhere ----------------------------------------------------------

    def final_snapshot(self) -> asyncio.Future[None]:
        """The computation is being suspended (a graceful stop): a future done once a snapshot of everything
        this dataflow was given so far is complete everywhere. That is the snapshot of the least time anything
        anywhere in the dataflow still holds or carries: every operator will cut it as its frontier passes,
        and no window has to close for it (a restart resumes the open ones from it)."""
        fut = self.scope.worker.waiter()
        progress = self.scope.progress
        assert progress is not None
        least = progress.tracker.least_pointstamp(self._own_nodes)
        target = _ALL if least is None else max(self.complete, least // self.every)
        if self._everywhere or target <= self.complete:
            fut.set_result(None)
        else:
            self._waiters.append((target, fut))
        return fut

    def _completed(self, through: int | None) -> None:
        """The ``Snapshots`` frontier moved: snapshots up to ``through`` (``None``: all) are complete everywhere."""
        complete = through if through is not None else max(self.complete, self.durable)
        if through is None and not self._everywhere:
            self._everywhere = True
            self._forget_final()
        if complete > self.complete:
            self.complete = complete
            self.scope.worker.start_soon(self.store.prune(self.scope.dataflow.name, self.scope.worker.index,
                                                          complete),
                                         name=f"pruning the snapshots of {self.scope.describe()}")
        if self._waiters:
            still = []
            for wanted, fut in self._waiters:
                if fut.done():
                    continue
                if through is None or wanted <= complete:
                    fut.set_result(None)
                else:
                    still.append((wanted, fut))
            self._waiters = still

    async def wait_complete(self, snapshot: int) -> None:
        """Wait until snapshot ``snapshot`` is complete on every worker."""
        if snapshot <= self.complete:
            return
        fut = self.scope.worker.waiter()
        self._waiters.append((snapshot, fut))
        await fut
