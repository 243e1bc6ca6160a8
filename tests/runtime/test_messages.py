"""Mistakes a new user makes get a message that says what is wrong, where, and how to fix it (not Python's
words about what broke inside)."""

from __future__ import annotations

import asyncio
import time

import pytest

import aiotimely as at
from aiotimely.connectors import from_aiter


def test_a_number_of_workers_given_as_a_string_is_refused_saying_so():
    with pytest.raises(TypeError, match=r"workers must be an int, not str '2' \(use 2\)"):
        at.execute(lambda worker: None, workers="2")


def test_a_process_index_out_of_range_is_refused_saying_so():
    with pytest.raises(ValueError, match=r"process 2 of 2 processes does not exist \(process is an index: 0..1\)"):
        at.execute(lambda worker: None, processes=2, process=2)


def test_a_dataflow_built_from_an_input_handle_says_how_to_build_with_it():
    with pytest.raises(TypeError, match=r"takes a function fn\(scope\).*not InputHandle.*inp.to_stream\(scope\)"):
        at.execute(lambda worker: worker.dataflow(at.InputHandle()))


async def numbers():
    yield 1


@pytest.mark.parametrize(("given", "said"), [
    ([1, 2, 3], r"list is a plain iterable, not an async iterator: for records at hand use at.to_stream"),
    (numbers, r"numbers is an async generator function: call it, from_aiter\(scope, numbers\(\)\)"),
    (3, r"needs an async iterator or a function \(worker_index, peers\) -> async iterator, not int 3"),
])
def test_from_aiter_of_what_is_not_an_async_iterator_says_what_to_give(given, said):
    with pytest.raises(TypeError, match=said):
        at.execute(lambda worker: worker.dataflow(lambda scope: from_aiter(scope, given)))


def test_execute_inside_a_running_loop_points_to_execute_async():
    async def inside():
        at.execute(lambda worker: None)

    with pytest.raises(RuntimeError, match=r"use 'await aiotimely.execute_async\(build, ...\)'"):
        asyncio.run(inside())


def test_advancing_an_input_to_a_float_says_times_are_ints():
    def build(worker):
        inp = at.InputHandle()
        worker.dataflow(lambda scope: inp.to_stream(scope).probe())
        inp.advance_to(time.time())

    with pytest.raises(TypeError, match=r"InputHandle.advance_to\(.*\) in operator 'Input' \(#1\).*expected an int "
                                        r"timestamp.*int\(time.time\(\) \* 1000\)"):
        at.execute(build)
