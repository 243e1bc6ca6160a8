"""aiotimely: timely dataflow for Python's asyncio.

The public names of API.md are re-exported here. This release contains the
progress core (``aiotimely.progress``): timestamps, frontiers, reachability
tracking and nested scopes; the worker runtime and operators come next.
"""

from .errors import AiotimelyError as AiotimelyError
from .errors import CapabilityError as CapabilityError
from .errors import ClusterError as ClusterError
from .errors import DataflowError as DataflowError
from .errors import GraphError as GraphError
from .errors import ProgressError as ProgressError
from .progress import Antichain as Antichain
from .progress import ChangeBatch as ChangeBatch
from .progress import FrontierInterest as FrontierInterest
from .progress import MutableAntichain as MutableAntichain
from .progress import PathSummary as PathSummary
from .progress import Product as Product
from .progress import Timestamp as Timestamp

__version__ = "0.1.0"

__all__ = [
    "AiotimelyError", "Antichain", "CapabilityError", "ChangeBatch", "ClusterError",
    "DataflowError", "FrontierInterest", "GraphError", "MutableAntichain", "PathSummary",
    "Product", "ProgressError", "Timestamp",
]
