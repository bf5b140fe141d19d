"""`git obversa install --codex/--gemini` and the `.mcp.json` entry: merged into the user's
own settings files, idempotent, and taken out again byte for byte."""

from __future__ import annotations

import json

import pytest

from git_obversa.agents import settings
from tests.gitutil import obversa

CODEX_HOOKS = (
    '{\n\t"hooks": {\n\t\t"Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]'
    '\n\t},\n\t"other": 1\n}'  # tabs, and no newline at the end
)
CODEX_CONFIG = 'model = "o4-mini"\n\n[mcp_servers.docs]\ncommand = "docs-server"\n'
GEMINI_SETTINGS = json.dumps(
    {
        "theme": "Dracula",
        "hooks": {
            "BeforeTool": [
                {"matcher": "write_file", "hooks": [{"type": "command", "command": "lint"}]}
            ]
        },  # noqa: E501
        "mcpServers": {"github": {"command": "gh-mcp"}},
    },
    indent=4,
)


def write_settings(repo) -> dict:
    files = {
        repo / ".codex" / "hooks.json": CODEX_HOOKS,
        repo / ".codex" / "config.toml": CODEX_CONFIG,
        repo / ".gemini" / "settings.json": GEMINI_SETTINGS,
    }
    for path, text in files.items():
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    return {path: path.read_bytes() for path in files}


