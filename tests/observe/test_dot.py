"""A worker's dataflow graph as Graphviz DOT and as Mermaid: operators by name, scopes as clusters, exchange and
loop edges marked; callable on a worker, and on a scope while build is still making it."""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
from typing import Any

import pytest

import aiotimely as at

from .flows import named
from aiotimely.observe.snapshot import snapshot


def _countdown(inp: at.InputHandle[int], scope: at.Scope[at.Stream], seen: list[str]) -> at.ProbeHandle:
    """An exchange, then an iterative scope whose loop counts each number down to zero."""
    numbers = named(inp.to_stream(scope).exchange(lambda x: x), "Numbers")

    def loop(inner: at.Scope[at.Stream]) -> at.Stream:
        handle, again = inner.feedback(1)
        counted = named(numbers.enter(inner).concat(again).map(lambda x: x - 1), "Decrement")
        named(counted.filter(lambda x: x > 0), "Positive").connect_loop(handle)
        return counted.leave()

    result = scope.iterative(loop, name="Countdown")
    seen.append(at.to_mermaid(scope))  # inside build: the graph made so far
    return result.probe()


def _block(text: str, opening: str, close: str) -> str:
    """The lines from ``opening`` to its matching closing line (by indentation)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(opening))
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = next(i for i in range(start + 1, len(lines)) if lines[i] == " " * indent + close)
    return "\n".join(lines[start:end + 1])


def _graphs() -> tuple[str, str, list[str], Any]:
    async def main() -> tuple[str, str, list[str], Any]:
        async with at.Worker() as worker:
            inp: at.InputHandle[int] = at.InputHandle()
            during: list[str] = []
            worker.dataflow(lambda scope: _countdown(inp, scope, during), name="numbers")
            dot, mermaid, view = at.to_dot(worker), at.to_mermaid(worker), snapshot(worker._scheduler)
            inp.close()
            return dot, mermaid, during, view

    return asyncio.run(main())


def test_dot_draws_scopes_as_clusters_with_exchange_and_loop_edges_marked() -> None:
    dot, _, _, view = _graphs()
    assert dot.startswith("digraph aiotimely {")
    dataflow = _block(dot, 'subgraph "cluster_0"', "}")
    assert "dataflow 'numbers'" in dataflow
    loop = _block(dot, 'subgraph "cluster_0.', "}")
    assert '"Countdown (iterative)"' in loop
    for name in ("Decrement", "Positive", "Feedback", "in 0", "out 0"):
        assert name in loop, name
    assert "Input" not in loop  # the input is outside the loop, in the dataflow's cluster
    assert re.search(r'"Input".*\n', dataflow)
    (exchange,) = [line for line in dot.splitlines() if 'label="exchange"' in line]
    (source,) = [op for op in view.dataflows[0].operators if op.name == "Input"]
    assert exchange.strip().startswith(f'"{source.id}" ->')
    (back,) = [line for line in dot.splitlines() if 'label="loop"' in line]
    assert "style=dashed" in back


def test_mermaid_draws_the_same_graph_and_works_inside_build() -> None:
    _, mermaid, during, _ = _graphs()
    assert mermaid.startswith("flowchart TD")
    loop = _block(mermaid, "subgraph ns0_", "end")
    assert '"Countdown (iterative)"' in loop and "Decrement" in loop and "Positive" in loop
    assert re.search(r"\bn0_\d+ == exchange ==> n0_\d+", mermaid)
    assert re.search(r"-\. loop \.->", mermaid)
    # inside build the dataflow was not installed yet, but its operators and edges so far are drawn
    (built,) = during
    assert "Countdown (iterative)" in built and "== exchange ==>" in built and "Probe" not in built
    assert "Probe" in mermaid


def test_names_that_need_quoting_stay_inside_their_labels() -> None:
    async def main() -> tuple[str, str]:
        async with at.Worker() as worker:
            inp: at.InputHandle[int] = at.InputHandle()
            worker.dataflow(lambda s: named(inp.to_stream(s), 'say "hi" <b>\\').probe(),
                            name="odd")
            inp.close()
            return at.to_dot(worker, dataflow="odd"), at.to_mermaid(worker, dataflow=0)

    dot, mermaid = asyncio.run(main())
    assert r'label="say \"hi\" <b>\\"' in dot
    assert '"say &quot;hi&quot; &lt;b&gt;\\"' in mermaid  # as Mermaid 11 shows them: say "hi" <b>\


def test_asking_for_what_is_not_there_says_what_is() -> None:
    async def main() -> None:
        async with at.Worker() as worker:
            inp: at.InputHandle[int] = at.InputHandle()
            worker.dataflow(lambda s: inp.to_stream(s).probe(), name="only")
            with pytest.raises(ValueError, match=r"no dataflow 'other'.*0 \('only'\)"):
                at.to_dot(worker, dataflow="other")
            inp.close()

    asyncio.run(main())
    with pytest.raises(TypeError, match="cannot draw a str: pass a Worker"):
        at.to_dot("worker")  # type: ignore[arg-type]


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_graphviz_renders_the_dot() -> None:
    dot, _, _, _ = _graphs()
    svg = subprocess.run(["dot", "-Tsvg"], input=dot, capture_output=True, text=True, check=True, timeout=60).stdout
    assert "Decrement" in svg and "Countdown (iterative)" in svg
