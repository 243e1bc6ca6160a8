"""Layer 3: scheduling — the activation set, the ``Schedule`` protocol dataflows implement, the
scheduler task with its task group, stepping, idle sleep, stuck detection; the event loop choice.
It knows operators only through ``Schedule``."""

from .activations import Activations as Activations
from .computation import Computation as Computation
from .schedule import Schedule as Schedule
from .schedule import WorkerHandle as WorkerHandle
from .scheduler import Scheduler as Scheduler
from .scheduler import WorkerStatistics as WorkerStatistics
from .scheduler import wake_all as wake_all

__all__ = ["Activations", "Computation", "Schedule", "Scheduler", "WorkerHandle", "WorkerStatistics", "wake_all"]
