"""Who wrote which lines (issue 28): real commits with captured agent turns leave a Git AI
v3 note under refs/notes/ai and an Agent Trace record under refs/notes/agent-trace, which
follow amend, rebase, push and fetch, and `why` reads them (or another tool's) back."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from git_obversa.attribution import agent_trace, git_ai
from git_obversa.record.turns import TurnStore
from tests.gitutil import git, make_repo, obversa

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "attribution"
SCHEMA = json.loads((FIXTURES / "agent-trace-trace-record.schema.json").read_text())
README_SCHEMA = json.loads((FIXTURES / "agent-trace-readme-schema.json").read_text())
AGENT = ("--agent", "claude-code", "--session", "conv-7f3a", "--model", "claude-sonnet-4-5")
SESSION = "s_" + hashlib.sha256(b"claude-code:conv-7f3a").hexdigest()[:14]


@pytest.fixture
def attributed(repo: Path) -> Path:
    completed = obversa("install", "--attribution", cwd=repo)
    assert completed.returncode == 0, completed.stderr
    assert git(repo, "config", "obversa.attribution") == "git-ai,agent-trace\n"
    assert git(repo, "config", "--get-all", "notes.rewriteRef").split() == [
        "refs/notes/ai",
        "refs/notes/agent-trace",
    ]
    return repo


def note(repo: Path, ref: str, rev: str = "HEAD") -> str:
    return git(repo, "notes", "--ref", ref, "show", rev)


def agent_note(repo: Path, *texts: str, who: tuple[str, ...] = AGENT) -> None:
    for text in texts:
        done = obversa("record", "note", *who, text, cwd=repo)
        assert done.returncode == 0, done.stderr


def commit(repo: Path, *args: str, editor: str = ":") -> None:
    environment = {**os.environ, "GIT_EDITOR": editor}
    done = subprocess.run(
        ["git", "commit", "-q", *args], cwd=repo, capture_output=True, text=True, env=environment
    )
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr, done.stderr


def change_files(repo: Path) -> dict[str, list[tuple[int, int]]]:
    """A new file and a line inserted into README.md: the ranges the commit will add."""
    (repo / "retry.py").write_text("ATTEMPTS = 3\nDELAY = 0.1\n\n\ndef backoff(n):\n    return n\n")
    (repo / "README.md").write_text("hello\nretries stop after 3 attempts\n")
    git(repo, "add", "retry.py", "README.md")
    return {"README.md": [(2, 2)], "retry.py": [(1, 6)]}


def attested(log: git_ai.AuthorshipLog) -> dict[str, list[tuple[int, int]]]:
    return {
        path: [r for _, ranges in entries for r in ranges] for path, entries in log.files.items()
    }


def editor_script(tmp_path: Path) -> str:
    script = tmp_path / "editor.sh"
    script.write_text(
        '#!/bin/sh\nprintf "Stop retrying after three attempts\\n" > "$1.new"\n'
        'cat "$1" >> "$1.new" && mv "$1.new" "$1"\n'
    )
    script.chmod(0o755)
    return str(script)


@pytest.mark.parametrize("route", ["message", "editor"])
def test_commit_with_agent_turns_carries_both_notes(attributed, tmp_path, route):
    repo = attributed
    agent_note(repo, "Retries stop after three attempts: the gateway fails in bursts.")
    added = change_files(repo)
    if route == "message":  # composed ahead: the shims alone, Python only for the notes
        commit(repo, "-m", "Stop retrying after three attempts")
    else:  # the editor: prepare-commit-msg and commit-msg in Python
        commit(repo, editor=editor_script(tmp_path))
    head = git(repo, "rev-parse", "HEAD").strip()
    assert "Why:" in git(repo, "log", "-1", "--format=%B")

    log = git_ai.parse(note(repo, git_ai.NOTES_REF))
    assert attested(log) == added
    keys = {key for entries in log.files.values() for key, _ in entries}
    assert len(keys) == 1 and keys.pop().startswith(SESSION + "::t_")
    assert log.metadata["schema_version"] == "authorship/3.0.0"
    assert log.metadata["base_commit_sha"] == head
    assert log.metadata["sessions"][SESSION]["agent_id"] == {
        "tool": "claude-code",
        "id": "conv-7f3a",
        "model": "claude-sonnet-4-5",
    }

    record = json.loads(note(repo, agent_trace.NOTES_REF))
    jsonschema.validate(
        record, SCHEMA, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    assert record["vcs"] == {"type": "git", "revision": head}
    files = {f["path"]: f["conversations"] for f in record["files"]}
    assert {
        path: [(r["start_line"], r["end_line"]) for r in c[0]["ranges"]]
        for path, c in files.items()
    } == added
    assert {c[0]["contributor"]["type"] for c in files.values()} == {"ai"}

    assert git(repo, "status", "--porcelain") == ""  # notes only: the worktree stays clean
    assert TurnStore.for_worktree(repo).read() == []
    assert not (repo / ".git/obversa/record/attribute").exists()
    # The notes are written before post-commit keeps the claimed turns: the commit's
    # whole record is there too, naming the same agent.
    shown = json.loads(obversa("record", "show", "HEAD", "--json", cwd=repo).stdout)
    assert [turn["text"] for turn in shown["turns"]] == [
        "Retries stop after three attempts: the gateway fails in bursts."
    ]
    assert {key: shown["turns"][0][key] for key in ("agent", "session", "model")} == {
        "agent": "claude-code",
        "session": "conv-7f3a",
        "model": "claude-sonnet-4-5",
    }


def test_a_claude_code_session_names_itself_in_the_notes(attributed, tmp_path):
    """Captured from a Claude Code transcript by its Stop hook: the session and model
    come from the transcript, as Claude Code wrote it."""
    transcript = tmp_path / "session.jsonl"
    transcript.write_text((FIXTURES.parent / "transcripts/claude-code-session.jsonl").read_text())
    conversation = "6513270e-269e-4d37-b2a7-4de452e6b438"
    event = {"session_id": conversation, "transcript_path": str(transcript)}
    event |= {"cwd": str(attributed), "hook_event_name": "Stop", "stop_hook_active": False}
    done = obversa("agent-hook", "claude-code", cwd=attributed, input=json.dumps(event))
    assert done.returncode == 0, done.stderr
    added = change_files(attributed)
    commit(attributed, "-m", "Give the payments client a retry budget")

    log = git_ai.parse(note(attributed, git_ai.NOTES_REF))
    session = "s_" + hashlib.sha256(f"claude-code:{conversation}".encode()).hexdigest()[:14]
    assert log.metadata["sessions"][session]["agent_id"] == {
        "tool": "claude-code",
        "id": conversation,
        "model": "claude-sonnet-4-20250514",
    }
    assert attested(log) == added
    shown = obversa("why", "retry.py:1", cwd=attributed).stdout
    assert f"claude-code (claude-sonnet-4-20250514), session {session}" in shown


def test_lines_a_person_may_have_written_are_never_claimed_as_ai(attributed):
    repo = attributed
    agent_note(repo, "Retries stop after three attempts.")
    agent_note(repo, "I also renamed the constant by hand.", who=())
    change_files(repo)
    commit(repo, "-m", "Stop retrying after three attempts")

    log = git_ai.parse(note(repo, git_ai.NOTES_REF))
    assert log.files == {}  # untracked, by the standard: not attested to the agent
    assert SESSION in log.metadata["sessions"]
    record = json.loads(note(repo, agent_trace.NOTES_REF))
    jsonschema.validate(record, SCHEMA)
    kinds = {c["contributor"]["type"] for f in record["files"] for c in f["conversations"]}
    assert kinds == {"mixed"}
    shown = obversa("why", "retry.py:1", cwd=repo).stdout
    assert "claude-code (claude-sonnet-4-5)" in shown and "mixed" in shown


def test_notes_follow_amend_and_rebase(attributed):
    repo = attributed
    agent_note(repo, "Retries stop after three attempts.")
    change_files(repo)
    commit(repo, "-m", "Stop retrying after three attempts")
    first = git(repo, "rev-parse", "HEAD").strip()

    commit(repo, "--amend", "-m", "Stop retrying after three attempts (amended)")
    amended = git(repo, "rev-parse", "HEAD").strip()
    assert amended != first
    assert attested(git_ai.parse(note(repo, git_ai.NOTES_REF))) == {
        "README.md": [(2, 2)],
        "retry.py": [(1, 6)],
    }
    jsonschema.validate(json.loads(note(repo, agent_trace.NOTES_REF)), SCHEMA)

    # An amend that brings new turns of the same session: one note, both sets of lines.
    agent_note(repo, "The delay doubles on each attempt.")
    (repo / "retry.py").write_text((repo / "retry.py").read_text() + "FACTOR = 2\n")
    git(repo, "add", "retry.py")
    commit(repo, "--amend", "-m", "Stop retrying after three attempts, back off")
    log = git_ai.parse(note(repo, git_ai.NOTES_REF))  # parses: not two notes glued together
    assert attested(log) == {"README.md": [(2, 2)], "retry.py": [(1, 7)]}
    assert git(repo, "notes", "--ref", git_ai.NOTES_REF, "list", amended, check=False) == ""

    # Rebase onto a commit made meanwhile on main: both notes on the rebased commit.
    git(repo, "checkout", "-q", "-b", "feature")
    git(repo, "checkout", "-q", "main")
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    (repo / "NOTES.txt").write_text("elsewhere\n")
    git(repo, "add", "NOTES.txt")
    git(repo, "commit", "-q", "-m", "Unrelated")
    before = git(repo, "rev-parse", "feature").strip()
    git(repo, "rebase", "-q", "main", "feature")
    rebased = git(repo, "rev-parse", "HEAD").strip()
    assert rebased != before
    assert attested(git_ai.parse(note(repo, git_ai.NOTES_REF))) == {
        "README.md": [(2, 2)],
        "retry.py": [(1, 7)],
    }
    jsonschema.validate(json.loads(note(repo, agent_trace.NOTES_REF)), SCHEMA)


def test_notes_travel_to_a_fresh_clone_where_why_shows_the_agent(attributed, tmp_path):
    repo = attributed
    agent_note(repo, "Retries stop after three attempts.")
    change_files(repo)
    commit(repo, "-m", "Stop retrying after three attempts")
    remote = make_repo(tmp_path / "remote.git", "--bare")
    git(repo, "remote", "add", "origin", str(remote))
    git(repo, "push", "-q", "origin", "main", git_ai.NOTES_REF, agent_trace.NOTES_REF)

    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(remote), str(clone))
    git(clone, "fetch", "-q", "origin", "refs/notes/*:refs/notes/*")
    shown = obversa("why", "retry.py:2", cwd=clone)
    assert shown.returncode == 0, shown.stderr
    assert f"Agent:  claude-code (claude-sonnet-4-5), session {SESSION}" in shown.stdout
    expected = {
        "agent": "claude-code",
        "model": "claude-sonnet-4-5",
        "session": SESSION,
        "contributor": "ai",
        "lines": [[2, 2]],
    }
    for command in ("why", "blame"):
        data = json.loads(obversa(command, "retry.py:2", "--json", cwd=clone).stdout)
        assert [commit["agents"] for commit in data["commits"]] == [[expected]], command


@pytest.mark.parametrize(
    ("example", "path", "line", "expected"),
    [
        ("git-ai-example-sessions.note", "src/lib.rs", 7, "claude (claude-sonnet-4-5-20250514)"),
        ("git-ai-example-sessions.note", "src/main.rs", 2, "cursor (claude-sonnet-4-5-20250514)"),
        ("git-ai-example-legacy.note", "src/main.rs", 2, "cursor (claude-4.5-opus)"),
        ("git-ai-example-mixed.note", "src/lib.rs", 40, "cursor (gpt-4)"),
    ],
)
def test_why_reads_notes_another_tool_wrote(repo, example, path, line, expected):
    (repo / "src").mkdir()
    for name in ("main.rs", "lib.rs"):
        (repo / "src" / name).write_text("".join(f"line {n}\n" for n in range(1, 51)))
    git(repo, "add", "src")
    git(repo, "commit", "-q", "-m", "Written with an agent elsewhere")
    git(repo, "notes", "--ref", "ai", "add", "-F", str(FIXTURES / example), "HEAD")

    shown = obversa("why", f"{path}:{line}", cwd=repo)
    assert shown.returncode == 0, shown.stderr
    assert f"Agent:  {expected}" in shown.stdout


def test_names_from_a_note_cannot_drive_the_terminal(repo):
    (repo / "a.txt").write_text("one\n")
    git(repo, "add", "a.txt")
    git(repo, "commit", "-q", "-m", "Add a")
    hostile = {"tool": "evil\x1b]0;owned\x07", "id": "x", "model": "m\nAuthor: forged"}
    metadata = {"schema_version": "authorship/3.0.0", "base_commit_sha": "0" * 40}
    metadata |= {"prompts": {}, "sessions": {"s_0123456789abcd": {"agent_id": hostile}}}
    text = "a.txt\n  s_0123456789abcd::t_0123456789abcd 1\n---\n" + json.dumps(metadata)
    git(repo, "notes", "--ref", "ai", "add", "-m", text, "HEAD")
    shown = obversa("why", "a.txt:1", cwd=repo).stdout
    assert "Agent:  evil?]0;owned? (m?Author: forged), session s_0123456789abcd" in shown
    assert "\x1b" not in shown


def test_nothing_of_this_runs_on_the_commit_path_unless_asked(repo, tmp_path):
    """The hooks in one Python process, as the shims start them: the attribution package
    is imported only when obversa.attribution is set."""
    program = """
