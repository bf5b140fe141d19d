"""What scrubbing costs, before and after a change, side by side in one run (issue 24).

Extracts REV (default: the merge base with main, i.e. before this branch) into a
temporary directory and measures it and the working tree alike, interleaved round by
round so load hits both the same:

- start-up: a fresh interpreter that imports the scrubber and scrubs one short line
  (after issue 24 this loads the detection engine once; a process pays it once);
- capture: in a warm process, the time to scrub one 10 KB turn, of prose and of code,
  as `scrub_turns` does it with the turn before it (what a capture or a composition runs);
- commit: `git commit -q -m` with the hooks installed by each tree and nothing pending
  (the shim starts no Python then), against no hooks at all.

    python bench/scrub.py [--before REV] [--runs 15]

Prints medians and minima; compare ratios, not absolute times, on a shared machine.
(A shared `--before REV` helper for bench/ was not on main yet: this one extracts
REV with `git archive`.)
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROSE = (
    "The retry budget stops after three attempts because the upstream fails in bursts of "
    "two; I checked the gateway logs and the token bucket holds ten percent of recent "
    "requests, so a storm never doubles the load. "
)
CODE = (ROOT / "fixtures" / "secrets" / "ordinary-cpython.txt").read_text().replace("\f", "")

# Run in a fresh interpreter with the tree under test first on sys.path.
STARTUP = """
import sys, time
start = time.perf_counter()
from git_obversa.record.scrub import scrub
scrub("rotated the key today")
print(time.perf_counter() - start)
"""
CAPTURE = """
import sys, time, statistics
from git_obversa.record.scrub import scrub_turns
text, previous = sys.stdin.read().split("\\0")
scrub_turns([previous, text])  # the engine and every rule loaded
times = []
for _ in range(int(sys.argv[1])):
    start = time.perf_counter()
    scrub_turns([previous, text])
    times.append(time.perf_counter() - start)
print(statistics.median(times))
"""


def python(tree: Path, code: str, *args: str, input: str | None = None) -> float:
    completed = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=tree,
        input=input,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": ""},
        check=True,
    )
    return float(completed.stdout.split()[-1])


def extract(rev: str, into: Path) -> Path:
    into.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "git_obversa"], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def commit_repo(root: Path, name: str, tree: Path | None) -> Path:
    path = root / "repos" / name.split()[0]
    path.mkdir(parents=True)
    for args in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "start"]):
        subprocess.run(["git", *args], cwd=path, check=True)
    if tree is not None:
        subprocess.run(
            [sys.executable, "-m", "git_obversa", "install"],
            cwd=path,
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tree)},
            check=True,
            capture_output=True,
        )
    return path


def timed_commit(path: Path, run: int) -> float:
    (path / "file.txt").write_text(f"{run}\n")
    subprocess.run(["git", "add", "file.txt"], cwd=path, check=True)
    start = time.perf_counter()
    subprocess.run(["git", "commit", "-q", "-m", f"change {run}"], cwd=path, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", help="the revision to compare with (default: merge base)")
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    before = (
        args.before
        or subprocess.run(
            ["git", "-C", str(ROOT), "merge-base", "HEAD", "main"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    prose = (PROSE * 80)[:10_000]
    code = CODE[:10_000]
    with tempfile.TemporaryDirectory() as scratch:
        trees = {
            f"before ({before[:10]})": extract(before, Path(scratch) / "before"),
            "after (working tree)": ROOT,
        }
        repos = {name: commit_repo(Path(scratch), name, tree) for name, tree in trees.items()}
        repos["no hook"] = commit_repo(Path(scratch), "no hook", None)
        times: dict[tuple[str, str], list[float]] = {}
        for run in range(args.runs):
            for name, tree in trees.items():
                times.setdefault((name, "start-up"), []).append(python(tree, STARTUP))
                for kind, text in (("prose", prose), ("code", code)):
                    cost = python(tree, CAPTURE, "5", input=f"{text}\0{text[:2000]}")
                    times.setdefault((name, f"10 KB {kind} turn"), []).append(cost)
            for name, path in repos.items():
                times.setdefault((name, "commit -m, nothing pending"), []).append(
                    timed_commit(path, run)
                )
        print(f"{args.runs} interleaved rounds (ms)             median   minimum")
        for (name, what), values in sorted(times.items(), key=lambda item: item[0][1]):
            median, least = statistics.median(values), min(values)
            print(f"  {what:28} {name:26} {1000 * median:8.1f} {1000 * least:9.1f}")


if __name__ == "__main__":
    main()
