"""The Spark ingress without Spark: exactly-once rules, and refusal of strangers, over real TCP."""

from __future__ import annotations

import asyncio
import socket
import threading

import pytest

import aiotimely as at
from aiotimely.connectors.spark import IngressClient, ingress


class Running:
    """An aiotimely computation with an ingress, in a thread of its own (as next to Spark)."""

    def __init__(self, secret="ingress-secret"):
        self.address = None
        self.rows: list = []
        self.statistics: dict = {}
        self.listening = threading.Event()
        self.secret = secret

        async def build(worker):
            ready = asyncio.get_running_loop().create_future()
            worker.dataflow(lambda s: ingress(s, "127.0.0.1:0", secret=secret, ready=ready,
                                              statistics=self.statistics)
                            .inspect_time(lambda t, row: self.rows.append((t, row))))
            self.address = await ready
            self.listening.set()

        self.thread = threading.Thread(target=lambda: at.execute(build, loop="asyncio"), daemon=True)
        self.thread.start()
        assert self.listening.wait(10)

    def client(self, secret=None):
        return IngressClient(self.address, secret or self.secret)

    def end(self):
        c = self.client()
        c.request("end")
        c.close()
        self.thread.join(10)
        assert not self.thread.is_alive()


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
