"""An operator's progress bookkeeping, apart from the operator that runs the logic (as timely splits them).

:class:`ProgressBooks` owns what the progress protocol needs of one operator on one
worker: the capabilities it holds, as counts per output and time, and the change
batches its scope collects after each activation (timely's ``SharedProgress``):
capability changes (internal), records consumed per input, records produced per
output, and the input frontier changes the scope's tracker pushes back. Capabilities,
sessions and ports change progress only through its methods; the operator runs the
logic and asks it what it holds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator

from ..progress import ChangeBatch
from ..worker.logging import CapabilityEvent

if TYPE_CHECKING:
    from ..progress import OperatorProgress, SharedProgress
    from ..worker import WorkerHandle

__all__ = ["ProgressBooks"]


class ProgressBooks:
    """The progress books of one operator on one worker (see the module)."""

    __slots__ = ("_worker", "_path", "_shared", "_held")

    def __init__(self, worker: WorkerHandle, path: tuple[int, ...]) -> None:
        self._worker = worker
        self._path = path
        self._shared: SharedProgress | None = None
        self._held: dict[tuple[int, Any], int] = {}

    def open(self, shared: SharedProgress, outputs: int, minimum: Any) -> None:
        """The operator's shape is complete: keep its change batches, holding one capability per output at
        ``minimum`` (the initial capabilities, not reported: the scope starts from them)."""
        self._shared = shared
        for output in range(outputs):
            self._held[(output, minimum)] = 1

    def add_output(self, progress: OperatorProgress, index: int, minimum: Any) -> ChangeBatch[Any]:
        """One more output (``index``), holding no capability (as if its initial one was dropped at once); the
        batch that counts what it produces."""
        produced, _ = progress.add_output()
        self._held[(index, minimum)] = 1
        self.hold(index, minimum, -1)
        return produced

    # -- capabilities ---------------------------------------------------------------

    def hold(self, output: int, time: Any, diff: int) -> None:
        """Hold ``diff`` more (or fewer) capabilities at ``time`` on ``output``: reported to the scope as an
        internal change, and logged."""
        assert self._shared is not None
        self._shared.internals[output].update(time, diff)
        log = self._worker.logging
        if log is not None:
            log.log(CapabilityEvent(self._path, output, time, diff))
        held = self._held
        key = (output, time)
        count = held.get(key, 0) + diff
        if count:
            held[key] = count
        else:
            held.pop(key, None)

    def held(self) -> list[tuple[int, Any]]:
        """``(output, time)`` of every capability held."""
        return [key for key, n in self._held.items() if n > 0]

    def holds_any(self) -> bool:
        """Whether any capability is held."""
        return bool(self._held)

    def release_all(self) -> None:
        """Drop every capability held (the operator finished)."""
        for (output, time), n in list(self._held.items()):
            self.hold(output, time, -n)

    # -- records and frontiers ---------------------------------------------------------

    def consumed(self, port: int) -> ChangeBatch[Any]:
        """The batch that counts records taken at input ``port``."""
        assert self._shared is not None
        return self._shared.consumeds[port]

    def produced(self, port: int) -> ChangeBatch[Any]:
        """The batch that counts records sent at output ``port``."""
        assert self._shared is not None
        return self._shared.produceds[port]

    def consumed_elsewhere(self, port: int) -> bool:
        """Whether this activation took anything so far from an input other than ``port``."""
        assert self._shared is not None
        consumeds = self._shared.consumeds
        return len(consumeds) > 1 and any(consumed.diffs for i, consumed in enumerate(consumeds) if i != port)

    def consumed_by_input(self) -> Iterator[ChangeBatch[Any]]:
        """What this activation took, input by input (for the log of received messages)."""
        assert self._shared is not None
        return iter(self._shared.consumeds)

    def frontier_changes(self) -> Iterator[tuple[int, dict[Any, int]]]:
        """The input frontier changes the scope pushed since the last look, input by input (taken)."""
        assert self._shared is not None
        for port, changes in enumerate(self._shared.frontiers):
            if changes.diffs:
                yield port, changes.take()

    def __repr__(self) -> str:
        return f"ProgressBooks({self._path}, held={self.held()!r})"
