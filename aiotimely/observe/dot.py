"""A worker's dataflow graphs as text for other tools: Graphviz DOT (:func:`to_dot`) and Mermaid
(:func:`to_mermaid`).

Both draw what :func:`~aiotimely.observe.snapshot.snapshot` sees: every operator by
name (a fused chain lists its stages), each nested region or iterative scope as a
cluster (``subgraph``) with a small node per scope input and output, exchange and
broadcast edges labelled, and the edges that go round a loop (out of a feedback
operator) dashed. Paste the DOT into ``dot -Tsvg`` or any Graphviz viewer, the
Mermaid into a Markdown file that renders it (GitHub does) or https://mermaid.live.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterator, Protocol, Union

from ..dataflow.scope import ScopeCore
from .snapshot import DataflowView, EdgeView, OperatorView, ScopeView, WorkerView, dataflow_view, snapshot
from .view import SchedulerView

__all__ = ["to_dot", "to_mermaid", "HasScheduler", "Graphable"]


class HasScheduler(Protocol):
    """Anything that runs on a worker's scheduler and shows it read only: an :class:`aiotimely.Worker`."""

    @property
    def scheduler_view(self) -> SchedulerView: ...


Graphable = Union[HasScheduler, SchedulerView, WorkerView, DataflowView, "ScopeCore[Any]"]
"""What :func:`to_dot` and :func:`to_mermaid` draw: a worker (its dataflows as they run), a
:class:`~aiotimely.observe.snapshot.WorkerView` or ``DataflowView`` taken before, or a scope (its whole dataflow,
also while ``build`` is still making it)."""


def to_dot(source: Graphable, *, dataflow: int | str | None = None) -> str:
    """The dataflows of ``source`` (a worker, a scope being built, or a snapshot) as a Graphviz ``digraph``.

    ``dataflow`` (an index or a name) keeps only that dataflow. Every dataflow is a cluster, and so is
    every scope nested in it; node ids are the snapshot's ids (``"0.3"``), so they match the live page's.
    """
    flows = _dataflows(source, dataflow)
    lines = ["digraph aiotimely {", "  compound=true;", "  rankdir=TB;",
             '  node [shape=box, style="rounded,filled", fillcolor="#f4f6fb", fontname="Helvetica", fontsize=11];',
             '  edge [fontname="Helvetica", fontsize=9];']
    for flow in flows:
        graph = _Graph.of(flow)
        lines.extend(_dot_scope(graph, graph.root, "  "))
        for edge in flow.edges:
            lines.append("  " + _dot_edge(graph, edge))
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_mermaid(source: Graphable, *, dataflow: int | str | None = None) -> str:
    """The dataflows of ``source`` (as for :func:`to_dot`) as a Mermaid ``flowchart``: scopes are
    ``subgraph`` blocks, exchange edges thick and labelled, loop edges dotted."""
    flows = _dataflows(source, dataflow)
    lines = ["flowchart TD"]
    for flow in flows:
        graph = _Graph.of(flow)
        lines.extend(_mermaid_scope(graph, graph.root, "  "))
        for edge in flow.edges:
            lines.append("  " + _mermaid_edge(graph, edge))
    return "\n".join(lines) + "\n"


# -- what to draw ----------------------------------------------------------------------------


def _dataflows(source: Graphable, which: int | str | None) -> list[DataflowView]:
    flows = _all_dataflows(source)
    if which is None:
        return flows
    chosen = [f for f in flows if (f.index == which if isinstance(which, int) else f.name == which)]
    if not chosen:
        present = ", ".join(f"{f.index} ({f.name!r})" for f in flows) or "none"
        raise ValueError(f"no dataflow {which!r} to draw: the dataflows are {present} (a dataflow shows once "
                         "worker.dataflow() installed it, until it completes)")
    return chosen


def _all_dataflows(source: Graphable) -> list[DataflowView]:
    """Every dataflow ``source`` shows: a snapshot's, a scope's (whole), or a worker's as it runs."""
    if isinstance(source, DataflowView):
        return [source]
    if isinstance(source, WorkerView):
        return list(source.dataflows)
    if isinstance(source, ScopeCore):
        return [dataflow_view(source)]
    view = getattr(source, "scheduler_view", source)  # (a Worker shows its scheduler; a Scheduler is a view)
    if not isinstance(view, SchedulerView):
        raise TypeError(f"cannot draw a {type(source).__name__}: pass a Worker, a Scope (inside build), a "
                        "scheduler view, or a WorkerView / DataflowView from aiotimely.observe.snapshot")
    return snapshot(view).dataflows


