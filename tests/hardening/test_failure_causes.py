"""The error a user sees is the first real one, located, whatever the other operators do while stopping."""

from __future__ import annotations

import asyncio

import pytest

import aiotimely as at


def test_an_operator_that_awaits_in_its_cleanup_does_not_hide_the_real_error(run):
    cleaned = []

    async def build(worker):
        inp = at.InputHandle()

        async def tidy(input, output, cap):
            cap.drop()
            try:
                async for _ in input.activations():
                    for time, batch in input.drain():
                        output.session(time).give_many(batch)
            finally:
                await asyncio.sleep(0.01)              # closing a connection, say: cleanup that awaits
                cleaned.append(worker.index)

        def make(s):
            stream = inp.to_stream(s)
            stream.unary(tidy, name="Tidy")
            stream.map(lambda x: 1 // x)

        worker.dataflow(make, name="tidy")
        inp.send(1)
        inp.advance_to(1)
        for _ in range(3):
            await worker.step()
        inp.send(0)                                    # the map fails; Tidy is still waiting for input
        inp.advance_to(2)
        await worker.step_until_done()

    with pytest.raises(at.DataflowError, match="operator 'Map'.*ZeroDivisionError"):
        run(build, workers=2)
    assert sorted(cleaned) == [0, 1]                   # every Tidy ran its cleanup to the end


def test_an_exchange_key_that_fails_is_blamed_on_the_operator_it_belongs_to(run):
    def build(worker):
        worker.dataflow(lambda s: at.to_stream([[1], [2]], s).exchange(lambda x: {x[0]: 1}).probe(),
                        name="keys")

    with pytest.raises(at.DataflowError) as info:
        run(build, workers=2)
    assert info.value.operator == "Exchange"
    assert "operator 'Exchange'" in str(info.value) and "exchange key" in str(info.value)
    assert "TypeError" in str(info.value)


def test_a_failure_while_sending_from_async_logic_names_the_operator(run):
    def build(worker):
        async def sender(output, cap):
            output.session(cap).give([1, 2])
            await asyncio.sleep(0)
            cap.drop()

        worker.dataflow(lambda s: at.source(s, "Sender", sender).exchange(lambda x: x[5]).probe(), name="send")

    with pytest.raises(at.DataflowError) as info:
        run(build, workers=2)
    assert info.value.operator == "Exchange" and "IndexError" in str(info.value)


def test_errors_name_the_operator_its_scopes_and_its_dataflow_in_words(run):
    def build(worker):
        def pipeline(scope):
            def body(inner):
                return at.to_stream([1], scope).enter(inner).map(lambda x: x / 0).leave()

            return scope.region(body, name="body")

        worker.dataflow(pipeline)                      # named after its build function

    with pytest.raises(at.DataflowError) as info:
        run(build)
    assert str(info.value).startswith(
        "operator 'Map' (#1) in scope 'body' in dataflow 'pipeline' on worker 0 failed at time 0: ZeroDivisionError")
    assert (info.value.dataflow, info.value.path) == ("pipeline", (0, 1, 1))   # dataflow 0, scope 1, operator 1
