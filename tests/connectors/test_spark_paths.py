"""The Spark connectors are one package, ``aiotimely.connectors.spark``; the old flat modules still offer every
name they had, as the very objects of the package's modules (programs import them, and Spark's processes load the
Spark-side classes by module and name)."""

from __future__ import annotations

import importlib
import pickle

import pytest

from aiotimely.connectors import spark, spark_cluster, spark_datasource, spark_reader
from aiotimely.connectors.spark import arrow_ingress, cluster, datasource, publisher, reader, records, wire

OLD = {
    "aiotimely.connectors.spark": ["ingress", "AiotimelyForeachWriter", "foreach_batch_sink", "ForeachBatchSink",
                                   "EpochListener", "IngressClient", "local_session", "control_message",
                                   "spark_class"],
    "aiotimely.connectors.spark_datasource": ["ArrowIngress", "register", "end_stream", "NAME", "RECORDS"],
    "aiotimely.connectors.spark_reader": ["publish_to_spark", "stream_reader", "DEFAULT_MAX_PENDING",
                                          "DEFAULT_END_TIMEOUT"],
    "aiotimely.connectors.spark_cluster": ["run_on_spark"],
}
"""Each old module's ``__all__``, as it was."""


@pytest.mark.parametrize("name", sorted(OLD))
def test_each_old_module_offers_what_it_offered(name):
    module = importlib.import_module(name)
    assert sorted(module.__all__) == sorted(OLD[name])
    for attribute in module.__all__:
        assert getattr(module, attribute) is not None


def test_the_old_names_are_the_new_modules_objects():
    assert spark_datasource.ArrowIngress is arrow_ingress.ArrowIngress
    assert spark_datasource.register is datasource.register and spark_datasource.end_stream is datasource.end_stream
    assert spark_reader.publish_to_spark is publisher.publish_to_spark
    assert spark_reader.stream_reader is reader.stream_reader
    assert spark_cluster.run_on_spark is cluster.run_on_spark
    assert spark.IngressClient is wire.WireClient and spark.control_message is wire.control_message
    # what tests and tools reach below the public names comes through as well
    assert spark_datasource._Client is datasource._Client and spark_datasource.SCHEMA == datasource.SCHEMA
    assert spark_datasource._Ingress is arrow_ingress._Ingress
    assert spark_reader._Published is publisher._Published and spark_reader.ROWS == records.ROWS
    assert spark_cluster._carry is cluster._carry
    with pytest.raises(AttributeError, match="spark_datasource' has no attribute 'nothing'"):
        spark_datasource.nothing  # noqa: B018


def test_the_data_source_keeps_its_name():
    assert spark_datasource.NAME == datasource.NAME == "aiotimely"        # format("aiotimely")


@pytest.mark.parametrize(("old", "new", "name"), [
    ("aiotimely.connectors.spark_datasource", "aiotimely.connectors.spark.datasource", "AiotimelyDataSource"),
    ("aiotimely.connectors.spark_datasource", "aiotimely.connectors.spark.datasource", "AiotimelyStreamWriter"),
    ("aiotimely.connectors.spark_datasource", "aiotimely.connectors.spark.datasource", "StagedAttempt"),
    ("aiotimely.connectors.spark_reader", "aiotimely.connectors.spark.reader", "AiotimelyStreamReader"),
])
def test_spark_side_classes_load_by_their_old_and_new_names(old, new, name):
    pytest.importorskip("pyspark.sql.datasource")
    made = getattr(importlib.import_module(old), name)
    assert made is getattr(importlib.import_module(new), name)
    assert made.__module__ == new                   # pickled by reference under the new name, as Spark ships it
    assert pickle.loads(pickle.dumps(made)) is made
    # a reference written under the old name (an older pickle; the names have the same length) loads it too
    assert pickle.loads(pickle.dumps(made).replace(new.encode(), old.encode())) is made
