"""`git obversa demo`: the product end to end in a throwaway repository.

Every step runs the real commands a user would type and prints them with their output,
so the demo doubles as a transcript to copy from.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

RETRY_CODE = """\
def fetch(url, attempts=3):
    for attempt in range(attempts):
        try:
            return get(url, timeout=2)
        except TimeoutError:
            if attempt == attempts - 1:
                raise
"""


class DemoFailed(Exception):
    pass


class Transcript:
    """Runs commands in the demo repository and prints them like a terminal session."""

    def __init__(self, directory: Path, out: TextIO = sys.stdout) -> None:
        self.directory = directory
        self.out = out

    def say(self, text: str) -> None:
        self.out.write("\n" + text + "\n")

    def run(self, args: Sequence[str], input: str | None = None, show: bool = True) -> str:
        if show:
            self.out.write(f"$ {shlex.join(args)}\n")
        completed = subprocess.run(
            list(args), cwd=self.directory, input=input, capture_output=True, text=True
        )
        if completed.returncode != 0:
            raise DemoFailed(f"`{shlex.join(args)}` failed: {completed.stderr.strip()}")
        if show and completed.stdout.strip():
            self.out.write(textwrap.indent(completed.stdout.rstrip("\n"), "  ") + "\n")
        return completed.stdout


def run_demo(keep: bool = False, out: TextIO = sys.stdout) -> Path:
    """Run the demo in a new temporary repository; returns its path (removed unless KEEP)."""
    directory = Path(tempfile.mkdtemp(prefix="obversa-demo-"))
    try:
        _steps(Transcript(directory, out))
    except BaseException:
        if not keep:
            shutil.rmtree(directory, ignore_errors=True)
        raise
    if keep:
        out.write(f"\nThe demo repository is kept at {directory}\n")
    else:
        shutil.rmtree(directory, ignore_errors=True)
    return directory


def _steps(t: Transcript) -> None:
    t.say(f"A throwaway repository at {t.directory}")
    t.run(["git", "init", "-q", "-b", "main"], show=False)
    # The user's global settings must not leak in: no signing prompt, hooks go here.
    for key, value in (
        ("user.name", "Obversa Demo"),
        ("user.email", "demo@example.com"),
        ("commit.gpgsign", "false"),
        ("core.hooksPath", ".git/hooks"),
    ):
        t.run(["git", "config", key, value], show=False)
    (t.directory / "client.py").write_text("def fetch(url):\n    return get(url)\n")
    t.run(["git", "add", "client.py"], show=False)
    t.run(["git", "commit", "-q", "-m", "Add the HTTP client"], show=False)

    t.say("1. Memory: files an agent opens again later, kept in a private ref.")
    t.run(
        ["git", "obversa", "memory", "create", "/memories/decisions.md", "-"],
        input="Retry timeouts, never other errors.\nKeep the public API small.\n",
    )
    t.run(["git", "obversa", "memory", "view", "/memories/decisions.md"])
    t.run(["git", "obversa", "memory", "scopes"])
    t.say("No commit, no branch, nothing in the index or worktree changed:")
    t.run(["git", "status", "--short", "--branch"])
    t.run(["git", "for-each-ref", "--format=%(objecttype) %(refname)", "refs/obversa/"])

    t.say("2. Capture: the writer's reasoning is noted while it works.")
    t.run(["git", "obversa", "install"])
    t.run(
        [
            "git",
            "obversa",
            "record",
            "note",
            "The API times out under load; a retry with a small bound rides out the bursts "
            "without hiding real errors, so only timeouts are retried.",
        ]
    )

    t.say("3. Commit: the prepare-commit-msg hook writes the why into the body.")
    (t.directory / "client.py").write_text(RETRY_CODE)
    t.run(["git", "add", "client.py"])
    t.run(["git", "commit", "-q", "-m", "Retry timeouts when fetching"])
    t.run(["git", "log", "-1", "--format=%B"])

    t.say("4. Later, a reader lands on a line and asks why.")
    t.run(["git", "obversa", "why", "client.py:5"])


def missing_requirement() -> str | None:
    """Why the demo cannot run here, or None."""
    if shutil.which("git") is None:
        return "git is not on PATH; install Git first"
    if shutil.which("git-obversa") is None:
        return "git-obversa is not on PATH; activate the environment you installed it into"
    if os.name != "posix":
        return "the demo's hooks are shell scripts; run it on Linux or macOS"
    return None