import subprocess, sys
from git_obversa.hooks import commit
from git_obversa.record.turns import TurnStore
TurnStore.for_worktree(".").append([{"stage": "s", "node": "s", "kind": "note",
    "text": "Retries stop after three attempts.", "agent": "claude-code", "session": "c1"}])
open("code.py", "a").write("retries = 3\\n")
subprocess.run(["git", "add", "code.py"], check=True)
open("MSG", "w").write("Stop retrying\\n")
assert commit.run("prepare-commit-msg", ["MSG", "message"], ".git") == 0
subprocess.run(["git", "-c", "core.hooksPath=/dev/null", "commit", "-q", "-F", "MSG"], check=True)
assert commit.run("post-commit", [], ".git") == 0
print(sorted(m for m in sys.modules if m.startswith("git_obversa.attribution")))
"""

    def run() -> list[str]:
        done = subprocess.run(
            [sys.executable, "-c", program], cwd=repo, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.replace("'", '"'))

    assert run() == []
    assert git(repo, "for-each-ref", "refs/notes") == ""
    git(repo, "config", "obversa.attribution", "git-ai")
    assert "git_obversa.attribution.emit" in run()
    assert git(repo, "for-each-ref", "--format=%(refname)", "refs/notes") == "refs/notes/ai\n"


@pytest.mark.parametrize("version", ["0.1", "0.1.0", "1.0"])
def test_agent_trace_versions_read(version):
    example = json.loads((FIXTURES / "agent-trace-readme-example.json").read_text())
    jsonschema.validate(example, README_SCHEMA)
    example["version"] = version
    files = agent_trace.parse(json.dumps(example))
    assert files and all(
        isinstance(c, agent_trace.Conversation) for cs in files.values() for c in cs
    )


def test_agent_trace_newer_major_is_refused():
    example = json.loads((FIXTURES / "agent-trace-readme-example.json").read_text())
    example["version"] = "2.0.0"
    with pytest.raises(agent_trace.RecordError, match="newer"):
        agent_trace.parse(json.dumps(example))


def test_git_ai_examples_parse_and_render_back():
    for name in ("sessions", "legacy", "mixed"):
        text = (FIXTURES / f"git-ai-example-{name}.note").read_text()
        log = git_ai.parse(text)
        assert log.files and all(log.author(key) for e in log.files.values() for key, _ in e)
        assert git_ai.parse(git_ai.render(log)).files == log.files


def test_install_refuses_a_format_it_does_not_know(repo):
    completed = obversa("install", "--attribution", "blame-o-matic", cwd=repo)
    assert completed.returncode == 1
    assert "git-ai and/or agent-trace" in completed.stderr
    assert git(repo, "config", "obversa.attribution", check=False) == ""
    assert not (repo / ".git/hooks/post-commit").exists()  # nothing half done


def test_added_lines_of_files_with_odd_names(repo):
    from git_obversa.attribution.lines import added_lines

    names = ["my file.rs", 'tab\té"q.rs', "plain.rs"]
    for name in names:
        (repo / name).write_text("a\nb\n")
    (repo / "README.md").write_text("hello\nworld\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "Odd names")
    assert added_lines("HEAD", repo) == {
        "README.md": [2],
        **{name: [1, 2] for name in names},
    }
    log = git_ai.AuthorshipLog({name: [("s_0123456789abcd::t_0", [(1, 2)])] for name in names})
    log.metadata = {"schema_version": git_ai.SCHEMA_VERSION}
    assert git_ai.parse(git_ai.render(log)).files == log.files


def test_session_id_is_the_standards():
    # git-ai's own test (src/authorship/authorship_log_serialization.rs) derives it so
    expected = "s_" + hashlib.sha256(b"cursor:session_123").hexdigest()[:14]
    assert git_ai.session_id("cursor", "session_123") == expected
    assert len(expected) == 16
