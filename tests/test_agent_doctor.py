"""`git obversa doctor`: says where an agent's reasoning would go nowhere, and the fix.

The states are set up in the files the clients themselves read and write: Codex's
`$CODEX_HOME/config.toml` (`[hooks.state."…"] trusted_hash`, `[projects."…"]`),
Gemini CLI's `~/.gemini/trustedFolders.json` and Copilot CLI's `~/.copilot/config.json`
(tests/realclients proves against the real clients that these are what they obey).
"""

from __future__ import annotations

import json

from git_obversa.agents.codex import approval_toml, hook_trust
from git_obversa.agents.context_hooks import CONTEXT_COMMAND
from git_obversa.agents.settings import CODEX_HOOK
from tests.gitutil import obversa


def doctor(repo, *args):
    return obversa("doctor", "--no-mcp", *args, cwd=repo)


def test_a_repository_without_hooks_is_one_problem_with_its_fix(repo):
    done = doctor(repo)
    assert done.returncode == 1
    assert "commit hooks: not installed" in done.stdout
    assert "git obversa install" in done.stdout
    report = json.loads(doctor(repo, "--json").stdout)
    assert report["problems"] == 1 and report["commit_hooks"]["ok"] is False


def test_codex_hooks_not_approved_then_approved(repo, git_environment, monkeypatch):
    codex_home = git_environment / ".codex"
    codex_home.mkdir()
    monkeypatch.setenv("CODEX_HOME", str(codex_home))
    config = codex_home / "config.toml"
    config.write_text(f'model = "gpt-5-codex"\n[projects."{repo}"]\ntrust_level = "trusted"\n')
    assert obversa("install", "--codex", cwd=repo).returncode == 0
    done = doctor(repo)
    assert done.returncode == 1
    assert "5 of 5 git-obversa hooks not approved" in done.stdout  # capture 3, context 2
    assert "/hooks" in done.stdout

    with open(config, "a") as handle:  # what approving in Codex's /hooks writes
        for command in (CODEX_HOOK, CONTEXT_COMMAND.format(agent="codex")):
            handle.write(approval_toml(hook_trust(repo / ".codex" / "hooks.json", command)))
    done = doctor(repo)
    assert done.returncode == 0, done.stdout
    assert "codex: last capture never" in done.stdout

    # An edited handler needs approving again: its hash no longer matches.
    hooks_json = repo / ".codex" / "hooks.json"
    hooks = json.loads(hooks_json.read_text())
    hooks["hooks"]["Stop"][0]["hooks"][0]["timeout"] = 5
    hooks_json.write_text(json.dumps(hooks))
    assert "1 of 5 git-obversa hooks not approved" in doctor(repo).stdout


def test_codex_untrusted_project(repo, git_environment, monkeypatch):
    codex_home = git_environment / ".codex"
    codex_home.mkdir()
    monkeypatch.setenv("CODEX_HOME", str(codex_home))
    assert obversa("install", "--codex", cwd=repo).returncode == 0
    (codex_home / "config.toml").write_text(
        approval_toml(hook_trust(repo / ".codex" / "hooks.json", CODEX_HOOK))
    )
    done = doctor(repo)
    assert done.returncode == 1
    assert "is not a trusted project" in done.stdout


def test_gemini_untrusted_folder_then_trusted(repo, git_environment):
    gemini = git_environment / ".gemini"
    gemini.mkdir()
    assert obversa("install", "--gemini", cwd=repo).returncode == 0
    done = doctor(repo)
    assert done.returncode == 1
    assert "only in a trusted folder" in done.stdout and "Trust folder" in done.stdout
    (gemini / "trustedFolders.json").write_text(json.dumps({str(repo): "DO_NOT_TRUST"}))
    assert doctor(repo).returncode == 1
    (gemini / "trustedFolders.json").write_text(json.dumps({str(repo): "TRUST_FOLDER"}))
    assert doctor(repo).returncode == 0


# What Copilot CLI 1.0.102 writes when the user answers "Yes, and remember this folder
# for future sessions" (driven through its own prompt in tests/realclients/test_doctor.py).
COPILOT_CONFIG = """// User settings belong in settings.json.
// This file is managed automatically.
{
  "firstLaunchAt": "2026-12-07T08:00:39.899Z",
  "appTipShown": true,
  "trustedFolders": %s
}
"""


def test_copilot_untrusted_folder_then_trusted(repo, git_environment, monkeypatch):
    monkeypatch.delenv("COPILOT_HOME", raising=False)
    monkeypatch.delenv("COPILOT_ALLOW_ALL", raising=False)
    copilot = git_environment / ".copilot"
    copilot.mkdir()
    installed = obversa("install", "--copilot", cwd=repo)
    assert installed.returncode == 0
    assert "Yes, and remember this folder" in installed.stdout  # what to approve, at once
    done = doctor(repo)
    assert done.returncode == 1
    assert "only in a trusted folder" in done.stdout
    assert "Yes, and remember this folder for future sessions" in done.stdout
    (check,) = [
        c
        for a in json.loads(doctor(repo, "--json").stdout)["agents"]
        if a["agent"] == "copilot"
        for c in a["checks"]
        if not c["ok"]
    ]
    assert check["name"] == "copilot folder trusted" and "`copilot`" in check["fix"]
    config = copilot / "config.json"
    config.write_text(COPILOT_CONFIG % json.dumps([str(repo.parent / "elsewhere")]))
    assert doctor(repo).returncode == 1
    config.write_text(COPILOT_CONFIG % json.dumps([str(repo.parent)]))  # a folder above
    assert doctor(repo).returncode == 0, doctor(repo).stdout
    # COPILOT_HOME moves the file; COPILOT_ALLOW_ALL=true trusts every folder.
    monkeypatch.setenv("COPILOT_HOME", str(git_environment / "elsewhere"))
    assert doctor(repo).returncode == 1
    monkeypatch.setenv("COPILOT_ALLOW_ALL", "true")
    assert doctor(repo).returncode == 0


def test_an_older_claude_code_install_lacks_the_after_call_hook(repo):
    assert obversa("install", "--claude-code", cwd=repo).returncode == 0
    settings = repo / ".claude" / "settings.json"
    data = json.loads(settings.read_text())
    del data["hooks"]["PostToolUse"]
    settings.write_text(json.dumps(data))
    done = doctor(repo)
    assert done.returncode == 1
    assert "lacks PostToolUse" in done.stdout
    assert "git obversa install --claude-code" in done.stdout


def test_qwen_folder_trust_and_disabled_hooks(repo, git_environment):
    qwen = git_environment / ".qwen"
    qwen.mkdir()
    assert obversa("install", "--qwen", cwd=repo).returncode == 0
    assert doctor(repo).returncode == 0  # folder trust is off by default: the folder loads
    (qwen / "settings.json").write_text(
        json.dumps({"security": {"folderTrust": {"enabled": True}}})
    )
    done = doctor(repo)
    assert done.returncode == 1 and "only in a trusted folder" in done.stdout
    (qwen / "trustedFolders.json").write_text(json.dumps({str(repo.parent): "TRUST_FOLDER"}))
    assert doctor(repo).returncode == 0
    (qwen / "settings.json").write_text(json.dumps({"disableAllHooks": True}))
    done = doctor(repo)
    assert done.returncode == 1 and "disableAllHooks" in done.stdout
