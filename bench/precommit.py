"""What the pre-commit route costs per commit, against the direct install, in one run.

Times `git commit -q -m ...` (one changed file) in three repositories: no hooks; the
shims of `git obversa install`; and the pre-commit framework with the configuration of
docs/reasoning.md (a `repo:` holding this checkout's package, pinned to a commit of it,
`language: python`: pre-commit's own virtualenv, built once before timing). Each with
nothing captured and with one note captured before every commit. Prints medians and the
ratio to the no-hook repository.

    python bench/precommit.py [--runs 11]
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

ROOT = Path(__file__).resolve().parent.parent
NOTE = "Retry twice: the upstream API fails in bursts of two."


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return done.stdout


def publish(path: Path) -> str:
    """A repository holding this checkout's package, as pre-commit fetches it; its HEAD."""
    names = ["pyproject.toml", "README.md", ".pre-commit-hooks.yaml", "man/git-obversa.1"]
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


def commit(path: Path, run: int, note: bool) -> float:
    """Milliseconds of one `git commit` of a changed file (a note captured first)."""
    if note:
        git(path, "obversa", "record", "note", NOTE)
    (path / "file.txt").write_text(f"{run} {note}\n")
    git(path, "add", "file.txt")
    start = time.perf_counter()
    git(path, "commit", "-q", "-m", f"change {run}")
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=11)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        os.environ["PRE_COMMIT_HOME"] = str(base / "pre-commit-home")
        published = base / "published"
        published.mkdir()
        rev = publish(published)
        plain = repository(base / "plain")
        shims = repository(base / "shims")
        git(shims, "obversa", "install")
        framework = repository(base / "framework")
        (framework / ".pre-commit-config.yaml").write_text(
            "default_stages: [pre-commit]\n"
            "default_install_hook_types:"
            " [pre-commit, prepare-commit-msg, commit-msg, post-commit]\n"
            f"repos:\n  - repo: {published}\n    rev: {rev}\n    hooks:\n"
            "      - id: obversa-reasoning\n      - id: obversa-reasoning-edited\n"
            "      - id: obversa-record-commit\n"
        )
        git(framework, "add", ".pre-commit-config.yaml")
        for step in (["pre-commit", "install"], ["pre-commit", "install-hooks"]):
            subprocess.run(step, cwd=framework, check=True, capture_output=True)
        setups = {"no hook": plain, "shims": shims, "pre-commit": framework}
        rows = []
        for note in (False, True):
            times: dict[str, list[float]] = {name: [] for name in setups}
            for run in range(runs):  # interleaved, so a load spike hits every setup alike
                for name, path in setups.items():
                    times[name].append(commit(path, run, note))
            medians = {name: statistics.median(values) for name, values in times.items()}
            rows += [
                (note, name, value, value / medians["no hook"]) for name, value in medians.items()
            ]
    print(f"median of {runs} commits, ms")
    print("| captured | setup | median | ratio |\n|---|---|---|---|")
    for note, name, value, ratio in rows:
        print(f"| {'one note' if note else 'nothing'} | {name} | {value:.1f} | {ratio:.2f} |")


if __name__ == "__main__":
    sys.exit(main())
