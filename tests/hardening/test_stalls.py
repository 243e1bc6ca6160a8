"""A wait that does not end because nothing lets time go (a forgotten ``advance_to``) is said in one log line naming
what holds time back and how to release it, once the worker has done nothing for a while: never while it works."""

from __future__ import annotations

import asyncio
import logging

import pytest

import aiotimely as at

STALL = "aiotimely.worker"


def stalls(caplog, level=logging.WARNING):
    return [r.getMessage() for r in caplog.records
            if r.name == STALL and r.levelno == level and "idle" in r.getMessage()]


@pytest.fixture
def quick(monkeypatch):
    """Stalls are said after 0.1 s of doing nothing (set through the environment, as a deployment would)."""
    monkeypatch.setenv("AIOTIMELY_STALL_AFTER", "0.1")


@pytest.mark.asyncio
async def test_a_forgotten_advance_to_is_said_naming_the_input_and_the_fix(caplog, quick):
    caplog.set_level(logging.INFO, logger="aiotimely")
    async with at.Worker() as worker:
        inp = at.InputHandle()
        probe = worker.dataflow(lambda s: inp.to_stream(s).map(lambda x: x + 1).probe(), name="x")
        inp.send(1)                                          # ... and no advance_to: time 0 never completes
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(probe.wait_beyond(0), 0.5)
        said = stalls(caplog)
        assert len(said) == 1, said                          # once, not every 0.1 s
        line = said[0]
        for part in ("worker 0", "a probe in dataflow 'x' waits for time 0", "operator 'Input' (#1)", "at time 0",
                     "call advance_to() or close() on its InputHandle", "AIOTIMELY_STALL_AFTER"):
            assert part in line, line
        inp.advance_to(1)
        await asyncio.wait_for(probe.wait_beyond(0), 5)


@pytest.mark.asyncio
async def test_a_stalled_step_while_is_said_too(caplog):
    caplog.set_level(logging.WARNING, logger="aiotimely")
    async with at.Worker(stall_after=0.1) as worker:
        inp = at.InputHandle()
        probe = worker.dataflow(lambda s: inp.to_stream(s).probe(), name="y")
        inp.send(1)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(worker.step_while(lambda: probe.less_than(1)), 0.5)
        said = stalls(caplog)
        assert len(said) == 1, said
        assert "worker.step_while" in said[0] and "operator 'Input' (#1) in dataflow 'y'" in said[0]
        assert "call advance_to() or close() on its InputHandle" in said[0]


@pytest.mark.asyncio
async def test_it_is_said_again_when_what_holds_time_back_changes(caplog, quick):
    caplog.set_level(logging.WARNING, logger="aiotimely")
    async with at.Worker() as worker:
        inp = at.InputHandle()
        probe = worker.dataflow(lambda s: inp.to_stream(s).probe(), name="z")
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(probe.wait_beyond(0), 0.35)
        inp.advance_to(1)                                    # time 0 completes; now 1 waits, held at 1
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(probe.wait_beyond(1), 0.35)
        said = stalls(caplog)
        assert len(said) == 2, said
        assert "waits for time 0" in said[0] and "waits for time 1" in said[1] and "at time 1" in said[1]
        inp.close()


@pytest.mark.asyncio
async def test_an_operator_holding_a_capability_is_named_with_its_time(caplog, quick):
    caplog.set_level(logging.WARNING, logger="aiotimely")
    kept = []

    async def keeper(input, output, cap):
        kept.append(cap)                                     # never dropped
        async for _ in input.activations():
            for time, batch in input.drain():
                output.session(time).give_many(batch)

    async with at.Worker() as worker:
        inp = at.InputHandle()
        probe = worker.dataflow(lambda s: inp.to_stream(s).unary_frontier(keeper, name="Keeper").probe(), name="k")
        inp.advance_to(3)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(probe.wait_beyond(1), 0.4)
        said = stalls(caplog)
        assert len(said) == 1, said
        assert "operator 'Keeper' (#2) in dataflow 'k' on worker 0 at time 0" in said[0]
        assert "holds a capability" in said[0] and "drop" in said[0]
        assert "'Input'" not in said[0]                      # the input is at 3: it does not hold time 1 back
        kept[0].drop()


