"""The pytest plugin (entry point ``pytest11``): fixtures for testing dataflows, and readable output mismatches.

Loaded by pytest wherever aiotimely is installed (``-p no:aiotimely`` turns it off):

- ``workers``: 1, then 2 (each test that takes it runs once per value); ``@pytest.mark.aiotimely_workers(1, 3)`` on a
  test, or ``aiotimely_workers = 1 2 4`` in the ini file, choose other counts;
- ``aiotimely_run``: ``aiotimely_run(build)`` runs a dataflow on ``workers`` workers and returns its
  :class:`~aiotimely.testing.Outputs` (:func:`~aiotimely.testing.run_dataflow`);
  ``await aiotimely_run.run_async(build)`` does so in an async test, on its loop;
  ``aiotimely_run.processes(target, processes=2)`` on real processes (:func:`~aiotimely.testing.run_processes`),
  each with ``workers`` workers;
- ``assert outputs == expected`` where ``outputs`` is an ``Outputs`` fails with the differences time by time.

Both fixtures are module-scoped (they hold no state), so hypothesis' ``@given`` tests may use them.
"""

from __future__ import annotations

import reprlib
from typing import Any, Callable

import pytest

from .outputs import Outputs

__all__ = ["Runner", "workers", "aiotimely_run", "pytest_addoption", "pytest_configure", "pytest_generate_tests",
           "pytest_assertrepr_compare"]

MARKER = "aiotimely_workers"


class Runner:
    """What the ``aiotimely_run`` fixture gives: the test helpers with ``workers`` filled in."""

    def __init__(self, workers: int) -> None:
        self.workers = workers

    def __call__(self, build: Callable[..., Any], **options: Any) -> Any:
        """:func:`~aiotimely.testing.run_dataflow` on ``workers`` workers."""
        from .running import run_dataflow

        return run_dataflow(build, workers=self.workers, **options)

    async def run_async(self, build: Callable[..., Any], **options: Any) -> Any:
        """:func:`~aiotimely.testing.run_dataflow_async` on ``workers`` workers, on the running event loop."""
        from .running import run_dataflow_async

        return await run_dataflow_async(build, workers=self.workers, **options)

    def processes(self, build: str | Callable[..., Any], processes: int = 2, **options: Any) -> Any:
        """:func:`~aiotimely.testing.run_processes` with ``workers`` workers in each of ``processes`` processes."""
        from .processes import run_processes

        return run_processes(build, processes, self.workers, **options)

    def __repr__(self) -> str:
        return f"aiotimely_run(workers={self.workers})"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(MARKER, "the worker counts the workers and aiotimely_run fixtures run each test on (default: 1 2)",
                  type="args", default=["1", "2"])


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}(*counts): the worker counts the workers and aiotimely_run "
                                       "fixtures run this test on")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run each test that uses ``workers`` (directly or through ``aiotimely_run``) once per worker count."""
    if "workers" not in metafunc.fixturenames:
        return
    if any("workers" in _argnames(mark) for mark in metafunc.definition.iter_markers("parametrize")):
        return  # the test chose its own (with scope="module" or wider, if it also uses aiotimely_run)
    marker = metafunc.definition.get_closest_marker(MARKER)
    counts = [int(c) for c in (marker.args if marker else metafunc.config.getini(MARKER))]
    if not counts or any(c < 1 for c in counts):
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: {MARKER} needs worker counts of 1 or more, "
                                f"not {counts}")
    metafunc.parametrize("workers", counts, ids=[f"{c}-worker{'s' if c != 1 else ''}" for c in counts],
                         scope="module")


def _argnames(mark: pytest.Mark) -> list[str]:
    names = mark.args[0] if mark.args else mark.kwargs.get("argnames", ())
    return [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)


@pytest.fixture(scope="module")
def workers(request: pytest.FixtureRequest) -> int:
    """The number of workers to run on: 1, then 2 (the plugin parametrizes every test that uses it)."""
    count: int = request.param
    return count


@pytest.fixture(scope="module")
def aiotimely_run(workers: int) -> Runner:
    """Run a dataflow on ``workers`` workers and collect its outputs: ``aiotimely_run(build) -> Outputs``."""
    return Runner(workers)


_short = reprlib.Repr()
_short.maxother = 100


def pytest_assertrepr_compare(config: pytest.Config, op: str, left: Any, right: Any) -> list[str] | None:
    """``outputs == expected`` (either way round) explained time by time, with every output by time."""
    if op != "==":
        return None
    got, expected = (left, right) if isinstance(left, Outputs) else (right, left)
    if not isinstance(got, Outputs) or not hasattr(expected, "keys"):
        return None
    return [f"{_short.repr(left)} == {_short.repr(right)}", *got.explain(expected)]
