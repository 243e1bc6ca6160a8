"""A worker's dataflows as they are right now: the graph, each input's frontier, the capabilities each operator
holds, what waits in its queues, and which operators hold time back.

:func:`snapshot` reads the live runtime without changing it (nothing is counted or
scheduled), so the metrics exporter, the live page and :func:`~aiotimely.observe.dot.to_dot`
can all call it as often as they like. The views are plain dataclasses whose times
are the dataflow's own objects; :meth:`WorkerView.as_json` gives the same with
times as strings, for a page or a file.

A dataflow still being built (inside ``build``, before ``worker.dataflow`` returns) can
be seen with :func:`dataflow_view` on any of its scopes: its graph so far, with
no frontiers yet.

Ids: an operator or a scope is named by its path (dataflow index, then child
indices) joined with dots, ``"0.3"`` or ``"0.2.1"``; unique on a worker and the
same on every worker. Inside a scope, node 0 of its progress graph is the scope's
own boundary, so an edge whose ``source`` or ``target`` is a scope's id enters or
leaves that scope.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

from ..dataflow.operator import OperatorRuntime
from ..dataflow.scope import ScopeCore
from ..progress import Antichain, Source, Target
from .view import SchedulerView

__all__ = ["DataflowView", "EdgeView", "InputView", "OperatorView", "OutputView", "ScopeView", "WorkerView",
           "dataflow_view", "node_id", "snapshot", "snapshots"]


def node_id(path: tuple[int, ...]) -> str:
    """The id of the operator or scope at ``path``: its indices joined with dots."""
    return ".".join(map(str, path))


@dataclass(slots=True)
class InputView:
    """One operator input: its frontier (the times that may still arrive), what waits in its queue
    (``queued_bytes``: what the containers waiting weigh), how it is fed (``pact``: ``"pipeline"``,
    ``"exchange"`` or ``"broadcast"``), and the batches (``taken``) and records taken so far."""

    port: int
    frontier: list[Any]
    queued_batches: int
    queued_records: int
    queued_times: list[Any]
    pact: str
    taken: int
    records: int = 0
    queued_bytes: int = 0


@dataclass(slots=True)
class OutputView:
    """One operator output, the times of the capabilities the operator holds on it, and the records sent on it
    so far."""

    port: int
    capabilities: list[Any]
    records: int = 0


@dataclass(slots=True)
class OperatorView:
    """One operator: where it is, its ports, whether it finished, and whether it holds time back (it holds a
    capability or a queued batch at a time no other pointstamp of its scope is earlier than)."""

    id: str
    path: tuple[int, ...]
    scope: str
    name: str
    stages: list[str] | None
    inputs: list[InputView]
    outputs: list[OutputView]
    done: bool
    holds_back: bool
    blockers: list[str]


@dataclass(slots=True)
class ScopeView:
    """A scope: the dataflow's root or a nested region (``iterative`` when its timestamps add a loop counter)."""

    id: str
    path: tuple[int, ...]
    name: str
    parent: str | None
    iterative: bool
    inputs: int
    outputs: int


@dataclass(slots=True)
class EdgeView:
    """A dataflow edge in ``scope``: output ``source_port`` of ``source`` feeds input ``target_port`` of
    ``target`` (an id equal to ``scope`` is the scope's boundary), the target input's ``pact``; ``feedback``
    when ``source`` is a loop's feedback operator (the edge goes round the loop, to the next iteration)."""

    scope: str
    source: str
    source_port: int
    target: str
    target_port: int
    pact: str
    feedback: bool = False


@dataclass(slots=True)
class DataflowView:
    """One dataflow on one worker: its scopes, operators and edges, and the lower envelope (``frontier``) of the
    times still held or in flight at its root, the time the dataflow as a whole has not passed."""

    index: int
    name: str
    scopes: list[ScopeView]
    operators: list[OperatorView]
    edges: list[EdgeView]
    frontier: list[Any]


@dataclass(slots=True)
class WorkerView:
    """One worker's incomplete dataflows (complete ones are gone), and its scheduling counts."""

    worker: int
    peers: int
    rounds: int
    operators_run: int
    dataflows: list[DataflowView] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """The view as JSON-ready dicts and lists, every time as its ``str``."""
        blob: dict[str, Any] = _jsonable(self, time_fields=_TIME_FIELDS)
        return blob


_TIME_FIELDS = frozenset({"frontier", "queued_times", "capabilities"})


