"""A fast producer and a slow consumer in another process: memory stays bounded on both sides."""

from __future__ import annotations

from .harness import PROGRAMS, Cluster


def test_a_flood_to_a_slow_consumer_does_not_exhaust_memory(tmp_path):
    # ~200 MB of records; without back-pressure the producer would buffer most of it
    results = Cluster(f"{PROGRAMS}:flood", 2, 1, tmp_path=tmp_path).wait(timeout=120)
    peaks = {}
    for code, out, err in results:
        assert code == 0, err
        _, worker, mib = out.split()[-3:]
        peaks[int(worker)] = int(mib)
    assert peaks[0] < 120, peaks   # producer: transport buffer bounded (4 MB high-water mark)
    assert peaks[1] < 160, peaks   # consumer: reading pauses while its mailbox is full
