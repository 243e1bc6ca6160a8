"""A finished dataflow is freed: a long build that makes dataflow after dataflow holds only the live ones.

Each run builds a few hundred tiny dataflows one after another in one build (tests/hardening/churn.py: a few
records in, the input closed, the probe awaited) and measures what this process holds after the first ones and
after the rest: the growth per dataflow in between must be about nothing. A leak shows as kilobytes per dataflow
(a finished dataflow's graph is tens of kilobytes; one mailbox left in the fabric, about one), the noise as a few
bytes.
"""

from __future__ import annotations

from typing import Any

import pytest

from aiotimely.comm.cluster import Cluster
from aiotimely.comm.framing import ALL, Frame, Kind
from aiotimely.comm.local import LocalFabric
from aiotimely.errors import ClusterError
from tests.cluster.harness import launch, lines_after_prefix
from tests.hardening import churn

FIRST, LAST = 100, 400
"""The dataflows built before the first measure and before the second (fewer where each costs more: with
recovery, each waits for its snapshots to be written; over processes, for the other process)."""
SLOW_FIRST, SLOW_LAST = 50, 150
BOUND = 200
"""Bytes a dataflow may leave behind, on average (the noise is a few; a leak is a kilobyte or tens)."""
BACKLOG = 16
"""Dataflows a build waiting only for probes may be ahead of the store by (a store that cannot keep up: a
hundred of 150)."""
RECOVERY_BOUND = BOUND
"""The same with recovery: the store keeps nothing per dataflow once it began (a leak there showed as 550 bytes)."""


def _check(growth: tuple[float, float], bound: float, what: str) -> None:
    per_bytes, per_objects = growth
    assert per_bytes < bound, (f"{what}: each finished dataflow left {per_bytes:.0f} bytes "
                               f"({per_objects:.2f} objects) behind")


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("kind", ["input", "to_stream"])
def test_finished_dataflows_are_freed(kind, workers):
    _check(churn.run(kind, FIRST, LAST, workers=workers), BOUND, f"{kind}, {workers} worker(s)")


@pytest.mark.parametrize("wait", ["complete", "probe"])
@pytest.mark.parametrize("kind", ["input", "to_stream"])
def test_finished_recoverable_dataflows_are_freed(kind, wait, tmp_path):
    """With recovery a dataflow is complete once its last snapshot is written, after its probe is done. A build
    that waits only for the probe goes on while the store writes: the store takes what comes meanwhile in one
    batch, so it keeps up, and dataflows waiting for their writes do not pile up."""
    measures = churn.Measures()
    growth = churn.run(kind, SLOW_FIRST, SLOW_LAST, recovery=str(tmp_path / "state"), wait=wait, measures=measures)
    _check(growth, RECOVERY_BOUND, f"{kind} with recovery, waiting for the {wait}")
    assert max(measures.live) <= BACKLOG, (f"{kind} with recovery, waiting for the {wait}: {measures.live} dataflows "
                                           f"of {SLOW_LAST} still waiting for their snapshots to be written")


@pytest.mark.parametrize("kind", ["input", "to_stream"])
def test_finished_dataflows_are_freed_in_every_process(kind):
    status, out, err = launch(str(churn.__file__), 2, 1, "--", "--kind", kind, "--first", str(SLOW_FIRST),
                              "--last", str(SLOW_LAST), timeout=120)
    assert status == 0, out + err
    lines = [line.split() for line in lines_after_prefix(out) if line.startswith("growth ")]
    assert len(lines) == 2, out + err
    for _, per_bytes, per_objects in lines:
        _check((float(per_bytes), float(per_objects)), BOUND, f"{kind}, 2 processes")


def test_finished_recoverable_dataflows_are_freed_in_every_process(tmp_path):
    status, out, err = launch(str(churn.__file__), 2, 1, "--", "--kind", "input", "--first", str(SLOW_FIRST),
                              "--last", str(SLOW_LAST), "--recovery", str(tmp_path / "state"), "--wait", "complete",
                              timeout=120)
    assert status == 0, out + err
    lines = [line.split() for line in lines_after_prefix(out) if line.startswith("growth ")]
    assert len(lines) == 2, out + err
    for _, per_bytes, per_objects in lines:
        _check((float(per_bytes), float(per_objects)), RECOVERY_BOUND, "recovery, 2 processes")


