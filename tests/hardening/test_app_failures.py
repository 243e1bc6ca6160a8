"""A dataflow that fails inside ``async with at.Worker()`` is noticed at once, not when the block ends: it is
logged, the inputs refuse records, the worker says so (``failure``, ``failed()``, ``on_error``), and with
``cancel_on_error=True`` the block is cancelled as an ``asyncio.TaskGroup`` cancels its body."""

from __future__ import annotations

import asyncio
import logging

import pytest

import aiotimely as at


def dividing(worker, inp):
    """A dataflow that fails at time 0 when it is given 0: ``map(lambda x: 1 / x)``."""
    return worker.dataflow(lambda s: inp.to_stream(s).map(lambda x: 1 / x).probe(), name="div")


async def until_failed(worker, rounds=200):
    """Let the loop run until the worker's computation has failed (without the API under test)."""
    for _ in range(rounds):
        if worker._scheduler.computation.error is not None:
            return
        await asyncio.sleep(0)
    raise AssertionError("the computation did not fail")


@pytest.mark.asyncio
async def test_the_first_failure_is_logged_when_it_happens_located_with_its_traceback(caplog):
    caplog.set_level(logging.INFO, logger="aiotimely")
    logged_in_block = []
    with pytest.raises(at.DataflowError, match="ZeroDivisionError"):
        async with at.Worker() as worker:
            inp = at.InputHandle()
            dividing(worker, inp)
            inp.send(0)
            inp.advance_to(1)
            await until_failed(worker)
            await asyncio.sleep(0.01)
            logged_in_block = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(logged_in_block) == 1                       # while the block still ran, not when it ended
    record = logged_in_block[0]
    assert record.name == "aiotimely" and record.levelno == logging.ERROR
    message = record.getMessage()
    for part in ("operator 'Map' (#2)", "dataflow 'div'", "worker 0", "at time 0", "ZeroDivisionError"):
        assert part in message, message
    assert "cancel_on_error" in message                    # what the user can do about it
    assert record.exc_info is not None and record.exc_info[1] is worker.failure
    assert "1 / x" in caplog.text                          # the traceback reaches the user's function
    assert len([r for r in caplog.records if r.levelno >= logging.ERROR]) == 1   # once


@pytest.mark.asyncio
@pytest.mark.parametrize("action", ["send", "send_batch", "send_at", "advance_to", "close", "asend", "asend_batch"])
async def test_an_input_of_a_failed_computation_refuses_everything_at_once(action):
    with pytest.raises(at.DataflowError):
        async with at.Worker() as worker:
            inp = at.InputHandle()
            dividing(worker, inp)
            inp.send(0)
            inp.advance_to(1)
            await until_failed(worker)
            calls = {"send": lambda: inp.send(1), "send_batch": lambda: inp.send_batch([1, 2]),
                     "send_at": lambda: inp.send_at(3, 1), "advance_to": lambda: inp.advance_to(5),
                     "close": inp.close, "asend": lambda: inp.asend(1), "asend_batch": lambda: inp.asend_batch([1])}
            with pytest.raises(at.DataflowError) as info:
                result = calls[action]()
                if asyncio.iscoroutine(result):
                    await result
            error = info.value
            original = worker._scheduler.computation.error
            assert error is original or error.__cause__ is original
            assert "failed" in str(error) and "operator 'Map' (#2)" in str(error)
            assert error.operator == "Map" and error.dataflow == "div" and error.worker == 0
            with pytest.raises(at.DataflowError):            # and again: it does not wear off
                inp.send(2)


@pytest.mark.asyncio
async def test_asend_refuses_at_once_not_after_a_buffer_full():
    with pytest.raises(at.DataflowError):
        async with at.Worker() as worker:
            inp = at.InputHandle()
            worker.dataflow(lambda s: inp.to_stream(s).map(lambda r: r["key"]).probe(), name="keys")
            inp.send({"nokey": 1})                           # a key function raising KeyError
            inp.advance_to(1)
            await until_failed(worker)
            accepted = 0
            with pytest.raises(at.DataflowError, match="KeyError"):
                for i in range(10_000):
                    await inp.asend({"key": i})
                    accepted += 1
            assert accepted == 0


