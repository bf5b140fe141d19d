"""Blame lookup speed: `git obversa why` against plain `git blame`, in the same run.

Builds (with `git fast-import`) a repository whose notes.md has 2,000 commits of history
(random edits, inserts and deletes; half the messages carry a `Why:` block) plus 1,000
commits to other files, and small.md, 30 lines with 20 commits, then times, interleaved
so noise hits every contender alike (medians):

  whole file   `git blame --porcelain notes.md` (the baseline) against `git obversa why
               notes.md` warm (its blame cached), cold (the cache emptied before each
               run), extending (the parent's blame cached, the file changed by the
               commit), and `--no-cache`; the API `why(..., rev=None)` warm and uncached
  small file   `git blame --porcelain small.md` against the CLI warm, cold, --no-cache,
               and warm with small.md's index entry racy (see below)
  one line     `git blame -L n,n notes.md` against the CLI warm and --no-cache
  start-up     `git blame` of small.md against bare Python processes (`-I -S`, with site,
               importing `re` as a script pip generates does, and argparse), the blame
               engine alone under `python -I -S` (the floor of an entry without site),
               and the CLI warm

Each figure is given as wall time and as CPU time (user + system of the process and the
git processes it waited for: `os.wait4` for a command, `getrusage` around an in-process
call). A cold CLI run keeps its blame after answering, in a child it does not wait for:
that child's CPU time (~4-5 ms) is in no row. On a loaded machine the wall time of a
fresh process grows with the queue for the cores; its CPU time far less. `chrt -f 10
python bench/why.py` (as root) runs the bench ahead of the other processes, the nearest
this shared machine comes to idle.

The CLI, like git blame, reads the working tree unless given --rev. A warm lookup of it
shows the file unchanged from git's index when it can (git_obversa/repo/index.py,
`index_holds`); a script that writes a file and commits it within one second leaves the
file's index entry racy (not older than the index file), which neither git nor that
proof trusts: git then reads the file, the lookup runs `git diff-index`. So once built,
the bench waits out the second and runs `git status` (which rewrites such an index), as
any repository is once a second has passed and git has looked at it; the racy row puts
the index file's time back to small.md's before each of its runs.

The CLI, like git blame, reads the working tree unless given --rev. It runs with its
bytecode cached, as an installed package has it (pip compiles it at install; Python
caches it on first import): a sandbox that sets PYTHONDONTWRITEBYTECODE=1 would
otherwise make every run compile the package anew, a cost no user pays. The cache goes
to a directory under the bench's work directory (PYTHONPYCACHEPREFIX), filled by one
untimed run.

With --timeline N it also traces N cold whole-file runs with strace: when blame starts
after `git obversa` does, and how long the program runs after blame has ended.
--before REV runs all of it against REV as well (bench/before.py).

Usage: python bench/why.py [--commits 2000] [--repeat 7] [--lines 12] [--keep DIR]
                          [--timeline N] [--before REV]
"""

from __future__ import annotations

import argparse
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

# bench/before.py, beside this script; also when a test loads this file (its `build`).
sys.path.insert(0, str(Path(__file__).resolve().parent))
import before  # noqa: E402

sys.path.insert(0, str(before.tree()))

import git_obversa  # noqa: E402
from git_obversa.lookup.blame import lookup  # noqa: E402
from git_obversa.lookup.why import why  # noqa: E402

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


def seconds(action) -> tuple[float, float]:
    """(wall, CPU) seconds of ACTION: a command reports its own CPU time (a float); an
    in-process call's is this process's and its waited-for children's, around it."""
    before = _cpu()
    start = time.perf_counter()
    cpu = action()
    wall = time.perf_counter() - start
    return wall, cpu if isinstance(cpu, float) else _cpu() - before


def _cpu() -> float:
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def command(repo: Path, *args: str, env: dict[str, str] | None = None):
    """An action running ARGS in REPO (stdout discarded) that returns its CPU seconds:
    the process's and those of the processes it waited for (`os.wait4`)."""

    def run() -> float:
        process = subprocess.Popen(args, cwd=repo, stdout=subprocess.DEVNULL, env=env)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            raise subprocess.CalledProcessError(process.returncode, args)
        return usage.ru_utime + usage.ru_stime

    return run


