"""The progress core: timestamps, frontiers, reachability and nested scopes, with no I/O.

Layer 1 of aiotimely (see DESIGN.md). Nothing here touches an event loop or a
socket, so every algorithm is tested directly, against brute-force references.

An installed package may run these modules compiled with mypyc (see setup.py): the
same source, compiled to C, 10-40% faster; :data:`COMPILED` says which it is.
"""

from importlib.machinery import EXTENSION_SUFFIXES as _EXTENSION_SUFFIXES

from . import batch as _batch
from . import frontier as _frontier
from . import location as _location
from . import operate as _operate
from . import reachability as _reachability
from . import subgraph as _subgraph

from .batch import Progcaster as Progcaster
from .batch import ProgressBatch as ProgressBatch
from .frontier import Antichain as Antichain
from .frontier import ChangeBatch as ChangeBatch
from .frontier import MutableAntichain as MutableAntichain
from .location import Location as Location
from .location import Source as Source
from .location import Target as Target
from .operate import FrontierInterest as FrontierInterest
from .operate import Operate as Operate
from .operate import OperatorProgress as OperatorProgress
from .operate import SharedProgress as SharedProgress
from .reachability import Graph as Graph
from .reachability import GraphBuilder as GraphBuilder
from .reachability import Tracker as Tracker
from .subgraph import Subgraph as Subgraph
from .subgraph import SubgraphBuilder as SubgraphBuilder
from .timestamp import INT as INT
from .timestamp import INT_MAX as INT_MAX
from .timestamp import PathSummary as PathSummary
from .timestamp import Product as Product
from .timestamp import ProductType as ProductType
from .timestamp import ProtocolType as ProtocolType
from .timestamp import Refinement as Refinement
from .timestamp import Timestamp as Timestamp
from .timestamp import TimestampType as TimestampType
from .timestamp import timestamp_type as timestamp_type

COMPILED: bool = all((module.__file__ or "").endswith(tuple(_EXTENSION_SUFFIXES))
                     for module in (_batch, _frontier, _location, _operate, _reachability, _subgraph))
"""True if the progress core runs compiled (an installed wheel built with mypyc), False if it runs as Python."""

__all__ = [
    "COMPILED", "Antichain", "ChangeBatch", "FrontierInterest", "Graph", "GraphBuilder", "INT", "INT_MAX",
    "Location", "MutableAntichain", "Operate", "OperatorProgress", "PathSummary", "Product",
    "ProductType", "Progcaster", "ProgressBatch", "ProtocolType", "Refinement", "SharedProgress",
    "Source", "Subgraph", "SubgraphBuilder", "Target", "Timestamp", "TimestampType", "Tracker",
    "timestamp_type",
]
