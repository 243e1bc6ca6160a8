"""Layer 2: how items reach other workers — mailboxes in one process, authenticated TCP links between
processes (``framing`` and ``handshake`` sans-IO, ``link``, ``cluster``), the value codec, record routing
and the back-pressure policy. It moves channel ids and bytes and knows nothing of time: the codecs of
records, times and progress are supplied by the dataflow layer."""

from .backpressure import BackPressure as BackPressure
from .codec import RecordCodec as RecordCodec
from .fabric import ChannelCodec as ChannelCodec
from .fabric import Fabric as Fabric
from .local import LocalFabric as LocalFabric
from .local import Mailbox as Mailbox
from .routing import route as route

__all__ = ["BackPressure", "ChannelCodec", "Fabric", "LocalFabric", "Mailbox", "RecordCodec", "route"]
