"""Who wrote which lines (issue 28), on the way to other clones: the installed `pre-push`
hook and `memory sync` carry refs/notes/ai and refs/notes/agent-trace to a real bare
remote and back, merging notes both sides wrote, never dropping one."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from git_obversa.attribution import agent_trace, git_ai, travel
from tests.gitutil import git, make_repo, obversa
from tests.test_attribution import FIXTURES, SESSION, agent_note, change_files, commit, note

NOTES = (git_ai.NOTES_REF, agent_trace.NOTES_REF)


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "remote.git", "--bare")


@pytest.fixture
def hooked(repo: Path, remote: Path) -> Path:
    """A repository with the commit hooks, attribution and the pre-push sync hook."""
    git(repo, "remote", "add", "origin", str(remote))
    for args in (["--attribution"], ["--sync"]):
        installed = obversa("install", *args, cwd=repo)
        assert installed.returncode == 0, installed.stderr
    return repo


def clone(tmp_path: Path, remote: Path, name: str) -> Path:
    path = tmp_path / name
    git(tmp_path, "clone", "-q", str(remote), str(path))
    return path


def shows_the_agent(path: Path) -> None:
    shown = obversa("why", "retry.py:2", cwd=path)
    assert shown.returncode == 0, shown.stderr
    assert f"Agent:  claude-code (claude-sonnet-4-5), session {SESSION}" in shown.stdout


def test_a_push_through_the_hook_carries_the_notes_to_a_fresh_clone(hooked, remote, tmp_path):
    agent_note(hooked, "Retries stop after three attempts.")
    change_files(hooked)
    commit(hooked, "-m", "Stop retrying after three attempts")
    pushed = subprocess.run(
        ["git", "push", "-q", "origin", "main"], cwd=hooked, capture_output=True, text=True
    )
    assert pushed.returncode == 0 and "warning" not in pushed.stderr, pushed.stderr
    for ref in NOTES:
        assert git(remote, "rev-parse", ref) == git(hooked, "rev-parse", ref)

    fetched = clone(tmp_path, remote, "fetched")  # plain git: notes are fetched when asked
    git(fetched, "fetch", "-q", "origin", "refs/notes/*:refs/notes/*")
    shows_the_agent(fetched)

    synced = clone(tmp_path, remote, "synced")  # or by memory sync
    assert "Agent:" not in obversa("why", "retry.py:2", cwd=synced).stdout
    done = obversa("memory", "sync", cwd=synced)
    assert done.returncode == 0 and "warning" not in done.stderr, done.stderr
    shows_the_agent(synced)


def test_notes_both_sides_wrote_are_merged_and_none_is_dropped(hooked, remote, tmp_path):
    """Two clones write notes meanwhile, on different commits and on the same one (ours and
    another tool's): after a sync on each side, both have every note, the shared commit's
    as one note of each format that still parses."""
    agent_note(hooked, "Retries stop after three attempts.")
    change_files(hooked)
    commit(hooked, "-m", "Stop retrying after three attempts")
    shared = git(hooked, "rev-parse", "HEAD").strip()
    git(hooked, "push", "-q", "origin", "main")
    other = clone(tmp_path, remote, "other")

    # Here: a new commit with notes. There: another tool's notes on the shared commit,
    # and a commit with a note this reader cannot read.
    agent_note(hooked, "The delay doubles.")
    (hooked / "delay.py").write_text("FACTOR = 2\n")
    git(hooked, "add", "delay.py")
    commit(hooked, "-m", "Back off")
    ours = git(hooked, "rev-parse", "HEAD").strip()
    example = (FIXTURES / "git-ai-example-sessions.note").read_text()
    git(other, "notes", "--ref", "ai", "add", "-m", example, shared)
    (other / "x.txt").write_text("x\n")
    git(other, "add", "x.txt")
    git(other, "commit", "-q", "-m", "Theirs")
    theirs = git(other, "rev-parse", "HEAD").strip()
    git(other, "notes", "--ref", "ai", "add", "-m", "free text, not a log", theirs)

    assert obversa("memory", "sync", cwd=other).returncode == 0  # theirs first
    done = obversa("memory", "sync", cwd=hooked)  # then ours: a true merge
    assert done.returncode == 0 and "warning" not in done.stderr, done.stderr
    assert obversa("memory", "sync", cwd=other).returncode == 0  # and back

    for path in (hooked, other):
        assert git(path, "rev-parse", git_ai.NOTES_REF) == git(
            remote, "rev-parse", git_ai.NOTES_REF
        )
        git(path, "fetch", "-q", "origin", "main")
        assert note(path, git_ai.NOTES_REF, ours).startswith("delay.py\n")
        assert note(path, git_ai.NOTES_REF, theirs) == "free text, not a log\n"
        json.loads(note(path, agent_trace.NOTES_REF, ours))
    combined = git_ai.parse(note(hooked, git_ai.NOTES_REF, shared))  # one log, both sides'
    assert set(combined.metadata["sessions"]) == {SESSION, "s_c9883b05a2487d", "s_e7f2a90b31cc48"}
    assert {"retry.py", "README.md", "src/main.rs", "src/lib.rs"} == set(combined.files)


def test_two_logs_on_one_commit_combine_into_one_that_parses():
    mine = git_ai.AuthorshipLog(
        files={"a.py": [("s_0123456789abcd::t_00000000000001", [(1, 2)])]},
        metadata={
            "schema_version": git_ai.SCHEMA_VERSION,
            "sessions": {"s_0123456789abcd": {"agent_id": {"tool": "claude-code"}}},
        },
    )
    theirs = git_ai.parse((FIXTURES / "git-ai-example-sessions.note").read_text())
    combined = git_ai.parse(
        travel.combine(git_ai.NOTES_REF, git_ai.render(mine), git_ai.render(theirs))
    )
    assert combined.files["a.py"] == mine.files["a.py"]
    for path, entries in theirs.files.items():
        assert combined.files[path] == entries
    assert set(combined.metadata["sessions"]) == {"s_0123456789abcd"} | set(
        theirs.metadata["sessions"]
    )


def test_a_note_neither_format_reads_is_kept_with_the_other_sides():
    assert travel.combine(git_ai.NOTES_REF, "free text\n", "other text\n") == (
        "free text\n\nother text\n"
    )
