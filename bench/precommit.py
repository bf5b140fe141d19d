"""What the pre-commit route costs per commit, against the direct install, in one run.

Times `git commit -q -m ...` (one changed file) in four repositories: no hooks; the
shims of `git obversa install`; the pre-commit framework with the configuration of
docs/reasoning.md (a `repo:` holding this checkout's package, pinned to a commit of it,
`language: python`: pre-commit's own virtualenv, built once before timing; hook types
pre-commit and commit-msg, the one hook obversa-reasoning); and, for comparison, the
route before it was one hook (three hooks: prepare-commit-msg, commit-msg, post-commit,
from a commit of the same package whose manifest offers them). Each with nothing
captured and with one note captured before every commit. Prints medians, the ratio to
the no-hook repository, and the lines each commit printed.

    python bench/precommit.py [--runs 11] [--before REV]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import before  # noqa: E402  (bench/before.py, beside this script)

ROOT = before.tree()  # the checkout whose package pre-commit installs
NOTE = "Retry twice: the upstream API fails in bursts of two."


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return done.stdout


# The manifest of the route before it was one hook: the same package, three hook stages.
THREE_HOOKS = "".join(
    f"- id: {name}\n  name: {name}\n  entry: git-obversa hook {hook}\n  language: python\n"
    f"  stages: [{hook}]\n  always_run: true\n  pass_filenames: {hook != 'post-commit'}\n"
    for name, hook in (
        ("obversa-reasoning", "prepare-commit-msg"),
        ("obversa-reasoning-edited", "commit-msg"),
        ("obversa-record-commit", "post-commit"),
    )
)


def publish(path: Path) -> str:
    """A repository holding this checkout's package, as pre-commit fetches it; its HEAD."""
    names = ["pyproject.toml", "README.md", ".pre-commit-hooks.yaml", "man/git-obversa.1"]
    names += ["bin/git-obversa"]  # pyproject names it as the script to install
    names += [
        str(p.relative_to(ROOT))
        for p in (ROOT / "git_obversa").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    ]
    for name in names:
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / name, path / name)
    git(path, "init", "-q")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "publish")
    return git(path, "rev-parse", "HEAD").strip()


def repository(path: Path) -> Path:
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "file.txt").write_text("0\n")
    git(path, "add", "file.txt")
    git(path, "commit", "-q", "-m", "initial")
    return path


def framework(path: Path, published: Path, rev: str, types: str, ids: list[str]) -> Path:
    """A repository using PUBLISHED at REV with pre-commit (hook types TYPES, hook IDS)."""
    repository(path)
    (path / ".pre-commit-config.yaml").write_text(
        f"default_stages: [pre-commit]\ndefault_install_hook_types: [{types}]\n"
        f"repos:\n  - repo: {published}\n    rev: {rev}\n    hooks:\n"
        + "".join(f"      - id: {id}\n" for id in ids)
    )
    git(path, "add", ".pre-commit-config.yaml")
    for step in (["pre-commit", "install"], ["pre-commit", "install-hooks"]):
        subprocess.run(step, cwd=path, check=True, capture_output=True)
    return path


def commit(path: Path, run: int, note: bool) -> tuple[float, int]:
    """Milliseconds of one `git commit` of a changed file (a note captured first), and
    the lines it printed."""
    if note:
        git(path, "obversa", "record", "note", NOTE)
    (path / "file.txt").write_text(f"{run} {note}\n")
    git(path, "add", "file.txt")
    start = time.perf_counter()
    done = subprocess.run(
        ["git", "commit", "-q", "-m", f"change {run}"],
        cwd=path,
        check=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return (time.perf_counter() - start) * 1000, len(done.stdout.splitlines())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=11)
    before.add_arguments(parser)
    args = parser.parse_args()
    if before.side_by_side(args):
        return
    runs = args.runs
    load = f"{os.getloadavg()[0]:.1f}"
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        os.environ["PRE_COMMIT_HOME"] = str(base / "pre-commit-home")
        published = base / "published"
        published.mkdir()
        rev = publish(published)
        (published / ".pre-commit-hooks.yaml").write_text(THREE_HOOKS)
        git(published, "commit", "-q", "-am", "the three hooks")
        three_rev = git(published, "rev-parse", "HEAD").strip()
        shims = repository(base / "shims")
        git(shims, "obversa", "install")
        ids = ["obversa-reasoning", "obversa-reasoning-edited", "obversa-record-commit"]
        setups = {
            "no hook": repository(base / "plain"),
            "shims": shims,
            "pre-commit, one hook": framework(
                base / "one", published, rev, "pre-commit, commit-msg", ids[:1]
            ),
            "pre-commit, three hooks (before)": framework(
                base / "three",
                published,
                three_rev,
                "pre-commit, prepare-commit-msg, commit-msg, post-commit",
                ids,
            ),
        }
        rows = []
        for note in (False, True):
            times: dict[str, list[float]] = {name: [] for name in setups}
            lines: dict[str, set[int]] = {name: set() for name in setups}
            for run in range(runs):  # interleaved, so a load spike hits every setup alike
                for name, path in setups.items():
                    took, printed = commit(path, run, note)
                    times[name].append(took)
                    lines[name].add(printed)
            medians = {name: statistics.median(values) for name, values in times.items()}
            rows += [
                (note, name, value, value / medians["no hook"], lines[name])
                for name, value in medians.items()
            ]
    after = f"{os.getloadavg()[0]:.1f}"
    print(f"median of {runs} commits, ms; load average {load} before, {after} after")
    print("| captured | setup | median | ratio | lines printed |\n|---|---|---|---|---|")
    for note, name, value, ratio, printed in rows:
        captured = "one note" if note else "nothing"
        shown = ", ".join(map(str, sorted(printed)))
        print(f"| {captured} | {name} | {value:.1f} | {ratio:.2f} | {shown} |")
        before.figure(f"{captured} captured, {name}", value)


if __name__ == "__main__":
    sys.exit(main())
