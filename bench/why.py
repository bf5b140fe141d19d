"""Blame lookup speed: `git obversa why` against plain `git blame`, in the same run.

Builds (with `git fast-import`) a repository whose notes.md has 2,000 commits of history
(random edits, inserts and deletes; half the messages carry a `Why:` block) plus 1,000
commits to other files, then times, interleaved so noise hits every contender alike:

  whole file   `git blame --porcelain notes.md`   vs  `git obversa why notes.md`  (CLI)
                                                  vs  `why(repo, "notes.md", rev=None)`
                                                  vs  `blame.lookup(...)` (no dataclasses)
               `git blame --porcelain HEAD -- notes.md`  vs  `why(repo, "notes.md")`
  one line     `git blame -L n,n notes.md`        vs  `git obversa why notes.md:n`
                                                  vs  `why(repo, "notes.md", n, n, rev=None)`

The CLI, like git blame, reads the working tree unless given --rev; the API defaults to
rev="HEAD", and naming a revision makes git blame itself slower (compare the two
`git blame` rows), so each form is set against its own baseline.

Two more rows weigh the CLI's exit shortcut (`why`, `blame` and `log` end with os._exit
once their output is flushed, skipping Python's teardown): the CLI started as
`python -c`, once ending as the program does and once with `main(argv)`, which returns
and so ends through Python's normal teardown.

The CLI runs with its bytecode cached, as an installed package has it (pip compiles it
at install; Python caches it on first import). A sandbox that sets
PYTHONDONTWRITEBYTECODE=1 would otherwise make every run compile the package anew, a
cost no user pays: the cache goes to a directory under the bench's work directory
(PYTHONPYCACHEPREFIX) and one untimed run fills it.

Usage: python bench/why.py [--commits 2000] [--repeat 7] [--lines 12] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from git_obversa.lookup.blame import lookup
from git_obversa.lookup.why import why

FILE = "notes.md"


def build(repo: Path, commits: int, seed: int = 7) -> int:
    """The history; returns the final line count of notes.md."""
    rng = random.Random(seed)
    lines = [f"seed line {n} {rng.randrange(10**6)}" for n in range(900)]
    stream = []
    when = 1_700_000_000
    for number in range(commits + commits // 2):
        when += 60
        other = number % 3 == 2  # every third commit changes another file
        if other:
            name, data = f"other/{number % 50}.txt", f"change {number}\n"
        else:
            for _ in range(rng.randint(1, 3)):
                roll = rng.random()
                at = rng.randrange(len(lines))
                if roll < 0.55:
                    lines[at] = f"edit {number} {rng.randrange(10**6)}"
                elif roll < 0.9:
                    lines.insert(at, f"new {number} {rng.randrange(10**6)}")
                elif len(lines) > 100:
                    del lines[at]
            name, data = FILE, "".join(line + "\n" for line in lines)
        subject = f"change {number}"
        message = subject + "\n"
        if number % 2:
            message += (
                f"\nWhy:\nStep {number} keeps the notes in step with the code it\n"
                "describes, so the next reader finds the reason here.\n\n"
                "Obversa-Record: implement\n"
            )
        stream.append(
            f"commit refs/heads/main\ncommitter A U Thor <a@example.com> {when} +0000\n"
            f"data {len(message.encode())}\n{message}\n"
            f"M 100644 inline {name}\ndata {len(data.encode())}\n{data}\n"
        )
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run(
        ["git", "fast-import", "--quiet"], cwd=repo, input="".join(stream).encode(), check=True
    )
    subprocess.run(["git", "reset", "-q", "--hard"], cwd=repo, check=True)
    subprocess.run(["git", "gc", "-q"], cwd=repo, check=True)
    return len(lines)


def seconds(action) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def command(repo: Path, *args: str, env: dict[str, str] | None = None):
    def run() -> None:
        subprocess.run(args, cwd=repo, stdout=subprocess.DEVNULL, check=True, env=env)

    return run


def cached_bytecode_environment(workdir: Path) -> dict[str, str]:
    """The environment with Python's bytecode cache on, kept under WORKDIR."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(workdir / "pycache")
    return env


