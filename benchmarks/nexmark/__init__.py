"""NEXMark on aiotimely (issue 33, item 5): a deterministic event generator, a plain-Python reference for the
queries Q0-Q8 (Beam/Flink semantics), each query on the record API and on the columnar API, and the ``nexmark``
benchmark (docs/nexmark.md).

* :mod:`.generator`: persons, auctions and bids (Beam's proportions and hot keys), as tuples and as Polars frames;
* :mod:`.reference`: each query in plain Python (what the dataflows must give, and the baseline);
* :mod:`.records`, :mod:`.columnar`: each query on one API; :mod:`.ordered`: the time-ordered operator both use
  for winning bids (Q4, Q6); :mod:`.run`: build functions for tests and the benchmark;
* :mod:`.bench`: ``python -m benchmarks nexmark``.
"""
