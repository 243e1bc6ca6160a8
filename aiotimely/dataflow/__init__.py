"""Layer 2: building dataflows — scopes, streams, operators, capabilities, inputs and probes."""

from .capability import Capability as Capability
from .capability import CapabilityRef as CapabilityRef
from .capture import Captured as Captured
from .capture import Messages as Messages
from .capture import Progress as Progress
from .capture import replay as replay
from .input import InputHandle as InputHandle
from .input import ProbeHandle as ProbeHandle
from .input import source as source
from .input import to_stream as to_stream
from .notificator import FrontierNotificator as FrontierNotificator
from .notificator import Notificator as Notificator
from .ports import Activator as Activator
from .ports import OperatorInput as OperatorInput
from .ports import OperatorOutput as OperatorOutput
from .scope import LoopHandle as LoopHandle
from .scope import Scope as Scope
from .stream import Stream as Stream
from .stream import concatenate as concatenate
