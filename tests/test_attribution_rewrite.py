"""Who wrote which lines (issue 28), after history is rewritten: real `git commit
--amend`, `rebase -i` (reword, squash, fixup) and `cherry-pick` with the installed hooks
leave on each new commit a Git AI note that parses by the standard and an Agent Trace
record that validates, over the lines that commit adds."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import jsonschema
import pytest

from git_obversa.attribution import agent_trace, git_ai
from tests.gitutil import git, obversa
from tests.test_attribution import SCHEMA, SESSION, agent_note, attested, commit, note

OTHER = ("--agent", "codex", "--session", "conv-b2", "--model", "gpt-5-codex")


@pytest.fixture
def attributed(repo: Path) -> Path:
    installed = obversa("install", "--attribution", cwd=repo)
    assert installed.returncode == 0, installed.stderr
    return repo


def agent_commit(repo: Path, path: str, text: str, message: str, who=None) -> str:
    """A commit of the agent's: a captured turn, then PATH appended with TEXT."""
    agent_note(repo, f"{message}.", **({"who": who} if who else {}))
    with open(repo / path, "a") as handle:
        handle.write(text)
    git(repo, "add", path)
    commit(repo, "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


def person_commit(repo: Path, path: str, text: str, message: str) -> str:
    with open(repo / path, "a") as handle:
        handle.write(text)
    git(repo, "add", path)
    commit(repo, "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


def both_notes(repo: Path, rev: str = "HEAD") -> tuple[git_ai.AuthorshipLog, dict]:
    """HEAD's notes, checked: the Git AI note parses and names this commit, the Agent
    Trace record validates and names it too."""
    sha = git(repo, "rev-parse", rev).strip()
    log = git_ai.parse(note(repo, git_ai.NOTES_REF, rev))
    assert log.metadata["base_commit_sha"] == sha
    record = json.loads(note(repo, agent_trace.NOTES_REF, rev))
    jsonschema.validate(record, SCHEMA)
    assert record["vcs"]["revision"] == sha
    return log, record


def contributors(record: dict, path: str) -> dict[str, list[tuple[int, int]]]:
    """{contributor type: its ranges} of PATH in an Agent Trace record."""
    found: dict[str, list[tuple[int, int]]] = {}
    for file in record["files"]:
        if file["path"] == path:
            for entry in file["conversations"]:
                found.setdefault(entry["contributor"]["type"], []).extend(
                    (r["start_line"], r["end_line"]) for r in entry["ranges"]
                )
    return found


def rebase_i(repo: Path, onto: str, script: str, message: str | None = None) -> None:
    """`git rebase -i ONTO` with the todo list rewritten by SCRIPT (a sed program) and
    each message editor writing MESSAGE (or keeping what git offers)."""
    editor = ":" if message is None else f"printf '%s\\n' '{message}' >"
    environment = {**os.environ, "GIT_SEQUENCE_EDITOR": f"sed -i -e '{script}'"}
    environment["GIT_EDITOR"] = editor
    done = subprocess.run(
        ["git", "rebase", "-q", "-i", onto], cwd=repo, capture_output=True, text=True,
        env=environment,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr, done.stderr


def test_a_rebase_onto_moved_lines_recomputes_the_ranges(attributed):
    repo = attributed
    person_commit(repo, "retry.py", "VERSION = 1\n", "Version")
    agent_commit(repo, "retry.py", "ATTEMPTS = 3\nDELAY = 0.1\n", "Retry three times")
    assert attested(both_notes(repo)[0]) == {"retry.py": [(2, 3)]}
    git(repo, "switch", "-q", "-c", "feature")
    git(repo, "switch", "-q", "main")
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    (repo / "retry.py").write_text("# retries\n# settings\nVERSION = 1\n")  # moves the lines
    git(repo, "commit", "-q", "-am", "Header")
    git(repo, "switch", "-q", "feature")
    written = git(repo, "rev-list", "--count", git_ai.NOTES_REF)
    git(repo, "rebase", "-q", "main")
    # git's copy (notes.rewriteRef), then post-rewrite's, once for the whole rebase: its
    # picks are not taken for cherry-picks.
    assert int(git(repo, "rev-list", "--count", git_ai.NOTES_REF)) == int(written) + 2
    log, record = both_notes(repo)
    assert attested(log) == {"retry.py": [(4, 5)]}
    assert contributors(record, "retry.py") == {"ai": [(4, 5)]}


def test_reword_keeps_the_notes_and_fixup_of_a_persons_commit_is_not_claimed(attributed):
    repo = attributed
    base = git(repo, "rev-parse", "HEAD").strip()
    agent_commit(repo, "retry.py", "ATTEMPTS = 3\nDELAY = 0.1\n", "Retry three times")
    rebase_i(repo, base, "1s/^pick/reword/", "Retry thrice")
    assert git(repo, "log", "-1", "--format=%s") == "Retry thrice\n"
    log, record = both_notes(repo)
    assert attested(log) == {"retry.py": [(1, 2)]}
    assert list(log.metadata["sessions"]) == [SESSION]

    # A person's fixup folded in: their line is the agent's in neither note.
    person_commit(repo, "retry.py", "LIMIT = 10\n", "fixup! Retry thrice")
    rebase_i(repo, base, "2s/^pick/fixup/")
    assert git(repo, "rev-list", "--count", f"{base}..HEAD") == "1\n"
    log, record = both_notes(repo)
    assert attested(log) == {"retry.py": [(1, 2)]}
    assert contributors(record, "retry.py") == {"ai": [(1, 2)], "unknown": [(3, 3)]}


def test_squash_of_two_agents_commits_is_one_note_by_the_standard(attributed):
    repo = attributed
    base = git(repo, "rev-parse", "HEAD").strip()
    agent_commit(repo, "retry.py", "ATTEMPTS = 3\n", "Retry three times")
    agent_commit(repo, "retry.py", "DELAY = 0.1\nFACTOR = 2\n", "Back off", who=OTHER)
    rebase_i(repo, base, "2s/^pick/squash/", "Retry three times, backing off")
    log, record = both_notes(repo)  # one note that parses, not two glued together
    codex = git_ai.session_id("codex", "conv-b2")
    assert {key.split("::")[0]: ranges for key, ranges in log.files["retry.py"]} == {
        SESSION: [(1, 1)],
        codex: [(2, 3)],
    }
    assert set(log.metadata["sessions"]) == {SESSION, codex}
    models = {
        entry["contributor"]["model_id"]: entry["ranges"]
        for entry in record["files"][0]["conversations"]
    }
    assert models == {
        "claude-sonnet-4-5": [{"start_line": 1, "end_line": 1}],
        "gpt-5-codex": [{"start_line": 2, "end_line": 3}],
    }
    shown = obversa("why", "retry.py:3", cwd=repo).stdout
    assert "Agent:  codex (gpt-5-codex)" in shown


def test_cherry_pick_carries_the_notes_to_the_picked_commits(attributed):
    repo = attributed
    git(repo, "switch", "-q", "-c", "topic")
    agent_commit(repo, "retry.py", "ATTEMPTS = 3\nDELAY = 0.1\n", "Retry three times")
    agent_commit(repo, "delay.py", "FACTOR = 2\n", "Back off", who=OTHER)
    git(repo, "switch", "-q", "main")
    person_commit(repo, "other.py", "x = 1\n", "Meanwhile")
    picked = subprocess.run(
        ["git", "cherry-pick", "main..topic"], cwd=repo, capture_output=True, text=True
    )
    assert picked.returncode == 0 and "warning" not in picked.stderr, picked.stderr
    assert git(repo, "rev-parse", "HEAD") != git(repo, "rev-parse", "topic")
    log, record = both_notes(repo, "HEAD~1")
    assert attested(log) == {"retry.py": [(1, 2)]}
    assert contributors(record, "retry.py") == {"ai": [(1, 2)]}
    log, record = both_notes(repo)
    assert attested(log) == {"delay.py": [(1, 1)]}
    assert (
        "Agent:  claude-code (claude-sonnet-4-5)" in obversa("why", "retry.py:1", cwd=repo).stdout
    )
    assert "Agent:  codex (gpt-5-codex)" in obversa("why", "delay.py:1", cwd=repo).stdout


def test_cherry_pick_committed_by_hand_after_a_conflict(attributed):
    repo = attributed
    git(repo, "switch", "-q", "-c", "topic")
    agent_commit(repo, "retry.py", "ATTEMPTS = 3\nDELAY = 0.1\n", "Retry three times")
    git(repo, "switch", "-q", "main")
    person_commit(repo, "retry.py", "ATTEMPTS = 5\n", "Five attempts")
    stopped = subprocess.run(["git", "cherry-pick", "topic"], cwd=repo, capture_output=True)
    assert stopped.returncode != 0  # the conflict
    (repo / "retry.py").write_text("ATTEMPTS = 4\nDELAY = 0.1\n")
    git(repo, "add", "retry.py")
    commit(repo, "--no-edit")
    log, record = both_notes(repo)
    # The resolved line is the person's; the line taken as the agent wrote it is the agent's.
    assert contributors(record, "retry.py") == {"unknown": [(1, 1)], "ai": [(2, 2)]}
    assert attested(log) == {"retry.py": [(2, 2)]}


def test_nothing_is_carried_where_attribution_is_unset(repo):
    assert obversa("install", cwd=repo).returncode == 0
    agent_commit(repo, "retry.py", "ATTEMPTS = 3\n", "Retry three times")
    git(repo, "switch", "-q", "-c", "topic")
    git(repo, "switch", "-q", "main")
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    person_commit(repo, "other.py", "x = 1\n", "Meanwhile")
    git(repo, "cherry-pick", "topic")
    git(repo, "rebase", "-q", "HEAD~1", "--exec", "true")
    assert git(repo, "for-each-ref", "refs/notes") == ""


def test_lines_rebased_onto_a_renamed_file_keep_their_claim(attributed):
    repo = attributed
    person_commit(repo, "retry.py", "VERSION = 1\nNAME = 'retry'\nOWNER = 'ops'\n", "Version")
    agent_commit(repo, "retry.py", "ATTEMPTS = 3\n", "Retry three times")
    git(repo, "switch", "-q", "-c", "feature")
    git(repo, "switch", "-q", "main")
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    git(repo, "mv", "retry.py", "backoff.py")
    git(repo, "commit", "-q", "-m", "Rename")
    git(repo, "switch", "-q", "feature")
    git(repo, "rebase", "-q", "main")
    log, record = both_notes(repo)
    assert attested(log) == {"backoff.py": [(4, 4)]}
    assert contributors(record, "backoff.py") == {"ai": [(4, 4)]}


def test_an_amend_without_turns_keeps_the_agent_s_lines_and_claims_none_of_the_person_s(
    attributed,
):
    repo = attributed
    agent_commit(repo, "retry.py", "ATTEMPTS = 3\nDELAY = 0.1\n", "Retry three times")
    (repo / "retry.py").write_text("# by hand\nATTEMPTS = 3\nDELAY = 0.1\n")
    git(repo, "add", "retry.py")
    commit(repo, "--amend", "--no-edit")
    log, record = both_notes(repo)  # rewritten for the amended commit, by post-rewrite
    assert attested(log) == {"retry.py": [(2, 3)]}
    assert contributors(record, "retry.py") == {"unknown": [(1, 1)], "ai": [(2, 3)]}
