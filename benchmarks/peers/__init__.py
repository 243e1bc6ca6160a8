"""The peers the benchmarks compare aiotimely with, as programs of their own (run in processes of their own).

- ``tcp_raw``: raw asyncio TCP + msgpack between two processes (``exchange``); needs only msgpack.
- ``bytewax_flows``: bytewax 0.21.1 dataflows of the pipeline, wordcount and windows workloads.
- ``quix_windows``: quixstreams' tumbling window on the windows workload, against an embedded tansu broker.

Written for this repository after the anchors' scripts (same workloads, same figures measured); every input
they read is made by the benchmarks themselves (:mod:`benchmarks.corpus`, :mod:`benchmarks.win_events`).
A peer whose package is not installed is skipped by its benchmark, with a one-line note.
"""
