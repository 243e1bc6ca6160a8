"""bytewax 0.21.1 dataflows of the benchmarks' workloads, for ``bytewax.run`` and ``bytewax.testing``.

    python -m bytewax.run "benchmarks.peers.bytewax_flows:pipeline(1000)"           # 2,000,000 ints, batches of 1000
    python -m bytewax.run "benchmarks.peers.bytewax_flows:wordcount('corpus.txt')" -w 2
    python -m bytewax.testing "benchmarks.peers.bytewax_flows:windows(2000000)" -p 2

- ``pipeline(batch, n)``: ``range(n)`` split over the workers -> ``map(x + 1)`` -> ``filter(even)`` -> a sink.
- ``wordcount(path, batch)``: worker ``w`` of ``W`` reads lines ``w, w + W, ...`` of the corpus ->
  ``flat_map(str.split)`` -> ``count_final`` by word -> a sink.
- ``windows(n, batch)``: the events of :mod:`benchmarks.win_events`, worker ``w`` taking the keys whose index
  is ``w`` modulo ``W`` -> ``key_on`` -> ``fold_window`` (count, sum) over 10 s tumbling windows of event time
  with an ``EventClock`` whose watermark is the latest event time - 100 ms and nothing else (its system clock
  frozen, no wake-ups: the only configuration that drops nothing in a replay) -> a sink; late events go to a
  counting sink (they must be none).

With ``PEER_CHECK_DIR`` set, each worker's sinks write a JSON file there when they close: what they got
(``items`` and ``sum``; for windows the table's ``rows`` or the ``late`` count) and the wall-clock times the
worker's source was built (``t_build``) and the sink closed (``t_close``). The benchmarks take the dataflow's
time as the last close - the first build (interpreter start-up and cluster connection left out) and check the
results.
"""

from __future__ import annotations

import json
import os
import time
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Iterator

import bytewax.operators as op
from bytewax.dataflow import Dataflow
from bytewax.inputs import DynamicSource, StatelessSourcePartition
from bytewax.operators.windowing import EventClock, TumblingWindower, fold_window
from bytewax.outputs import DynamicSink, StatelessSinkPartition

from ..win_events import LATENESS_MS, N_EVENTS, WINDOW_MS, Event, gen_events

N_INTS = 2_000_000
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_T_BUILD: dict[int, float] = {}      # worker index -> when its source was built


def _report(worker: int, kind: str, **fields: Any) -> None:
    folder = os.environ.get("PEER_CHECK_DIR")
    if folder:
        with open(os.path.join(folder, f"pid{os.getpid()}_w{worker}_{kind}.json"), "w") as f:
            json.dump({"worker": worker, "t_build": _T_BUILD.get(worker), "t_close": time.time(), **fields}, f)


class _Batches(StatelessSourcePartition):
    def __init__(self, batches: Iterator[list[Any]]) -> None:
        self._batches = batches

    def next_batch(self) -> list[Any]:
        return next(self._batches)          # (StopIteration ends the partition)


class _Source(DynamicSource):
    """Worker ``w`` of ``W`` reads the batches ``batches(w, W)`` gives."""

    def __init__(self, batches: Callable[[int, int], Iterator[list[Any]]]) -> None:
        self._batches = batches

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _Batches:
        _T_BUILD[worker_index] = time.time()
        return _Batches(self._batches(worker_index, worker_count))


class _Part(StatelessSinkPartition):
    def __init__(self, worker: int, kind: str, add: Callable[[dict[str, Any], list[Any]], None],
                 state: dict[str, Any]) -> None:
        self.worker, self.kind, self.add, self.state = worker, kind, add, state

    def write_batch(self, items: list[Any]) -> None:
        self.add(self.state, items)

    def close(self) -> None:
        _report(self.worker, self.kind, **self.state)