def cli_exit(repo: Path, env: dict[str, str], shortcut: bool, *args: str):
    """The CLI as `python -c`, ending with the exit shortcut or Python's own teardown."""
    argv = "" if shortcut else "sys.argv[1:]"  # main() given argv returns instead
    program = f"import sys; from git_obversa.cli import main; sys.exit(main({argv}))"
    return command(repo, sys.executable, "-c", program, *args, env=env)


def race(contenders: dict, repeat: int) -> dict[str, float]:
    """Median seconds per contender, the contenders taking turns in every round."""
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeat):
        for name, action in contenders.items():
            times[name].append(seconds(action))
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--commits", type=int, default=2000, help="commits touching notes.md")
    parser.add_argument("--repeat", type=int, default=7, help="rounds per measurement")
    parser.add_argument("--lines", type=int, default=12, help="single lines to time")
    parser.add_argument("--keep", type=Path, help="build the repository here and keep it")
    args = parser.parse_args()

    workdir = args.keep or Path(tempfile.mkdtemp(prefix="bench-why-"))
    repo = workdir / "repo"
    if repo.exists():  # fast-import would stack a second history on the first
        parser.error(f"{repo} exists already; give --keep a new directory")
    started = time.perf_counter()
    total = build(repo, args.commits)
    print(
        f"built {args.commits} commits of {FILE} ({total} lines) in "
        f"{time.perf_counter() - started:.1f} s at {repo}"
    )
    env = cached_bytecode_environment(workdir)
    command(repo, "git", "obversa", "why", f"{FILE}:1", env=env)()  # fills the cache
    print("load average before: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))

    whole = race(
        {
            "git blame --porcelain": command(repo, "git", "blame", "--porcelain", FILE),
            "git blame --porcelain HEAD --": command(
                repo, "git", "blame", "--porcelain", "HEAD", "--", FILE
            ),
            "git obversa why (CLI)": command(repo, "git", "obversa", "why", FILE, env=env),
            "python -c CLI, exit shortcut": cli_exit(repo, env, True, "why", FILE),
            "python -c CLI, Python's teardown": cli_exit(repo, env, False, "why", FILE),
            "why(rev=None) (API)": lambda: why(repo, FILE, rev=None),
            "blame.lookup(rev=None) (engine)": lambda: lookup(repo, FILE, rev=None),
            'why(rev="HEAD") (API)': lambda: why(repo, FILE),
        },
        args.repeat,
    )
    rng = random.Random(11)
    numbers = sorted(rng.sample(range(1, total + 1), args.lines))
    one: dict[str, list[float]] = {}
    for n in numbers:
        medians = race(
            {
                "git blame -L": command(repo, "git", "blame", "-L", f"{n},{n}", FILE),
                "CLI": command(repo, "git", "obversa", "why", f"{FILE}:{n}", env=env),
                "API": lambda n=n: why(repo, FILE, n, n, rev=None),
                "python -c CLI, exit shortcut": cli_exit(repo, env, True, "why", f"{FILE}:{n}"),
                "python -c CLI, Python's teardown": cli_exit(
                    repo, env, False, "why", f"{FILE}:{n}"
                ),
            },
            args.repeat,
        )
        for name, value in medians.items():
            one.setdefault(name, []).append(value)

    print("load average after: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    base = whole["git blame --porcelain"]
    print(f"\nwhole file, median of {args.repeat} rounds")
    print("| command | ms | ratio |\n|---|---:|---:|")
    for name, value in whole.items():
        print(f"| `{name}` | {value * 1000:.0f} | {value / base:.2f}x |")
    print(
        f"\none line, {len(numbers)} lines ({numbers[0]}..{numbers[-1]}), "
        f"median of {args.repeat} rounds per line"
    )
    print("| command | total ms | ratio of totals | median ms | worst line ratio |")
    print("|---|---:|---:|---:|---:|")
    base_lines = one["git blame -L"]
    for name, values in one.items():
        worst = max(v / b for v, b in zip(values, base_lines, strict=True))
        print(
            f"| {name} | {sum(values) * 1000:.0f} | {sum(values) / sum(base_lines):.2f}x "
            f"| {statistics.median(values) * 1000:.0f} | {worst:.2f}x |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
