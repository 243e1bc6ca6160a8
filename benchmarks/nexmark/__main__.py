"""``python -m benchmarks.nexmark``: the ``nexmark`` benchmark (:mod:`benchmarks.nexmark.bench`)."""

from .bench import main

main()
