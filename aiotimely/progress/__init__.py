"""The progress core: timestamps, frontiers, reachability and nested scopes, with no I/O.

Layer 1 of aiotimely (see DESIGN.md). Nothing here touches an event loop or a
socket, so every algorithm is tested directly, against brute-force references.
"""

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

__all__ = [
    "Antichain", "ChangeBatch", "FrontierInterest", "Graph", "GraphBuilder", "INT", "INT_MAX",
    "Location", "MutableAntichain", "Operate", "OperatorProgress", "PathSummary", "Product",
    "ProductType", "Progcaster", "ProgressBatch", "ProtocolType", "Refinement", "SharedProgress",
    "Source", "Subgraph", "SubgraphBuilder", "Target", "Timestamp", "TimestampType", "Tracker",
    "timestamp_type",
]