@pytest.mark.asyncio
async def test_nothing_is_said_while_the_worker_runs_rounds(caplog, quick):
    caplog.set_level(logging.INFO, logger="aiotimely")

    async def ticker(output, cap):                           # real I/O that progresses: a tick every 20 ms
        for i in range(25):
            await asyncio.sleep(0.02)
            output.session(cap).give(i)
        cap.drop()

    async with at.Worker() as worker:
        probe = worker.dataflow(lambda s: at.source(s, "Ticker", ticker).probe(), name="ticks")
        await asyncio.wait_for(probe.wait_done(), 5)         # 0.5 s of waiting, never idle for 0.1 s
    assert stalls(caplog) == [] and stalls(caplog, logging.INFO) == []


@pytest.mark.asyncio
async def test_a_source_waiting_on_io_is_said_at_info_not_warning(caplog, quick):
    caplog.set_level(logging.INFO, logger="aiotimely")
    gate = asyncio.Event()

    async def waiting(output, cap):
        await gate.wait()                                    # a quiet connection: legitimately idle
        cap.drop()

    async with at.Worker() as worker:
        probe = worker.dataflow(lambda s: at.source(s, "Quiet", waiting).probe(), name="q")
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(probe.wait_done(), 0.4)
        assert stalls(caplog) == []
        said = stalls(caplog, logging.INFO)
        assert len(said) == 1, said
        assert "waits for dataflow 'q' to complete" in said[0] and "operator 'Quiet' (#1)" in said[0]
        assert "awaits" in said[0]
        gate.set()


@pytest.mark.asyncio
async def test_nothing_is_said_when_the_block_ends_or_when_turned_off(caplog, monkeypatch):
    caplog.set_level(logging.INFO, logger="aiotimely")
    monkeypatch.setenv("AIOTIMELY_STALL_AFTER", "0")         # off
    async with at.Worker() as worker:
        inp = at.InputHandle()
        probe = worker.dataflow(lambda s: inp.to_stream(s).probe(), name="off")
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(probe.wait_beyond(0), 0.3)
    monkeypatch.setenv("AIOTIMELY_STALL_AFTER", "0.1")
    async with at.Worker() as worker:
        inp = at.InputHandle()
        worker.dataflow(lambda s: inp.to_stream(s).probe(), name="ended")
    await asyncio.sleep(0.3)                                 # the worker stopped: no timer is left behind
    assert stalls(caplog) == [] and stalls(caplog, logging.INFO) == []


@pytest.mark.asyncio
async def test_a_bad_setting_is_refused_naming_it(monkeypatch):
    monkeypatch.setenv("AIOTIMELY_STALL_AFTER", "soon")
    with pytest.raises(ValueError, match="AIOTIMELY_STALL_AFTER"):
        at.Worker()
    monkeypatch.delenv("AIOTIMELY_STALL_AFTER")
    with pytest.raises(ValueError, match="stall_after"):
        at.Worker(stall_after=-1)


def test_another_worker_holding_time_back_is_named(run, caplog, monkeypatch):
    monkeypatch.setenv("AIOTIMELY_STALL_AFTER", "0.1")
    caplog.set_level(logging.WARNING, logger="aiotimely")

    async def build(worker):
        inp = at.InputHandle()
        probe = worker.dataflow(lambda s: inp.to_stream(s).probe(), name="pair")
        if worker.index == 0:
            inp.advance_to(1)
            await probe.wait_beyond(0)                       # held by worker 1's input, until it advances
        else:
            await asyncio.sleep(0.4)
            inp.advance_to(1)

    run(build, workers=2)
    said = stalls(caplog)
    assert len(said) == 1, said
    assert "a probe in dataflow 'pair' waits for time 0" in said[0]
    assert "operator 'Input' (#1) in dataflow 'pair' on worker 1 at time 0" in said[0]
    assert "on worker 0 at time" not in said[0]
