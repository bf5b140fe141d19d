"""What the commit hooks add to `git commit`, side by side in one run (issue 14 item 2).

For a history of 10 and of 1,000 commits, times `git commit -q -m ...` (one changed
file each time) in repositories set up six ways, interleaved round by round so load
hits them alike: no hooks (the baseline); the shims of `git obversa install` with nothing
captured; the shims with 100 captured turns waiting, composed ahead as every capture
command leaves them (`compose_ahead`: the commit copies the composition in); the same
turns composed at the commit (what a stale or missing composition costs, e.g. deltas a
Python record streamed after its last pause), started the lean way (the interpreter
named in `obversa-runtime`, `python -I -S`: no `site`); the same through the installed
`git-obversa` program (what the shims run when the runtime file is missing); and that
with a `post-commit` that starts Python too (what the pre-commit framework ran).

Prints medians of wall time and of CPU time (git and its hooks, from the children's
rusage: what load does not inflate as much), each against the no-hook baseline of the
same history, the load average before and after, and the time `compose_ahead` takes at
capture. Checks that the messages composed ahead and at the commit are the same.

    python bench/hook.py [--runs 21] [--before REV]

Target (issue 14): 100 turns pending adds at most 30 ms on an idle machine.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import before  # noqa: E402  (bench/before.py, beside this script)

# The package the hooks run (the `git-obversa` on PATH): a composition is tied to the
# files that composed it, so composing ahead with another copy would always look stale.
# Under --before each run has its tree's package and program first (bench/before.py).
try:
    if os.environ.get(before.TREE):
        raise ImportError
    import git_obversa  # noqa: F401
except ImportError:  # a checkout without an install, or a tree of --before
    sys.path.insert(0, str(before.tree()))

from git_obversa.hooks.install import RUNTIME_FILE  # noqa: E402
from git_obversa.record.composition import compose_ahead  # noqa: E402
from git_obversa.record.turns import TurnStore  # noqa: E402

TURNS = 100
TURN_TEXT = "Retry twice with jitter because the upstream API fails in bursts of two; "
AHEAD = f"{TURNS} turns, composed ahead"
SETUPS = (
    ("no hook", False, 0),
    ("shims, nothing pending", True, 0),
    (AHEAD, True, TURNS),
    (f"{TURNS} turns, composed at commit, lean entry", True, TURNS),
    (f"{TURNS} turns, git-obversa program", True, TURNS),
    (f"{TURNS} turns, git-obversa program + Python post-commit", True, TURNS),
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
        if "git-obversa program" in setup:
            (hooks / RUNTIME_FILE).unlink()
        if "Python post-commit" in setup:
            (hooks / "post-commit").write_text("#!/bin/sh\nexec git-obversa hook post-commit\n")
    return path


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed_commit(path: Path, run: int, turns: int, ahead: bool) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds of git and its hooks, seconds compose_ahead took)."""
    store = TurnStore.for_worktree(path)
    composing = 0.0
    if turns:
        store.append(
            [
                {"stage": "bench", "node": "bench", "kind": "engine:text", "text": TURN_TEXT}
                for _ in range(turns)
            ]
        )
        if ahead:
            start = time.perf_counter()
            assert compose_ahead(store.directory, path)
            composing = time.perf_counter() - start
    (path / "file.txt").write_text(f"change {run}\n")
    git(path, "add", "file.txt")
    cpu = children_cpu()
    start = time.perf_counter()
    git(path, "commit", "-q", "-m", f"bench {run}")
    elapsed = time.perf_counter() - start
    cpu = children_cpu() - cpu
    if turns:
        assert not store.read(), "post-commit left turns behind"
    return elapsed, cpu, composing


def last_message(path: Path) -> str:
    return subprocess.run(
        ["git", "log", "-1", "--format=%b"], cwd=path, capture_output=True, text=True, check=True
    ).stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    before.add_arguments(parser)
    args = parser.parse_args()
    if before.side_by_side(args):
        return
    if not os.environ.get(before.TREE):  # this environment's git-obversa
        env_bin = str(Path(sys.executable).parent)
        os.environ["PATH"] = env_bin + os.pathsep + os.environ["PATH"]
    load_before = os.getloadavg()[0]
    rows = []
    ahead_times: list[float] = []
    with tempfile.TemporaryDirectory() as root:
        for history in (10, 1000):
            paths = [
                prepare(Path(root), history, index, setup, hooked)
                for index, (setup, hooked, _) in enumerate(SETUPS)
            ]
            walls: list[list[float]] = [[] for _ in SETUPS]
            cpus: list[list[float]] = [[] for _ in SETUPS]
            for run in range(args.runs):
                for index, (setup, _, turns) in enumerate(SETUPS):
                    wall, cpu, composing = timed_commit(paths[index], run, turns, setup == AHEAD)
                    walls[index].append(wall)
                    cpus[index].append(cpu)
                    if composing:
                        ahead_times.append(composing)
                # Composed ahead or at the commit: the same message.
                assert last_message(paths[2]) == last_message(paths[3])
            wall_medians = [statistics.median(series) * 1000 for series in walls]
            cpu_medians = [statistics.median(series) * 1000 for series in cpus]
            rows += [
                (history, setup, wall, wall_medians[0], cpu, cpu_medians[0])
                for (setup, _, _), wall, cpu in zip(SETUPS, wall_medians, cpu_medians, strict=True)
            ]
    load_after = os.getloadavg()[0]
    print(
        f"git commit, median of {args.runs} interleaved runs (ms); added = against no hook, "
        f"same history; load average {load_before:.1f} before, {load_after:.1f} after"
    )
    print(
        f"{'history':>8} {'setup':<48} {'wall':>7} {'added':>7} {'ratio':>6}"
        f" {'CPU':>6} {'added':>6}"
    )
    for history, setup, wall, base, cpu, cpu_base in rows:
        print(
            f"{history:>8} {setup:<48} {wall:>7.1f} {wall - base:>7.1f} {wall / base:>6.2f}"
            f" {cpu:>6.1f} {cpu - cpu_base:>6.1f}"
        )
        before.figure(f"history {history}, {setup}, wall", wall)
        before.figure(f"history {history}, {setup}, CPU", cpu)
        if setup != "no hook":  # what the hooks add, against no hook in the same rounds
            before.figure(f"history {history}, {setup}, CPU added", cpu - cpu_base)
    print(
        f"compose_ahead at capture ({TURNS} turns), median of {len(ahead_times)}: "
        f"{statistics.median(ahead_times) * 1000:.1f} ms"
    )
    composing = statistics.median(ahead_times) * 1000
    before.figure(f"compose_ahead at capture ({TURNS} turns)", composing)


if __name__ == "__main__":
    main()
