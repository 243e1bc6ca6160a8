"""worker.statistics() and the Prometheus endpoint (aiotimely.observe.metrics), scraped over HTTP."""

from __future__ import annotations

import asyncio
import os
import queue
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path
from typing import Any

import pytest

import aiotimely as at
from aiotimely.launch import free_ports
from aiotimely.observe import metrics
from aiotimely.observe.metrics import serve_metrics

prometheus_parser = pytest.importorskip("prometheus_client.parser")

ROOT = Path(__file__).resolve().parent.parent.parent
PROGRAM = Path(__file__).resolve().parent / "metrics_program.py"
TIMEOUT = 30.0


def scrape(url: str) -> list[tuple[str, dict[str, str], float]]:
    """Every sample at ``url``: ``(name, labels, value)``."""
    with urllib.request.urlopen(url, timeout=TIMEOUT) as response:
        text = response.read().decode()
    return [(s.name, s.labels, s.value) for family in prometheus_parser.text_string_to_metric_families(text)
            for s in family.samples]


def value(samples: list[tuple[str, dict[str, str], float]], name: str, **labels: str) -> float | None:
    """The one sample called ``name`` with ``labels`` (None if there is none)."""
    found = [v for n, ls, v in samples if n == name and all(ls.get(k) == want for k, want in labels.items())]
    assert len(found) <= 1, (name, labels, found)
    return found[0] if found else None


def evens(stream: at.Stream, name: str = "Evens") -> at.Stream:
    @stream.unary(name=name)
    async def kept(input: Any, output: Any, cap: Any) -> None:
        cap.drop()
        async for _ in input.activations():
            for time, batch in input.drain():
                output.session(time).give_many([x for x in batch if x % 2 == 0])

    return kept


def test_statistics_count_what_each_named_operator_took_and_sent() -> None:
    async def main() -> None:
        async with at.Worker() as worker:
            inp: at.InputHandle[int] = at.InputHandle()
            probe = worker.dataflow(lambda scope: evens(inp.to_stream(scope)).probe(), name="numbers")
            for t in range(1, 4):
                inp.send_batch(range(10))
                inp.advance_to(t)
                await asyncio.wait_for(worker.step_while(lambda: probe.less_than(inp.time)), TIMEOUT)
            stats = worker.statistics()
            kept = stats.operator("Evens")
            assert (kept.records_in, kept.records_out, kept.dataflow) == (30, 15, "numbers")
            assert kept.inputs[0].batches == 3 and kept.inputs[0].frontier == (3,)
            assert kept.queued_records == 0 and not kept.done
            assert kept.activations >= 3 and kept.busy_seconds > 0
            assert stats.operator("Input").records_out == 30
            assert stats.dataflows == 1 and stats.rounds > 0 and stats.busy_seconds > 0
            assert stats.operators_run >= sum(op.activations for op in stats.operators)
            inp.close()
            await asyncio.wait_for(worker.step_until_done(), TIMEOUT)
            done = worker.statistics()  # a complete dataflow's operators are still there
            assert done.dataflows == 0
            assert done.operator("Evens").done and done.operator("Evens").records_in == 30

    asyncio.run(main())


def test_statistics_of_each_worker_add_up_over_an_exchange() -> None:
    workers: list[at.Worker] = []

    def build(worker: at.Worker) -> None:
        workers.append(worker)
        worker.dataflow(lambda scope: evens(at.to_stream(range(worker.index, 100, 2), scope).exchange(lambda x: x))
                        .probe(), name="spread")

    at.execute(build, workers=2)
    by_worker = [w.statistics().operator("Evens") for w in workers]
    assert [op.records_in for op in by_worker] == [50, 50]  # an int key goes to worker key % 2
    assert [op.records_out for op in by_worker] == [50, 0]
    assert all(op.done for op in by_worker)


