"""Run the benchmark suite: ``python -m benchmarks NAME [options]`` (or ``aiotimely bench NAME``).

NAME is one of pipeline, wordcount, many-dataflows, exchange, latency, tracker, kafka, spark,
spark-arrow, spark-columnar, recovery, windows, nexmark, or
``all``. ``--quick`` runs a small, fast version that only checks the results (what
CI runs); without it each benchmark prints its table and writes
``benchmarks/results/NAME.json``. ``plots`` draws ``docs/*.png`` from those files
(matplotlib: ``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import importlib
import sys

SUITE = {
    "pipeline": "benchmarks.pipeline",
    "wordcount": "benchmarks.wordcount",
    "many-dataflows": "benchmarks.many_dataflows",
    "exchange": "benchmarks.exchange",
    "latency": "benchmarks.latency",
    "kafka": "benchmarks.kafka",
    "spark": "benchmarks.spark",
    "spark-arrow": "benchmarks.spark_arrow",
    "spark-columnar": "benchmarks.spark_columnar",
    "tracker": "benchmarks.tracker",
    "recovery": "benchmarks.recovery",
    "windows": "benchmarks.windows",
    "columnar-windows": "benchmarks.columnar_windows",
    "columnar-wordcount": "benchmarks.columnar_wordcount",
    "columnar-exchange": "benchmarks.columnar_exchange",
    "nexmark": "benchmarks.nexmark.bench",
    "plots": "benchmarks.plots",
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        print("benchmarks:", ", ".join(SUITE))
        return 0
    name, rest = argv[0], argv[1:]
    names = [n for n in SUITE if n != "plots"] if name == "all" else [name]
    for n in names:
        if n not in SUITE:
            print(f"unknown benchmark {n!r}; choose from {', '.join(SUITE)} or all", file=sys.stderr)
            return 2
        print(f"== {n}", flush=True)
        importlib.import_module(SUITE[n]).main(rest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
