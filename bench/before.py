"""`--before REV`, shared by every benchmark: the same load against REV and this checkout,
side by side in one run.

REV is checked out into a temporary git worktree. The benchmark script (this checkout's,
so the load is the same) then runs as a child process once per tree, alternating which
goes first, `--alternations` times. Each child imports the package of its tree and finds
that tree's `git-obversa` first on PATH (a copy of its `bin/git-obversa` whose first line
names this interpreter, as pip writes it), so the hooks it installs, the commands it
runs and its in-process calls are all that tree's. Every child prints its own report;
the figures it records with `figure()` are then printed once more, as the median of
each tree's runs, with the ratio (this checkout / REV) and the noise (the larger spread,
(max - min) / median, of the two trees' runs). A ratio above 1 + noise is marked `worse`.

A benchmark uses it as:

    sys.path.insert(0, str(before.tree()))      # instead of this checkout's root
    before.add_arguments(parser)
    args = parser.parse_args()
    if before.side_by_side(args):               # ran both trees as children
        return
    ... before.figure("warm query", seconds * 1000) for each figure it prints ...

Benchmarks that already compare in finer steps (bench/corpus.py: one child process per
measurement) call `checkout` and `environment` themselves.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
TREE = "OBVERSA_BENCH_TREE"  # set in a child: the checkout whose package it measures
FIGURES = "OBVERSA_BENCH_FIGURES"  # set in a child: the file its figures go to


def tree() -> Path:
    """The checkout whose package this process measures (this one unless a child)."""
    return Path(os.environ.get(TREE) or HERE)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--before",
        metavar="REV",
        help="also run this benchmark against REV (a temporary worktree), alternating, "
        "and print both and the ratio",
    )
    parser.add_argument(
        "--alternations",
        type=int,
        default=3,
        metavar="N",
        help="with --before: how many times each tree runs (default 3)",
    )


def figure(name: str, value: float, unit: str = "ms") -> None:
    """Record one figure of this run for the side-by-side table (a no-op unless a child)."""
    path = os.environ.get(FIGURES)
    if path:
        with open(path, "a", encoding="utf-8") as file:
            file.write(json.dumps({"name": name, "value": value, "unit": unit}) + "\n")


@contextlib.contextmanager
def checkout(rev: str) -> Iterator[Path]:
    """REV checked out into a temporary worktree of this repository, compiled; removed
    (and pruned from the repository's list) afterwards."""
    directory = Path(tempfile.mkdtemp(prefix="obversa-before-"))
    worktree = directory / "tree"
    subprocess.run(
        ["git", "worktree", "add", "-q", "--detach", str(worktree), rev],
        cwd=HERE,
        check=True,
    )
    try:
        compile_package(worktree)
        yield worktree
    finally:
        subprocess.run(
            ["git", "worktree", "remove", "--force", str(worktree)], cwd=HERE, check=False
        )
        shutil.rmtree(directory, ignore_errors=True)


def compile_package(root: Path) -> None:
    """Bytecode for ROOT's package, as an installed package has it (pip compiles it)."""
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(root / "git_obversa")], check=True
    )


def environment(root: Path, scratch: Path, base: dict[str, str] | None = None) -> dict:
    """BASE (os.environ) for a process that measures the checkout ROOT: its package
    first on the import path, its `git-obversa` (written into SCRATCH) first on PATH."""
    base = dict(os.environ if base is None else base)
    bin_directory = scratch / "bin"
    bin_directory.mkdir(parents=True, exist_ok=True)
    script = (root / "bin" / "git-obversa").read_text(encoding="utf-8").split("\n", 1)[1]
    program = bin_directory / "git-obversa"
    program.write_text(f"#!{sys.executable}\n{script}", encoding="utf-8")
    program.chmod(0o755)
    imports = [str(root), *filter(None, [base.get("PYTHONPATH")])]
    return {
        **base,
        TREE: str(root),
        "PYTHONPATH": os.pathsep.join(imports),
        "PATH": str(bin_directory) + os.pathsep + base.get("PATH", ""),
    }


def side_by_side(args: argparse.Namespace) -> bool:
    """With `--before REV` (in the parent): run the calling script against REV and this
    checkout as described above and print the table; True when it did."""
    if not args.before or os.environ.get(TREE):
        return False
    script = Path(sys.argv[0]).resolve()
    compile_package(HERE)
    with checkout(args.before) as old, tempfile.TemporaryDirectory() as scratch:
        trees = {"now": HERE, args.before: old}
        environments = {}
        for label, root in trees.items():
            place = Path(scratch, f"tree-{len(environments)}")
            environments[label] = {
                **environment(root, place),
                FIGURES: str(place / "figures.jsonl"),
            }
        for number in range(args.alternations):
            order = list(trees) if number % 2 == 0 else list(trees)[::-1]
            for label in order:
                print(f"\n## {label} ({trees[label]}), run {number + 1}", flush=True)
                subprocess.run(
                    [sys.executable, str(script), *sys.argv[1:]],
                    env=environments[label],
                    check=True,
                )
        runs = {label: read_figures(env[FIGURES]) for label, env in environments.items()}
    print_table(args.before, runs)
    return True


def read_figures(path: str) -> dict[str, tuple[str, list[float]]]:
    figures: dict[str, tuple[str, list[float]]] = {}
    with open(path, encoding="utf-8") as file:
        for line in file:
            entry = json.loads(line)
            figures.setdefault(entry["name"], (entry["unit"], []))[1].append(entry["value"])
    return figures


def spread(values: list[float]) -> float:
    middle = statistics.median(values)
    return (max(values) - min(values)) / middle if middle else 0.0


def print_table(rev: str, runs: dict[str, dict[str, tuple[str, list[float]]]]) -> None:
    now, old = runs["now"], runs[rev]
    print(f"\n## side by side: this checkout against {rev} (medians of each tree's runs)")
    print(f"| figure | now | {rev} | now / {rev} | noise | |")
    print("|---|---:|---:|---:|---:|---|")
    for name, (unit, values) in now.items():
        if name not in old:
            print(f"| {name} | {statistics.median(values):.2f} {unit} | — | | | |")
            continue
        before_values = old[name][1]
        a, b = statistics.median(values), statistics.median(before_values)
        ratio = a / b if b else float("inf")
        if min(len(values), len(before_values)) < 2:  # one run each: no noise to judge by
            noise_cell, mark = "—", ""
        else:
            noise = max(spread(values), spread(before_values))
            noise_cell, mark = f"{noise * 100:.0f} %", "worse" if ratio > 1 + noise else ""
        print(f"| {name} | {a:.2f} {unit} | {b:.2f} {unit} | {ratio:.2f} | {noise_cell} | {mark} |")
