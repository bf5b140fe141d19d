"""What a one-shot command's process loads before it answers (issue 14, item 3).

An agent without MCP starts `git obversa memory ...` or `git obversa why ...` once per
command, so their start is held to what they use. Each test runs the `git-obversa`
program of this checkout (bin/git-obversa, what an install puts on PATH) under
`python -S -X importtime`: without `site`, whose own imports (an editable install's
finder imports `re`, `urllib`, `pathlib`) would hide ours, every module the program
loads is listed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.gitutil import git, obversa

ROOT = Path(__file__).resolve().parents[1]
PROGRAM = ROOT / "bin" / "git-obversa"

# Machinery neither kind of command uses on its usual command lines: argparse (which
# imports `re`, `enum`, `gettext`, `locale`), `shutil` (with bz2, lzma), `typing`, the
# dataclasses module, `subprocess`, threads, `json` (not even for --json), hashlib
# (which loads OpenSSL), and the Python modules `collections` and `operator`.
NEVER = {"argparse", "re", "enum", "gettext", "locale", "shutil", "bz2", "lzma", "typing"}
NEVER |= {"dataclasses", "inspect", "subprocess", "threading", "json", "hashlib", "_hashlib"}
NEVER |= {"collections", "operator"}


def started(*args: str, cwd: Path) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Run the program with ARGS in CWD; (the process, the modules it imported)."""
    completed = run(*args, cwd=cwd, options=("-X", "importtime"))
    modules = {
        line.rsplit("|", 1)[1].strip()
        for line in completed.stderr.splitlines()
        if line.startswith("import time:")
    }
    return completed, modules


def run(*args: str, cwd: Path, options: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-S", *options, PROGRAM, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
    )


@pytest.fixture
def history(repo: Path) -> Path:
    (repo / "notes.md").write_text("one\ntwo\n")
    git(repo, "add", "notes.md")
    git(repo, "commit", "-q", "-m", "Notes\n\nWhy:\nA reader needs them.")
    return repo


@pytest.mark.parametrize(
    "args",
    [["why", "notes.md"], ["why", "--rev", "HEAD", "notes.md:2", "--json"], ["blame", "notes.md"]],
)
def test_a_lookup_from_the_cache_imports_neither_argparse_nor_re(history, args):
    whole = [word.removesuffix(":2") for word in args if word != "--json"]
    assert obversa(*whole, cwd=history).returncode == 0  # the file's blame cached
    completed, modules = started(*args, cwd=history)
    assert completed.returncode == 0, completed.stderr
    assert "A reader needs them." in completed.stdout
    assert "git_obversa.lookup.blame" in modules  # the profile did list the imports
    assert not NEVER & modules


def test_a_warm_why_loads_no_module_it_can_do_without(history):
    """Each module costs a fresh process ~0.2 ms (docs/benchmarks.md, "Blame lookup"): a
    warm `why FILE` loads neither `__future__` (no module on its path asks for it), nor
    itertools, nor zlib (the entry's checksum is `lean.checksum`), nor any module
    of the repository floor but the readers of its location, HEAD and index."""
    assert obversa("why", "notes.md", cwd=history).returncode == 0  # the file's blame cached
    completed, modules = started("why", "notes.md", cwd=history)
    assert completed.returncode == 0, completed.stderr
    assert "git_obversa.repo.location" in modules
    assert not {"__future__", "itertools", "zlib", "binascii"} & modules
    assert {m for m in modules if m.startswith("git_obversa.lookup.")} == {
        f"git_obversa.lookup.{name}" for name in ("head_start", "cache", "blame")
    }
    assert {m for m in modules if m.startswith("git_obversa.repo.")} <= {
        f"git_obversa.repo.{name}" for name in ("git", "location", "refs", "index", "varint")
    }


@pytest.mark.parametrize(
    "args",
    [
        ["view", "/memories/a.md"],
        ["view", "a.md", "-r", "1", "-1", "--limits", '{"max_files": 8}', "--json"],
        ["str-replace", "/memories/a.md", "first", "second"],
        ["create", "/memories/b.md", "new text", "--scope", "default"],
    ],
)
def test_a_one_shot_memory_command_imports_neither_argparse_nor_re(repo, args):
    assert obversa("memory", "create", "a.md", "first line\n", cwd=repo).returncode == 0
    completed, modules = started("memory", *args, cwd=repo)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip()
    assert "git_obversa.repo.objects" in modules
    assert not NEVER & modules  # a write of one command hashes with CPython's own SHA-1


