"""Layer 4: building and running dataflows — scopes, operators and their ports, capabilities,
channels, inputs and probes, and the operator library (``operators/``)."""

from .builder import OperatorBuilder as OperatorBuilder
from .capability import Capability as Capability
from .capability import CapabilityRef as CapabilityRef
from .capture import Captured as Captured
from .capture import Messages as Messages
from .capture import Progress as Progress
from .capture import replay as replay
from .input import InputHandle as InputHandle
from .input import ProbeHandle as ProbeHandle
from .input import SourceStopped as SourceStopped
from .input import source as source
from .input import to_stream as to_stream
from .notificator import FrontierNotificator as FrontierNotificator
from .notificator import Notificator as Notificator
from .operators.generic import operator as operator
from .operators.loops import LoopHandle as LoopHandle
from .operators.routing import concatenate as concatenate
from .ports import Activator as Activator
from .ports import InputPort as InputPort
from .ports import OperatorInput as OperatorInput
from .ports import OperatorOutput as OperatorOutput
from .ports import Session as Session
from .ports import TimedOrder as TimedOrder
from .ports import TimeOrder as TimeOrder
from .scope import Dataflow as Dataflow
from .scope import ScopeCore as ScopeCore
from .scope import ScopeCore as Scope  # (the name it had; aiotimely.Scope adds the operator builders)
from .stream import StreamCore as StreamCore
from .unordered import ActivateCapability as ActivateCapability
from .unordered import UnorderedHandle as UnorderedHandle
from .unordered import UnorderedSession as UnorderedSession

__all__ = [
    "ActivateCapability", "UnorderedHandle", "UnorderedSession", "operator",
    "Activator", "Capability", "CapabilityRef", "Captured", "Dataflow", "FrontierNotificator", "InputHandle",
    "InputPort", "LoopHandle", "Messages", "Notificator", "OperatorBuilder", "OperatorInput", "OperatorOutput",
    "ProbeHandle", "Progress", "Scope", "ScopeCore", "Session", "SourceStopped", "StreamCore", "TimeOrder",
    "TimedOrder",
    "concatenate", "replay", "source", "to_stream",
]
