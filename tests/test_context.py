"""The why flows back (agents/context_hooks.py, lookup/context.py, agents/session_memory.py)
on real repositories: the hook answers with the reasons behind an edit's lines, once per
session, bounded and warned; grounding and the session summary."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from git_obversa.agents import session_memory
from git_obversa.agents.context_hooks import patch_updates, respond
from git_obversa.lookup.context import LIMIT, changed_lines, edited_ranges
from git_obversa.memory.mechanics import MEMORY_WARNING

WHY = "Retries stop after 3 attempts because the gateway fails in bursts of two."


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "config", "user.name", "T")
    git(repo, "config", "user.email", "t@example.com")
    (repo / "retry.py").write_text("RETRIES = 3\nDELAY = 1\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "Add a retry budget", "-m", f"Why:\n{WHY}")
    with open(repo / "retry.py", "a") as file:
        file.write("NAME = 'x'\n")
    git(repo, "commit", "-qam", "Name it")
    return repo


def edit(repo: Path, tool_input: dict, session: str = "s1", agent: str = "claude-code") -> str:
    event = {
        "hook_event_name": "PreToolUse",
        "session_id": session,
        "cwd": str(repo),
        "tool_name": "Edit",
        "tool_input": tool_input,
    }
    return respond(agent, json.dumps(event))


def context(answer: str) -> str:
    return json.loads(answer)["hookSpecificOutput"]["additionalContext"] if answer else ""


def test_an_edit_is_told_the_why_of_its_lines_once_per_session(repo):
    retry = str(repo / "retry.py")
    told = context(edit(repo, {"file_path": retry, "old_string": "RETRIES = 3"}))
    assert told.startswith(MEMORY_WARNING) and WHY in told
    assert told.endswith("`git obversa why retry.py:1-1`") and len(told) <= LIMIT
    assert edit(repo, {"file_path": retry, "old_string": "DELAY = 1"}) == ""  # same commit
    assert WHY in context(edit(repo, {"file_path": retry, "old_string": "DELAY"}, session="s2"))


def test_lines_without_reasoning_a_new_file_or_outside_add_nothing(repo, tmp_path):
    assert edit(repo, {"file_path": str(repo / "retry.py"), "old_string": "NAME = 'x'"}) == ""
    assert edit(repo, {"file_path": str(repo / "new.py"), "content": "X = 1\n"}) == ""
    (tmp_path / "out.py").write_text("RETRIES = 3\n")
    assert edit(repo, {"file_path": str(tmp_path / "out.py"), "old_string": "RETRIES"}) == ""
    assert edit(repo, {"file_path": str(repo / "retry.py"), "old_string": "absent"}) == ""


def test_the_hook_never_fails_the_agent(repo):
    command = [sys.executable, "-m", "git_obversa", "agent-context", "claude-code"]
    for stdin in ("not json", "[]", '{"hook_event_name": "PreToolUse", "tool_name": "Edit"}'):
        done = subprocess.run(command, cwd=repo, input=stdin, capture_output=True, text=True)
        assert done.returncode == 0 and done.stdout == ""


def test_context_off_with_one_setting(repo):
    git(repo, "config", "obversa.context", "false")
    assert edit(repo, {"file_path": str(repo / "retry.py"), "old_string": "RETRIES = 3"}) == ""


def test_the_bound_keeps_the_most_relevant_first(repo):
    long_why = "Because " + "the gateway limits bursts; " * 40
    (repo / "big.py").write_text("".join(f"A{i} = {i}\n" for i in range(10)))
    git(repo, "add", "big.py")
    git(repo, "commit", "-qm", "Add the table", "-m", f"Why:\n{long_why}")
    (repo / "big.py").write_text(
        "".join(f"A{i} = {i * 2}\n" for i in range(2))
        + "".join(f"A{i} = {i}\n" for i in range(2, 10))
    )
    git(repo, "commit", "-qam", "Double two", "-m", "Why:\nTwo rows are doubled for the test.")
    told = context(edit(repo, {"file_path": str(repo / "big.py"), "content": "changed\n"}))
    assert len(told) <= LIMIT and told.startswith(MEMORY_WARNING)
    assert told.index("Add the table") < told.index("Double two")  # owns 8 lines, not 2


def test_ranges_of_edits_writes_and_patches():
    text = "a\nb\nc\nd\n"
    assert edited_ranges(text, {"old_string": "b\nc\n"}) == [(2, 3)]
    assert edited_ranges(text, {"edits": [{"old_string": "a"}, {"old_string": "d"}]}) == [
        (1, 1),
        (4, 4),
    ]
    assert edited_ranges("x\nx\n", {"old_string": "x", "replace_all": True}) == [(1, 2)]
    assert changed_lines(text, "a\nB\nc\nd\ne\n") == [(2, 2)]
    patch = "*** Begin Patch\n*** Update File: f.py\n@@\n a\n-b\n+B\n c\n*** End Patch\n"
    assert patch_updates(patch) == [("f.py", [[" a", "-b", "+B", " c"]])]


def test_gemini_is_told_after_the_edit_what_was_worked_out_before(repo):
    retry = str(repo / "retry.py")
    base = {"session_id": "g1", "cwd": str(repo), "tool_name": "replace"}
    tool_input = {"file_path": retry, "old_string": "RETRIES = 3", "new_string": "RETRIES = 4"}
    before = {**base, "hook_event_name": "BeforeTool", "tool_input": tool_input}
    assert respond("gemini", json.dumps(before)) == ""
    (repo / "retry.py").write_text("RETRIES = 4\nDELAY = 1\nNAME = 'x'\n")
    after = {**base, "hook_event_name": "AfterTool", "tool_input": tool_input}
    assert WHY in context(respond("gemini", json.dumps(after)))
    assert respond("gemini", json.dumps(after)) == ""


def test_a_session_starts_grounded_and_leaves_a_summary(repo):
    start = {"hook_event_name": "SessionStart", "session_id": "s1", "cwd": str(repo)}
    assert respond("claude-code", json.dumps(start)) == ""  # nothing configured
    subprocess.run(
        [sys.executable, "-m", "git_obversa", "memory", "create", "/memories/project.md", "Fri."],
        cwd=repo,
        check=True,
        capture_output=True,
    )
    git(repo, "config", "obversa.ground", "/memories/project.md /memories/decisions/")
    git(repo, "config", "obversa.consolidate", "true")
    grounded = context(respond("claude-code", json.dumps(start)))
    assert grounded.startswith(MEMORY_WARNING) and "Fri." in grounded
    (repo / "retry.py").write_text("RETRIES = 4\n")
    git(repo, "commit", "-qam", "Four tries", "-m", "Why:\nThe token sk-" + "a" * 32 + " burst.")
    end = {**start, "hook_event_name": "SessionEnd"}
    assert respond("claude-code", json.dumps(end)) == ""
    assert respond("claude-code", json.dumps(end)) == ""  # nothing new: not folded in twice
    target = session_memory.summary_path("true", __import__("time").strftime("%Y-%m-%d"))
    shown = subprocess.run(
        [sys.executable, "-m", "git_obversa", "memory", "view", target],
        cwd=repo,
        capture_output=True,
        text=True,
    ).stdout
    assert shown.count("Four tries") == 1 and "sk-aaaa" not in shown


def test_summary_keeps_the_newest_sessions_within_its_bound():
    prior = "\n\n".join(f"## Session {i}\n\n" + "x" * 6000 for i in range(3))
    text = session_memory.folded(prior, "## Session new\n\n- y")
    assert len(text) <= session_memory.MAX_SUMMARY and text.endswith("- y")
    assert "Session 0" not in text and "Session 2" in text


def test_grounding_keeps_what_a_configured_judge_picks(repo, tmp_path):
    for path, text in (
        ("/memories/rules/style.md", "Short names."),
        ("/memories/a.md", "A."),
        ("/memories/b.md", "B."),
    ):
        subprocess.run(
            [sys.executable, "-m", "git_obversa", "memory", "create", path, text],
            cwd=repo,
            check=True,
            capture_output=True,
        )
    judge = tmp_path / "judge.py"
    judge.write_text(
        "import json, sys\n"
        "qs = json.load(sys.stdin)\n"
        "print(json.dumps({q['key']: {'status': 'answered',"
        " 'probability': 0.9 if q['title'].endswith('a.md') else 0.1} for q in qs}))\n"
    )
    git(repo, "config", "obversa.ground", "/memories")
    git(repo, "config", "obversa.groundJudge", f"{sys.executable} {judge}")
    start = {"hook_event_name": "SessionStart", "session_id": "j1", "cwd": str(repo)}
    grounded = context(respond("claude-code", json.dumps(start)))
    assert grounded.startswith(MEMORY_WARNING)
    assert "Short names." in grounded and "A." in grounded and "B." not in grounded


def test_install_doctor_and_uninstall_of_the_context_hooks(repo):
    def obversa(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "git_obversa", *args], cwd=repo, capture_output=True, text=True
        )

    before = sorted(path.name for path in repo.iterdir())
    assert obversa("install", "--claude-code").returncode == 0
    hooks = json.loads((repo / ".claude" / "settings.json").read_text())["hooks"]
    ours = "git obversa agent-context claude-code"
    for event in ("PreToolUse", "SessionStart", "SessionEnd", "PreCompact"):
        assert any(h["command"] == ours for group in hooks[event] for h in group["hooks"])

    def check() -> dict:
        report = json.loads(obversa("doctor", "--no-mcp", "--json").stdout)
        [claude] = [agent for agent in report["agents"] if agent["agent"] == "claude-code"]
        return {c["name"]: c for c in claude["checks"]}["claude-code context hooks"]

    assert check()["ok"] and check()["detail"].startswith("on;")
    git(repo, "config", "obversa.context", "false")
    assert "turned off" in check()["detail"]
    assert obversa("uninstall", "--claude-code").returncode == 0
    assert sorted(path.name for path in repo.iterdir()) == before


def test_copilot_edit_and_session_start_in_its_own_shapes(repo):
    """Copilot CLI's payloads (camelCase, no event name: the command line gives it) and
    its answer shape, `{"additionalContext"}` (tests/realclients proves the model gets it)."""
    retry = str(repo / "retry.py")

    def copilot(name: str, payload: dict) -> str:
        answer = respond("copilot", json.dumps({"cwd": str(repo), **payload}), name)
        return json.loads(answer)["additionalContext"] if answer else ""

    call = {"sessionId": "c1", "timestamp": 1, "toolName": "edit"}
    told = copilot("preToolUse", {**call, "toolArgs": {"path": retry, "old_str": "RETRIES = 3"}})
    assert told.startswith(MEMORY_WARNING) and WHY in told and len(told) <= LIMIT
    assert copilot("preToolUse", {**call, "toolArgs": {"path": retry, "old_str": "DELAY"}}) == ""
    view = {**call, "toolName": "view", "toolArgs": {"path": retry}}
    assert copilot("preToolUse", view) == ""  # not an edit
    assert copilot("sessionStart", {"sessionId": "c2", "source": "new"}) == ""  # unset
    subprocess.run(
        [sys.executable, "-m", "git_obversa", "memory", "create", "/memories/project.md", "Fri."],
        cwd=repo,
        check=True,
        capture_output=True,
    )
    git(repo, "config", "obversa.ground", "/memories/project.md")
    grounded = copilot("sessionStart", {"sessionId": "c2", "source": "new"})
    assert grounded.startswith(MEMORY_WARNING) and "Fri." in grounded


def test_install_doctor_and_uninstall_of_copilots_context_hooks(repo):
    def obversa(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "git_obversa", *args], cwd=repo, capture_output=True, text=True
        )

    before = [path.name for path in repo.iterdir()]
    assert obversa("install", "--copilot").returncode == 0
    hooks = json.loads((repo / ".github" / "hooks" / "git-obversa.json").read_text())["hooks"]
    ours = "git obversa agent-context copilot"
    assert [h for h in hooks["preToolUse"] if h["bash"].startswith(ours)] == [
        {"type": "command", "bash": f"{ours} preToolUse", "matcher": "edit", "timeoutSec": 10}
    ]
    assert [h["bash"] for h in hooks["sessionStart"]] == [f"{ours} sessionStart"]

    def check() -> dict:
        report = json.loads(obversa("doctor", "--no-mcp", "--json").stdout)
        [copilot] = [agent for agent in report["agents"] if agent["agent"] == "copilot"]
        return {c["name"]: c for c in copilot["checks"]}["copilot context hooks"]

    assert check()["ok"] and check()["detail"].startswith("on;")
    git(repo, "config", "obversa.context", "false")
    assert "turned off" in check()["detail"]
    assert obversa("uninstall", "--copilot").returncode == 0
    assert not (repo / ".github" / "hooks").exists()
    assert [path.name for path in repo.iterdir() if path.name != ".github"] == before


def test_qwen_is_told_after_the_edit_what_was_worked_out_before(repo):
    """Qwen Code drops what its PreToolUse returns: the reasons go over at PostToolUse."""
    retry = str(repo / "retry.py")
    base = {"session_id": "q1", "cwd": str(repo), "tool_name": "edit"}
    tool_input = {"file_path": retry, "old_string": "RETRIES = 3", "new_string": "RETRIES = 4"}
    before = {**base, "hook_event_name": "PreToolUse", "tool_input": tool_input}
    assert respond("qwen", json.dumps(before)) == ""
    (repo / "retry.py").write_text("RETRIES = 4\nDELAY = 1\nNAME = 'x'\n")
    after = {**base, "hook_event_name": "PostToolUse", "tool_input": tool_input}
    assert WHY in context(respond("qwen", json.dumps(after)))
    assert respond("qwen", json.dumps(after)) == ""
