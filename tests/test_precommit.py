"""The hooks through the pre-commit framework, from this repository's manifest.

The hook entries are the manifest's own, in a `repo: local` config with language
`unsupported` (the entry runs from PATH, where the test venv's `git-obversa` is): the
`language: python` install would only pip-install this same package into a fresh venv.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from git_obversa.turns import TurnStore
from tests.gitutil import git, make_repo

MANIFEST = Path(__file__).resolve().parent.parent / ".pre-commit-hooks.yaml"
REASON = "Retry twice because the upstream API fails in bursts of two."


@pytest.fixture(scope="module")
def precommit_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("pre-commit-home")


@pytest.fixture
def repo(tmp_path, precommit_home, monkeypatch) -> Path:
    monkeypatch.setenv("PRE_COMMIT_HOME", str(precommit_home))
    path = make_repo(tmp_path / "repo")
    hooks = []
    for hook in yaml.safe_load(MANIFEST.read_text()):
        hooks.append({**hook, "language": "unsupported"})
    config = {
        "default_stages": ["pre-commit"],
        "default_install_hook_types": ["prepare-commit-msg", "post-commit"],
        "repos": [{"repo": "local", "hooks": hooks}],
    }
    (path / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    git(path, "add", ".pre-commit-config.yaml")
    git(path, "commit", "-q", "-m", "pre-commit config")
    installed = subprocess.run(["pre-commit", "install"], cwd=path, capture_output=True, text=True)
    assert installed.returncode == 0, installed.stderr
    return path


def capture(cwd: Path, text: str = REASON) -> None:
    TurnStore.for_worktree(cwd).append(
        [{"stage": "implement", "node": "implement", "kind": "engine:text", "text": text}]
    )


def commit(cwd: Path, *args: str, editor: str = ":") -> subprocess.CompletedProcess:
    (cwd / "code.py").write_text("retries = 2\n" + " ".join(args))
    git(cwd, "add", "code.py")
    return subprocess.run(
        ["git", "commit", "-q", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, "GIT_EDITOR": editor},
    )


def message(cwd: Path) -> str:
    return git(cwd, "log", "-1", "--format=%B")[:-1]


def trailers(cwd: Path) -> str:
    return git(cwd, "interpret-trailers", "--parse", input=message(cwd))


def test_manifest_is_valid_and_offers_both_hooks():
    validated = subprocess.run(
        ["pre-commit", "validate-manifest", str(MANIFEST)], capture_output=True, text=True
    )
    assert validated.returncode == 0, validated.stdout + validated.stderr
    hooks = {hook["id"]: hook for hook in yaml.safe_load(MANIFEST.read_text())}
    assert hooks["obversa-reasoning"]["stages"] == ["prepare-commit-msg"]
    assert hooks["obversa-record-commit"]["stages"] == ["post-commit"]
    assert hooks["obversa-record-commit"]["always_run"] is True


def test_message_flag_signoff_and_trailer(repo):
    capture(repo)
    completed = commit(repo, "-s", "--trailer", "Fixes: #12", "-m", "Retry API calls")
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert message(repo) == (
        f"Retry API calls\n\nWhy:\n{REASON}\n\n"
        "Signed-off-by: Test Author <author@example.com>\nFixes: #12\n"
        "Obversa-Record: implement\n"
    )
    assert trailers(repo).endswith("Fixes: #12\nObversa-Record: implement\n")
    assert TurnStore.for_worktree(repo).read() == []  # the post-commit hook ran


def test_editor_verbose_fills_the_subject(repo, tmp_path):
    capture(repo)
    editor = tmp_path / "editor.sh"
    editor.write_text(f'#!/bin/sh\ncp "$1" {tmp_path}/seen\n')
    editor.chmod(0o755)
    completed = commit(repo, "-v", editor=str(editor))
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "Why:" in (tmp_path / "seen").read_text()
    assert message(repo).startswith(
        "Retry twice because the upstream API fails in bursts of two\n\nWhy:\n"
    )
    assert "diff --git" not in message(repo)


def test_amend_no_edit_sees_the_commit_source(repo):
    assert commit(repo, "-m", "Retry API calls").returncode == 0
    capture(repo)
    completed = commit(repo, "--amend", "--no-edit")
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert message(repo).count("Why:") == 1
    assert trailers(repo) == "Obversa-Record: implement\n"


def test_aborted_commit_keeps_the_turns(repo, tmp_path):
    capture(repo)
    editor = tmp_path / "empty.sh"
    editor.write_text('#!/bin/sh\n: > "$1"\n')
    editor.chmod(0o755)
    completed = commit(repo, editor=str(editor))
    assert completed.returncode != 0
    assert message(repo) == "pre-commit config\n"
    assert [turn["text"] for turn in TurnStore.for_worktree(repo).read()] == [REASON]


def test_comment_char_and_strip_cleanup(repo, tmp_path):
    git(repo, "config", "core.commentChar", ";")
    capture(repo, "; a line that looks like a comment")
    completed = commit(repo, "--cleanup=strip", "-m", "Subject")
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert message(repo) == (
        "Subject\n\nWhy:\n ; a line that looks like a comment\n\nObversa-Record: implement\n"
    )
