"""The window operator's parts, composed by :func:`aiotimely.dataflow.operators.windows.window`, one job each:

* :mod:`.eventtime` — how a record's event time is found (dataflow time, ``time=fn``, timed records, the clock);
* :mod:`.deadlines` — when a window is complete and at which dataflow time its result goes (int times, ``Product``
  times inside iterations, the wall clock), and how late a record is;
* :mod:`.assign` — which fixed windows a batch's records fall in;
* :mod:`.fixed`, :mod:`.sessions`, :mod:`.combined` — the open windows of each kind (tumbling and sliding;
  sessions; fixed windows fed by a combiner before the exchange), over the kept state of :mod:`.state`;
* :mod:`.logic` — the operator's logic: apply complete times, send early results and late records, close.

Capabilities for output times are held in a :class:`~aiotimely.dataflow.operators.pool.CapabilityPool`.
"""