def cached_bytecode_environment(workdir: Path) -> dict[str, str]:
    """The environment with Python's bytecode cache on, kept under WORKDIR."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(workdir / "pycache")
    return env


def race(contenders: dict, repeat: int) -> dict[str, tuple[float, float]]:
    """Median (wall, CPU) seconds per contender, the contenders taking turns in every
    round. A contender is an action, or (preparation, action): the preparation runs
    untimed."""
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in contenders}
    for _ in range(repeat):
        for name, action in contenders.items():
            if isinstance(action, tuple):
                prepare, action = action
                prepare()
            times[name].append(seconds(action))
    return {
        name: (statistics.median(w for w, _ in values), statistics.median(c for _, c in values))
        for name, values in times.items()
    }


def small_history(repo: Path) -> None:
    """small.md: 30 lines, 20 commits each changing a line or two."""
    rng = random.Random(3)
    lines = [f"small line {n}" for n in range(30)]
    for number in range(20):
        for _ in range(rng.randint(1, 2)):
            lines[rng.randrange(len(lines))] = f"small edit {number} {rng.randrange(1000)}"
        (repo / "small.md").write_text("".join(line + "\n" for line in lines))
        subprocess.run(["git", "add", "small.md"], cwd=repo, check=True)
        subprocess.run(
            ["git", "commit", "-q", "-m", f"small {number}"],
            cwd=repo,
            check=True,
            env={
                **os.environ,
                "GIT_AUTHOR_NAME": "A",
                "GIT_AUTHOR_EMAIL": "a@example.com",
                "GIT_COMMITTER_NAME": "A",
                "GIT_COMMITTER_EMAIL": "a@example.com",
            },
        )


def settle_index(repo: Path) -> float:
    """Let git rewrite the index a second after the last write (see the module's
    docstring); the index file's modification time then."""
    index = repo / ".git" / "index"
    time.sleep(max(0.0, os.stat(repo / "small.md").st_mtime + 1.1 - time.time()))
    subprocess.run(["git", "status", "--porcelain"], cwd=repo, check=True, capture_output=True)
    written = os.stat(index).st_mtime
    if int(written) <= int(os.stat(repo / "small.md").st_mtime):
        print("warning: small.md's index entry is still racy")
    return written


def index_written_at(repo: Path, when: float):
    """A preparation that sets the index file's modification time to WHEN."""

    def prepare() -> None:
        os.utime(repo / ".git" / "index", (when, when))

    return prepare


def empty_cache(repo: Path):
    def empty() -> None:
        shutil.rmtree(repo / ".git" / "obversa" / "blame", ignore_errors=True)

    return empty


def only_parent_cached(repo: Path, child: str):
    """Leave the cache holding nothing but the blame of CHILD's parent."""

    def prepare() -> None:
        empty_cache(repo)()
        lookup(repo, FILE, rev=f"{child}^")

    return prepare


def timeline(repo: Path, envs: dict[str, dict[str, str]], runs: int) -> dict[str, tuple]:
    """Per install (name -> environment), medians of RUNS cold `why notes.md` under
    strace, the installs taking turns: ms from the command's start to blame's, from
    blame's end to the program's, and blame's own run. strace slows every process start,
    so these compare installs and phases; the races above give the absolute times."""
    trace = Path(tempfile.mkdtemp(prefix="bench-why-trace-")) / "trace"
    found: dict[str, list[tuple[float, float, float]]] = {name: [] for name in envs}
    for _ in range(runs):
        for name, env in envs.items():
            empty_cache(repo)()
            subprocess.run(
                ["strace", "-f", "--seccomp-bpf", "-ttt", "-e", "trace=execve,exit_group"]
                + ["-o", str(trace), "git", "obversa", "why", FILE],
                cwd=repo,
                env=env,
                stdout=subprocess.DEVNULL,
                check=True,
            )
            found[name].append(_phases(trace.read_text()))
    shutil.rmtree(trace.parent)
    return {
        name: tuple(statistics.median(run[i] for run in values) for i in range(3))
        for name, values in found.items()
    }


