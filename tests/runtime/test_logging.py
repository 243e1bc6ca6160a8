"""``worker.log_register()``: timely's event log — what a consumer of the ``"timely"`` log sees, in batches."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

import aiotimely as at


def listen(worker, name="timely"):
    """Bind ``name`` to a callback that keeps every call: returns the list of ``(elapsed, batch)`` calls."""
    calls = []
    worker.log_register().insert(name, lambda elapsed, batch: calls.append((elapsed, list(batch))))
    return calls


def events(calls, kind=None):
    return [e for _, batch in calls for (_, _, e) in batch if kind is None or isinstance(e, kind)]


def exchange_pipeline(worker, n=100):
    """to_stream -> exchange (a unary operator) -> sink, every worker introducing its share of ``range(n)``."""
    def make(scope):
        stream = at.to_stream(range(worker.index, n, worker.peers), scope)

        @stream.unary(exchange=lambda x: x, name="Route")
        async def route(input, output, cap):
            cap.drop()
            async for _ in input.activations():
                for time, batch in input.drain():
                    output.session(time).give_many(batch)

        route.inspect(lambda x: None)

    worker.dataflow(make, name="pipeline")


def test_operates_and_channels_events_describe_the_graph(run):
    def build(worker):
        calls = listen(worker)
        exchange_pipeline(worker)
        return calls

    calls = run(build)[0]
    operates = {e.addr: e.name for e in events(calls, at.lowlevel.OperatesEvent)}
    assert operates[(0,)] == "pipeline"
    by_name = {name: addr for addr, name in operates.items()}
    assert {"ToStream", "Route", "Inspect"} <= set(by_name)
    channels = events(calls, at.lowlevel.ChannelsEvent)
    edges = {(c.source[0], c.target[0]) for c in channels}
    assert all(c.scope_addr == (0,) for c in channels)
    assert (by_name["ToStream"][-1], by_name["Route"][-1]) in edges
    assert (by_name["Route"][-1], by_name["Inspect"][-1]) in edges
    assert len({c.id for c in channels}) == len(channels)


def test_nested_scopes_appear_with_their_children(run):
    def build(worker):
        calls = listen(worker)

        def make(scope):
            source = at.to_stream([0], scope)

            def loop(inner):
                handle, stream = inner.feedback(1)
                entered = source.enter(inner).concat(stream)
                entered.filter(lambda x: x < 3).map(lambda x: x + 1).connect_loop(handle)
                return entered.leave()

            scope.iterative(loop, name="Loop").inspect(lambda x: None)

        worker.dataflow(make)
        return calls

    calls = run(build)[0]
    operates = {e.addr: e.name for e in events(calls, at.lowlevel.OperatesEvent)}
    (loop,) = [addr for addr, name in operates.items() if name == "Loop"]
    inside = [addr for addr in operates if addr[:len(loop)] == loop and addr != loop]
    assert inside and all(len(addr) == len(loop) + 1 for addr in inside)
    assert {c.scope_addr for c in events(calls, at.lowlevel.ChannelsEvent)} >= {loop}
    assert {e.addr for e in events(calls, at.lowlevel.ScheduleEvent)} >= {loop, *inside}


def test_each_activation_is_bracketed_and_each_operator_shuts_down_once(run):
    def build(worker):
        calls = listen(worker)
        exchange_pipeline(worker)
        return calls

    for calls in run(build, workers=2):
        schedule = events(calls, at.lowlevel.ScheduleEvent)
        assert schedule
        open_ = {}
        for e in schedule:  # start, stop, start, stop ... per address (a scope's bracket holds its children's)
            assert open_.get(e.addr, at.lowlevel.StartStop.STOP) != e.start_stop
            open_[e.addr] = e.start_stop
        assert set(open_.values()) == {at.lowlevel.StartStop.STOP}
        built = {e.addr for e in events(calls, at.lowlevel.OperatesEvent)}
        shut = Counter(e.addr for e in events(calls, at.lowlevel.ShutdownEvent))
        assert set(shut) == built and set(shut.values()) == {1}


def test_messages_events_count_every_record_sent_and_received(run):
    def build(worker):
        calls = listen(worker)
        exchange_pipeline(worker, n=100)
        return calls

    results = run(build, workers=2)
    route = {e.addr[-1]: e for e in events(results[0], at.lowlevel.OperatesEvent)}
    exchanged = next(c.id for c in events(results[0], at.lowlevel.ChannelsEvent)
                     if route[c.target[0]].name == "Route")
    sent, received = defaultdict(int), defaultdict(int)
    for w, calls in enumerate(results):
        for e in events(calls, at.lowlevel.MessagesEvent):
            if e.channel != exchanged:
                continue
            if e.is_send:
                assert e.source == w
                sent[e.target] += e.length
            else:
                assert e.target == w
                received[w] += e.length
    assert sent == received == {0: 50, 1: 50}  # an int key routes to key % peers


def test_progress_events_are_the_batches_each_worker_sends_and_receives(run):
    def build(worker):
        calls = listen(worker)
        exchange_pipeline(worker)
        return calls

    results = run(build, workers=2)
    for w, calls in enumerate(results):
        progress = events(calls, at.lowlevel.ProgressEvent)
        mine = [e for e in progress if e.is_send]
        theirs = [e for e in progress if not e.is_send]
        assert mine and theirs
        assert all(e.source == w for e in mine) and all(e.source == 1 - w for e in theirs)
        assert [e.seq_no for e in mine if e.addr == (0,)] == list(range(len([e for e in mine if e.addr == (0,)])))
        sent_by_other = [(e.seq_no, e.messages, e.internal) for e in events(results[1 - w], at.lowlevel.ProgressEvent)
                         if e.is_send]
        assert [(e.seq_no, e.messages, e.internal) for e in theirs] == sent_by_other


def test_capability_and_push_progress_events_follow_an_input(run):
    def build(worker):
        calls = listen(worker)
        inp = at.InputHandle()
        worker.dataflow(lambda s: inp.to_stream(s).probe())
        inp.advance_to(3)
        inp.close()
        return calls

    calls = run(build)[0]
    input_addr = next(e.addr for e in events(calls, at.lowlevel.OperatesEvent) if e.name == "Input")
    caps = [(e.time, e.diff) for e in events(calls, at.lowlevel.CapabilityEvent) if e.addr == input_addr]
    assert caps == [(3, 1), (0, -1), (3, -1)]
    probe_addr = next(e.addr for e in events(calls, at.lowlevel.OperatesEvent) if e.name == "Probe")
    assert probe_addr in {e.addr for e in events(calls, at.lowlevel.PushProgressEvent)}


def test_events_come_in_batches_stamped_with_the_worker_and_end_with_an_empty_batch(run):
    def build(worker):
        calls = listen(worker)
        exchange_pipeline(worker)
        return calls

    for w, calls in enumerate(run(build, workers=2)):
        assert len(calls) > 2  # flushed round by round, not once at the end
        assert calls[-1][1] == [] and all(batch for _, batch in calls[:-1])
        stamps = [elapsed for _, batch in calls for (elapsed, _, _) in batch]
        assert stamps == sorted(stamps)
        assert all(elapsed >= batch[-1][0] for elapsed, batch in calls[:-1])
        assert {worker for _, batch in calls for (_, worker, _) in batch} == {w}


@pytest.mark.asyncio
async def test_remove_stops_the_log_and_insert_replaces_it():
    async with at.Worker() as worker:
        registry = worker.log_register()
        assert worker._scheduler.logging is None  # nobody listens: every site sees None and does nothing
        first, second = [], []

        def keep_first(elapsed, batch):
            first.append(batch)

        assert registry.insert("timely", keep_first) is None
        inp = at.InputHandle()
        worker.dataflow(lambda s: inp.to_stream(s).probe())
        await worker.step()
        assert registry.insert("timely", lambda elapsed, batch: second.append(batch)) is keep_first
        assert first[-1] == [] and events([(0, b) for b in first], at.lowlevel.OperatesEvent)
        inp.advance_to(1)
        await worker.step()
        removed = registry.remove("timely")
        assert removed is not None and removed is not keep_first
        assert second[-1] == [] and events([(0, b) for b in second], at.lowlevel.CapabilityEvent)
        assert worker._scheduler.logging is None and registry.remove("timely") is None
        seen = sum(map(len, first + second))
        inp.close()
        await worker.step_until_done()
        assert sum(map(len, first + second)) == seen


def test_an_application_log_is_written_through_get(run):
    def build(worker):
        calls = listen(worker, "app")
        assert worker.log_register().get("nothing") is None
        logger = worker.log_register().get("app")
        logger.log(("started", worker.index))
        worker.dataflow(lambda s: at.to_stream([1, 2], s).inspect(lambda x: logger.log(("saw", x))))
        return calls

    calls = run(build)[0]
    assert events(calls) == [("started", 0), ("saw", 1), ("saw", 2)]
    assert calls[-1][1] == []


def test_a_failing_callback_stops_the_computation_naming_the_log(run):
    def build(worker):
        def broken(elapsed, batch):
            raise ValueError("disk full")

        worker.log_register().insert("timely", broken)
        worker.dataflow(lambda s: at.to_stream(range(3), s).inspect(lambda x: None))

    with pytest.raises(at.DataflowError, match="'timely' log callback of worker 0 failed: ValueError: disk full"):
        run(build)


def test_bad_arguments_are_refused(run):
    def build(worker):
        registry = worker.log_register()
        with pytest.raises(TypeError, match="callable"):
            registry.insert("timely", "print")
        with pytest.raises(TypeError, match="name"):
            registry.insert(3, print)
        return "ok"

    assert run(build) == ["ok"]


def test_a_fused_chain_logs_the_batches_its_producer_hands_it(run):
    """map -> filter -> inspect run as one chain inside the source's pushes: no mailbox, no activation of their
    own, yet each channel's records are logged as sent and received, as on any other channel."""
    def build(worker):
        calls = listen(worker)
        worker.dataflow(lambda s: at.to_stream(range(100), s).map(lambda x: x + 1).filter(lambda x: x % 2)
                        .inspect(lambda x: None), name="chain")
        return calls

    calls = run(build)[0]
    by_index = {e.addr[-1]: e.name for e in events(calls, at.lowlevel.OperatesEvent)}
    source = next(i for i, name in by_index.items() if name == "ToStream")
    fed = next(c.id for c in events(calls, at.lowlevel.ChannelsEvent) if c.source[0] == source)
    messages = [e for e in events(calls, at.lowlevel.MessagesEvent) if e.channel == fed]
    assert sum(e.length for e in messages if e.is_send) == 100
    assert sum(e.length for e in messages if not e.is_send) == 100
