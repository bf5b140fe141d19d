"""What `git obversa doctor` reports is what the real clients do: Codex skips hooks it
was not asked to approve, Gemini CLI skips a project's hooks outside a trusted folder
(headless, it refuses the folder), Copilot CLI works in an untrusted folder but runs
none of its hooks, and so does Qwen Code once folder trust is on; doctor says so, and once
approved the why lands."""

from __future__ import annotations

import json

import pytest

from tests.realclients.conftest import commits, make_client, obversa
from tests.realclients.model_server import Say, Shell, Write
from tests.realclients.test_sessions import REASONS, approve_codex_hooks, run

pytestmark = pytest.mark.realclients


def commit_once(client, server, path: str) -> str:
    run(
        client,
        f"Add {path} and commit it.",
        server,
        [Say(REASONS["budget"]), Write(str(client.repo / path), "X = 1\n")],
        [Shell(f"git add {path} && git commit -m 'Add {path}'")],
        [Say("Done.")],
    )
    return commits(client)[0]["why"]


def test_codex_unapproved_hooks_are_skipped_and_doctor_says_so(server, tmp_path):
    client = make_client("codex", tmp_path, server)
    assert obversa(client, "install", "--codex").returncode == 0
    done = obversa(client, "doctor", "--no-mcp", "--json")
    assert done.returncode == 1
    (check,) = [
        c
        for a in json.loads(done.stdout)["agents"]
        if a["agent"] == "codex"
        for c in a["checks"]
        if not c["ok"]
    ]
    assert check["name"] == "codex hooks approved" and "/hooks" in check["fix"]
    assert commit_once(client, server, "a.py") == ""  # Codex ran none of them

    approve_codex_hooks(client)
    assert obversa(client, "doctor", "--no-mcp").returncode == 0
    assert REASONS["budget"][:40] in commit_once(client, server, "b.py")


def test_gemini_untrusted_folder_skips_project_hooks_and_doctor_says_so(server, tmp_path):
    client = make_client("gemini", tmp_path, server)
    trusted = client.home / ".gemini" / "trustedFolders.json"
    trusted.write_text(json.dumps({str(client.repo): "DO_NOT_TRUST"}))
    assert obversa(client, "install", "--gemini").returncode == 0
    done = obversa(client, "doctor", "--no-mcp")
    assert done.returncode == 1 and "only in a trusted folder" in done.stdout
    # Headless, Gemini CLI 0.61 refuses to work in an untrusted folder at all.
    refused = client.run("Add a.py and commit it.")
    assert refused.returncode != 0 and "trusted" in refused.stderr

    trusted.write_text(json.dumps({str(client.repo): "TRUST_FOLDER"}))
    assert obversa(client, "doctor", "--no-mcp").returncode == 0
    assert REASONS["budget"][:40] in commit_once(client, server, "b.py")


def test_qwen_untrusted_folder_skips_project_hooks_and_doctor_says_so(server, tmp_path):
    client = make_client("qwen", tmp_path, server)
    settings = client.home / ".qwen" / "settings.json"
    user = json.loads(settings.read_text())
    user["security"]["folderTrust"] = {"enabled": True}  # off by default in Qwen Code
    settings.write_text(json.dumps(user))
    trusted = client.home / ".qwen" / "trustedFolders.json"
    trusted.write_text(json.dumps({str(client.repo): "DO_NOT_TRUST"}))
    assert obversa(client, "install", "--qwen").returncode == 0
    done = obversa(client, "doctor", "--no-mcp")
    assert done.returncode == 1 and "only in a trusted folder" in done.stdout
    # Untrusted, Qwen Code 0.24 still answers, but loads none of the project's settings
    # (its hooks neither) and, headless, offers the model no tool that changes anything.
    said = client.run("Explain the retry budget.")
    assert said.returncode == 0 and "not trusted" in said.stderr
    offered = {tool["function"]["name"] for tool in server.requests[-1].body["tools"]}
    assert "run_shell_command" not in offered and "write_file" not in offered
    report = json.loads(obversa(client, "doctor", "--no-mcp", "--json").stdout)
    (qwen,) = [agent for agent in report["agents"] if agent["agent"] == "qwen"]
    assert qwen["last_capture"] is None  # its Stop hook did not run

    trusted.write_text(json.dumps({str(client.repo): "TRUST_FOLDER"}))
    assert obversa(client, "doctor", "--no-mcp").returncode == 0
    assert REASONS["budget"][:40] in commit_once(client, server, "b.py")


def test_copilot_untrusted_folder_skips_project_hooks_and_doctor_says_so(server, tmp_path):
    from tests.realclients.driver import trust_copilot_folder

    client = make_client("copilot", tmp_path, server)
    del client.env["COPILOT_ALLOW_ALL"]  # as a user runs it: folders trusted one by one
    installed = obversa(client, "install", "--copilot")
    assert installed.returncode == 0 and "remember this folder" in installed.stdout
    done = obversa(client, "doctor", "--no-mcp", "--json")
    assert done.returncode == 1
    (check,) = [
        c
        for a in json.loads(done.stdout)["agents"]
        if a["agent"] == "copilot"
        for c in a["checks"]
        if not c["ok"]
    ]
    assert check["name"] == "copilot folder trusted" and "`copilot`" in check["fix"]
    # Headless with --allow-all-tools, it works in the folder but runs no project hook.
    assert commit_once(client, server, "a.py") == ""
    assert (client.repo / "a.py").exists()

    trust_copilot_folder(client)  # the user answers the client's own question
    assert obversa(client, "doctor", "--no-mcp").returncode == 0
    assert REASONS["budget"][:40] in commit_once(client, server, "b.py")
