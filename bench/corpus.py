"""Corpus search: the on-disk index against a full scan and against a baseline, in one run.

Generates a Markdown corpus (default 5,000 files, 50 MB; seeded, so every run searches the
same text) in a temporary directory, commits it to a Git repository too, then measures,
for this checkout and (with --baseline REV) for the package as of REV, each in its own
process on the same corpus, one after the other:

- the index build (the first indexed search: every file read, split and indexed), in
  wall and CPU time, and the index's size on disk,
- the warm indexed query (median over the query set; the corpus is only stat'ed), in wall
  time and in CPU time (the machine may be shared), and the `stat` walk alone,
- the floor under that walk: every file `lstat`ed by name from its open directory, the
  names known ahead (no listing), in one process and split between two; and, where a C
  compiler is found, `bench/statfloor.c` listing and statting the same in C,
- the next search after one file is edited (the index brought up to date), the warm
  query once it is, and the next search after the edit is undone,
- the same for the Git-tree corpus (`repository=..., directory="corpus"`): build, and the
  warm query both on a kept corpus object and opened afresh for every query (as a
  command would),
- the full scan (`index=False`: every file read and scored), on a sample of the queries,

and checks that every way returns the same hits for every query measured both ways. CPU
times are user + system of the measuring process and the git processes it waited for.
Compile the package first (`python -m compileall -q git_obversa`) when
PYTHONDONTWRITEBYTECODE is set, or every process compiles it from source.

    python bench/corpus.py [--files 5000] [--megabytes 50] [--queries 100] [--scans 5]
                           [--baseline REV] [--rounds N] [--parts directory,edit,git]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


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


def cpu_time() -> float:
    """User + system time of this process and of its waited-for children (git)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def timed_cpu(function):
    started, cpu = time.perf_counter(), cpu_time()
    result = function()
    return time.perf_counter() - started, cpu_time() - cpu, result


def directory_size(path: Path) -> int:
    return sum(item.stat().st_size for item in path.rglob("*") if item.is_file())


