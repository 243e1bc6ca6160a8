"""A peer that said goodbye needs nothing more: what this process still sends it after its connection closed is
dropped, not taken for a lost peer (a suspended computation's processes close their links as soon as they have
every goodbye, while others still run). A peer that did not say goodbye is still a failure."""

from __future__ import annotations

from aiotimely.comm.cluster import Cluster
from aiotimely.comm.framing import Frame, Kind


class _Link:
    """The link to a peer, as the cluster sees it when frames arrive and when it closes."""

    bytes_sent = bytes_received = 0

    def __init__(self, process: int) -> None:
        self.process = process
        self.rejected: list[str] = []

    def reject(self, why: str) -> None:
        self.rejected.append(why)


def _cluster() -> tuple[Cluster, list[BaseException]]:
    cluster = Cluster(["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"], 0, 1, b"secret")
    failures: list[BaseException] = []
    cluster.on_failure = failures.append
    return cluster, failures


def test_sending_to_a_peer_that_said_goodbye_and_closed_is_not_a_failure():
    cluster, failures = _cluster()
    link = _Link(1)
    cluster.frame_received(link, Frame(Kind.BYE, 0, 0, 0, 0, b""))  # type: ignore[arg-type]
    cluster.link_lost(link, None)                           # (it had every goodbye: it closed)
    cluster.send(1, b"a progress batch")
    assert failures == [] and cluster.error is None and link.rejected == []


def test_sending_to_a_peer_that_never_connected_or_said_goodbye_fails():
    cluster, failures = _cluster()
    cluster.send(2, b"data")
    assert [str(e) for e in failures] == ["process 2 is not connected"]
