"""What scrubbing costs at capture, and that a plain commit does not pay it (issue 24).

- start-up: a fresh interpreter that imports the scrubber and scrubs one short line
  (since issue 24 this loads the detection engine, once per process);
- a 10 KB turn, of prose and of code, scrubbed in a warm process as capture does it,
  with the 2 KB captured before it (`scrub_turns`);
- `git commit -q -m` with the hooks installed and nothing pending (the shim starts no
  Python then), and without hooks, for scale.

    python bench/scrub.py [--runs 15] [--before REV]

With `--before REV` (bench/before.py) the same runs against REV, side by side, with the
ratio. Prints medians and minima; on a shared machine compare ratios, not times.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
import before  # noqa: E402  (bench/before.py, beside this script)

sys.path.insert(0, str(before.tree()))

PROSE = (
    "The retry budget stops after three attempts because the upstream fails in bursts of "
    "two; I checked the gateway logs and the token bucket holds ten percent of recent "
    "requests, so a storm never doubles the load. "
)
CODE = Path(__file__).resolve().parent.parent / "fixtures" / "secrets" / "ordinary-cpython.txt"

STARTUP = """
import time
start = time.perf_counter()
from git_obversa.record.scrub import scrub
scrub("rotated the key today")
print(time.perf_counter() - start)
"""


def startup_seconds() -> float:
    completed = subprocess.run(
        [sys.executable, "-c", STARTUP],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(before.tree())},
        cwd=before.tree(),  # `-c` puts the working directory first on the import path
        check=True,
    )
    return float(completed.stdout.split()[-1])


def turn_seconds(text: str, runs: int) -> list[float]:
    from git_obversa.record.scrub import scrub_turns

    previous = text[:2000]
    scrub_turns([previous, text])  # every rule and the engine loaded
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        scrub_turns([previous, text])
        times.append(time.perf_counter() - start)
    return times


def commit_seconds(runs: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"hooks": [], "no hooks": []}
    with tempfile.TemporaryDirectory() as scratch:
        repos = {}
        for name in times:
            path = Path(scratch, name.replace(" ", "-"))
            path.mkdir()
            subprocess.run(["git", "init", "-q"], cwd=path, check=True)
            subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "start"], cwd=path)
            if name == "hooks":
                install = ["git-obversa", "install"]
                subprocess.run(install, cwd=path, check=True, capture_output=True)
            repos[name] = path
        for run in range(runs):
            for name, path in repos.items():
                (path / "file.txt").write_text(f"{run}\n")
                subprocess.run(["git", "add", "file.txt"], cwd=path, check=True)
                start = time.perf_counter()
                commit = ["git", "commit", "-q", "-m", f"change {run}"]
                subprocess.run(commit, cwd=path, check=True)
                times[name].append(time.perf_counter() - start)
    return times


def report(name: str, seconds: list[float]) -> None:
    median, least = 1000 * statistics.median(seconds), 1000 * min(seconds)
    print(f"  {name:36} median {median:7.1f} ms   minimum {least:7.1f} ms")
    before.figure(name, least)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    before.add_arguments(parser)
    args = parser.parse_args()
    if before.side_by_side(args):
        return
    code = CODE.read_text(encoding="utf-8").replace("\f", "")[:10_000]
    prose = (PROSE * 80)[:10_000]
    print(f"scrubbing, {args.runs} runs each ({before.tree()})")
    report("start-up (import, first scrub)", [startup_seconds() for _ in range(args.runs)])
    report("10 KB turn of prose", turn_seconds(prose, args.runs))
    report("10 KB turn of code", turn_seconds(code, args.runs))
    for name, seconds in commit_seconds(args.runs).items():
        report(f"commit -m, nothing pending, {name}", seconds)


if __name__ == "__main__":
    main()