def _phases(trace: str) -> tuple[float, float, float]:
    """(blame's start after the command's, the program's end after blame's, blame's run),
    in ms, from an `strace -f -ttt -e trace=execve,exit_group` of one `git obversa why`."""
    rows = [row.split(None, 2) for row in trace.splitlines()]
    rows = [row for row in rows if len(row) == 3 and "ENOENT" not in row[2]]
    start = float(rows[0][1])
    program = blame = None
    began = ended = done = start
    for pid, when, call in rows:
        if call.startswith("execve(") and "git-obversa" in call:
            program = pid
        elif call.startswith("execve(") and '"blame"' in call:
            blame, began = pid, float(when)
        elif call.startswith("exit_group") and pid == blame:
            ended = float(when)
        elif call.startswith("exit_group") and pid == program:
            done = float(when)  # a child it forks exits under another pid
    return (began - start) * 1000, (done - ended) * 1000, (ended - began) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--commits", type=int, default=2000, help="commits touching notes.md")
    parser.add_argument("--repeat", type=int, default=7, help="rounds per measurement")
    parser.add_argument("--lines", type=int, default=12, help="single lines to time")
    parser.add_argument("--keep", type=Path, help="build the repository here and keep it")
    parser.add_argument(
        "--timeline",
        type=int,
        default=0,
        metavar="N",
        help="also trace N cold whole-file runs (strace): when blame starts and how long the "
        "program runs after it",
    )
    before.add_arguments(parser)
    args = parser.parse_args()
    if before.side_by_side(args):
        return 0

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
    small_history(repo)
    settled = settle_index(repo)
    env = cached_bytecode_environment(workdir)
    command(repo, "git", "obversa", "why", f"{FILE}:1", env=env)()  # fills the bytecode cache
    # The newest commit that changed notes.md: its parent's blame extends to it.
    child = subprocess.run(
        ["git", "rev-list", "-1", "HEAD", "--", FILE], cwd=repo, capture_output=True, text=True
    ).stdout.strip()
    print("load average before: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))

    def cli(*args: str):
        return command(repo, "git", "obversa", "why", *args, env=env)

    whole = race(
        {
            "git blame --porcelain notes.md": command(repo, "git", "blame", "--porcelain", FILE),
            "git obversa why notes.md, warm": cli(FILE),
            "git obversa why notes.md, cold": (empty_cache(repo), cli(FILE)),
            "git obversa why notes.md --no-cache": cli(FILE, "--no-cache"),
            "git obversa why --rev C notes.md, parent cached": (
                only_parent_cached(repo, child),
                cli("--rev", child, FILE),
            ),
            "git blame --porcelain C -- notes.md": command(
                repo, "git", "blame", "--porcelain", child, "--", FILE
            ),
            "why(rev=None) (API), warm": lambda: why(repo, FILE, rev=None),
            "why(rev=None, cache=False) (API)": lambda: why(repo, FILE, rev=None, cache=False),
        },
        args.repeat,
    )
    small = race(
        {
            "git blame --porcelain small.md": command(
                repo, "git", "blame", "--porcelain", "small.md"
            ),
            "git obversa why small.md, warm": (index_written_at(repo, settled), cli("small.md")),
            "git obversa why small.md, cold": (empty_cache(repo), cli("small.md")),
            "git obversa why small.md --no-cache": cli("small.md", "--no-cache"),
            "git obversa why small.md, warm, index entry racy": (
                index_written_at(repo, os.stat(repo / "small.md").st_mtime),
                cli("small.md"),
            ),
        },
        args.repeat,
    )
    index_written_at(repo, settled)()
    python = sys.executable  # the venv's: the interpreter of its git-obversa script
    package_root = str(Path(git_obversa.__file__).resolve().parents[1])
    engine_alone = (
        f"import os, sys; sys.path.insert(0, {package_root!r}); "
        "from git_obversa.lookup import blame; blame.lookup('.', 'small.md', rev=None); "
        "os._exit(0)"
    )
    startup = race(
        {
            "git blame --porcelain small.md": command(
                repo, "git", "blame", "--porcelain", "small.md"
            ),
            "python -I -S -c pass": command(repo, python, "-I", "-S", "-c", "pass"),
            "python -c pass": command(repo, python, "-c", "pass", env=env),
            'python -c "import re" (how a script pip generates starts)': command(
                repo, python, "-c", "import re", env=env
            ),
            'python -c "import re, argparse"': command(
                repo, python, "-c", "import re, argparse", env=env
            ),
            "python -I -S, blame.lookup alone, warm": command(
                repo, python, "-I", "-S", "-c", engine_alone
            ),
            "git obversa why small.md, warm": cli("small.md"),
        },
        args.repeat * 3,
    )
    cli(FILE)()  # the whole file's blame cached again, for the single lines
    rng = random.Random(11)
    numbers = sorted(rng.sample(range(1, total + 1), args.lines))
    one: dict[str, list[tuple[float, float]]] = {}
    for n in numbers:
        medians = race(
            {
                "git blame -L n,n notes.md": command(repo, "git", "blame", "-L", f"{n},{n}", FILE),
                "git obversa why notes.md:n, warm": cli(f"{FILE}:{n}"),
                "git obversa why notes.md:n --no-cache": cli(f"{FILE}:{n}", "--no-cache"),
            },
            args.repeat,
        )
        for name, value in medians.items():
            one.setdefault(name, []).append(value)

    traced = {}
    if args.timeline and shutil.which("strace"):
        traced = timeline(repo, {"this install": env}, args.timeline)

    print("load average after: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    for title, results in (
        (f"whole file ({total} lines, {args.commits} commits)", whole),
        ("small file (30 lines, 20 commits)", small),
        ("start-up: what a small-file `why` pays before its lookup", startup),
    ):
        wall_base, cpu_base = next(iter(results.values()))
        rounds = args.repeat * 3 if results is startup else args.repeat
        print(f"\n{title}, median of {rounds} rounds")
        print("| command | wall ms | ratio | minus baseline | CPU ms | ratio | minus baseline |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for name, (wall, cpu) in results.items():
            print(
                f"| `{name}` | {wall * 1000:.0f} | {wall / wall_base:.2f}x "
                f"| {(wall - wall_base) * 1000:+.1f} | {cpu * 1000:.0f} "
                f"| {cpu / cpu_base:.2f}x | {(cpu - cpu_base) * 1000:+.1f} |"
            )
            before.figure(f"{name}, wall", wall * 1000)
            before.figure(f"{name}, CPU", cpu * 1000)
    print(
        f"\none line, {len(numbers)} lines ({numbers[0]}..{numbers[-1]}), "
        f"median of {args.repeat} rounds per line"
    )
    print("| command | total wall ms | ratio of totals | worst line ratio | total CPU ms | ratio |")
    print("|---|---:|---:|---:|---:|---:|")
    base_lines = one["git blame -L n,n notes.md"]
    for name, values in one.items():
        wall = sum(w for w, _ in values)
        cpu = sum(c for _, c in values)
        wall_base = sum(w for w, _ in base_lines)
        cpu_base = sum(c for _, c in base_lines)
        worst = max(v[0] / b[0] for v, b in zip(values, base_lines, strict=True))
        print(
            f"| `{name}` | {wall * 1000:.0f} | {wall / wall_base:.2f}x | {worst:.2f}x "
            f"| {cpu * 1000:.0f} | {cpu / cpu_base:.2f}x |"
        )
        before.figure(f"{name}, {len(numbers)} lines, wall", wall * 1000)
    if args.timeline and not traced:
        print("\n--timeline: strace is not installed; no timeline")
    if traced:
        print(
            f"\ncold `why {FILE}` under strace, median of {args.timeline} runs each "
            "(installs taking turns), ms"
        )
        print("| install | blame starts after the command | program ends after blame | blame |")
        print("|---|---:|---:|---:|")
        for name, (began, after, run) in traced.items():
            print(f"| {name} | {began:.1f} | {after:.1f} | {run:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