class _Sink(DynamicSink):
    """Folds each batch into a per-worker dict with ``add``; reports the dict when it closes."""

    def __init__(self, kind: str, add: Callable[[dict[str, Any], list[Any]], None],
                 state: Callable[[], dict[str, Any]]) -> None:
        self.kind, self.add, self.state = kind, add, state

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _Part:
        return _Part(worker_index, self.kind, self.add, self.state())


def _tally() -> dict[str, Any]:
    return {"items": 0, "sum": 0}


def _add_ints(state: dict[str, Any], items: list[int]) -> None:
    state["items"] += len(items)
    state["sum"] += sum(items)


def _add_counts(state: dict[str, Any], items: list[tuple[str, int]]) -> None:
    state["items"] += len(items)
    state["sum"] += sum(n for _, n in items)


def _slices(items: list[Any], batch: int) -> Iterator[list[Any]]:
    return (items[i:i + batch] for i in range(0, len(items), batch))


def _inc(x: int) -> int:
    return x + 1


def _even(x: int) -> bool:
    return x % 2 == 0


def pipeline(batch: int = 1000, n: int = N_INTS) -> Dataflow:
    def batches(worker: int, workers: int) -> Iterator[list[int]]:
        per = n // workers
        lo, hi = worker * per, n if worker == workers - 1 else (worker + 1) * per
        return (list(range(i, min(i + batch, hi))) for i in range(lo, hi, batch))

    flow = Dataflow(f"pipeline_b{batch}")
    ints = op.input("in", flow, _Source(batches))
    op.output("out", op.filter("even", op.map("inc", ints, _inc), _even), _Sink("ints", _add_ints, _tally))
    return flow


def wordcount(path: str, batch: int = 1) -> Dataflow:
    def batches(worker: int, workers: int) -> Iterator[list[str]]:
        with open(path) as f:
            return _slices(f.readlines()[worker::workers], batch)

    flow = Dataflow("wordcount")
    words = op.flat_map("split", op.input("in", flow, _Source(batches)), str.split)
    op.output("out", op.count_final("count", words, lambda word: word), _Sink("counts", _add_counts, _tally))
    return flow


_EVENTS: list[Event] = []


def _event_time(event: Event) -> datetime:
    return EPOCH + timedelta(milliseconds=event[1])


def _frozen_now() -> datetime:
    return datetime(2000, 1, 1, tzinfo=timezone.utc)


def _no_wakeup(_at: datetime) -> None:
    return None


def _add_rows(state: dict[str, Any], items: list[Any]) -> None:
    rows = state["rows"]
    for key, (window_id, (count, total)) in items:
        rows.append([key, window_id * WINDOW_MS, count, total])


def _add_late(state: dict[str, Any], items: list[Any]) -> None:
    state["late"] += len(items)


def windows(n: int = N_EVENTS, batch: int = 1000) -> Dataflow:
    if len(_EVENTS) != n:                   # made when the flow is, before any source is built
        _EVENTS[:] = gen_events(n)

    def batches(worker: int, workers: int) -> Iterator[list[Event]]:
        mine = _EVENTS if workers == 1 else [e for e in _EVENTS if int(e[0][1:]) % workers == worker]
        return _slices(mine, batch)

    flow = Dataflow("windows")
    keyed = op.key_on("key", op.input("in", flow, _Source(batches)), lambda e: e[0])
    clock = EventClock(_event_time, wait_for_system_duration=timedelta(milliseconds=LATENESS_MS),
                       now_getter=_frozen_now, to_system_utc=_no_wakeup)
    windower = TumblingWindower(length=timedelta(milliseconds=WINDOW_MS), align_to=EPOCH)
    out = fold_window("window", keyed, clock, windower, lambda: (0, 0), lambda acc, e: (acc[0] + 1, acc[1] + e[2]),
                      lambda a, b: (a[0] + b[0], a[1] + b[1]))
    op.output("out", out.down, _Sink("table", _add_rows, lambda: {"rows": []}))
    op.output("late", out.late, _Sink("late", _add_late, lambda: {"late": 0}))
    return flow
