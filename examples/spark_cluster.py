"""aiotimely on a Spark cluster: a word count run by 3 aiotimely processes of 2 workers each, as the 3 tasks of
one Spark barrier stage (``run_on_spark``), on a local Spark (``local[4]``: 4 task slots).

Each worker introduces a share of the lines; words are exchanged over the processes' TCP connections so that
each word is counted on one worker; each worker returns its counts, and the driver prints them all, then
which process and worker counted which words.

Run:  python examples/spark_cluster.py     (needs: pip install 'aiotimely[spark]' and Java 17)
"""

from __future__ import annotations

import operator
import tempfile

import aiotimely as at
from aiotimely.connectors.spark import local_session
from aiotimely.connectors.spark_cluster import run_on_spark

PROCESSES, WORKERS = 3, 2

TEXT = """\
the quick brown fox jumps over the lazy dog
the dog barks and the fox runs
a quick brown dog jumps over a lazy fox
"""


def build(worker: at.Worker) -> list[tuple[str, int]]:
    """This worker's share of the lines in; the final count of each word this worker owns out."""
    lines = [line for i, line in enumerate(TEXT.splitlines()) if i % worker.peers == worker.index]
    counts: list[tuple[str, int]] = []
    worker.dataflow(
        lambda scope: at.to_stream(lines, scope)
        .flat_map(lambda line: [(word, 1) for word in line.split()])
        .reduce(operator.add)            # routes each word to one worker, over TCP when it lives elsewhere
        .inspect(counts.append)
    )
    return counts


def main() -> dict[str, int]:
    with tempfile.TemporaryDirectory(prefix="aiotimely-spark-") as workdir:
        spark = local_session("local[4]", workdir=workdir, app="spark-cluster")
        try:
            results = run_on_spark(spark, build, processes=PROCESSES, workers=WORKERS, timeout=300)
        finally:
            spark.stop()
    counts = {word: n for process in results for worker in process for word, n in worker}
    for word in sorted(counts, key=lambda w: (-counts[w], w)):
        print(f"{word}\t{counts[word]}")
    for p, process in enumerate(results):       # results[p][w]: what build returned on worker p * WORKERS + w
        for w, words in enumerate(process):
            print(f"process {p}, worker {p * WORKERS + w}: {' '.join(sorted(word for word, _ in words)) or '-'}")
    return counts


if __name__ == "__main__":
    main()
