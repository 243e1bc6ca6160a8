"""An operator that waits for others by activating itself (timely's flow_control.rs) yields to them instead of
spinning, and an operator that never yields at all cannot keep a stop signal from acting: within about a
second the stop is forced, naming the operator. Real processes, real signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

FLOW_CONTROL = textwrap.dedent("""
    import aiotimely as at

    def build(worker):
        probe = at.ProbeHandle()
        seen = []

        def dataflow(scope):
            async def source(output, cap):
                activator = output.activator()
                for batch in range(5):
                    while probe.less_than(cap.time):
                        activator.activate()            # "schedule me again", as timely operators do
                        await activator.activated()
                    output.session(cap).give_many(range(batch * 10, batch * 10 + 10))
                    cap.downgrade(cap.time + 1)
                cap.drop()
            at.source(scope, "Source", source).inspect(seen.append).probe_with(probe)

        worker.dataflow(dataflow)
        return seen

    print(sorted(at.execute(build, loop={loop!r})[0]) == list(range(50)))
""")

RUNAWAY = textwrap.dedent("""
    import aiotimely as at

    def build(worker):
        def dataflow(scope):
            async def source(output, cap):
                print("running away", flush=True)
                n = 0
                while True:
                    n += 1
            at.source(scope, "Runaway", source).probe()
        worker.dataflow(dataflow, name="spin")

    at.execute(build, loop={loop!r})
""")


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_source_waiting_for_its_probe_by_activating_itself_yields_to_the_others(loop):
    if loop == "uvloop":
        pytest.importorskip("uvloop")
    done = subprocess.run([sys.executable, "-c", FLOW_CONTROL.format(loop=loop)], capture_output=True, text=True,
                          timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, "True"), done.stderr[-3000:]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_stop_signal_is_forced_through_an_operator_that_never_yields(loop, sig):
    if loop == "uvloop":
        pytest.importorskip("uvloop")
    proc = subprocess.Popen([sys.executable, "-c", RUNAWAY.format(loop=loop)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "running away"
    time.sleep(0.2)
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError("the signal did not stop the process") from None
    assert proc.returncode == 128 + sig, err[-3000:]
    line = err.strip().splitlines()[-1]
    assert line.startswith(f"aiotimely: stopped by {sig.name} at once: operator 'Runaway' (#1) in dataflow 'spin' "
                           "on worker 0 has not yielded for "), err[-3000:]


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_second_signal_stops_a_runaway_operator_at_once(loop):
    """With the watchdog's own deadline far away (30 s), only the second Ctrl-C can force the stop: it does, at
    once."""
    if loop == "uvloop":
        pytest.importorskip("uvloop")
    env = {**os.environ, "AIOTIMELY_STOP_RUNAWAY": "30"}
    proc = subprocess.Popen([sys.executable, "-c", RUNAWAY.format(loop=loop)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "running away"
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=10)        # (well before the watchdog's 30 s)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError("the second signal did not stop the process") from None
    assert proc.returncode == 130, err[-3000:]
    assert err.strip().splitlines()[-1].startswith("aiotimely: stopped by SIGINT at once: operator 'Runaway' (#1)")