# -- the fabric's side, frame by frame ------------------------------------------------------------------------


class _Echo:
    """A channel codec whose items are their own payloads."""

    def encode(self, item: Any, limit: int) -> list[bytes]:
        return [item]

    def decode(self, payload: bytes) -> Any:
        return payload


class _Peer:
    """The link to process 1, as the fabric sees it."""

    process = 1

    def __init__(self) -> None:
        self.rejected: list[str] = []

    def reject(self, why: str) -> None:
        self.rejected.append(why)


def _fabric() -> tuple[Cluster, _Peer]:
    """Process 0 of two, two workers each (workers 0 and 1 here, 2 and 3 there), not connected."""
    return Cluster(["127.0.0.1:1", "127.0.0.1:2"], 0, 2, b"secret"), _Peer()


def test_a_dataflow_is_forgotten_once_every_worker_of_the_process_is_done_with_it():
    cluster, _ = _fabric()
    fabric = cluster.fabric
    fabric.begin_dataflow(0)
    fabric.begin_dataflow(1)
    fabric.begin_dataflow(0)   # (the other worker numbers it too)
    for dataflow in (0, 1):
        fabric.register((dataflow, 0), _Echo())
        fabric.mailboxes((dataflow, 0), source=0)
    assert len(fabric._boxes) == 4 and len(fabric._remote) == 4 and len(fabric._codecs) == 2

    fabric.end_dataflow(0)     # worker 0 is done with it; worker 1 still reads its mailbox
    assert not fabric.released(0) and len(fabric._boxes) == 4
    fabric.end_dataflow(0)
    assert fabric.released(0) and not fabric.released(1) and not fabric.released(2)
    assert sorted(fabric._boxes) == [((1, 0), 0), ((1, 0), 1)]
    assert list(fabric._codecs) == [(1, 0)] and {key[0] for key in fabric._remote} == {(1, 0)}


def test_frames_for_a_dataflow_this_process_is_done_with_are_dropped():
    cluster, peer = _fabric()
    fabric = cluster.fabric
    fabric.begin_dataflow(0)
    fabric.register((0, 0), _Echo())
    fabric.mailboxes((0, 0), source=0)
    fabric.end_dataflow(0)
    fabric.end_dataflow(0)

    # a progress batch from a worker that was behind, a batch of records, credit for batches we sent: dropped
    cluster.frame_received(peer, Frame(Kind.PROGRESS, 2, ALL, 0, 0, b"late progress"))
    cluster.frame_received(peer, Frame(Kind.DATA, 2, 1, 0, 0, b"late records"))
    cluster.frame_received(peer, Frame(Kind.CREDIT, ALL, ALL, 0, 0, cluster.codec.pack((0, 0, 0, 2, 3))))
    assert peer.rejected == []
    assert fabric.late == 3
    assert not fabric._boxes and not fabric._waiting and not fabric._codecs and not fabric._remote

    # what is early still waits for its dataflow; credit for a channel never sent on is still the peer's fault
    cluster.frame_received(peer, Frame(Kind.PROGRESS, 2, ALL, 1, 0, b"early"))
    assert list(fabric._waiting) == [(1, 0)]
    fabric.begin_dataflow(1)
    fabric.register((1, 0), _Echo())
    assert not fabric._waiting and list(fabric.mailbox((1, 0), 0).queue) == [b"early"]
    cluster.frame_received(peer, Frame(Kind.CREDIT, ALL, ALL, 0, 0, cluster.codec.pack((1, 0, 0, 2, 3))))
    assert len(peer.rejected) == 1 and "never sent on" in peer.rejected[0]
    with pytest.raises(ClusterError, match="never sent on"):
        fabric.credit(cluster.codec.pack((7, 0, 0, 2, 3)))


def test_one_process_forgets_mailboxes_as_its_workers_finish():
    fabric = LocalFabric(2)
    for worker in (0, 1):
        fabric.begin_dataflow(0)
        fabric.mailbox((0, 0), worker)
    fabric.end_dataflow(0)
    assert len(fabric._boxes) == 2
    fabric.end_dataflow(0)
    fabric.end_dataflow(0)     # (once more is harmless)
    assert not fabric._boxes and not fabric._boxes_of and fabric.released(0)
