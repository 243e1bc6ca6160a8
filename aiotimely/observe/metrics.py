"""Prometheus metrics of a running computation: ``await serve_metrics(schedulers, port)``.

Every scrape reads the live counts (``SchedulerView.statistics()``, ``Link.statistics()``)
and :func:`~aiotimely.observe.snapshot.snapshot` of each worker, on the workers' event
loop between two rounds, so it never sees a round half done; the HTTP server runs
in a thread of its own, so the workers never wait for a scraper to read. Nothing is
counted for metrics beyond what the runtime always counts: serving them costs only
the scrapes.

The metrics (``process`` and ``worker`` label every one of a worker; an operator's
also have ``dataflow``, its name, ``operator_id``, its path such as ``"0.3"``, and
``operator``, its name; an input's ``port`` and ``channel``; a connection's ``peer``):

- ``aiotimely_worker_rounds_total``, ``..._operators_run_total``, ``..._busy_seconds_total``,
  ``aiotimely_worker_dataflows``
- ``aiotimely_operator_activations_total``, ``..._busy_seconds_total``, ``..._records_in_total``,
  ``..._records_out_total``, ``..._records_skipped_total`` and ``..._dead_letters_total`` (records its function
  raised on, under ``errors="skip"`` and ``"dead_letter"``), ``aiotimely_operator_capabilities`` (held now),
  ``aiotimely_operator_holds_back``
- ``aiotimely_input_records_total``, ``aiotimely_input_queued_batches``, ``aiotimely_input_queued_records``,
  ``aiotimely_input_queued_bytes`` (what the containers waiting weigh),
  ``aiotimely_input_frontier`` and ``aiotimely_input_frontier_lag`` (numeric times only, see :func:`frontier_lags`)
- ``aiotimely_dataflow_frontier`` (numeric times only)
- ``aiotimely_connection_bytes_sent_total``, ``..._bytes_received_total``, ``..._frames_sent_total``,
  ``..._frames_received_total`` (one connection per peer process)

``prometheus_client`` is an optional dependency: ``pip install 'aiotimely[metrics]'``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib
import logging
import socket
import socketserver
import threading
import wsgiref.simple_server
from collections.abc import Iterator, Sequence
from typing import Any

from ..comm.cluster import Cluster
from .serving import Served
from .snapshot import DataflowView, OperatorView, snapshot
from .view import SchedulerView

__all__ = ["MetricsCollector", "serve_metrics", "frontier_lags", "SCRAPE_TIMEOUT"]

log = logging.getLogger("aiotimely.observe")

SCRAPE_TIMEOUT = 5.0
"""Seconds a scrape waits for the event loop to be free (an operator that blocks the loop delays it)."""

POLL_INTERVAL = 0.05
"""Seconds the server thread waits between looks at whether it should stop (``close`` waits as long)."""

_OPERATOR = ["process", "worker", "dataflow", "operator_id", "operator"]


def _prometheus() -> Any:
    """The ``prometheus_client`` module, or an error saying how to install it."""
    try:
        importlib.import_module("prometheus_client.core")  # (the metric families)
        return importlib.import_module("prometheus_client")
    except ImportError:
        raise ImportError("Prometheus metrics need the prometheus_client package: "
                          "pip install 'aiotimely[metrics]'") from None


def _numeric(time: Any) -> bool:
    return type(time) is int or type(time) is float


def frontier_lags(flow: DataflowView) -> dict[tuple[str, int], float]:
    """How far each operator input of ``flow`` is behind the dataflow's head, in the dataflow's own time units,
    keyed by ``(operator id, port)``.

    The head is the largest time held or awaited anywhere in the dataflow right now: the most advanced input
    frontier or capability (a source's capability is where its input stands: ``advance_to(t)`` moves it to ``t``).
    An input's lag is the head minus the least time of its frontier. Only numeric times (``int``, ``float``)
    have a lag; inputs of other times (``Product`` in an iterative scope, ...) and complete inputs (empty frontier)
    are left out."""
    times = [t for op in flow.operators for i in op.inputs for t in i.frontier if _numeric(t)]
    times.extend(t for op in flow.operators for o in op.outputs for t in o.capabilities if _numeric(t))
    if not times:
        return {}
    head = max(times)
    lags: dict[tuple[str, int], float] = {}
    for op in flow.operators:
        for i in op.inputs:
            if i.frontier and all(_numeric(t) for t in i.frontier):
                lags[(op.id, i.port)] = head - min(i.frontier)
    return lags


class _Families:
    """The metric families of one scrape, filled worker by worker."""

    def __init__(self, prom: Any) -> None:
        core = prom.core
        counter, gauge = core.CounterMetricFamily, core.GaugeMetricFamily
        worker, op = ["process", "worker"], _OPERATOR
        inp, out = _OPERATOR + ["port", "channel"], _OPERATOR + ["port"]
        self.rounds = counter("aiotimely_worker_rounds", "Rounds of scheduling the worker ran.", labels=worker)
        self.operators_run = counter("aiotimely_worker_operators_run", "Operator and scope runs.", labels=worker)
        self.worker_busy = counter("aiotimely_worker_busy_seconds", "Seconds spent running rounds.", labels=worker)
        self.dataflows = gauge("aiotimely_worker_dataflows", "Dataflows running (not complete).", labels=worker)
        self.activations = counter("aiotimely_operator_activations", "Times the operator's logic ran.", labels=op)
        self.busy = counter("aiotimely_operator_busy_seconds", "Seconds the operator's logic ran.", labels=op)
        self.records_in = counter("aiotimely_operator_records_in", "Records the operator took from its inputs.",
                                  labels=op)
        self.records_out = counter("aiotimely_operator_records_out", "Records the operator sent on its outputs.",
                                   labels=op)
        self.skipped = counter("aiotimely_operator_records_skipped",
                               "Records the operator's function raised on that it dropped (errors='skip').", labels=op)
        self.dead_letters = counter("aiotimely_operator_dead_letters",
                                    "Records the operator's function raised on that it sent to dead letters "
                                    "(errors='dead_letter').", labels=op)
        self.capabilities = gauge("aiotimely_operator_capabilities", "Distinct capabilities the operator holds.",
                                  labels=op)
        self.holds_back = gauge("aiotimely_operator_holds_back",
                                "1 if the operator holds its scope's earliest time (a capability or a queued batch).",
                                labels=op)
        self.input_records = counter("aiotimely_input_records", "Records taken from the input.", labels=inp)
        self.queued_batches = gauge("aiotimely_input_queued_batches", "Batches waiting at the input.", labels=inp)
        self.queued_records = gauge("aiotimely_input_queued_records", "Records waiting at the input.", labels=inp)
        self.queued_bytes = gauge("aiotimely_input_queued_bytes", "Bytes of containers waiting at the input.",
                                  labels=inp)
        self.frontier = gauge("aiotimely_input_frontier",
                              "The least time that may still arrive at the input (numeric times).", labels=inp)
        self.lag = gauge("aiotimely_input_frontier_lag",
                         "How far the input's frontier is behind the dataflow's most advanced time, in its time "
                         "units (numeric times).", labels=inp)
        self.output_records = counter("aiotimely_output_records", "Records sent on the output.", labels=out)
        self.dataflow_frontier = gauge("aiotimely_dataflow_frontier",
                                       "The least time held or in flight in the dataflow (numeric times).",
                                       labels=["process", "worker", "dataflow", "dataflow_index"])
        peer = ["process", "peer"]
        self.bytes_sent = counter("aiotimely_connection_bytes_sent", "Bytes sent to the peer process.", labels=peer)
        self.bytes_received = counter("aiotimely_connection_bytes_received", "Bytes received from the peer process.",
                                      labels=peer)
        self.frames_sent = counter("aiotimely_connection_frames_sent", "Frames sent to the peer process.",
                                   labels=peer)
        self.frames_received = counter("aiotimely_connection_frames_received",
                                       "Frames received from the peer process.", labels=peer)

    def all(self) -> list[Any]:
        """Every family, in the order made."""
        return list(vars(self).values())


def _worker_metrics(families: _Families, scheduler: SchedulerView, process: str) -> None:
    stats = scheduler.statistics()
    worker = str(scheduler.index)
    w = [process, worker]
    families.rounds.add_metric(w, stats.rounds)
    families.operators_run.add_metric(w, stats.operators_run)
    families.worker_busy.add_metric(w, stats.busy_seconds)
    families.dataflows.add_metric(w, stats.dataflows)
    for op in stats.operators:
        labels = [process, worker, op.dataflow, op.id, op.name]
        families.activations.add_metric(labels, op.activations)
        families.busy.add_metric(labels, op.busy_seconds)
        families.records_in.add_metric(labels, op.records_in)
        families.records_out.add_metric(labels, op.records_out)
        families.skipped.add_metric(labels, op.skipped)
        families.dead_letters.add_metric(labels, op.dead_letters)
        for i in op.inputs:
            channel = ".".join(map(str, i.channel)) if i.channel is not None else ""
            families.input_records.add_metric(labels + [str(i.port), channel], i.records)
        for port, records in enumerate(op.outputs):
            families.output_records.add_metric(labels + [str(port)], records)
    channels = {(op.id, i.port): i.channel for op in stats.operators for i in op.inputs}
    for flow in snapshot(scheduler).dataflows:
        lags = frontier_lags(flow)
        if flow.frontier and all(_numeric(t) for t in flow.frontier):
            families.dataflow_frontier.add_metric([process, worker, flow.name, str(flow.index)], min(flow.frontier))
        for view in flow.operators:
            _operator_gauges(families, view, [process, worker, flow.name, view.id, view.name], lags, channels)


def _operator_gauges(families: _Families, view: OperatorView, labels: list[str],
                     lags: dict[tuple[str, int], float], channels: dict[tuple[str, int], Any]) -> None:
    families.capabilities.add_metric(labels, sum(len(o.capabilities) for o in view.outputs))
    families.holds_back.add_metric(labels, 1 if view.holds_back else 0)
    for i in view.inputs:
        channel = channels.get((view.id, i.port))
        port = labels + [str(i.port), ".".join(map(str, channel)) if channel is not None else ""]
        families.queued_batches.add_metric(port, i.queued_batches)
        families.queued_records.add_metric(port, i.queued_records)
        families.queued_bytes.add_metric(port, i.queued_bytes)
        if i.frontier and all(_numeric(t) for t in i.frontier):
            families.frontier.add_metric(port, min(i.frontier))
        lag = lags.get((view.id, i.port))
        if lag is not None:
            families.lag.add_metric(port, lag)


def _connection_metrics(families: _Families, cluster: Cluster, process: str) -> None:
    for peer, link in sorted(cluster.connections.items()):
        stats = link.statistics()
        labels = [process, str(peer)]
        families.bytes_sent.add_metric(labels, stats.bytes_sent)
        families.bytes_received.add_metric(labels, stats.bytes_received)
        families.frames_sent.add_metric(labels, stats.frames_sent)
        families.frames_received.add_metric(labels, stats.frames_received)


class MetricsCollector:
    """A ``prometheus_client`` collector of the workers ``schedulers`` (all on one event loop) of process
    ``process``, and of ``cluster``'s connections: register it with any registry
    (``prometheus_client.REGISTRY.register(collector)``) to serve the metrics with an exporter of your own.

    Create it on the workers' event loop; :meth:`collect` may then be called from any thread: it reads the
    runtime on that loop, between rounds, waiting at most :data:`SCRAPE_TIMEOUT` seconds."""

    def __init__(self, schedulers: Sequence[SchedulerView], *, process: int = 0, cluster: Cluster | None = None,
                 loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._prom = _prometheus()
        self.schedulers = list(schedulers)
        self.process = process
        self.cluster = cluster
        self._loop = loop or asyncio.get_running_loop()
        self._thread = threading.get_ident()

    def collect(self) -> Iterator[Any]:
        """The metric families as of now (``prometheus_client``'s ``Collector`` protocol)."""
        loop = self._loop
        if threading.get_ident() == self._thread:
            yield from self._families()
            return
        answer: concurrent.futures.Future[list[Any]] = concurrent.futures.Future()

        def read() -> None:
            if answer.set_running_or_notify_cancel():
                try:
                    answer.set_result(self._families())
                except BaseException as exc:  # noqa: BLE001 - handed to the scraping thread, which reports it
                    answer.set_exception(exc)

        try:
            loop.call_soon_threadsafe(read)
            families = answer.result(timeout=SCRAPE_TIMEOUT)
        except RuntimeError:  # the loop is closed: the computation is over
            return
        except concurrent.futures.TimeoutError:
            answer.cancel()
            log.warning("metrics of process %d: the event loop did not answer within %g s (an operator may be "
                        "blocking it); this scrape is empty", self.process, SCRAPE_TIMEOUT)
            return
        yield from families

    def _families(self) -> list[Any]:
        families = _Families(self._prom)
        process = str(self.process)
        for scheduler in self.schedulers:
            _worker_metrics(families, scheduler, process)
        if self.cluster is not None:
            _connection_metrics(families, self.cluster, process)
        return families.all()


async def serve_metrics(schedulers: Sequence[SchedulerView], port: int = 0, *, host: str = "127.0.0.1",
                        process: int = 0, cluster: Cluster | None = None) -> Served:
    """Serve the metrics of ``schedulers`` (this process's workers, index ``process``) and of ``cluster``'s
    connections in Prometheus's text format at ``http://host:port/metrics`` (port 0: any free port; the
    :class:`~aiotimely.observe.serving.Served` returned says which), until ``await served.close()``.

    Raises ``ImportError`` if ``prometheus_client`` is not installed (``pip install 'aiotimely[metrics]'``),
    and ``OSError`` naming the address if it cannot listen there."""
    prom = _prometheus()
    collector = MetricsCollector(schedulers, process=process, cluster=cluster)
    registry = prom.CollectorRegistry(auto_describe=False)
    registry.register(collector)
    try:
        server = _server(host, port, prom.make_wsgi_app(registry))
    except OSError as e:
        raise OSError(e.errno, f"process {process} cannot serve metrics on {host}:{port}: {e.strerror or e}") from e
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": POLL_INTERVAL},
                              name=f"aiotimely-metrics-{process}", daemon=True)
    thread.start()
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{server.server_address[1]}/metrics"
    log.info("process %d serves metrics at %s", process, url)
    loop = asyncio.get_running_loop()

    async def close() -> None:
        await loop.run_in_executor(None, _shutdown, server, thread)

    return Served(url, close)


class _Server(socketserver.ThreadingMixIn, wsgiref.simple_server.WSGIServer):
    """The HTTP server: one thread per request (a slow scraper holds up no other), none outliving the process."""

    daemon_threads = True


class _Quiet(wsgiref.simple_server.WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Requests are not logged (a scrape every few seconds would fill stderr)."""


def _server(host: str, port: int, app: Any) -> _Server:
    """A WSGI server of ``app`` listening on ``host:port`` (IPv4 or IPv6, as ``host`` resolves)."""
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]

    class Server(_Server):
        address_family = family

    return wsgiref.simple_server.make_server(host, port, app, Server, handler_class=_Quiet)


def _shutdown(server: Any, thread: threading.Thread) -> None:
    server.shutdown()
    server.server_close()
    thread.join(timeout=SCRAPE_TIMEOUT)
