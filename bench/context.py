"""The edit hook's cost: `git obversa agent-context claude-code` before an Edit, beside a
bare `python -c pass`, in the same run.

Builds the history of bench/why.py (notes.md: 2,000 commits, half of them carrying a
`Why:` block), picks a line whose commit records reasoning, and times, taking turns
(medians of --repeat):

  python        `python -c pass` with the same interpreter (the floor of any hook)
  hook warm     the hook for an Edit of that line, the file's blame cached (a whole-file
                lookup before each run keeps it, untimed), a new session each run so the
                reasons are rendered and recorded every time
  hook cold     the same with the blame cache emptied before each run
  blame -L      plain `git blame --porcelain -L n,n notes.md` (what a cold hook runs)

Each as wall time and as CPU time (the process's and the git processes it waited for).

A cold run is also traced (GIT_TRACE) to show that it runs one `git blame`, of the
lines concerned (`-L`), not of the whole file. Figures are wall seconds; the machine is
shared, so read the ratios.

Usage: python bench/context.py [--commits 2000] [--repeat 20] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from why import FILE, build, settle_index  # noqa: E402  (bench/why.py's history)

from git_obversa.lookup.blame import lookup  # noqa: E402

PROGRAM = shutil.which("git-obversa") or "git-obversa"


def reasoned_line(repo: Path) -> tuple[int, str]:
    """A line of notes.md whose commit records reasoning: (number, text)."""
    lines: list[tuple[int, str, str]] = []
    commits = lookup(repo, FILE, rev=None, lines=lines)
    for number, sha, text in lines:
        if commits[sha]["reasoning"] and sum(t == text for _, _, t in lines) == 1:
            return number, text
    raise SystemExit("no line with reasoning in notes.md")


def hook(repo: Path, text: str, env: dict[str, str]):
    counter = iter(range(10**9))

    def run() -> None:
        event = {
            "hook_event_name": "PreToolUse",
            "session_id": f"bench-{os.getpid()}-{next(counter)}-{time.time_ns()}",
            "cwd": str(repo),
            "tool_name": "Edit",
            "tool_input": {"file_path": str(repo / FILE), "old_string": text, "new_string": "x"},
        }
        done = subprocess.run(
            [sys.executable, PROGRAM, "agent-context", "claude-code"],
            cwd=repo,
            input=json.dumps(event),
            capture_output=True,
            text=True,
            env=env,
        )
        assert done.returncode == 0 and "additionalContext" in done.stdout, done.stderr

    return run


def plain(args: list[str], repo: Path):
    def run() -> None:
        subprocess.run(args, cwd=repo, check=True, capture_output=True)

    return run


def empty_cache(repo: Path) -> None:
    shutil.rmtree(repo / ".git" / "obversa" / "blame", ignore_errors=True)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def race(contenders: dict, repeat: int) -> dict[str, tuple[float, float]]:
    """Median (wall, CPU) seconds per contender, taking turns; CPU is the processes' own
    and that of the processes they waited for (the hook's git processes)."""
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in contenders}
    for _ in range(repeat):
        for name, (prepare, action) in contenders.items():
            prepare()
            cpu, start = _children_cpu(), time.perf_counter()
            action()
            times[name].append((time.perf_counter() - start, _children_cpu() - cpu))
    return {
        name: (statistics.median(w for w, _ in values), statistics.median(c for _, c in values))
        for name, values in times.items()
    }


def blames_of_a_cold_run(repo: Path, text: str, env: dict[str, str]) -> list[str]:
    empty_cache(repo)
    with tempfile.NamedTemporaryFile("r", suffix=".trace") as trace:
        hook(repo, text, {**env, "GIT_TRACE": trace.name})()
        return [line.split("git ", 1)[1] for line in trace if "built-in: git blame" in line]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--keep", type=Path, help="build (or reuse) the repository here")
    options = parser.parse_args()
    work = options.keep or Path(tempfile.mkdtemp(prefix="obversa-context-bench-"))
    repo = work / "repo"
    if not repo.exists():
        build(repo, options.commits)
        (repo / "small.md").write_text("")
        settle_index(repo)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    number, text = reasoned_line(repo)
    hook(repo, text, env)()  # bytecode compiled, blame cached: untimed
    nothing = lambda: None  # noqa: E731
    results = race(
        {
            "python": (nothing, plain([sys.executable, "-c", "pass"], repo)),
            "hook warm": (lambda: lookup(repo, FILE, rev=None), hook(repo, text, env)),
            "hook cold": (lambda: empty_cache(repo), hook(repo, text, env)),
            "blame -L": (
                nothing,
                plain(["git", "blame", "--porcelain", "-L", f"{number},{number}", FILE], repo),
            ),
        },
        options.repeat,
    )
    floor, floor_cpu = results["python"]
    print(
        f"notes.md: {options.commits} commits; edit of line {number}; medians of {options.repeat}"
    )
    print("               wall             CPU          (ratios to python -c pass)")
    for name, (wall, cpu) in results.items():
        print(
            f"  {name:10s} {wall * 1000:7.1f} ms {wall / floor:5.2f} x"
            f"   {cpu * 1000:6.1f} ms {cpu / floor_cpu:5.2f} x"
        )
    blames = blames_of_a_cold_run(repo, text, env)
    print(f"  a cold run's git blame processes: {len(blames)}: {'; '.join(blames)}")
    verdict = "yes" if results["hook warm"][0] <= 0.100 else "no (a busy machine inflates it)"
    print(f"  warm hook wall <= 100 ms: {verdict}")
    if not options.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