@dataclass
class _Graph:
    """One dataflow as a tree of scopes, each with its operators, nested scopes and boundary ports."""

    root: ScopeView
    scopes: dict[str, ScopeView]
    children: dict[str, list[ScopeView]] = field(default_factory=dict)
    operators: dict[str, list[OperatorView]] = field(default_factory=dict)
    by_id: dict[str, OperatorView] = field(default_factory=dict)

    @staticmethod
    def of(flow: DataflowView) -> _Graph:
        scopes = {s.id: s for s in flow.scopes}
        root = next(s for s in flow.scopes if s.parent is None)
        graph = _Graph(root, scopes)
        for s in flow.scopes:
            if s.parent is not None:
                graph.children.setdefault(s.parent, []).append(s)
        for op in flow.operators:
            graph.operators.setdefault(op.scope, []).append(op)
            graph.by_id[op.id] = op
        return graph

    def source(self, edge: EdgeView) -> str:
        """The node an edge leaves: an operator, a scope's input (inside it), or a nested scope's output."""
        if edge.source == edge.scope:
            return port_node(edge.scope, "in", edge.source_port)
        if edge.source in self.scopes:
            return port_node(edge.source, "out", edge.source_port)
        return edge.source

    def target(self, edge: EdgeView) -> str:
        """The node an edge enters: an operator, a scope's output (inside it), or a nested scope's input."""
        if edge.target == edge.scope:
            return port_node(edge.scope, "out", edge.target_port)
        if edge.target in self.scopes:
            return port_node(edge.target, "in", edge.target_port)
        return edge.target

    def ports(self, scope: ScopeView) -> Iterator[tuple[str, str]]:
        """The boundary nodes of a nested scope and their labels."""
        for kind, count in (("in", scope.inputs), ("out", scope.outputs)):
            for port in range(count):
                yield port_node(scope.id, kind, port), f"{kind} {port}"


def port_node(scope: str, kind: str, port: int) -> str:
    """The id of the node standing for input or output ``port`` of nested scope ``scope``: ``"0.3/in0"``."""
    return f"{scope}/{kind}{port}"


def _label(op: OperatorView) -> str:
    """An operator's name, or a fused chain's stages in order (its name is its first stage's)."""
    return " → ".join(op.stages) if op.stages and len(op.stages) > 1 else op.name


def _scope_label(scope: ScopeView, top: bool) -> str:
    if top:
        return f"dataflow {scope.name!r}"
    return f"{scope.name} (iterative)" if scope.iterative else f"{scope.name} (region)"


def _edge_text(edge: EdgeView) -> str:
    return "loop" if edge.feedback else edge.pact if edge.pact != "pipeline" else ""


# -- DOT -----------------------------------------------------------------------------------


def _q(text: str) -> str:
    """A DOT quoted string (JSON's escapes are DOT's for quotes, backslashes and newlines)."""
    return json.dumps(text, ensure_ascii=False)


def _dot_scope(graph: _Graph, scope: ScopeView, indent: str) -> Iterator[str]:
    top = scope.parent is None
    style = "rounded,dashed" if scope.iterative and not top else "rounded"
    yield f"{indent}subgraph {_q('cluster_' + scope.id)} {{"
    inner = indent + "  "
    yield f'{inner}label={_q(_scope_label(scope, top))}; style="{style}"; color="#8a94a6"; fontname="Helvetica";'
    if not top:
        for node, text in graph.ports(scope):
            yield f'{inner}{_q(node)} [label={_q(text)}, shape=circle, fixedsize=true, width=0.35, fontsize=8];'
    for op in graph.operators.get(scope.id, []):
        yield f"{inner}{_q(op.id)} [label={_q(_label(op))}, tooltip={_q(op.id)}];"
    for child in graph.children.get(scope.id, []):
        yield from _dot_scope(graph, child, inner)
    yield f"{indent}}}"


def _dot_edge(graph: _Graph, edge: EdgeView) -> str:
    attrs = []
    text = _edge_text(edge)
    if text:
        attrs.append(f"label={_q(text)}")
    if edge.feedback:
        attrs.append('style=dashed, color="#7a5cc7"')
    elif edge.pact != "pipeline":
        attrs.append('penwidth=2, color="#d9822b"')
    target = graph.by_id.get(edge.target)
    if target is not None and len(target.inputs) > 1:
        attrs.append(f"headlabel={_q(str(edge.target_port))}")
    source = graph.by_id.get(edge.source)
    if source is not None and len(source.outputs) > 1:
        attrs.append(f"taillabel={_q(str(edge.source_port))}")
    suffix = f" [{', '.join(attrs)}]" if attrs else ""
    return f"{_q(graph.source(edge))} -> {_q(graph.target(edge))}{suffix};"


# -- Mermaid ---------------------------------------------------------------------------------


def _mid(node: str) -> str:
    """A Mermaid node id (letters, digits and ``_`` only) for a snapshot id or a boundary node."""
    return "n" + node.replace(".", "_").replace("/", "_")


def _mtext(text: str) -> str:
    """A Mermaid quoted label: ``& " < > #`` as HTML entities (Mermaid 11 shows its own ``#quot;`` codes
    as they are), newlines as ``<br>``."""
    text = (text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("#", "&num;"))
    return '"' + text.replace("\n", "<br>") + '"'


def _mermaid_scope(graph: _Graph, scope: ScopeView, indent: str) -> Iterator[str]:
    top = scope.parent is None
    yield f"{indent}subgraph {_mid('s' + scope.id)}[{_mtext(_scope_label(scope, top))}]"
    inner = indent + "  "
    if not top:
        for node, text in graph.ports(scope):
            yield f"{inner}{_mid(node)}(({_mtext(text)}))"
    for op in graph.operators.get(scope.id, []):
        yield f"{inner}{_mid(op.id)}[{_mtext(_label(op))}]"
    for child in graph.children.get(scope.id, []):
        yield from _mermaid_scope(graph, child, inner)
    yield f"{indent}end"


def _mermaid_edge(graph: _Graph, edge: EdgeView) -> str:
    source, target = _mid(graph.source(edge)), _mid(graph.target(edge))
    text = _edge_text(edge)
    if edge.feedback:
        return f"{source} -. {text} .-> {target}"
    if text:
        return f"{source} == {text} ==> {target}"
    return f"{source} --> {target}"
