"""The Spark ingress without Spark: exactly-once rules, time, the stream's end, refusal of strangers, over real TCP."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import pytest

import aiotimely as at
from aiotimely.connectors.spark import ForeachBatchSink, IngressClient, foreach_batch_sink, ingress


class Running:
    """An aiotimely computation with an ingress, in a thread of its own (as next to Spark).

    ``rows`` gets ``(time, row)`` as rows arrive; ``passed`` gets ``epoch -> time.monotonic()`` as the
    frontier after the ingress passes each epoch; ``done`` is set once the dataflow completed, and
    ``error`` holds what ``execute`` raised, if anything.
    """

    def __init__(self, secret="ingress-secret", sink=None):
        self.address = None
        self.rows: list = []
        self.statistics: dict = {}
        self.passed: dict[int, float] = {}
        self.changed = threading.Condition()
        self.listening = threading.Event()
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.complete = False
        self.secret = secret

        async def build(worker):
            ready = asyncio.get_running_loop().create_future()
            probe = worker.dataflow(lambda s: ingress(s, "127.0.0.1:0", secret=secret, ready=ready,
                                                      statistics=self.statistics, sink=sink)
                                    .inspect_time(lambda t, row: self.rows.append((t, row))).probe())
            self.address = await ready
            self.listening.set()
            epoch = 0
            while not probe.done():
                await probe.wait_beyond(epoch)
                frontier = list(probe.frontier)
                with self.changed:
                    upto = frontier[0] if frontier else epoch + 1
                    for e in range(epoch, upto):
                        self.passed[e] = time.monotonic()
                    self.changed.notify_all()
                epoch = upto
            with self.changed:
                self.complete = True                    # the frontier is empty: every epoch passed
                self.changed.notify_all()

        def run():
            try:
                at.execute(build, loop="asyncio")
            except BaseException as e:  # noqa: BLE001 - the test looks at it
                self.error = e
            finally:
                self.done.set()
                with self.changed:
                    self.changed.notify_all()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        assert self.listening.wait(10)

    def client(self, secret=None):
        return IngressClient(self.address, secret or self.secret)

    def wait_passed(self, epoch, timeout=10.0) -> bool:
        """Until the frontier has passed ``epoch`` (True), or ``timeout`` seconds (False)."""
        with self.changed:
            self.changed.wait_for(lambda: epoch in self.passed or self.complete or self.done.is_set(), timeout)
            return epoch in self.passed or self.complete

    def end(self):
        c = self.client()
        c.request("end")
        c.close()
        self.join()

    def join(self, timeout=10.0):
        assert self.done.wait(timeout), "the dataflow did not complete"
        self.thread.join(timeout)
        assert self.error is None, self.error


def attempt(run, epoch, partition, rows, ok=True, epoch_done=False):
    c = run.client()
    c.send("open", epoch, partition)
    c.send("rows", rows)
    c.request("close", ok, "" if ok else "boom")
    if epoch_done:
        c.request("epoch", epoch)
    c.close()


def test_only_successful_first_attempts_enter_at_their_epoch():
    run = Running()
    attempt(run, 0, 0, [{"id": 1}, {"id": 2}])
    attempt(run, 0, 1, [{"id": 3}], ok=False)          # a failed attempt: discarded
    attempt(run, 0, 1, [{"id": 3}])                    # its retry: delivered
    attempt(run, 0, 0, [{"id": 1}, {"id": 2}])         # a replay of a completed attempt: ignored
    attempt(run, 1, 0, [{"id": 4}], epoch_done=False)
    c = run.client()
    c.request("epoch", 0)
    c.request("epoch", 1)
    c.close()
    attempt(run, 1, 0, [{"id": 4}])                    # a replay after the epoch completed: ignored
    run.end()
    assert sorted((t, r["id"]) for t, r in run.rows) == [(0, 1), (0, 2), (0, 3), (1, 4)]
    assert run.statistics == {"replays_ignored": 2, "attempts_discarded": 1, "epochs_delivered": 2}


def test_a_connection_lost_mid_attempt_discards_it():
    run = Running()
    c = run.client()
    c.send("open", 0, 0)
    c.send("rows", [{"id": 9}])
    c.close()                                          # the executor died before close
    attempt(run, 0, 0, [{"id": 10}])
    run.end()
    assert [r["id"] for _, r in run.rows] == [10]


def test_strangers_and_garbage_are_refused_while_the_ingress_goes_on(caplog):
    run = Running()
    host, port = run.address.split(":")
    from aiotimely.comm.handshake import HandshakeError

    with pytest.raises(HandshakeError, match="does not know the shared secret"):
        IngressClient(run.address, "wrong-secret")
    for garbage in (b"GET / HTTP/1.0\r\n\r\n" * 3, bytes(range(200))):
        with socket.create_connection((host, int(port))) as raw:
            raw.sendall(garbage)
            raw.settimeout(5)
            try:
                assert raw.recv(10) == b""
            except ConnectionResetError:
                pass
    c = run.client()
    c.send("open", 0, 0)
    c.send("not-a-message")                            # authenticated, but nonsense: this connection closes
    with pytest.raises((at.ClusterError, ConnectionError)):
        c.request("close", True, "")
    attempt(run, 0, 1, [{"id": 1}])
    run.end()
    assert [r["id"] for _, r in run.rows] == [1]
    refusals = [r.getMessage() for r in caplog.records if "refused a connection" in r.getMessage()]
    assert len(refusals) >= 4, refusals            # wrong secret, two kinds of garbage, a bad message
    assert any("unknown message 'not-a-message'" in m for m in refusals)


class Batch:
    """What ``foreachBatch`` hands its function, as far as the sink looks at it: rows (here plain dicts)."""

    def __init__(self, *ids):
        self.ids = ids

    def toLocalIterator(self):  # noqa: N802 - Spark's name
        return iter([{"id": i} for i in self.ids])


def test_an_epoch_mark_moves_the_frontier_at_once_without_another_record():
    run = Running()
    attempt(run, 0, 0, [{"id": 1}])
    assert not run.wait_passed(0, timeout=0.3)          # rows alone do not complete their epoch
    c = run.client()
    c.request("epoch", 0)                              # Spark says batch 0 is complete; nothing follows
    assert run.wait_passed(0, timeout=5), "the frontier stayed at epoch 0"
    assert run.rows == [(0, {"id": 1})]
    c.request("epoch", 3)                              # epochs may be skipped (batches with no rows)
    assert run.wait_passed(3, timeout=5)
    c.close()
    run.end()


def test_foreach_batch_sink_alone_completes_each_epoch_as_its_call_returns_and_close_ends_the_stream():
    sink = foreach_batch_sink()                        # no address, no secret: it learns both from the ingress
    run = Running(secret=None, sink=sink)
    for epoch in range(3):
        sink(Batch(epoch * 10, epoch * 10 + 1), epoch)
        assert run.wait_passed(epoch, timeout=5), f"epoch {epoch} did not complete after its batch"
    assert not run.done.is_set()                       # the query may go on: the stream stays open
    sink.close()                                       # the query stopped
    run.join()
    assert run.complete                                # the frontier passed everything, the dataflow completed
    assert sorted((t, r["id"]) for t, r in run.rows) == [(0, 0), (0, 1), (1, 10), (1, 11), (2, 20), (2, 21)]
    assert run.statistics == {"replays_ignored": 0, "attempts_discarded": 0, "epochs_delivered": 3}


def test_a_batch_replayed_after_a_failed_query_enters_once():
    sink = foreach_batch_sink()
    run = Running(secret=None, sink=sink)
    with sink:
        sink(Batch(1, 2), 0)
        sink(Batch(3), 1)                              # then the query failed before Spark committed batch 1,
        sink(Batch(3), 1)                              # and its restart runs batch 1 again
        sink(Batch(4), 2)
    run.join()
    assert sorted((t, r["id"]) for t, r in run.rows) == [(0, 1), (0, 2), (1, 3), (2, 4)]
    assert run.statistics["replays_ignored"] == 1


def test_a_query_without_batches_still_ends_the_stream_and_a_closed_sink_refuses_batches():
    sink = foreach_batch_sink()
    run = Running(secret=None, sink=sink)
    with sink:
        pass                                           # availableNow over an empty folder: no batch at all
    run.join()
    assert run.complete and run.rows == []
    with pytest.raises(at.ClusterError, match="closed"):
        sink(Batch(1), 0)


def test_a_batch_that_comes_before_the_ingress_listens_waits_for_it():
    sink = foreach_batch_sink()
    early = threading.Thread(target=sink, args=(Batch(7), 0))
    early.start()                                      # Spark may start before the dataflow runs
    time.sleep(0.2)
    run = Running(secret=None, sink=sink)
    early.join(10)
    assert run.wait_passed(0, timeout=5)
    sink.close()
    run.join()
    assert run.rows == [(0, {"id": 7})]


def test_leaving_the_sink_with_an_error_fails_the_dataflow():
    sink = foreach_batch_sink()
    run = Running(secret=None, sink=sink)
    with pytest.raises(RuntimeError, match="the query died"):
        with sink:
            sink(Batch(1), 0)
            raise RuntimeError("the query died")       # as awaitTermination raises StreamingQueryException
    assert run.done.wait(10), "the dataflow went on waiting for a query that had failed"
    assert isinstance(run.error, at.DataflowError)
    assert "the Spark query failed" in str(run.error.__cause__) and "the query died" in str(run.error.__cause__)


def test_a_sink_and_its_ingress_agree_on_the_secret():
    given = foreach_batch_sink(secret="from-the-sink")
    run = Running(secret=None, sink=given)             # the ingress takes the sink's secret
    assert isinstance(given, ForeachBatchSink) and given.address == run.address
    IngressClient(run.address, "from-the-sink").close()
    given.close()
    run.join()
    with pytest.raises(ValueError, match="secret"):
        async def build(worker):
            worker.dataflow(lambda s: ingress(s, secret="another", sink=foreach_batch_sink(secret="one")))
        at.execute(build)


def test_a_sink_closed_before_its_ingress_listens_ends_the_stream_once_it_does():
    sink = foreach_batch_sink()
    sink.close()                                       # the query stopped before the dataflow ran
    run = Running(secret=None, sink=sink)
    run.join()
    assert run.complete and run.rows == []


def test_closing_the_sink_on_the_ingresss_own_event_loop_does_not_block_it():
    async def main():
        sink = foreach_batch_sink()
        async with at.Worker() as worker:             # the user's program: no thread of its own
            rows = []
            probe = worker.dataflow(lambda s: ingress(s, sink=sink)
                                    .inspect_time(lambda t, row: rows.append((t, row["id"]))).probe())
            with sink:
                await asyncio.to_thread(sink, Batch(1, 2), 0)
                await asyncio.wait_for(probe.wait_beyond(0), 5)
            await asyncio.wait_for(probe.wait_done(), 5)
        return rows

    assert asyncio.run(asyncio.wait_for(main(), 20)) == [(0, 1), (0, 2)]


def test_a_batch_still_being_sent_when_the_sink_closes_fails_rather_than_being_lost():
    started, release = threading.Event(), threading.Event()

    class Slow(Batch):
        def toLocalIterator(self):  # noqa: N802 - Spark's name
            yield {"id": 1}
            started.set()
            release.wait(5)
            yield {"id": 2}

    async def main():
        sink = foreach_batch_sink()
        async with at.Worker() as worker:
            rows = []
            worker.dataflow(lambda s: ingress(s, sink=sink).inspect(rows.append))
            sending = asyncio.ensure_future(asyncio.to_thread(sink, Slow(), 0))
            assert await asyncio.to_thread(started.wait, 5)
            sink.close()                               # on the loop: does not wait for the batch
            await asyncio.sleep(0.1)
            release.set()
            with pytest.raises((at.ClusterError, ConnectionError)):
                await sending
        return rows

    assert asyncio.run(asyncio.wait_for(main(), 20)) == []


def test_a_pickled_copy_of_a_listening_sink_sends_to_the_same_ingress():
    import pickle

    sink = foreach_batch_sink()
    run = Running(secret=None, sink=sink)
    copy = pickle.loads(pickle.dumps(sink))          # as a function shipped to another Python process
    copy(Batch(5), 0)
    assert run.wait_passed(0, timeout=5)
    sink.close()
    run.join()
    assert run.rows == [(0, {"id": 5})]
