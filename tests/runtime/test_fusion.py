"""Fused chains of stateless operators: the same records, frontiers and errors as unfused ones, without a
mailbox and an activation per operator and batch."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import aiotimely as at

TIMEOUT = 10.0   # seconds a round may take before a stalled frontier counts as a failure

STAGES = st.sampled_from(["map", "filter", "flat_map", "inspect", "exchange", "tee"])


def pipeline(stream: at.Stream, stages: list[str], seen: list) -> list[at.Stream]:
    """Apply ``stages``; a ``tee`` also sends the stream so far to the output (two consumers of one stream)."""
    ends = []
    for stage in stages:
        if stage == "map":
            stream = stream.map(lambda x: x * 3 + 1)
        elif stage == "filter":
            stream = stream.filter(lambda x: x % 4 != 0)
        elif stage == "flat_map":
            stream = stream.flat_map(lambda x: [x, x + 1] if x % 3 == 0 else [x])
        elif stage == "inspect":
            stream = stream.inspect(lambda x: seen.append(x))
        elif stage == "exchange":
            stream = stream.exchange(lambda x: x)
        else:
            ends.append(stream.map(lambda x: -x))
    return ends + [stream]


def run(stages: list[str], rounds: list[list[int]], workers: int, fuse: bool, monkeypatch) -> tuple:
    monkeypatch.setenv("AIOTIMELY_FUSE", "1" if fuse else "0")
    outputs: list = []
    seen: list = []

    async def build(worker):
        inp = at.InputHandle()

        def make(scope):
            ends = pipeline(inp.to_stream(scope), stages, seen)
            return at.concatenate(scope, ends).inspect_time(lambda t, x: outputs.append((t, x))).probe()

        probe = worker.dataflow(make)
        for t, records in enumerate(rounds):
            if worker.index == 0:
                inp.send_batch(records)
            inp.advance_to(t + 1)
            # frontiers move round by round (a progress count lost would stall the probe: fail, not hang)
            await asyncio.wait_for(worker.step_while(lambda: probe.less_than(inp.time)), timeout=TIMEOUT)
            if worker.index == 0:
                assert not any(time > t for time, _ in outputs), "the probe passed a time still to come"
        inp.close()

    at.execute(build, workers=workers, loop="asyncio")
    return sorted(outputs), sorted(seen)


@settings(max_examples=30, deadline=None)
@given(stages=st.lists(STAGES, max_size=8), rounds=st.lists(st.lists(st.integers(0, 99), max_size=6), max_size=4),
       workers=st.sampled_from([1, 2]))
def test_a_fused_pipeline_gives_what_an_unfused_one_gives(stages, rounds, workers):
    with pytest.MonkeyPatch.context() as monkeypatch:
        assert run(stages, rounds, workers, True, monkeypatch) == run(stages, rounds, workers, False, monkeypatch)


@pytest.mark.parametrize("bug", ["progress-not-collected", "consumed-not-counted", "tees-share-one-output"])
def test_planted_bugs_in_fusion_are_caught(monkeypatch, bug):
    """The property test's comparison (with its stall timeout) must fail on each of these."""
    from aiotimely.dataflow import fusion

    monkeypatch.setattr(__import__(__name__, fromlist=["TIMEOUT"]), "TIMEOUT", 1.0)
    real_init = fusion.FusedChain.__init__

    def planted(self, op, input, ran):
        if bug == "progress-not-collected":
            ran = lambda index: None        # the scope never learns the chain ran  # noqa: E731
        else:
            input._consumed = at.progress.ChangeBatch()   # what it consumed goes nowhere
        real_init(self, op, input, ran)

    def one_output(self, stage):                # every stage's consumers on output 0: counted once per edge,
        stage.output = self.op.outputs[0]       # so each consumer is owed what another one got
        return at.progress.Source(self.op.index, 0)

    if bug == "tees-share-one-output":
        monkeypatch.setattr(fusion.FusedChain, "claim_output", one_output)
    else:
        monkeypatch.setattr(fusion.FusedChain, "__init__", planted)
    with pytest.raises(asyncio.TimeoutError):   # the probe never passes the first round: a stall, not a hang
        run(["map", "tee", "filter"], [[1, 2, 3], [4]], 1, True, monkeypatch)