def helper_cpu() -> float:
    """CPU seconds (user + system) the corpus walk's helper process has used so far: it
    is not waited for, so `cpu_time` does not count it (0 without one; Linux only)."""
    try:
        from git_obversa.corpus import statwalk

        helper = statwalk._helper
    except ImportError:
        return 0.0
    if helper is None:
        return 0.0
    try:
        fields = Path(f"/proc/{helper.pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def forget_kept() -> None:
    """Empty what a long-lived process keeps of its indexes between queries (terms and
    decompressed texts), so the next query pays what it would in a new process (but
    for Python's start and opening the index)."""
    from git_obversa.corpus import index

    opened = getattr(index, "format", index)  # the package's file module, or the old module
    for held in getattr(opened, "_open_indexes", {}).values():
        if hasattr(held, "kept_terms"):
            held.kept_terms.clear()
            held.kept_texts.clear()
            held.kept_members = held.kept_bytes = 0


def stat_floor(root: Path) -> tuple[float, float]:
    """Median seconds (21 rounds) to `lstat` every `.md` file below ROOT by name from its
    open directory, the names known ahead: in this process alone, and split between it
    and a forked one (the second half of the directories), as a warm query's walk is."""
    groups = []
    for folder in sorted({path.parent for path in root.rglob("*.md")}):
        descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        groups.append((descriptor, sorted(path.name for path in folder.glob("*.md"))))

    def statted(part: list[tuple[int, list[str]]]) -> None:
        for descriptor, names in part:
            for name in names:
                os.stat(name, dir_fd=descriptor, follow_symlinks=False)

    half = len(groups) // 2
    ask_read, ask_write = os.pipe()
    done_read, done_write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(ask_write)  # so that the parent closing it ends this loop
            os.close(done_read)
            while os.read(ask_read, 1):
                statted(groups[half:])
                os.write(done_write, b".")
        finally:
            os._exit(0)

    def shared() -> None:
        os.write(ask_write, b".")
        statted(groups[:half])
        os.read(done_read, 1)

    alone = statistics.median(timed(lambda: statted(groups))[0] for _ in range(21))
    two = statistics.median(timed(shared)[0] for _ in range(21))
    os.close(ask_write)
    os.waitpid(pid, 0)
    for descriptor in (ask_read, done_read, done_write, *(group[0] for group in groups)):
        os.close(descriptor)
    return alone, two


def c_stat_floor(program: Path, root: Path, processes: int) -> float | None:
    """The median of bench/statfloor.c's 21 rounds, seconds (None without it)."""
    if not program.exists():
        return None
    found = subprocess.run(
        [str(program), str(root), str(processes), "21"], capture_output=True, text=True
    )
    return float(found.stdout.split()[0]) / 1000 if found.returncode == 0 else None


def measure(workdir: Path, scans: int, parts: set[str]) -> dict:
    """Every figure of PARTS for the package this process imports, on the corpus in
    WORKDIR."""

    root, repo = workdir / "corpus", workdir / "repo"
    queries = json.loads((workdir / "queries.json").read_text())
    cache = Path(tempfile.mkdtemp(prefix="cache-", dir=workdir))
    os.environ["XDG_CACHE_HOME"] = str(cache)
    figures: dict = {"load_before": os.getloadavg()[0]}
    results: dict = {}
    if "directory" in parts:
        measure_directory(root, queries, figures, results, scans, parts)
    if "git" in parts:
        measure_git(repo, queries, figures, results)
    figures["hits"] = results
    figures["load_after"] = os.getloadavg()[0]
    return figures


def measure_directory(
    root: Path, queries: list[str], figures: dict, results: dict, scans: int, parts: set[str]
) -> None:
    from git_obversa import open_markdown_corpus

    indexed = open_markdown_corpus(root)
    figures["build"], figures["build_cpu"], _ = timed_cpu(
        lambda: indexed.search("warm up the index")
    )
    figures["size"] = directory_size(Path(os.environ["XDG_CACHE_HOME"]))
    warm, warm_cpu = [], []
    helper_before = helper_cpu()
    for query in queries:
        seconds, cpu, hits = timed_cpu(lambda q=query: indexed.search(q))
        warm.append(seconds)
        warm_cpu.append(cpu)
        results[query] = hits
    figures["warm"], figures["warm_p90"] = statistics.median(warm), quantile(warm)
    figures["warm_cpu"] = statistics.median(warm_cpu)
    # The helper's CPU time, read in clock ticks: a mean over the queries is what holds.
    helper = (helper_cpu() - helper_before) / len(queries)
    figures["warm_cpu_mean_all"] = statistics.mean(warm_cpu) + helper
    figures["warm_helper_cpu"] = helper

    # What a warm query must do to prove no file changed: the walk, plus the digest
    # where the source makes one (older revisions list CorpusFile rows instead). The
    # first walk of a corpus object is one process's; later ones are shared with a
    # helper process where the package has one.
    def alone():
        source = open_markdown_corpus(root).source
        return getattr(source, "listing", source.files)()

    walk = getattr(indexed.source, "listing", indexed.source.files)
    figures["listing"] = statistics.median(timed(alone)[0] for _ in range(21))
    figures["listing_shared"] = statistics.median(timed(walk)[0] for _ in range(21))
    figures["warm_over_walk"] = figures["warm"] - figures["listing"]
    figures["floor_one"], figures["floor_two"] = stat_floor(root)
    for processes, key in ((1, "c_floor_one"), (2, "c_floor_two")):
        found = c_stat_floor(root.parent / "statfloor", root, processes)
        if found is not None:
            figures[key] = found
    if "edit" in parts:
        measure_edit(root, queries, indexed, figures, results)
    if scans:
        scanning = open_markdown_corpus(root, index=False)
        scan_times = []
        for query in queries[:scans]:
            seconds, hits = timed(lambda q=query: scanning.search(q))
            scan_times.append(seconds)
            if hits != results[query]:
                figures["mismatch"] = f"full scan, {query!r}"
        figures["scan"] = statistics.median(scan_times)


def measure_git(repo: Path, queries: list[str], figures: dict, results: dict) -> None:
    from git_obversa import open_markdown_corpus

    git_index = repo / ".git" / "obversa"
    shutil.rmtree(git_index, ignore_errors=True)
    tree = open_markdown_corpus("corpus", repository=repo)
    figures["git_build"], figures["git_build_cpu"], _ = timed_cpu(
        lambda: tree.search("warm up the index")
    )
    figures["git_size"] = directory_size(git_index)
    kept, kept_cpu, fresh, fresh_cpu, emptied, emptied_cpu = [], [], [], [], [], []
    for query in queries:
        seconds, cpu, hits = timed_cpu(lambda q=query: tree.search(q))
        kept.append(seconds)
        kept_cpu.append(cpu)
        if results.setdefault(query, hits) != hits:
            figures["mismatch"] = f"Git tree, {query!r}"
        seconds, cpu, hits = timed_cpu(
            lambda q=query: open_markdown_corpus("corpus", repository=repo).search(q)
        )
        fresh.append(seconds)
        fresh_cpu.append(cpu)
    for query in queries:  # again, each after emptying what the process kept
        forget_kept()
        seconds, cpu, hits = timed_cpu(lambda q=query: tree.search(q))
        emptied.append(seconds)
        emptied_cpu.append(cpu)
    figures["git_warm"], figures["git_fresh"] = statistics.median(kept), statistics.median(fresh)
    figures["git_warm_cpu"] = statistics.median(kept_cpu)
    figures["git_fresh_cpu"] = statistics.median(fresh_cpu)
    figures["git_emptied"] = statistics.median(emptied)
    figures["git_emptied_cpu"] = statistics.median(emptied_cpu)


def measure_edit(
    root: Path, queries: list[str], indexed: Any, figures: dict, results: dict
) -> None:

    # One file edited (a passage added that no query holds): the next search updates the
    # index. The file is put back as it was for the next contender.
    paths = sorted(root.rglob("*.md"))
    edited = paths[len(paths) // 2]
    original = edited.read_bytes()
    edited.write_bytes(original + b"\n\nzzyzx edited\n")
    figures["update"], figures["update_cpu"], hits = timed_cpu(lambda: indexed.search("zzyzx"))
    if [hit["path"] for hit in hits] != [f"/memories/{edited.relative_to(root)}"]:
        figures["mismatch"] = "the edited file is not found"
    # Warm queries once the index holds the edit (no query holds the added words).
    after, after_cpu = [], []
    for query in queries:
        seconds, cpu, hits = timed_cpu(lambda q=query: indexed.search(q))
        after.append(seconds)
        after_cpu.append(cpu)
        if hits != results[query]:
            figures["mismatch"] = f"after the edit, {query!r}"
    figures["edited_warm"] = statistics.median(after)
    figures["edited_warm_cpu"] = statistics.median(after_cpu)
    edited.write_bytes(original)
    figures["restore"], figures["restore_cpu"], _ = timed_cpu(lambda: indexed.search("zzyzx"))


def quantile(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[-1]


def run_measure(workdir: Path, scans: int, parts: str, package: Path | None) -> dict:
    """measure() in a fresh process importing the package from PACKAGE (this checkout
    when None)."""
    env = dict(os.environ)
    if package is not None:
        env["PYTHONPATH"] = str(package)
    output = workdir / f"figures-{package.name if package else 'this'}.json"
    label = package.name if package else "this checkout"
    print(f"{label}: load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    subprocess.run(
        [
            sys.executable,
            __file__,
            "--measure",
            str(workdir),
            "--scans",
            str(scans),
            "--parts",
            parts,
            "--output",
            str(output),
        ],
        env=env,
        check=True,
    )
    print(f"{label}: load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return json.loads(output.read_text())


def combined(rounds: list[dict]) -> dict:
    """One contender's figures over ROUNDS: each number the median of its rounds', the
    hits of the first round (a round that found others is a mismatch)."""
    figures = {}
    for key, value in rounds[0].items():
        if isinstance(value, (int, float)):
            figures[key] = statistics.median(round_[key] for round_ in rounds)
        else:
            figures[key] = value
    for round_ in rounds:
        if "mismatch" in round_:
            figures["mismatch"] = round_["mismatch"]
        elif round_["hits"] != rounds[0]["hits"]:
            figures["mismatch"] = "the rounds disagree"
    return figures


def baseline_package(rev: str, workdir: Path) -> Path:
    """The git_obversa package as of REV, extracted under WORKDIR."""
    target = workdir / f"baseline-{rev.replace('/', '-')}"
    target.mkdir()
    here = Path(__file__).resolve().parents[1]
    archive = subprocess.run(
        ["git", "archive", "--end-of-options", rev, "git_obversa"],
        cwd=here,
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--megabytes", type=float, default=50)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--scans", type=int, default=5, help="queries also run as a full scan")
    parser.add_argument("--baseline", metavar="REV", help="also measure the package as of REV")
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="measure each contender this many times, alternating (each figure: the median "
        "of its rounds'), so that a slow phase of the machine does not fall on one of them",
    )
    parser.add_argument(
        "--parts",
        default="directory,edit,git",
        help="what to measure, comma-separated: directory (build, warm query, walk), edit "
        "(an edit and the queries after it; needs directory), git (the Git-tree corpus)",
    )
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--output", type=Path, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.measure:
        parts = set(options.parts.split(","))
        options.output.write_text(json.dumps(measure(options.measure, options.scans, parts)))
        return 0

    with tempfile.TemporaryDirectory(prefix="obversa-corpus-bench-") as temporary:
        workdir = Path(temporary)
        root, repo = workdir / "corpus", workdir / "repo"
        root.mkdir()
        seconds, vocabulary = timed(lambda: generate(root, options.files, options.megabytes))
        size = sum(path.stat().st_size for path in root.rglob("*.md"))
        print(f"corpus: {options.files} files, {size / 1e6:.1f} MB (generated in {seconds:.1f} s)")
        queries = make_queries(random.Random(7), root, vocabulary, options.queries)
        (workdir / "queries.json").write_text(json.dumps(queries))
        compiler = shutil.which("cc") or shutil.which("gcc")
        if compiler:
            source = Path(__file__).resolve().parent / "statfloor.c"
            subprocess.run(
                [compiler, "-O2", "-o", str(workdir / "statfloor"), str(source)], check=False
            )
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        shutil.copytree(root, repo / "corpus")
        subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
        subprocess.run(
            [
                "git",
                "-c",
                "user.name=Bench",
                "-c",
                "user.email=bench@example.com",
                "commit",
                "-q",
                "-m",
                "corpus",
            ],
            cwd=repo,
            check=True,
        )
        print("load average before: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
        packages: dict[str, Path | None] = {"this checkout": None}
        if options.baseline:
            packages[f"baseline {options.baseline}"] = baseline_package(options.baseline, workdir)
        rounds: dict[str, list[dict]] = {name: [] for name in packages}
        for number in range(options.rounds):
            # Every other round the baseline goes first, so neither always runs second.
            order = list(packages) if number % 2 == 0 else list(packages)[::-1]
            for name in order:
                rounds[name].append(
                    run_measure(workdir, options.scans, options.parts, packages[name])
                )
        contenders = {name: combined(figures) for name, figures in rounds.items()}
        print("load average after: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
        if options.rounds > 1:
            for name, figures in rounds.items():
                medians = " ".join(
                    f"{round_['warm'] * 1000:.1f}" for round_ in figures if "warm" in round_
                )
                print(f"{name}: directory warm query median by round, ms: {medians}")
        rows = [
            ("index build (first search), s", "build", 1, ".2f"),
            ("index build CPU, s", "build_cpu", 1, ".2f"),
            ("index size, MB", "size", 1e-6, ".1f"),
            ("warm query, median ms", "warm", 1000, ".1f"),
            ("warm query, p90 ms", "warm_p90", 1000, ".1f"),
            ("warm query CPU (the searching process), median ms", "warm_cpu", 1000, ".1f"),
            ("warm query CPU with the helper's, mean ms", "warm_cpu_mean_all", 1000, ".1f"),
            ("of which the helper process, mean ms", "warm_helper_cpu", 1000, ".1f"),
            ("stat walk, one process (a new corpus object), median ms", "listing", 1000, ".1f"),
            (
                "stat walk, kept corpus object (shared with a helper), ms",
                "listing_shared",
                1000,
                ".1f",
            ),
            (
                "warm query minus the one-process walk: walk + N, N ms",
                "warm_over_walk",
                1000,
                ".1f",
            ),
            ("floor: every file lstat'ed, names known, one process, ms", "floor_one", 1000, ".1f"),
            ("floor: the same split between two processes, ms", "floor_two", 1000, ".1f"),
            ("floor in C (statfloor.c: list + lstat), one process, ms", "c_floor_one", 1000, ".1f"),
            ("floor in C, two processes (a fork per round), ms", "c_floor_two", 1000, ".1f"),
            ("next search after one file is edited, s", "update", 1, ".3f"),
            ("next search after one file is edited, CPU s", "update_cpu", 1, ".3f"),
            ("next search after that edit is undone, CPU s", "restore_cpu", 1, ".3f"),
            ("warm query once the edit is indexed, median ms", "edited_warm", 1000, ".1f"),
            ("warm query once the edit is indexed, CPU median ms", "edited_warm_cpu", 1000, ".1f"),
            ("Git tree: index build, s", "git_build", 1, ".2f"),
            ("Git tree: index build, CPU s (with git)", "git_build_cpu", 1, ".2f"),
            ("Git tree: index size, MB", "git_size", 1e-6, ".1f"),
            ("Git tree: warm query, kept object, median ms", "git_warm", 1000, ".1f"),
            ("Git tree: warm query CPU, kept object, median ms", "git_warm_cpu", 1000, ".1f"),
            (
                "Git tree: warm query, kept object, emptied caches, median ms",
                "git_emptied",
                1000,
                ".1f",
            ),
            ("Git tree: the same, CPU median ms", "git_emptied_cpu", 1000, ".1f"),
            ("Git tree: warm query, opened per query, median ms", "git_fresh", 1000, ".1f"),
            ("Git tree: opened per query, CPU median ms (with git)", "git_fresh_cpu", 1000, ".1f"),
            ("full scan, median s", "scan", 1, ".2f"),
            ("load average (1 min) before", "load_before", 1, ".2f"),
            ("load average (1 min) after", "load_after", 1, ".2f"),
        ]
        names = list(contenders)
        print("\n| figure | " + " | ".join(names) + (" | ratio |" if len(names) > 1 else " |"))
        print("|---" * (len(names) + 1 + (len(names) > 1)) + "|")
        for title, key, scale, form in rows:
            if not all(key in contenders[name] for name in names):
                continue
            values = [contenders[name][key] for name in names]
            cells = " | ".join(f"{value * scale:{form}}" for value in values)
            ratio = f" | {values[0] / values[1]:.2f}x" if len(names) > 1 and values[1] else ""
            print(f"| {title} | {cells}{ratio} |")
        failed = False
        for name, figures in contenders.items():
            if "mismatch" in figures:
                print(f"MISMATCH ({name}): {figures['mismatch']}", file=sys.stderr)
                failed = True
        if len(names) > 1 and contenders[names[0]]["hits"] != contenders[names[1]]["hits"]:
            print("MISMATCH: this checkout and the baseline disagree", file=sys.stderr)
            failed = True
        if not failed:
            print(
                f"\nhits identical every way, on {len(queries)} queries "
                f"({options.scans} also as a full scan)"
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
