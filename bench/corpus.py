"""Corpus search: the on-disk index against a full scan, in the same run.

Generates a Markdown corpus (default 5,000 files, 50 MB; seeded, so every run searches the
same text) in a temporary directory, then measures:

- the index build (the first indexed search: every file read, split and indexed),
- the warm indexed query (median over the query set; the corpus is only stat'ed), in wall
  time and in this process's CPU time (the machine may be shared), and how much of it is
  listing the corpus (the `stat` of every file that proves nothing changed),
- the full scan (`index=False`: every file read and scored), on a sample of the queries,

and checks that both return the same hits for every query measured both ways.

    python bench/corpus.py [--files 5000] [--megabytes 50] [--queries 100] [--scans 5]
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from git_obversa import open_markdown_corpus


def make_vocabulary(rng: random.Random, size: int) -> list[str]:
    syllables = [a + b for a in "bcdfghklmnprstvz" for b in "aeiou"]
    words = set()
    while len(words) < size:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(1, 4))))
    return sorted(words)


def generate(root: Path, files: int, megabytes: float, seed: int = 5) -> list[str]:
    """Write FILES Markdown files of about MEGABYTES in all; return the vocabulary."""
    rng = random.Random(seed)
    vocabulary = make_vocabulary(rng, 20000)
    weights = list(itertools.accumulate(1 / (rank + 1) for rank in range(len(vocabulary))))
    per_file = int(megabytes * 1_000_000 / files)
    for number in range(files):
        folder = root / f"area-{number % 50:02}"
        folder.mkdir(exist_ok=True)
        lines, size = [f"# Topic {number}", ""], 0
        while size < per_file:
            words = rng.choices(vocabulary, cum_weights=weights, k=rng.randint(20, 120))
            paragraph = " ".join(words).capitalize() + "."
            if rng.random() < 0.15:
                lines += [f"## {' '.join(rng.choices(vocabulary, cum_weights=weights, k=3))}", ""]
            lines += [paragraph, ""]
            size += len(paragraph) + 1
        (folder / f"note-{number:05}.md").write_text("\n".join(lines))
    return vocabulary


def make_queries(rng: random.Random, root: Path, vocabulary: list[str], count: int) -> list[str]:
    """A third single words, a third word pairs, a third phrases copied from the corpus."""
    weights = [1 / (rank + 1) for rank in range(len(vocabulary))]
    paths = sorted(root.rglob("*.md"))
    queries = []
    for number in range(count):
        kind = number % 3
        if kind == 0:
            queries.append(rng.choice(vocabulary[100:]))
        elif kind == 1:
            queries.append(" ".join(rng.choices(vocabulary, weights, k=2)))
        else:
            words = rng.choice(paths).read_text().split()
            start = rng.randrange(len(words) - 3)
            queries.append(" ".join(words[start : start + 3]))
    return queries


def timed(function):
    started = time.perf_counter()
    result = function()
    return time.perf_counter() - started, result


def timed_cpu(function):
    started, cpu = time.perf_counter(), time.process_time()
    result = function()
    return time.perf_counter() - started, time.process_time() - cpu, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--megabytes", type=float, default=50)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--scans", type=int, default=5, help="queries also run as a full scan")
    options = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="obversa-corpus-bench-") as temporary:
        root, cache = Path(temporary) / "corpus", Path(temporary) / "cache"
        root.mkdir()
        os.environ["XDG_CACHE_HOME"] = str(cache)
        seconds, vocabulary = timed(lambda: generate(root, options.files, options.megabytes))
        size = sum(path.stat().st_size for path in root.rglob("*.md"))
        print(f"corpus: {options.files} files, {size / 1e6:.1f} MB (generated in {seconds:.1f} s)")
        queries = make_queries(random.Random(7), root, vocabulary, options.queries)

        indexed = open_markdown_corpus(root)
        scanning = open_markdown_corpus(root, index=False)
        build, _ = timed(lambda: indexed.search("warm up the index"))
        index_bytes = sum(path.stat().st_size for path in cache.rglob("*") if path.is_file())
        print(f"index build (first search): {build:.2f} s, {index_bytes / 1e6:.1f} MB on disk")

        warm, warm_cpu, results = [], [], {}
        for query in queries:
            seconds, cpu, hits = timed_cpu(lambda q=query: indexed.search(q))
            warm.append(seconds)
            warm_cpu.append(cpu)
            results[query] = hits
        listing = statistics.median(timed(indexed.source.files)[0] for _ in range(21))
        scans = []
        for query in queries[: options.scans]:
            seconds, hits = timed(lambda q=query: scanning.search(q))
            scans.append(seconds)
            if hits != results[query]:
                print(f"MISMATCH for {query!r}", file=sys.stderr)
                return 1
        warm_median, scan_median = statistics.median(warm), statistics.median(scans)
        print(
            f"warm indexed query: median {warm_median * 1000:.1f} ms, "
            f"p90 {statistics.quantiles(warm, n=10)[-1] * 1000:.1f} ms over {len(warm)} queries"
            f" (CPU median {statistics.median(warm_cpu) * 1000:.1f} ms)"
        )
        print(f"listing the corpus (stat of every file): median {listing * 1000:.1f} ms")
        print(f"full scan: median {scan_median:.2f} s over {len(scans)} queries")
        speedup = scan_median / warm_median
        print(f"speed-up of a warm indexed query over a full scan: {speedup:.0f}x")
        print(f"hits identical on the {len(scans)} queries run both ways")
    return 0


if __name__ == "__main__":
    sys.exit(main())
