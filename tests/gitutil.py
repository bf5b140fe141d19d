"""Helpers for tests that drive real git and the real CLI."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path


def git(cwd: Path | str, *args: str, input: str | None = None, check: bool = True) -> str:
    """Run git in CWD and return stdout; fails the test with git's stderr on error."""
    completed = subprocess.run(["git", *args], cwd=cwd, input=input, capture_output=True, text=True)
    if check and completed.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {completed.stderr}")
    return completed.stdout


def make_repo(path: Path, *args: str, commit: bool = True) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", *args)
    if commit and "--bare" not in args:
        (path / "README.md").write_text("hello\n")
        git(path, "add", "README.md")
        git(path, "commit", "-q", "-m", "initial")
    return path


def every_object(repo: Path) -> dict[str, tuple[str, bytes]]:
    """Every object of REPO, as `git cat-file --batch` prints it: id -> (kind, payload)."""
    ids = git(repo, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)").split()
    out = subprocess.run(
        ["git", "cat-file", "--batch"],
        cwd=repo,
        input=("\n".join(ids) + "\n").encode(),
        capture_output=True,
        check=True,
    ).stdout
    found, position = {}, 0
    for oid in ids:
        end = out.index(b"\n", position)
        _, kind, size = out[position:end].split()
        found[oid] = (kind.decode(), out[end + 1 : end + 1 + int(size)])
        position = end + 2 + int(size)
    return found


def rename_and_grow(repo: Path) -> None:
    """Commit a.py (ten lines, with a why), then rename it to b.py with three new first
    lines: b.py's line 5 was line 2 of a.py."""
    (repo / "a.py").write_text("".join(f"old {n}\n" for n in range(1, 11)))
    git(repo, "add", "a.py")
    git(repo, "commit", "-q", "-m", "Add a", "-m", "Why:\nBecause a.")
    git(repo, "mv", "a.py", "b.py")
    (repo / "b.py").write_text("new 1\nnew 2\nnew 3\n" + (repo / "b.py").read_text())
    git(repo, "commit", "-qam", "Rename and grow")


def settle(repo: Path | str, *names: str) -> None:
    """Date the files NAMES ten seconds back and let git record that in its index (written
    now): their entries are no longer racy (as old as the index file), so git, and
    `git_obversa.repo.index.index_holds`, trust their stat data."""
    past = os.stat(Path(repo) / names[0]).st_mtime - 10
    for name in names:
        os.utime(Path(repo) / name, (past, past))
    git(repo, "update-index", "-q", "--refresh")


def obversa(*args: str, cwd: Path | str, input: str | None = None, env=None):
    """Run the real CLI (`git obversa ...`) and return the completed process."""
    return subprocess.run(
        ["git", "obversa", *args],
        cwd=cwd,
        input=input,
        capture_output=True,
        text=True,
        env=env,
    )


def log_git_calls(directory: Path, monkeypatch) -> Path:
    """Put a `git` first on PATH that appends its arguments (one line per call) to the
    file returned, then runs the real git."""
    real = shutil.which("git")
    log = directory / "git-calls.log"
    wrapper = directory / "logging-bin" / "git"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> "{log}"\nexec "{real}" "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}")
    log.write_text("")
    return log