def _jsonable(value: Any, time_fields: frozenset[str], key: str | None = None) -> Any:
    """``value`` with every view as a dict, every tuple as a list and the times in ``time_fields`` as strings
    (as ``dataclasses.asdict`` would, without its deep copies: a view holds nothing to copy)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name), time_fields, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {k: _jsonable(v, time_fields, k) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        if key in time_fields:
            return [str(t) for t in value]
        return [_jsonable(v, time_fields) for v in value]
    return value


def snapshot(scheduler: SchedulerView) -> WorkerView:
    """What ``scheduler``'s worker runs right now (call it on the worker's event loop, between rounds)."""
    view = WorkerView(scheduler.index, scheduler.peers, scheduler.rounds, scheduler.operators_run)
    for root in scheduler.dataflows():
        if isinstance(root, ScopeCore):
            view.dataflows.append(_dataflow(root))
    return view


def snapshots(schedulers: Sequence[SchedulerView]) -> list[WorkerView]:
    """:func:`snapshot` of several workers of this process at once, with ``holds_back`` judged over all of them:
    an operator holds time back when one of its pointstamps (a capability held, a batch queued) is minimal
    among those of its scope on every worker given. (One worker's source at time 5 does not hold time back
    while another worker's is still at 0.)"""
    views = [snapshot(s) for s in schedulers]
    ttypes = {node_id(scope.path): scope.ttype for s in schedulers for root in s.dataflows()
              if isinstance(root, ScopeCore) for scope in _scopes(root)}
    by_scope: dict[str, list[OperatorView]] = {}
    for view in views:
        for flow in view.dataflows:
            for op in flow.operators:
                by_scope.setdefault(op.scope, []).append(op)
    for sid, ops in by_scope.items():
        ttype = ttypes.get(sid)
        if ttype is None:
            continue
        minimal = Antichain((t for op in ops if not op.done for t in _view_pointstamps(op)),
                            less_equal=ttype.less_equal)
        for op in ops:
            op.holds_back = not op.done and any(t in minimal.elements for t in _view_pointstamps(op))
    return views


def _view_pointstamps(op: OperatorView) -> list[Any]:
    return [t for o in op.outputs for t in o.capabilities] + [t for i in op.inputs for t in i.queued_times]


def dataflow_view(scope: ScopeCore[Any]) -> DataflowView:
    """The dataflow ``scope`` belongs to (any of its scopes), whole, as it is now: built and running (as in
    :func:`snapshot`), or still being built, when it shows the operators and edges made so far."""
    return _dataflow(scope.dataflow.root)


def _dataflow(root: ScopeCore[Any]) -> DataflowView:
    scopes: list[ScopeView] = []
    operators: list[OperatorView] = []
    edges: list[EdgeView] = []
    for scope in _scopes(root):
        sid = node_id(scope.path)
        shape = scope.progress if scope.progress is not None else scope._builder
        scopes.append(ScopeView(
            sid, scope.path, scope.name, None if scope.parent is None else node_id(scope.parent.path),
            scope.refinement.kind == "iterative",
            shape.inputs if shape is not None else 0, shape.outputs if shape is not None else 0,
        ))
        edges.extend(_edges(scope, sid))
        ops = [child for child in scope.children.values() if isinstance(child, OperatorRuntime)]
        minimal = _lower_envelope(scope, ops)
        operators.extend(_operator(op, sid, minimal) for op in ops)
    held = [t for op in operators if op.scope == node_id(root.path) for o in op.outputs for t in o.capabilities]
    queued = [t for op in operators if op.scope == node_id(root.path) for i in op.inputs for t in i.queued_times]
    frontier = Antichain(held + queued, less_equal=root.ttype.less_equal)
    return DataflowView(root.dataflow.index, root.dataflow.name, scopes, operators, edges,
                        sorted(frontier.elements, key=repr))


def _scopes(scope: ScopeCore[Any]) -> Iterator[ScopeCore[Any]]:
    yield scope
    for child in scope.children.values():
        if isinstance(child, ScopeCore):
            yield from _scopes(child)


def _edges(scope: ScopeCore[Any], sid: str) -> Iterator[EdgeView]:
    pairs: list[tuple[Source, Target]]
    if scope.progress is not None:
        pairs = [(s, t) for s, ts in scope.progress.graph.edges.items() for t in ts]
    elif scope._builder is not None:  # still being built: the edges made so far
        pairs = list(scope._builder._edges)
    else:
        pairs = []
    for source, target in pairs:
        target_child = scope.children.get(target.node)
        pact = "pipeline"
        if isinstance(target_child, OperatorRuntime) and target.port < len(target_child.pacts):
            pact = target_child.pacts[target.port]
        source_child = scope.children.get(source.node)
        feedback = isinstance(source_child, OperatorRuntime) and not source_child.bounded  # only loops are unbounded
        yield EdgeView(sid, _child_id(scope, source.node), source.port, _child_id(scope, target.node), target.port,
                       pact, feedback)


def _child_id(scope: ScopeCore[Any], node: int) -> str:
    return node_id(scope.path if node == 0 else scope.path + (node,))


def _pointstamps(op: OperatorRuntime) -> list[Any]:
    times = [t for _, t in op.books.held()]
    for port in op.inputs:
        times.extend(port.queued_times())
    return times


def _lower_envelope(scope: ScopeCore[Any], ops: list[OperatorRuntime]) -> Antichain[Any]:
    """The minimal times among every capability held and batch queued in ``scope``."""
    return Antichain((t for op in ops if not op.done for t in _pointstamps(op)), less_equal=scope.ttype.less_equal)


def _operator(op: OperatorRuntime, sid: str, minimal: Antichain[Any]) -> OperatorView:
    inputs = []
    for port in op.inputs:
        batches, records, nbytes = port.queued()
        frontier = op.current_frontier(port.port)
        pact = op.pacts[port.port] if port.port < len(op.pacts) else "pipeline"
        inputs.append(InputView(port.port, sorted(frontier.elements, key=repr), batches, records,
                                sorted(set(port.queued_times()), key=repr), pact, port.taken, port.records, nbytes))
    outputs = [OutputView(o, sorted({t for out, t in op.books.held() if out == o}, key=repr),
                          op.outputs[o].records) for o in range(len(op.outputs))]
    holds_back = not op.done and any(t in minimal.elements for t in _pointstamps(op))
    stages = [stage.name for stage in op.chain.stages] if op.chain is not None else None
    return OperatorView(node_id(op.path), op.path, sid, op.name, stages, inputs, outputs, op.done, holds_back,
                        op.blockers())