def test_the_endpoint_shows_queues_frontiers_and_lag_as_they_change() -> None:
    """``Gate`` waits for an event before it drops its first capability, so what comes queues at its input and
    everything after it lags; once the gate opens, the queue drains and the lag goes."""

    async def main() -> None:
        async with at.Worker() as worker:
            gate = asyncio.Event()
            inp: at.InputHandle[int] = at.InputHandle()

            def build(scope: at.Scope[at.Stream]) -> at.ProbeHandle:
                @inp.to_stream(scope).unary(name="Gate")
                async def gated(input: Any, output: Any, cap: Any) -> None:
                    await gate.wait()
                    cap.drop()
                    async for _ in input.activations():
                        for time, batch in input.drain():
                            output.session(time).give_many(batch)

                return evens(gated, "After").probe()

            probe = worker.dataflow(build, name="gated")
            served = await serve_metrics([worker._scheduler])
            try:
                assert served.url.startswith("http://127.0.0.1:") and served.url.endswith("/metrics")
                for t in range(1, 4):
                    inp.send_batch(range(10))
                    inp.advance_to(t)
                await asyncio.wait_for(worker.step_while(
                    lambda: worker.statistics().operator("Gate").queued_records < 30), TIMEOUT)
                samples = await asyncio.to_thread(scrape, served.url)
                gate_labels = {"dataflow": "gated", "operator": "Gate", "process": "0", "worker": "0"}
                after = {"dataflow": "gated", "operator": "After"}
                assert value(samples, "aiotimely_input_queued_records", **gate_labels) == 30
                # records queued at times 0, 1, 2 hold Gate's input frontier at 0, the input is at 3
                assert value(samples, "aiotimely_input_frontier", **gate_labels) == 0
                assert value(samples, "aiotimely_input_frontier_lag", **gate_labels) == 3
                assert value(samples, "aiotimely_operator_holds_back", **gate_labels) == 1
                assert value(samples, "aiotimely_input_frontier", **after) == 0
                assert value(samples, "aiotimely_input_frontier_lag", **after) == 3
                assert value(samples, "aiotimely_operator_records_in_total", **after) == 0
                assert value(samples, "aiotimely_dataflow_frontier", dataflow="gated") == 0

                gate.set()
                await asyncio.wait_for(worker.step_while(lambda: probe.less_than(3)), TIMEOUT)
                samples = await asyncio.to_thread(scrape, served.url)
                assert value(samples, "aiotimely_input_queued_records", **gate_labels) == 0
                assert value(samples, "aiotimely_input_frontier_lag", **after) == 0
                assert value(samples, "aiotimely_input_frontier", **after) == 3
                assert value(samples, "aiotimely_operator_records_in_total", **after) == 30
                assert value(samples, "aiotimely_operator_records_out_total", **after) == 15
                assert value(samples, "aiotimely_input_records_total", port="0", **after) == 30
                assert value(samples, "aiotimely_operator_activations_total", **after) >= 1
                assert value(samples, "aiotimely_worker_rounds_total", worker="0") > 0
                assert value(samples, "aiotimely_connection_bytes_sent_total") is None  # no cluster, no peers
            finally:
                await served.close()
            inp.close()

    asyncio.run(main())


def test_without_prometheus_client_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    monkeypatch.setitem(sys.modules, "prometheus_client.core", None)

    async def main() -> None:
        async with at.Worker() as worker:
            with pytest.raises(ImportError, match=r"pip install 'aiotimely\[metrics\]'"):
                await metrics.serve_metrics([worker._scheduler])

    asyncio.run(main())


