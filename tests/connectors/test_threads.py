"""to_thread: blocking functions run in threads of the operator's own, bounded, while the loop goes on."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import aiotimely as at
from aiotimely.connectors import to_thread


def test_blocking_calls_run_off_the_loop_bounded_and_pass_on_what_was_delivered(run):
    async def build(worker):
        loop_thread = threading.get_ident()
        lock = threading.Lock()
        state = {"running": 0, "most": 0, "seen": [], "threads": set()}
        ticks = []

        def deliver(t, records):                    # a blocking call: sleeps in its thread
            with lock:
                state["running"] += 1
                state["most"] = max(state["most"], state["running"])
                state["threads"].add(threading.get_ident())
            time.sleep(0.02)
            with lock:
                state["seen"].extend(records)
                state["running"] -= 1

        async def ticker():                         # the loop keeps running while the calls block
            while True:
                ticks.append(time.perf_counter())
                await asyncio.sleep(0.001)

        inp = at.InputHandle()
        delivered = []
        probe = worker.dataflow(lambda s: to_thread(inp.to_stream(s), deliver, max_in_flight=2)
                                .inspect(delivered.append).probe())
        task = asyncio.ensure_future(ticker())
        for t in range(8):
            inp.send_batch([t * 10 + i for i in range(3)])
            inp.advance_to(t + 1)
        inp.close()
        await asyncio.wait_for(probe.wait_done(), 30)
        task.cancel()
        return state, delivered, loop_thread, len(ticks)

    state, delivered, loop_thread, ticks = run(build)[0]
    assert state["most"] == 2                        # never more than max_in_flight threads at once
    assert loop_thread not in state["threads"]
    assert ticks > 8                                 # 8 calls of 20 ms, two at a time: the loop ran meanwhile
    assert sorted(delivered) == sorted(state["seen"]) == sorted(t * 10 + i for t in range(8) for i in range(3))


def test_an_error_in_the_blocking_function_names_the_operator(run):
    def build(worker):
        def picky(record):
            if record == 3:
                raise ValueError("three is bad")

        worker.dataflow(lambda s: to_thread(at.to_stream(range(5), s), picky, per="record", name="Picky"))

    with pytest.raises(at.DataflowError, match="Picky.*ValueError: three is bad"):
        run(build)


def test_max_in_flight_must_be_positive():
    def build(worker):
        worker.dataflow(lambda s: to_thread(at.to_stream(range(5), s), print, max_in_flight=0))

    with pytest.raises(ValueError, match="max_in_flight must be at least 1"):
        at.execute(build)
