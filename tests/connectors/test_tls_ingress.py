"""The Spark ingress and the Spark publisher over TLS, driven by their own Spark-side clients (no JVM), real TCP."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

import aiotimely as at  # noqa: E402
from aiotimely.comm.tls import TLSError  # noqa: E402
from aiotimely.connectors import spark_datasource  # noqa: E402
from aiotimely.connectors.spark_datasource import ArrowIngress, end_stream  # noqa: E402
from aiotimely.connectors.spark_reader import publish_to_spark, stream_reader  # noqa: E402

from ..cluster.tls_certs import make_certificates  # noqa: E402

SECRET = "tls-ingress-secret"


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certificates(tmp_path_factory.mktemp("certs"))


def _stage(address: str, tls: Any, batch: int, token: str, ids: list[int]) -> None:
    client = spark_datasource._Client(address, SECRET, 10, tls)
    try:
        client.send("stage", batch, 0, token, 0, 0)
        record_batch = pa.record_batch({"id": pa.array(ids, pa.int32())})
        client.send_arrow(spark_datasource.SCHEMA, record_batch.schema.serialize())
        client.send_arrow(spark_datasource.BATCH, record_batch.serialize())
        assert client.ask("staged", len(ids)) == ["ok", len(ids)]
    finally:
        client.close()


def test_the_arrow_ingress_takes_tls_writers_and_refuses_plaintext_and_strangers(certs, caplog):
    ingress = ArrowIngress("127.0.0.1:0", secret=SECRET, tls=certs.node())
    rows: list[tuple[int, Any]] = []
    failure: list[BaseException] = []

    def build(worker: Any) -> None:
        worker.dataflow(lambda s: ingress.stream(s).inspect_time(lambda t, r: rows.append((t, r))))

    def main() -> None:
        try:
            at.execute(build, loop="asyncio")
        except BaseException as e:  # noqa: BLE001 - reported below
            failure.append(e)

    thread = threading.Thread(target=main, daemon=True)
    with caplog.at_level(logging.WARNING, logger="aiotimely.connectors.spark_datasource"):
        thread.start()
        try:
            address = ingress.wait_listening(10)
            with pytest.raises(at.ClusterError, match="closed the connection"):
                spark_datasource._Client(address, SECRET, 5, False)              # plaintext: refused
            with pytest.raises(TLSError, match="does not trust this process's certificate"):
                spark_datasource._Client(address, SECRET, 5, certs.stranger())   # another CA: refused
            _stage(address, certs.node(), 0, "t0", [1, 2, 3])
            writer = spark_datasource._StreamWriterLogic({"address": address}, SECRET, certs.node())
            writer.commit([spark_datasource._StagedAttemptFields(0, 0, "t0", 3, 0)], 0)   # as Spark's driver
            end_stream(address, SECRET, tls=certs.node())
            thread.join(20)
        finally:
            ingress.close()
            thread.join(10)
    assert not thread.is_alive() and not failure, failure
    assert sorted(rows) == [(0, (1,)), (0, (2,)), (0, (3,))]
    refusals = [r.getMessage() for r in caplog.records if "refused a connection" in r.getMessage()]
    assert any("SparkArrowIngress" in m and "a plaintext connection to a TLS listener" in m for m in refusals), \
        refusals
    assert any("certificate not trusted" in m for m in refusals), refusals


def test_spark_reads_a_tls_publisher_and_a_plaintext_reader_is_refused(certs, caplog):
    def reader(address: str, tls: Any) -> Any:
        return stream_reader({"address": address, "connectTimeout": "5"}, ["value"], secret=SECRET, tls=tls)

    async def main() -> list[Any]:
        ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        async with at.Worker() as worker:
            inp = at.InputHandle()
            probe = worker.dataflow(lambda s: publish_to_spark(inp.to_stream(s), secret=SECRET, ready=ready,
                                                               end_timeout=10, tls=certs.node()).probe())
            address = await asyncio.wait_for(ready, 10)
            with pytest.raises(at.ClusterError, match="publisher at"):
                await asyncio.to_thread(reader(address, False).initialOffset)
            good = reader(address, certs.node())
            start = await asyncio.to_thread(good.initialOffset)
            inp.send_batch([1, 2])
            inp.close()
            end = start
            for _ in range(200):
                end = await asyncio.to_thread(good.latestOffset, start, None)
                if end.get("final"):
                    break
                await asyncio.sleep(0.02)
            got = [row for p in good.partitions(start, end) for row in await asyncio.to_thread(list, good.read(p))]
            await asyncio.to_thread(good.latestOffset, end, None)       # commits the end: the publisher completes
            await asyncio.wait_for(probe.wait_done(), 10)
            await asyncio.to_thread(good.stop)
            return got

    with caplog.at_level(logging.WARNING, logger="aiotimely.connectors.spark_reader"):
        got = asyncio.run(asyncio.wait_for(main(), 60))
    assert sorted(got) == [(1,), (2,)]
    assert any("a plaintext connection to a TLS listener" in r.getMessage() for r in caplog.records), caplog.text


def test_the_foreach_ingress_takes_tls_writers_and_refuses_plaintext(certs, caplog):
    from aiotimely.connectors.spark import AiotimelyForeachWriter, EpochListener, ingress

    rows: list[tuple[int, Any]] = []
    failure: list[BaseException] = []
    listening = threading.Event()
    where: list[str] = []

    async def build(worker: Any) -> None:
        ready = asyncio.get_running_loop().create_future()
        worker.dataflow(lambda s: ingress(s, "127.0.0.1:0", secret=SECRET, ready=ready, tls=certs.node())
                        .inspect_time(lambda t, r: rows.append((t, r))))
        where.append(await ready)
        listening.set()

    def main() -> None:
        try:
            at.execute(build, loop="asyncio")
        except BaseException as e:  # noqa: BLE001 - reported below
            failure.append(e)
        finally:
            listening.set()

    thread = threading.Thread(target=main, daemon=True)
    with caplog.at_level(logging.WARNING, logger="aiotimely.connectors.spark"):
        thread.start()
        assert listening.wait(10) and where, failure
        with pytest.raises(at.ClusterError, match="closed the connection"):
            AiotimelyForeachWriter(where[0], SECRET, tls=False).open(0, 0)          # plaintext: refused
        writer = AiotimelyForeachWriter(where[0], SECRET, tls=certs.node())         # as a Spark task
        assert writer.open(0, 0)
        writer.process({"id": 1})
        writer.close(None)
        listener = EpochListener(where[0], SECRET, tls=certs.node())               # as Spark's driver
        listener._tell("epoch", 0)
        listener._tell("end")
        thread.join(20)
    assert not thread.is_alive() and not failure, failure
    assert rows == [(0, {"id": 1})]
    assert any("a plaintext connection to a TLS listener" in r.getMessage() for r in caplog.records), caplog.text