@pytest.mark.asyncio
async def test_the_worker_says_it_failed_failure_failed_and_on_error():
    called = []
    with pytest.raises(at.DataflowError) as info:
        async with at.Worker(on_error=called.append) as worker:
            inp = at.InputHandle()
            dividing(worker, inp)
            assert worker.failure is None
            watcher = asyncio.ensure_future(worker.failed())   # waiting before it fails
            inp.send(1)
            inp.advance_to(1)
            await worker.step()
            assert not watcher.done() and called == []
            inp.send(0)
            inp.advance_to(2)
            error = await asyncio.wait_for(watcher, 5)
            assert isinstance(error, at.DataflowError) and error is worker.failure
            assert called == [error]                         # once, when it happened
            assert await worker.failed() is error            # at once, now that it has
    assert info.value is called[0]
    assert called == [info.value]


@pytest.mark.asyncio
async def test_failed_returns_none_once_the_worker_stopped_without_failing():
    async with at.Worker() as worker:
        inp = at.InputHandle()
        dividing(worker, inp)
        watcher = asyncio.ensure_future(worker.failed())
        inp.send(1)
    assert await asyncio.wait_for(watcher, 5) is None
    assert worker.failure is None
    assert await worker.failed() is None


@pytest.mark.asyncio
async def test_an_on_error_that_raises_is_logged_and_the_failure_still_surfaces(caplog):
    def broken(error):
        raise RuntimeError("the callback is broken")

    with pytest.raises(at.DataflowError, match="ZeroDivisionError"):
        async with at.Worker(on_error=broken) as worker:
            inp = at.InputHandle()
            dividing(worker, inp)
            inp.send(0)
            inp.advance_to(1)
            await until_failed(worker)
            with pytest.raises(at.DataflowError):
                inp.send(1)
    assert any("on_error" in r.getMessage() and "the callback is broken" in caplog.text for r in caplog.records)


@pytest.mark.asyncio
async def test_an_async_on_error_runs_as_a_task():
    seen = []

    async def on_error(error):
        await asyncio.sleep(0)
        seen.append(error)

    with pytest.raises(at.DataflowError):
        async with at.Worker(on_error=on_error) as worker:
            inp = at.InputHandle()
            dividing(worker, inp)
            inp.send(0)
            inp.advance_to(1)
            await until_failed(worker)
            for _ in range(5):
                await asyncio.sleep(0)
            assert seen == [worker.failure]


@pytest.mark.asyncio
async def test_cancel_on_error_cancels_the_block_and_raises_the_failure_not_cancelled_error():
    reached = []
    loop = asyncio.get_running_loop()
    start = loop.time()
    with pytest.raises(at.DataflowError, match="operator 'Map'.*ZeroDivisionError") as info:
        async with at.Worker(cancel_on_error=True) as worker:
            inp = at.InputHandle()
            dividing(worker, inp)
            inp.send(0)
            inp.advance_to(1)
            try:
                await asyncio.sleep(60)                      # serving requests, say
            except asyncio.CancelledError:
                reached.append("cancelled")
                raise
            reached.append("after the sleep")
    assert reached == ["cancelled"]
    assert loop.time() - start < 5
    assert info.value is worker.failure
    assert asyncio.current_task().cancelling() == 0          # the cancellation was the worker's: taken back


@pytest.mark.asyncio
async def test_cancel_on_error_leaves_a_cancellation_from_outside_alone():
    inner_started = asyncio.Event()

    async def serve():
        async with at.Worker(cancel_on_error=True) as worker:
            inp = at.InputHandle()
            dividing(worker, inp)
            inp.send(0)
            inner_started.set()
            await asyncio.sleep(60)

    task = asyncio.ensure_future(serve())
    await asyncio.wait_for(inner_started.wait(), 5)
    task.cancel()                                            # cancelled from outside before the failure
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.asyncio
async def test_without_cancel_on_error_the_block_runs_on_and_a_wait_raises_the_failure():
    with pytest.raises(at.DataflowError):
        async with at.Worker() as worker:
            inp = at.InputHandle()
            probe = dividing(worker, inp)
            inp.send(0)
            inp.advance_to(1)
            with pytest.raises(at.DataflowError, match="ZeroDivisionError"):
                await asyncio.wait_for(probe.wait_beyond(0), 5)
            await asyncio.sleep(0)                           # the block was not cancelled


