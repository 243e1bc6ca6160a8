"""The NEXMark dataflows the tests run, as top-level build functions (``run_processes`` imports them by name)."""

from __future__ import annotations

import functools
from typing import Any

from benchmarks.nexmark.generator import Events, generate
from benchmarks.nexmark.params import TESTS
from benchmarks.nexmark.run import columnar_build, record_build

EVENTS, RATE, BATCH = 6000, 200, 100
"""6,000 events at 200 a second (30 s of event time: 3 tumbling windows of 10 s), in batches of 100 (0.5 s)."""


@functools.cache
def events() -> Events:
    return generate(EVENTS, rate=RATE, batch=BATCH, seed=7)


def q4_records(scope: Any) -> Any:
    return record_build(4, events(), TESTS)(scope)


def q4_columnar(scope: Any) -> Any:
    return columnar_build(4, events(), TESTS)(scope)


def q5_records(scope: Any) -> Any:
    return record_build(5, events(), TESTS)(scope)


def q5_columnar(scope: Any) -> Any:
    return columnar_build(5, events(), TESTS)(scope)


def q7_records(scope: Any) -> Any:
    return record_build(7, events(), TESTS)(scope)


def q7_columnar(scope: Any) -> Any:
    return columnar_build(7, events(), TESTS)(scope)
