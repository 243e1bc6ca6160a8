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
    assert peaks[0] < 120, peaks   # producer: waits for credit (and for its transport buffer: 4 MB high-water)
    assert peaks[1] < 100, peaks   # consumer: holds at most the credit window (64 batches per sender)


def test_progress_is_never_held_behind_data_for_a_slow_sink(tmp_path):
    """The sink in process 1 awaits 20 ms per batch under a flood from process 0; a clock in another dataflow
    moves every 50 ms. Reading from the network never pauses, so the clock's frontier keeps moving."""
    results = Cluster(f"{PROGRAMS}:clock_behind_slow_sink", 2, 1, tmp_path=tmp_path).wait(timeout=120)
    for code, _out, err in results:
        assert code == 0, err
    longest = float(results[1][1].split("longest wait")[1].split()[0])
    assert longest < 1.0, longest          # a tick is 50 ms; held behind the data, it was stuck for seconds