# The package modules a one-shot `memory view` loads: the CLI, the port and its engine,
# the Git adapter's reader of format 1, and of the repository floor what reads objects
# and refs (locks for `gc.pid`). A command that writes adds the writers, no more.
MEMORY_READ = {"git_obversa", "git_obversa.memory", "git_obversa.lean", "git_obversa.repo"}
MEMORY_READ |= {f"git_obversa.cli.{name}" for name in ("commands", "memory")} | {"git_obversa.cli"}
MEMORY_READ |= {f"git_obversa.lean.{name}" for name in ("builtin", "record", "grammar", "jsonscan")}
MEMORY_READ |= {
    f"git_obversa.repo.{name}" for name in ("git", "locks", "varint", "objects", "refs")
}
MEMORY_READ |= {
    f"git_obversa.memory.{name}"
    for name in ("port", "paths", "engine", "names", "ref_names", "store_errors", "store_git")
    + ("gitstore", "scope_tree", "git_memory")
}
MEMORY_WRITE = {"scope_build", "history_commits"}


def test_a_one_shot_view_loads_none_of_the_modules_that_write(repo):
    assert obversa("memory", "create", "a.md", "first line\n", cwd=repo).returncode == 0
    completed, modules = started("memory", "view", "/memories/a.md", cwd=repo)
    assert completed.returncode == 0 and "first line" in completed.stdout
    assert {m for m in modules if m.startswith("git_obversa")} == MEMORY_READ
    completed, modules = started("memory", "str-replace", "a.md", "first", "second", cwd=repo)
    assert completed.returncode == 0, completed.stderr
    assert {m for m in modules if m.startswith("git_obversa")} == MEMORY_READ | {
        f"git_obversa.memory.{name}" for name in MEMORY_WRITE
    } | {"git_obversa.repo.reflog"}


def test_help_and_usage_errors_still_come_from_argparse(repo):
    completed, modules = started("memory", "view", "-h", cwd=repo)
    assert completed.returncode == 0 and "usage: git obversa memory view" in completed.stdout
    assert "argparse" in modules
    completed = run("memory", "view", "a.md", "-r", "3", "1", cwd=repo)
    assert completed.returncode == 2
    assert "argument -r/--range: 3 1 is not a range of lines" in completed.stderr
    # Found after the quick reading: the command's parser is built to report it.
    completed = run("why", "notes.md:0", cwd=repo)
    assert completed.returncode == 2
    assert completed.stderr.startswith("usage: git obversa why [-h]")


# --- an agent's hook: it runs at every response and before every git command -----------------

TRANSCRIPT = ROOT / "fixtures" / "transcripts" / "claude-code-session.jsonl"


def test_an_agent_hook_captures_and_scrubs_without_the_machinery_it_can_do_without(repo, tmp_path):
    # Run as installed, with `site` (the secret engine is an installed package): the
    # capture scrubs with the engine, composes ahead, and loads no command-line parser,
    # no dataclasses or typing, and not the engine's Python wrapper (its library only).
    # (A note first: the first process that scrubs indexes the engine's rules.)
    assert obversa("install", cwd=repo).returncode == 0
    assert obversa("record", "note", "Kept the retries.", cwd=repo).returncode == 0
    transcript = tmp_path / "session.jsonl"
    token = "ghp_R2c9xQ7mB4nK8vL1pZ6tY3wE5sD0fG9hJ2kA"
    transcript.write_text(
        TRANSCRIPT.read_text().replace("Retries now stop after 3 attempts", f"Revoked {token}")
    )
    event = {"hook_event_name": "Stop", "transcript_path": str(transcript), "cwd": str(repo)}
    completed = subprocess.run(
        [sys.executable, "-X", "importtime", PROGRAM, "agent-hook", "claude-code"],
        input=json.dumps(event),
        cwd=repo,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert completed.returncode == 0
    modules = {
        line.rsplit("|", 1)[1].strip()
        for line in completed.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert "git_obversa.record.composition" in modules  # composed ahead of the commit
    assert "git_obversa.lean.secrets_library" in modules
    assert not {"argparse", "typing", "dataclasses", "inspect", "betterleaks"} & modules
    shown = obversa("record", "show", "--raw", "--json", cwd=repo)
    texts = [turn["text"] for turn in json.loads(shown.stdout)]
    assert any("Revoked [redacted]" in text for text in texts) and token not in shown.stdout
