"""The wordcount corpus, made here: 2,000,000 words, Zipf(s=1.0) over a 10,000-word vocabulary, 1,000 a line.

Deterministic (a seeded ``random.Random``: the same bytes on every machine, the anchors'
``gen_corpus.py`` corpus), generated on first use into ``$WC_CORPUS`` or
``<temp dir>/aiotimely-bench/corpus.txt`` and reused after (its first ``n`` lines alone,
for quick runs, beside it as ``corpus-n.txt``). Nothing is read from outside the repository.

    python -m benchmarks.corpus [PATH]      # make it now; prints its path, size and sha256
"""

from __future__ import annotations

import hashlib
import itertools
import os
import random
import string
import sys
import tempfile
from pathlib import Path
from typing import Iterator

SEED = 20261122
VOCAB = 10_000
WORDS = 2_000_000
PER_LINE = 1_000
ZIPF_S = 1.0

CORPUS = Path(os.environ.get("WC_CORPUS") or Path(tempfile.gettempdir()) / "aiotimely-bench" / "corpus.txt")


def _vocabulary(rng: random.Random) -> list[str]:
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < VOCAB:
        n = min(12, max(2, int(rng.gauss(6.5, 2.2))))      # lengths 2..12, mostly 5-7
        word = "".join(rng.choice(string.ascii_lowercase) for _ in range(n))
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


def lines(count: int = WORDS // PER_LINE) -> Iterator[str]:
    """The corpus's first ``count`` lines (without their newlines)."""
    rng = random.Random(SEED)
    vocab = _vocabulary(rng)
    weights = list(itertools.accumulate(1.0 / (rank ** ZIPF_S) for rank in range(1, VOCAB + 1)))
    for _ in range(count):
        yield " ".join(rng.choices(vocab, cum_weights=weights, k=PER_LINE))


def first_words(n: int = PER_LINE) -> list[str]:
    """The first ``n`` (at most 1,000) words of the corpus, without making the file."""
    return next(lines(1)).split()[:n]


def corpus(count: int | None = None, path: Path | None = None) -> Path:
    """The corpus file (or a file of its first ``count`` lines), made on first use: written whole under another
    name, then renamed, so that a concurrent or interrupted run never leaves half a corpus behind."""
    if path is None:
        path = CORPUS if count is None else CORPUS.with_name(f"{CORPUS.stem}-{count}{CORPUS.suffix}")
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, partial = tempfile.mkstemp(dir=path.parent, prefix=".corpus-", suffix=".txt")
    try:
        with os.fdopen(fd, "w") as f:
            for line in lines(WORDS // PER_LINE if count is None else count):
                f.write(line)
                f.write("\n")
        os.chmod(partial, 0o644)
        os.replace(partial, path)
    except BaseException:
        os.unlink(partial)
        raise
    return path


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    path = corpus(path=Path(argv[0]) if argv else None)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    print(f"{path} bytes={path.stat().st_size} sha256={digest}")


if __name__ == "__main__":
    main()
