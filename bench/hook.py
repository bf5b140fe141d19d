"""What the commit hooks add to `git commit`, side by side in one run (issue 14 item 2).

For a history of 10 and of 1,000 commits, times `git commit -q -m ...` (one changed
file each time) in repositories set up five ways, interleaved round by round so load
hits them alike: no hooks (the baseline); the shims of `git obversa install` with nothing
captured; the shims with 100 captured turns waiting, started the lean way (the
interpreter named in `obversa-runtime`, `python -I -S`: no `site`, no console script);
the same through the `git-obversa` console script (what the shims ran before, and still
run when the runtime file is missing); and that with a `post-commit` that starts Python
too (what the pre-commit framework runs). Prints medians, the time added against the
baseline of the same history, and the load average before and after.

    python bench/hook.py [--runs 21]

Target (issue 14): 100 turns pending adds at most 30 ms on an idle machine.
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

from git_obversa.hooks.install import RUNTIME_FILE  # noqa: E402
from git_obversa.record.turns import TurnStore  # noqa: E402

TURNS = 100
TURN_TEXT = "Retry twice with jitter because the upstream API fails in bursts of two; "
SETUPS = (
    ("no hook", False, 0),
    ("shims, nothing pending", True, 0),
    (f"{TURNS} turns, lean entry", True, TURNS),
    (f"{TURNS} turns, console script", True, TURNS),
    (f"{TURNS} turns, console script + Python post-commit", True, TURNS),
)


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


def prepare(root: Path, history: int, index: int, setup: str, hooked: bool) -> Path:
    path = root / f"{history}-{index}"
    make_history(path, history)
    if hooked:
        subprocess.run(["git-obversa", "install"], cwd=path, check=True, capture_output=True)
        hooks = path / ".git" / "hooks"
        assert (hooks / RUNTIME_FILE).exists()
        if "console script" in setup:
            (hooks / RUNTIME_FILE).unlink()
        if "Python post-commit" in setup:
            (hooks / "post-commit").write_text("#!/bin/sh\nexec git-obversa hook post-commit\n")
    return path


def timed_commit(path: Path, run: int, turns: int) -> float:
    store = TurnStore.for_worktree(path)
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
    elapsed = time.perf_counter() - start
    if turns:
        assert not store.read(), "post-commit left turns behind"
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()
    env_bin = str(Path(sys.executable).parent)
    os.environ["PATH"] = env_bin + os.pathsep + os.environ["PATH"]
    load_before = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory() as root:
        for history in (10, 1000):
            paths = [
                prepare(Path(root), history, index, setup, hooked)
                for index, (setup, hooked, _) in enumerate(SETUPS)
            ]
            times: list[list[float]] = [[] for _ in SETUPS]
            for run in range(args.runs):
                for index, (_, _, turns) in enumerate(SETUPS):
                    times[index].append(timed_commit(paths[index], run, turns))
            medians = [statistics.median(series) * 1000 for series in times]
            rows += [
                (history, setup, median, medians[0])
                for (setup, _, _), median in zip(SETUPS, medians, strict=True)
            ]
    load_after = os.getloadavg()[0]
    print(
        f"git commit, median of {args.runs} interleaved runs (ms); added = against no hook, "
        f"same history; load average {load_before:.1f} before, {load_after:.1f} after"
    )
    print(f"{'history':>8} {'setup':<48} {'median':>8} {'added':>8} {'ratio':>6}")
    for history, setup, median, base in rows:
        print(
            f"{history:>8} {setup:<48} {median:>8.1f} {median - base:>8.1f} {median / base:>6.2f}"
        )


if __name__ == "__main__":
    main()
