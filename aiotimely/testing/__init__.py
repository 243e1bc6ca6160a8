"""Helpers for testing dataflows: run on 1..N workers and processes, collect outputs per time, test sources.

::

    from aiotimely.testing import run_dataflow, script_source, schedule

    def test_counts(workers):                        # the pytest plugin's fixture: 1, then 2 workers
        script = schedule([(t, "x") for t in range(10)], shuffle=7)    # out of order, times completing early
        out = run_dataflow(lambda scope: script_source(scope, script).count(), workers=workers)
        assert out == {t: [1] for t in range(10)}    # records per time, as a multiset; out.frontier is empty

:func:`run_processes` runs the same kind of build function on real processes
over TCP; :func:`run_reordered` runs it on workers whose batches to each other a
seeded :class:`ReorderingFabric` delays and reorders, as far as timely allows
(:func:`execute_reordered` runs a build function of workers so);
:mod:`aiotimely.testing.strategies` has hypothesis strategies (it needs
hypothesis); :mod:`aiotimely.testing.plugin` is the pytest plugin (fixtures
``workers`` and ``aiotimely_run``, and readable ``assert outputs == expected``
failures), loaded by pytest wherever aiotimely is installed.
"""

from .fabric import FabricStatistics as FabricStatistics
from .fabric import ReorderingFabric as ReorderingFabric
from .fabric import execute_reordered as execute_reordered
from .fabric import execute_reordered_async as execute_reordered_async
from .fabric import run_reordered as run_reordered
from .fabric import run_reordered_async as run_reordered_async
from .outputs import Outputs as Outputs
from .processes import ProcessesFailed as ProcessesFailed
from .processes import run_processes as run_processes
from .running import Build as Build
from .running import DataflowTimeout as DataflowTimeout
from .running import run_dataflow as run_dataflow
from .running import run_dataflow_async as run_dataflow_async
from .sources import Advance as Advance
from .sources import Mode as Mode
from .sources import Script as Script
from .sources import Step as Step
from .sources import schedule as schedule
from .sources import script_source as script_source

__all__ = [
    "Advance", "Build", "DataflowTimeout", "FabricStatistics", "Mode", "Outputs", "ProcessesFailed",
    "ReorderingFabric", "Script", "Step", "execute_reordered", "execute_reordered_async", "run_dataflow",
    "run_dataflow_async", "run_processes", "run_reordered", "run_reordered_async", "schedule", "script_source",
]
