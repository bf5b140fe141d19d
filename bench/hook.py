"""What the commit hooks add to `git commit`, side by side in one run.

For a history of 10 and of 1,000 commits, times `git commit -q -m ...` (one changed
file each time) in four repositories: no hooks; the shims installed with nothing
captured; the shims with 100 captured turns waiting (prepare-commit-msg starts Python,
composes and writes the block; post-commit clears in `sh`); and the same with a
post-commit that starts Python for the clearing (`git obversa hook post-commit`, as the
pre-commit framework runs it). Prints medians and the added time against the no-hook
repository of the same history.

    python bench/hook.py [--runs 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from git_obversa.record.turns import TurnStore  # noqa: E402

TURNS = 100
TURN_TEXT = "Retry twice with jitter because the upstream API fails in bursts of two; "


def git(cwd: Path, *args: str, input: str | None = None) -> None:
    subprocess.run(["git", *args], cwd=cwd, input=input, check=True, capture_output=True, text=True)


def make_history(path: Path, commits: int) -> None:
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    stream = []
    for number in range(1, commits + 1):
        text = f"line {number}\n"
        stream.append(
            f"commit refs/heads/main\nmark :{number}\n"
            f"committer Bench <bench@example.com> {1700000000 + number} +0000\n"
            f"data 9\ncommit {number % 10}\n"
            + (f"from :{number - 1}\n" if number > 1 else "")
            + f"M 100644 inline file.txt\ndata {len(text)}\n{text}\n"
        )
    git(path, "fast-import", "--quiet", input="".join(stream))
    git(path, "checkout", "-q", "-f", "main")


def time_commits(path: Path, runs: int, turns: int) -> list[float]:
    store = TurnStore.for_worktree(path)
    times = []
    for run in range(runs):
        if turns:
            store.append(
                [
                    {"stage": "bench", "node": "bench", "kind": "engine:text", "text": TURN_TEXT}
                    for _ in range(turns)
                ]
            )
        (path / "file.txt").write_text(f"change {run}\n")
        git(path, "add", "file.txt")
        start = time.perf_counter()
        git(path, "commit", "-q", "-m", f"bench {run}")
        times.append(time.perf_counter() - start)
        if turns:
            assert not store.read(), "post-commit left turns behind"
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    env_bin = str(Path(sys.executable).parent)
    os.environ["PATH"] = env_bin + os.pathsep + os.environ["PATH"]
    print(f"git commit, median of {args.runs} runs (ms); added = against no hook, same history")
    print(f"{'history':>8} {'setup':<32} {'median':>8} {'added':>8} {'ratio':>6}")
    with tempfile.TemporaryDirectory() as root:
        for history in (10, 1000):
            results = {}
            for setup, hooked, turns in (
                ("no hook", False, 0),
                ("shims, nothing pending", True, 0),
                (f"shims, {TURNS} turns pending", True, TURNS),
                (f"{TURNS} turns, Python post-commit", True, TURNS),
            ):
                path = Path(root) / f"{history}-{len(results)}"
                make_history(path, history)
                if hooked:
                    subprocess.run(
                        ["git-obversa", "install"], cwd=path, check=True, capture_output=True
                    )
                if "Python post-commit" in setup:
                    post_commit = path / ".git" / "hooks" / "post-commit"
                    post_commit.write_text("#!/bin/sh\nexec git-obversa hook post-commit\n")
                results[setup] = statistics.median(time_commits(path, args.runs, turns)) * 1000
            base = results["no hook"]
            for setup, median in results.items():
                print(
                    f"{history:>8} {setup:<32} {median:>8.1f} {median - base:>8.1f} "
                    f"{median / base:>6.2f}"
                )


if __name__ == "__main__":
    main()
