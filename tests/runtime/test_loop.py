"""The event loop choice, and what a program can do after a computation ends."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

import aiotimely as at
from aiotimely.worker.loop import loop_factory

PROGRAM = """
import aiotimely as at
at.execute(lambda worker: worker.dataflow(lambda s: at.to_stream([1], s)), loop="{loop}")
at.execute(lambda worker: None, loop="{loop}")           # and a second run in the same process
print("x" * 200_000)
"""


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_program_can_print_a_lot_after_execute_to_a_slow_reader(loop):
    child = subprocess.Popen([sys.executable, "-c", PROGRAM.format(loop=loop)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    time.sleep(1.0)   # the pipe fills up: the child's write has to wait for us
    out, err = child.communicate(timeout=30)
    assert child.returncode == 0, err
    assert len(out) == 200_001


def test_loop_names_are_checked():
    with pytest.raises(ValueError, match="'auto', 'uvloop' or 'asyncio'"):
        loop_factory("tokio")
    assert loop_factory("asyncio") is None


def test_execute_runs_twice_on_the_kept_uvloop_loop():
    assert at.execute(lambda w: w.index, loop="uvloop") == [0]
    assert at.execute(lambda w: w.index, workers=2, loop="uvloop") == [0, 1]