def test_fused_operators_are_not_scheduled_per_batch(monkeypatch):
    def scheduled(fuse: bool) -> int:
        monkeypatch.setenv("AIOTIMELY_FUSE", "1" if fuse else "0")

        async def build(worker):
            inp = at.InputHandle()
            stream = inp.to_stream
            probe = worker.dataflow(lambda scope: chain(stream(scope)).probe())
            for t in range(10):
                inp.send_batch(range(100))
                inp.advance_to(t + 1)
                await worker.step_while(lambda: probe.less_than(inp.time))
            inp.close()
            await worker.step_until_done()
            return worker.statistics().operators_run

        def chain(stream):
            for _ in range(50):
                stream = stream.map(lambda x: x + 1)
            return stream

        return at.execute(build, loop="asyncio")[0]

    fused, unfused = scheduled(True), scheduled(False)
    assert unfused >= 500                     # each of 50 maps runs for each of 10 batches
    assert fused <= unfused - 450             # fused, they run inside the input's pushes (they still run
                                              # once at the start and once at the end)


def test_an_error_in_a_fused_stage_names_that_operator(monkeypatch):
    monkeypatch.setenv("AIOTIMELY_FUSE", "1")

    def build(worker):
        worker.dataflow(lambda scope: at.to_stream(range(5), scope).map(lambda x: x + 1)
                        .filter(lambda x: 1 / (x - 3) > 0, ).map(str).inspect(print), name="errors")

    with pytest.raises(at.DataflowError, match=r"operator 'Filter' \(#2, stage 2 of a fused chain\) in "
                                               r"dataflow 'errors' on worker 0 failed at time 0: ZeroDivisionError"):
        at.execute(build, loop="asyncio")


def test_a_chain_of_thousands_of_fused_maps_runs(monkeypatch):
    """Back-pressure looks through fused stages for the mailboxes they feed: without recursion."""
    monkeypatch.setenv("AIOTIMELY_FUSE", "1")

    def build(worker):
        out: list = []

        def chain(scope):
            stream = at.to_stream(range(3), scope)
            for _ in range(3000):
                stream = stream.map(lambda x: x + 1)
            return stream.inspect(out.append)

        worker.dataflow(chain)
        return out

    assert at.execute(build, loop="asyncio") == [[3000, 3001, 3002]]


def test_a_fused_stages_frontier_catches_up_once_nothing_else_runs(monkeypatch):
    """With one worker, what moves only fused stages' frontiers waits while other operators run (it is merged
    into a later propagation); once there is nothing else to run it is propagated, within a round or two."""
    monkeypatch.setenv("AIOTIMELY_FUSE", "1")

    async def build(worker):
        inp = at.InputHandle()
        scopes = []

        def make(scope):
            scopes.append(scope)
            inp.to_stream(scope).map(lambda x: x + 1).inspect(lambda x: None)

        worker.dataflow(make)
        tail = next(op for op in scopes[0].operators() if op.name == "Map")
        assert tail.progress.transparent                      # fused into the input's pushes
        lags = []
        for t in range(1, 6):
            inp.send(t)
            inp.advance_to(t)
            rounds = worker.statistics().rounds
            await asyncio.wait_for(worker.step_while(lambda t=t: tail.current_frontier(0).less_than(t)),
                                   timeout=TIMEOUT)
            lags.append(worker.statistics().rounds - rounds)
        inp.close()
        await worker.step_until_done()
        assert tail.current_frontier(0) == at.Antichain()
        return lags

    [lags] = at.execute(build, loop="asyncio")
    assert all(1 <= lag <= 2 for lag in lags), lags