def test_install_merges_is_idempotent_and_uninstall_restores_every_byte(repo):
    before = write_settings(repo)
    done = obversa("install", "--codex", "--gemini", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert "codex: " + str(repo / ".codex" / "hooks.json") + ": added" in done.stdout
    codex = json.loads((repo / ".codex" / "hooks.json").read_text())
    assert codex["other"] == 1
    assert [g["hooks"][0]["command"] for g in codex["hooks"]["Stop"]] == [
        "notify-send done",
        "git obversa agent-hook codex",
    ]
    assert codex["hooks"]["PreToolUse"] == [
        {
            "matcher": "Bash",
            "hooks": [{"type": "command", "command": "git obversa agent-hook codex"}],
        },  # noqa: E501
        {  # the context hooks (tests/test_context.py)
            "matcher": "Bash|apply_patch",
            "hooks": [
                {"type": "command", "command": "git obversa agent-context codex", "timeout": 10}
            ],
        },
    ]
    toml = (repo / ".codex" / "config.toml").read_text()
    assert toml.startswith(CODEX_CONFIG)
    assert '[mcp_servers.obversa]\ncommand = "git"\nargs = ["obversa", "mcp"]\n' in toml
    tomllib = pytest.importorskip("tomllib")
    parsed = tomllib.loads(toml)
    assert parsed["mcp_servers"]["obversa"] == {"command": "git", "args": ["obversa", "mcp"]}
    assert parsed["mcp_servers"]["docs"] == {"command": "docs-server"}
    gemini = json.loads((repo / ".gemini" / "settings.json").read_text())
    assert gemini["theme"] == "Dracula"
    assert set(gemini["mcpServers"]) == {"github", "obversa"}
    assert (
        gemini["hooks"]["AfterAgent"][0]["hooks"][0]["command"] == "git obversa agent-hook gemini"
    )
    assert [g["matcher"] for g in gemini["hooks"]["BeforeTool"]] == [
        "write_file",
        "run_shell_command",
        "replace|write_file",  # the context hooks (tests/test_context.py)
    ]

    installed = {path: path.read_bytes() for path in before}
    again = obversa("install", "--codex", "--gemini", cwd=repo)
    assert again.returncode == 0 and again.stdout.count("already there") == 3
    assert {path: path.read_bytes() for path in before} == installed

    removed = obversa("uninstall", "--codex", "--gemini", cwd=repo)
    assert removed.returncode == 0, removed.stderr
    assert {path: path.read_bytes() for path in before} == before
    # The commit hooks stay: only the agents' entries were asked to go.
    assert (repo / ".git" / "hooks" / "prepare-commit-msg").exists()


def test_files_install_created_are_deleted_again(repo):
    assert obversa("install", "--codex", "--gemini", cwd=repo).returncode == 0
    assert (repo / ".gemini" / "settings.json").exists()
    assert obversa("uninstall", "--codex", "--gemini", cwd=repo).returncode == 0
    assert not (repo / ".codex").exists() and not (repo / ".gemini").exists()


def test_edits_made_after_install_survive_uninstall(repo):
    write_settings(repo)
    assert obversa("install", "--gemini", cwd=repo).returncode == 0
    path = repo / ".gemini" / "settings.json"
    value = json.loads(path.read_text())
    value["theme"] = "Light"
    value["hooks"]["AfterAgent"][0]["hooks"].append({"type": "command", "command": "say done"})
    path.write_text(json.dumps(value))
    assert obversa("uninstall", "--gemini", cwd=repo).returncode == 0
    left = json.loads(path.read_text())
    assert left["theme"] == "Light"
    assert left["hooks"]["AfterAgent"] == [{"hooks": [{"type": "command", "command": "say done"}]}]
    assert "run_shell_command" not in json.dumps(left) and "obversa" not in left["mcpServers"]


def test_a_server_named_obversa_the_user_set_up_stays_theirs(repo):
    (repo / ".codex").mkdir()
    mine = '[mcp_servers.obversa]\ncommand = "my-obversa"\n'
    (repo / ".codex" / "config.toml").write_text(mine)
    done = obversa("install", "--codex", cwd=repo)
    assert "config.toml: already there (yours; left as it is)" in done.stdout
    assert (repo / ".codex" / "config.toml").read_text() == mine
    assert obversa("uninstall", "--codex", cwd=repo).returncode == 0
    assert (repo / ".codex" / "config.toml").read_text() == mine


def test_a_broken_settings_file_is_a_one_line_error_and_stays_untouched(repo):
    (repo / ".gemini").mkdir()
    (repo / ".gemini" / "settings.json").write_text("{ not json")
    done = obversa("install", "--gemini", cwd=repo)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "settings.json is not valid JSON" in done.stderr
    assert (repo / ".gemini" / "settings.json").read_text() == "{ not json"


def test_mcp_json_for_claude_code(repo):
    path = repo / ".mcp.json"
    original = b'{"mcpServers": {"db": {"command": "db-mcp"}}}'
    path.write_bytes(original)
    assert settings.install_agent("claude-code-mcp", repo) == [
        {"file": str(path), "action": "added"}
    ]
    servers = json.loads(path.read_text())["mcpServers"]
    assert servers["obversa"] == {"type": "stdio", "command": "git", "args": ["obversa", "mcp"]}
    assert settings.install_agent("claude-code-mcp", repo)[0]["action"] == "already there"
    settings.uninstall_agent("claude-code-mcp", repo)
    assert path.read_bytes() == original


def test_install_claude_code_merges_the_server_into_an_existing_mcp_json(repo):
    path = repo / ".mcp.json"
    original = b'{\n  "mcpServers": {\n    "db": {"command": "db-mcp", "args": []}\n  }\n}\n'
    path.write_bytes(original)
    done = obversa("install", "--claude-code", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert f"{path}: added" in done.stdout
    assert set(json.loads(path.read_text())["mcpServers"]) == {"db", "obversa"}
    assert obversa("uninstall", "--claude-code", cwd=repo).returncode == 0
    assert path.read_bytes() == original


def test_qwen_settings_merge_and_uninstall_restores_every_byte(repo):
    path = repo / ".qwen" / "settings.json"
    path.parent.mkdir()
    said = '{"hooks": [{"type": "command", "command": "say done"}]}'
    mine = '{\n  "ui": {"theme": "Default"},\n  "hooks": {"Stop": [' + said + "]}\n}\n"
    path.write_text(mine)
    done = obversa("install", "--qwen", cwd=repo)
    assert done.returncode == 0 and "qwen: " in done.stdout, done.stderr
    settings = json.loads(path.read_text())
    assert settings["ui"] == {"theme": "Default"} and "obversa" in settings["mcpServers"]
    commands = {
        event: [h["command"] for group in groups for h in group["hooks"]]
        for event, groups in settings["hooks"].items()
    }
    assert commands["Stop"] == ["say done", "git obversa agent-hook qwen"]
    assert "git obversa agent-hook qwen" in commands["PreToolUse"]
    assert "git obversa agent-context qwen" in commands["PostToolUse"]
    assert obversa("install", "--qwen", cwd=repo).stdout.count("already there") == 1
    assert obversa("uninstall", "--qwen", cwd=repo).returncode == 0
    assert path.read_text() == mine
