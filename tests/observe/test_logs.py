"""The human-readable log (stdlib ``logging``, loggers under ``"aiotimely"``): what a user sees at INFO."""

from __future__ import annotations

import asyncio
import logging

import pytest

import aiotimely as at
from aiotimely.launch import free_ports

TIMEOUT = 30.0


def messages(caplog: pytest.LogCaptureFixture, logger: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == logger]


def test_workers_and_dataflows_are_logged_at_info(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="aiotimely")

    def build(worker: at.Worker) -> None:
        worker.dataflow(lambda scope: at.to_stream(range(10), scope).exchange(lambda x: x).inspect(print),
                        name="numbers")

    at.execute(build, workers=2)
    lines = messages(caplog, "aiotimely.worker")
    for w in (0, 1):
        assert f"worker {w} of 2 started" in lines
        built = [line for line in lines if line.startswith(f"worker {w}: dataflow 'numbers' (#0) built with")]
        assert len(built) == 1 and "ToStream" in built[0] and "Exchange" in built[0]
        assert f"worker {w}: dataflow 'numbers' (#0) complete" in lines
        assert any(line.startswith(f"worker {w} stopped after") for line in lines)
    assert lines.index("worker 0 of 2 started") < lines.index("worker 0: dataflow 'numbers' (#0) complete")


def test_a_failed_worker_says_which_dataflows_it_left_incomplete(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="aiotimely.worker")

    def build(worker: at.Worker) -> None:
        worker.dataflow(lambda scope: at.to_stream([1, 0], scope).map(lambda x: 1 // x), name="divide")

    with pytest.raises(at.DataflowError):
        at.execute(build)
    assert any("stopped after" in line and "1 dataflow(s) incomplete" in line
               for line in messages(caplog, "aiotimely.worker"))


def test_nothing_is_logged_below_warning_by_default(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    at.execute(lambda worker: worker.dataflow(lambda scope: at.to_stream(range(3), scope).inspect(print)))
    assert not [r for r in caplog.records if r.name.startswith("aiotimely")]


def test_peers_connecting_and_closing_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    """Two processes of one computation, on one event loop here, over real TCP connections."""
    caplog.set_level(logging.INFO, logger="aiotimely.cluster")
    addresses = [f"127.0.0.1:{port}" for port in free_ports(2)]

    def build(worker: at.Worker) -> None:
        worker.dataflow(lambda scope: at.to_stream(range(10), scope).exchange(lambda x: x).inspect(print))

    async def main() -> None:
        await asyncio.wait_for(asyncio.gather(*(
            at.execute_async(build, processes=2, process=p, addresses=addresses, secret="log-test")
            for p in (0, 1))), TIMEOUT)

    asyncio.run(main())
    lines = messages(caplog, "aiotimely.cluster")
    assert f"process 1 connected to process 0 ({addresses[0]})" in lines
    assert f"process 0 connected to process 1 ({addresses[1]})" in lines
    closed = [line for line in lines if "closed (" in line]
    assert closed and all("bytes sent" in line for line in closed)
    assert not [r for r in caplog.records if r.name == "aiotimely.cluster" and r.levelno >= logging.WARNING]


def test_a_big_dataflow_is_logged_in_one_short_line(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="aiotimely.worker")

    def build(worker: at.Worker) -> None:
        def make(scope: at.Scope[at.Stream]) -> None:
            stream = at.to_stream(range(3), scope)
            for _ in range(30):
                stream = stream.exchange(lambda x: x)

        worker.dataflow(make, name="long")

    at.execute(build)
    (built,) = [line for line in messages(caplog, "aiotimely.worker") if "'long' (#0) built" in line]
    assert "built with 31 operators: ToStream, Exchange," in built and built.endswith("... (11 more)")