@pytest.mark.asyncio
async def test_an_http_like_handler_that_only_sends_answers_an_error_once_the_dataflow_failed():
    """The service shape: a handler calls ``inp.send`` and answers; once the dataflow failed, it answers 500."""
    answers = []

    def handle(value):
        try:
            inp.send(value)
        except at.DataflowError:
            answers.append(500)
        else:
            answers.append(200)

    with pytest.raises(at.DataflowError):
        async with at.Worker() as worker:
            inp = at.InputHandle()
            dividing(worker, inp)
            handle(1)
            handle(0)
            inp.advance_to(1)
            await until_failed(worker)
            handle(2)
    assert answers == [200, 200, 500]


def test_in_execute_the_failure_is_raised_not_logged(run, caplog):
    caplog.set_level(logging.INFO, logger="aiotimely")

    async def build(worker):
        inp = at.InputHandle()
        dividing(worker, inp)
        inp.send(0)
        inp.advance_to(1)
        for _ in range(50):
            await asyncio.sleep(0)
        inp.send(1)                                          # refused: the build ends with the error

    with pytest.raises(at.DataflowError, match="operator 'Map'.*ZeroDivisionError") as info:
        run(build)
    assert info.value.operator == "Map"
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []


@pytest.mark.asyncio
@pytest.mark.parametrize("workers", [1, 2])
async def test_in_execute_a_build_awaiting_something_else_is_cancelled_by_the_failure(workers):
    """A build that awaits what the dataflow has nothing to do with (a queue, a long sleep) ends when the
    computation fails: execute raises the failure at once instead of waiting for the build."""
    cleaned_up = []

    async def build(worker):
        inp = at.InputHandle()
        dividing(worker, inp)
        if worker.index == 0:
            inp.send(0)
        inp.advance_to(1)
        try:
            await asyncio.Event().wait()                     # never set
        finally:
            cleaned_up.append(worker.index)

    with pytest.raises(at.DataflowError, match="operator 'Map'.*ZeroDivisionError"):
        await asyncio.wait_for(at.execute_async(build, workers=workers), 20)
    assert sorted(cleaned_up) == list(range(workers))


@pytest.mark.asyncio
async def test_an_unordered_input_and_a_sequencer_of_a_failed_computation_refuse_at_once():
    with pytest.raises(at.DataflowError, match="operator 'Map'"):      # (what leaving the block raises)
        async with at.Worker() as worker:
            inp = at.InputHandle()
            dividing(worker, inp)
            unordered = {}

            def build(scope):
                unordered["input"], stream = scope.new_unordered_input()
                stream.probe()

            worker.dataflow(build, name="unordered")
            handle, cap = unordered["input"]
            sequencer = at.Sequencer(worker)
            session = handle.session(cap)
            session.give(1)                                  # accepted while the computation runs
            sequencer.push("before")
            inp.send(0)
            inp.advance_to(1)
            await until_failed(worker)
            with pytest.raises(at.DataflowError, match=r"cannot open a session through the unordered input of "
                                                       r"operator 'UnorderedInput' .*: the computation failed: "
                                                       r"operator 'Map'"):
                handle.session(cap)
            with pytest.raises(at.DataflowError, match="cannot send through the unordered input"):
                session.give(2)                              # a session opened before the failure refuses too
            with pytest.raises(at.DataflowError, match=r"cannot push through the Sequencer of worker 0: the "
                                                       r"computation failed: operator 'Map'") as info:
                sequencer.push("after")
            assert info.value.operator == "Map" and isinstance(info.value.__cause__, at.DataflowError)