class Process:
    """One process of tests/observe/metrics_program.py, its stdout and stderr read line by line by threads."""

    def __init__(self, index: int, addresses: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(PROGRAM), str(index), addresses], cwd=ROOT,
            env={**os.environ, "AIOTIMELY_SECRET": "metrics-test", "AIOTIMELY_CONNECT_TIMEOUT": "20"},
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.out: queue.Queue[str] = queue.Queue()
        self.err: queue.Queue[str] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._read, args=(self.proc.stdout, self.out, []), daemon=True).start()
        threading.Thread(target=self._read, args=(self.proc.stderr, self.err, self.stderr), daemon=True).start()

    @staticmethod
    def _read(stream: Any, lines: queue.Queue[str], kept: list[str]) -> None:
        for line in stream:
            kept.append(line)
            lines.put(line.strip())
        lines.put("")

    def expect(self, prefix: str, lines: queue.Queue[str] | None = None) -> str:
        """The next line of stdout (or of ``lines``), which must start with ``prefix``: the rest of it."""
        try:
            line = (lines or self.out).get(timeout=TIMEOUT)
        except queue.Empty:
            raise AssertionError(f"no {prefix!r} within {TIMEOUT} s; stderr:\n{''.join(self.stderr)}") from None
        assert line.startswith(prefix), f"{line!r} instead of {prefix!r}; stderr:\n{''.join(self.stderr)}"
        return line[len(prefix):].strip()

    def tell(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()


def test_two_processes_over_tcp_serve_record_counts_frontiers_and_connection_traffic() -> None:
    """The processes serve their metrics with ``execute(..., metrics_port=0)``, which says where on stderr."""
    addresses = ",".join(f"127.0.0.1:{port}" for port in free_ports(2))
    procs = [Process(p, addresses) for p in range(2)]
    try:
        urls = [proc.expect("aiotimely: metrics at", proc.err).split()[0] for proc in procs]
        frontiers = []
        for t in range(1, 4):
            for proc in procs:
                proc.tell(str(t))
            for proc in procs:
                assert proc.expect("reached") == str(t)
            scraped = [scrape(url) for url in urls]
            for p, samples in enumerate(scraped):
                route = {"process": str(p), "worker": str(p), "operator": "Route", "dataflow": "routed"}
                # each process sends 10 records per time; each worker gets the 5 even or odd ones of each
                assert value(samples, "aiotimely_operator_records_in_total", **route) == 10 * t
                assert value(samples, "aiotimely_operator_records_out_total", **route) == 10 * t
                assert value(samples, "aiotimely_operator_records_out_total", operator="Input") == 10 * t
                assert value(samples, "aiotimely_input_queued_records", **route) == 0
                peer = {"process": str(p), "peer": str(1 - p)}
                for name in ("bytes_sent", "bytes_received", "frames_sent", "frames_received"):
                    assert value(samples, f"aiotimely_connection_{name}_total", **peer) > 0
            frontiers.append([value(samples, "aiotimely_input_frontier", operator="Route") for samples in scraped])
        assert frontiers == [[1, 1], [2, 2], [3, 3]]  # the gauge moves as the inputs advance
        for proc in procs:
            proc.tell("close")
        for proc in procs:
            assert proc.proc.wait(timeout=TIMEOUT) == 0, "".join(proc.stderr)
    finally:
        for proc in procs:
            if proc.proc.poll() is None:
                proc.proc.kill()
                proc.proc.wait(timeout=TIMEOUT)


def test_a_scrape_while_an_operator_blocks_the_loop_is_empty_not_stuck(monkeypatch: pytest.MonkeyPatch,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(metrics, "SCRAPE_TIMEOUT", 0.1)

    async def main() -> None:
        async with at.Worker() as worker:
            served = await serve_metrics([worker._scheduler])
            scraped: list[Any] = []
            released = threading.Event()

            def scraper() -> None:
                try:
                    scraped.append(scrape(served.url))
                finally:
                    released.set()

            thread = threading.Thread(target=scraper)
            thread.start()
            released.wait(TIMEOUT)  # the event loop is blocked, as by an operator that never yields, until then
            thread.join(TIMEOUT)
            assert scraped == [[]]
            samples = await asyncio.to_thread(scrape, served.url)  # the loop is free again: so is the next scrape
            assert value(samples, "aiotimely_worker_rounds_total", worker="0") is not None
            await served.close()

    asyncio.run(main())
    assert "the event loop did not answer within 0.1 s" in caplog.text


def test_a_fused_chain_is_one_operator_that_names_its_stages() -> None:
    workers: list[at.Worker] = []

    def build(worker: at.Worker) -> None:
        workers.append(worker)
        worker.dataflow(lambda scope: at.to_stream(range(10), scope).map(lambda x: x + 1).filter(lambda x: x % 2)
                        .probe())

    at.execute(build)
    stats = workers[0].statistics()
    chain = stats.operator("Map")
    assert chain.stages == ("Map", "Filter") and (chain.records_in, chain.records_out) == (10, 5)
    with pytest.raises(KeyError, match="'Filter' runs fused in operator 'Map'"):
        stats.operator("Filter")


def test_a_port_in_use_is_an_error_naming_it() -> None:
    async def main() -> None:
        async with at.Worker() as worker:
            served = await serve_metrics([worker._scheduler])
            port = int(served.url.rsplit(":", 1)[1].split("/")[0])
            try:
                with pytest.raises(OSError, match=f"process 3 cannot serve metrics on 127.0.0.1:{port}"):
                    await serve_metrics([worker._scheduler], port, process=3)
            finally:
                await served.close()

    asyncio.run(main())
