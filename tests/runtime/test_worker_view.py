"""A worker's public, read-only scheduler view (``worker.scheduler_view``): what it shows, that everything in
``aiotimely.observe`` takes it, and that nothing outside the worker facade reads a worker's private scheduler."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

import aiotimely as at
import aiotimely.execution
import aiotimely.options
from aiotimely.observe.frames import LiveFeed
from aiotimely.observe.snapshot import snapshot
from aiotimely.observe.view import SchedulerView

PACKAGE = Path(at.__file__).resolve().parent


def _doubled(inp: at.InputHandle[int], scope: at.Scope[at.Stream]) -> at.ProbeHandle:
    return inp.to_stream(scope).map(lambda x: 2 * x).probe()


def test_the_view_shows_the_worker_its_counts_and_its_dataflows() -> None:
    async def main() -> None:
        async with at.Worker() as worker:
            view = worker.scheduler_view
            assert isinstance(view, SchedulerView)
            assert (view.index, view.peers) == (worker.index, worker.peers) == (0, 1)
            inp: at.InputHandle[int] = at.InputHandle()
            probe = worker.dataflow(lambda scope: _doubled(inp, scope), name="doubled")
            assert len(view.dataflows()) == 1
            inp.send_batch([1, 2, 3])
            inp.advance_to(1)
            await worker.step_while(lambda: probe.less_than(1))
            assert view.rounds > 0 and view.operators_run > 0
            assert view.statistics().rounds == view.rounds
            assert view.statistics().operators_run == worker.statistics().operators_run
            inp.close()
        assert view.dataflows() == []  # (complete ones are gone)

    asyncio.run(main())


def test_observe_draws_and_snapshots_a_worker_through_its_view() -> None:
    async def main() -> tuple[str, str, Any, str | None]:
        async with at.Worker() as worker:
            inp: at.InputHandle[int] = at.InputHandle()
            worker.dataflow(lambda scope: _doubled(inp, scope), name="doubled")
            view = worker.scheduler_view
            drawn = at.to_dot(view), at.to_dot(worker)
            shown = snapshot(view)
            frame = LiveFeed([view]).frame()
            inp.close()
            return drawn[0], drawn[1], shown, frame

    by_view, by_worker, shown, frame = asyncio.run(main())
    assert by_view == by_worker and '"dataflow \'doubled\'"' in by_view
    assert [flow.name for flow in shown.dataflows] == ["doubled"]
    assert frame is not None and '"name":"doubled"' in frame


def test_metrics_are_collected_through_the_view() -> None:
    pytest.importorskip("prometheus_client")
    from aiotimely.observe.metrics import MetricsCollector

    async def main() -> dict[str, float]:
        async with at.Worker() as worker:
            inp: at.InputHandle[int] = at.InputHandle()
            probe = worker.dataflow(lambda scope: _doubled(inp, scope), name="doubled")
            inp.send_batch([1, 2, 3])
            inp.advance_to(1)
            await worker.step_while(lambda: probe.less_than(1))
            families = list(MetricsCollector([worker.scheduler_view]).collect())
            inp.close()
        return {sample.name: sample.value for family in families for sample in family.samples
                if sample.name == "aiotimely_worker_rounds_total"}

    rounds = asyncio.run(main())
    assert rounds["aiotimely_worker_rounds_total"] > 0


def test_execute_gives_each_worker_a_view_of_its_own() -> None:
    def build(worker: at.Worker) -> tuple[int, int]:
        view = worker.scheduler_view
        return view.index, view.peers

    assert at.execute(build, workers=3) == [(0, 3), (1, 3), (2, 3)]


def test_nothing_outside_the_worker_facade_reads_a_workers_private_scheduler() -> None:
    facade = PACKAGE / "execution" / "worker.py"
    readers = [str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
               if path != facade and re.search(r"(?<!self)\._scheduler\b", path.read_text())]
    assert readers == []


def test_the_execution_package_offers_what_the_module_did() -> None:
    assert sorted(aiotimely.execution.__all__) == sorted(
        ["Worker", "execute", "execute_async", "execute_from_args", "parse_args", "execute_options", "add_options",
         "stop_grace", "STOP_GRACE"])
    assert aiotimely.execution.Worker is at.Worker
    assert aiotimely.execution.execute_from_args is at.execute_from_args
    for name in ("parse_args", "execute_options", "add_options"):
        assert getattr(aiotimely.execution, name) is getattr(aiotimely.options, name)
