"""The pytest plugin (entry point ``pytest11``): fixtures for testing dataflows, and readable output mismatches.

Loaded by pytest wherever aiotimely is installed (``-p no:aiotimely`` turns it off):

- ``workers``: 1, then 2 (each test that takes it runs once per value; ``@pytest.mark.parametrize("workers",
  [1, 3])`` on a test overrides the values);
- ``aiotimely_run``: ``aiotimely_run(build)`` runs a dataflow on ``workers`` workers and returns its
  :class:`~aiotimely.testing.Outputs` (:func:`~aiotimely.testing.run_dataflow`);
  ``await aiotimely_run.run_async(build)`` does so in an async test, on its loop;
  ``aiotimely_run.processes(target, processes=2)`` on real processes (:func:`~aiotimely.testing.run_processes`),
  each with ``workers`` workers;
- ``assert outputs == expected`` where ``outputs`` is an ``Outputs`` fails with the differences time by time.

Both fixtures are session-scoped (they hold no state), so hypothesis' ``@given`` tests may use them. The plugin
imports aiotimely only when a fixture is used, not when pytest starts.
"""

from __future__ import annotations

import reprlib
import sys
from typing import TYPE_CHECKING, Any, Callable

import pytest

if TYPE_CHECKING:
    from .outputs import Outputs

__all__ = ["Runner", "workers", "aiotimely_run", "pytest_assertrepr_compare"]


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


@pytest.fixture(scope="session", params=[1, 2], ids=["1-worker", "2-workers"])
def workers(request: pytest.FixtureRequest) -> int:
    """The number of workers to run on: 1, then 2."""
    count: int = request.param
    return count


@pytest.fixture(scope="session")
def aiotimely_run(workers: int) -> Runner:
    """Run a dataflow on ``workers`` workers and collect its outputs: ``aiotimely_run(build) -> Outputs``."""
    return Runner(workers)


_short = reprlib.Repr()
_short.maxother = 100


def pytest_assertrepr_compare(config: pytest.Config, op: str, left: Any, right: Any) -> list[str] | None:
    """``outputs == expected`` (either way round) explained time by time, with every output by time."""
    outputs_module = sys.modules.get("aiotimely.testing.outputs")
    if op != "==" or outputs_module is None:
        return None
    kind: type[Outputs] = outputs_module.Outputs
    got, expected = (left, right) if isinstance(left, kind) else (right, left)
    if not isinstance(got, kind) or not hasattr(expected, "keys"):
        return None
    return [f"{_short.repr(left)} == {_short.repr(right)}", *got.explain(expected)]
