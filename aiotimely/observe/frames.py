"""What the live page is sent: one JSON frame with the process's workers' dataflow graph and, per operator and
worker, its input frontiers, queues, capabilities held, rate and whether it holds time back.

:class:`LiveFeed` turns :func:`~aiotimely.observe.snapshot.snapshot` of several workers
into frames and says when one is worth sending (it differs from the last one). A
frame has two parts: ``graph``, what the page lays out (its ``id`` changes only when
the graph does, so the page lays it out again only then), and ``workers``, the
live state it writes into the laid-out graph in place.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import deque
from typing import Any, Callable, Sequence

from .view import SchedulerView
from .snapshot import DataflowView, WorkerView, snapshots

__all__ = ["LiveFeed", "RATE_WINDOW"]

RATE_WINDOW = 1.0
"""Seconds over which a rate is measured: records taken (or sent) in the last second or so, per second."""


class LiveFeed:
    """Frames for the live page from ``schedulers`` (this process's workers), process ``process`` of
    ``processes``."""

    def __init__(self, schedulers: Sequence[SchedulerView], *, process: int = 0, processes: int = 1,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.schedulers = list(schedulers)
        self.process = process
        self.processes = processes
        self.latest: str | None = None
        """The last frame made, as JSON text (for a page that connects now)."""
        self._clock = clock
        self._history: deque[tuple[float, dict[tuple[int, str], tuple[int, int]]]] = deque()

    def frame(self) -> str | None:
        """The frame of the workers as they are now, as JSON text, or ``None`` if it is the same as the last."""
        views = snapshots(self.schedulers)
        rates = self._rates(views)
        graph = _graph(views)
        blob = {
            "process": self.process,
            "processes": self.processes,
            "graph": graph,
            "workers": [_state(view, rates) for view in views],
        }
        text = json.dumps(blob, separators=(",", ":"))
        if text == self.latest:
            return None
        self.latest = text
        return text

    def _rates(self, views: list[WorkerView]) -> dict[tuple[int, str], tuple[float, float]]:
        """Records taken and records sent per second by each operator on each worker, over the last
        :data:`RATE_WINDOW` seconds."""
        now = self._clock()
        counts = {(view.worker, op.id): (sum(i.records for i in op.inputs), sum(o.records for o in op.outputs))
                  for view in views for flow in view.dataflows for op in flow.operators}
        history = self._history
        history.append((now, counts))
        while len(history) > 2 and now - history[1][0] >= RATE_WINDOW:
            history.popleft()
        then, before = history[0]
        elapsed = now - then
        rates = {}
        for key, (taken, sent) in counts.items():
            was_taken, was_sent = before.get(key, (taken, sent))
            rates[key] = ((round(max(0, taken - was_taken) / elapsed, 1), round(max(0, sent - was_sent) / elapsed, 1))
                          if elapsed > 0 else (0.0, 0.0))
        return rates


def _graph(views: list[WorkerView]) -> dict[str, Any]:
    """The dataflows' graph (every worker builds the same; a dataflow complete on one worker may still run on
    another), with an ``id`` that changes only when the graph does."""
    flows: dict[int, DataflowView] = {}
    for view in views:
        for flow in view.dataflows:
            flows.setdefault(flow.index, flow)
    dataflows = [{
        "index": flow.index,
        "name": flow.name,
        "scopes": [{"id": s.id, "name": s.name, "parent": s.parent, "iterative": s.iterative, "inputs": s.inputs,
                    "outputs": s.outputs} for s in flow.scopes],
        "operators": [{"id": op.id, "scope": op.scope, "name": op.name, "stages": op.stages,
                       "inputs": [i.pact for i in op.inputs], "outputs": len(op.outputs)} for op in flow.operators],
        "edges": [{"scope": e.scope, "source": e.source, "source_port": e.source_port, "target": e.target,
                   "target_port": e.target_port, "pact": e.pact, "feedback": e.feedback} for e in flow.edges],
    } for _, flow in sorted(flows.items())]
    text = json.dumps(dataflows, sort_keys=True)
    return {"id": hashlib.sha1(text.encode()).hexdigest()[:16], "dataflows": dataflows}


def _state(view: WorkerView, rates: dict[tuple[int, str], tuple[float, float]]) -> dict[str, Any]:
    """One worker's live state: per dataflow its frontier, per operator what the page shows beside it (every
    time as its ``str``)."""
    dataflows = []
    for flow in view.dataflows:
        operators = {}
        for op in flow.operators:
            rate_in, rate_out = rates.get((view.worker, op.id), (0.0, 0.0))
            operators[op.id] = {
                "inputs": [{"frontier": [str(t) for t in i.frontier], "queued_batches": i.queued_batches,
                            "queued_records": i.queued_records, "records": i.records} for i in op.inputs],
                "capabilities": [[str(t) for t in o.capabilities] for o in op.outputs],
                "sent": [o.records for o in op.outputs],
                "done": op.done,
                "holds_back": op.holds_back,
                "blockers": op.blockers,
                "rate_in": rate_in,
                "rate_out": rate_out,
            }
        dataflows.append({"index": flow.index, "name": flow.name, "frontier": [str(t) for t in flow.frontier],
                          "operators": operators})
    return {"worker": view.worker, "peers": view.peers, "rounds": view.rounds, "operators_run": view.operators_run,
            "dataflows": dataflows}
