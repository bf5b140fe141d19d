"""`git obversa install --claude-code` / `uninstall --claude-code` on real repositories:
the wiring merged into .claude/settings.json, idempotent, exactly undone, and working."""

from __future__ import annotations

import json
import subprocess

from tests.gitutil import git, obversa

THEIRS = (
    '{\n    "permissions": {"allow": ["Bash(ls)"]},\n'
    '    "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "echo done"}]}]}\n}'
)


def test_install_writes_the_wiring_once_and_uninstall_removes_what_it_created(repo):
    installed = obversa("install", "--claude-code", cwd=repo)
    assert installed.returncode == 0, installed.stderr
    settings = repo / ".claude" / "settings.json"
    hooks = json.loads(settings.read_text())["hooks"]
    capture = ["PostToolUse", "PreToolUse", "SessionEnd", "Stop", "SubagentStop"]
    assert sorted(hooks) == sorted([*capture, "PreCompact", "SessionStart"])  # + context's
    [group] = [g for g in hooks["PreToolUse"] if g["matcher"] == "Bash"]
    assert group["matcher"] == "Bash"
    assert group["hooks"][0]["command"] == "git obversa agent-hook claude-code"
    assert group["hooks"][0]["if"] == "Bash(git *)"
    before = settings.read_bytes()
    again = obversa("install", "--claude-code", cwd=repo)
    assert "settings.json: already there" in again.stdout
    assert settings.read_bytes() == before
    removed = obversa("uninstall", "--claude-code", cwd=repo)
    assert removed.returncode == 0, removed.stderr
    assert not (repo / ".claude").exists()
    assert git(repo, "status", "--porcelain") == ""


def test_an_existing_settings_file_is_merged_and_restored_byte_for_byte(repo):
    settings = repo / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(THEIRS)
    assert obversa("install", "--claude-code", cwd=repo).returncode == 0
    merged = json.loads(settings.read_text())
    assert merged["permissions"] == {"allow": ["Bash(ls)"]}
    stop = [handler["command"] for group in merged["hooks"]["Stop"] for handler in group["hooks"]]
    assert stop == ["echo done", "git obversa agent-hook claude-code"]
    assert obversa("uninstall", "--claude-code", cwd=repo).returncode == 0
    assert settings.read_text() == THEIRS


def test_edits_made_meanwhile_stay_when_uninstalling(repo):
    settings = repo / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(THEIRS)
    obversa("install", "--claude-code", cwd=repo)
    edited = json.loads(settings.read_text())
    edited["model"] = "opus"
    settings.write_text(json.dumps(edited))
    obversa("uninstall", "--claude-code", cwd=repo)
    assert json.loads(settings.read_text()) == {**json.loads(THEIRS), "model": "opus"}


def test_a_settings_file_that_is_not_json_is_left_alone(repo):
    settings = repo / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text("{ not json")
    completed = obversa("install", "--claude-code", cwd=repo)
    assert completed.returncode == 1
    assert len(completed.stderr.strip().splitlines()) == 1
    assert "settings.json" in completed.stderr
    assert settings.read_text() == "{ not json"


def test_the_installed_commands_capture_when_claude_code_runs_them(repo, tmp_path):
    obversa("install", "--claude-code", cwd=repo)
    hooks = json.loads((repo / ".claude" / "settings.json").read_text())["hooks"]
    transcript = tmp_path / "session.jsonl"
    entry = {
        "type": "assistant",
        "uuid": "u1",
        "timestamp": "2026-11-30T10:00:00Z",
        "message": {"id": "msg_1", "content": [{"type": "text", "text": "Chose a queue."}]},
    }
    transcript.write_text(json.dumps(entry) + "\n")
    event = {
        "session_id": "s",
        "transcript_path": str(transcript),
        "cwd": str(repo),
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "git commit -am 'Queue'"},
    }
    command = hooks["PreToolUse"][0]["hooks"][0]["command"]
    ran = subprocess.run(
        command, shell=True, cwd=repo, input=json.dumps(event), capture_output=True, text=True
    )
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, "", "")
    shown = obversa("record", "show", "--raw", "--json", cwd=repo)
    assert [turn["text"] for turn in json.loads(shown.stdout)] == ["Chose a queue."]
