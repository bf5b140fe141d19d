"""The hooks through the pre-commit framework, from this repository's manifest.

Most tests use the manifest's entries in a `repo: local` config with language
`unsupported` (the entry runs from PATH, where the test venv's `git-obversa` is), so
they run in milliseconds. One test consumes the manifest exactly as published: a pinned
`repo:` with `language: python`, which pre-commit installs into its own virtualenv.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from git_obversa.record.turns import TurnStore
from tests.gitutil import git, make_repo
from tests.test_docs import parse

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
        "default_install_hook_types": ["prepare-commit-msg", "commit-msg", "post-commit"],
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


def test_editor_verbose_shows_then_writes_the_reasoning(repo, tmp_path):
    capture(repo)
    editor = tmp_path / "editor.sh"
    editor.write_text(f'#!/bin/sh\ncp "$1" {tmp_path}/seen\nsed -i "1i Typed" "$1"\n')
    editor.chmod(0o755)
    completed = commit(repo, "-v", editor=str(editor))
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "# Why:" in (tmp_path / "seen").read_text()
    assert message(repo).startswith(f"Typed\n\nWhy:\n{REASON}\n")
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


def test_the_manifest_as_published_installs_and_runs(tmp_path, monkeypatch):
    """As a consumer uses it, with the configuration block of docs/reasoning.md: `repo:`
    pointing at a git repository holding this package, pinned by `rev:` to a commit of it,
    with the manifest's own `language: python` (pre-commit builds a
    virtualenv and pip-installs the package, dulwich from the package index)."""
    root = MANIFEST.parent
    published = tmp_path / "published"
    published.mkdir()
    for name in ("pyproject.toml", "README.md", ".pre-commit-hooks.yaml", "man/git-obversa.1"):
        (published / name).parent.mkdir(exist_ok=True)
        (published / name).write_bytes((root / name).read_bytes())
    for source in (root / "git_obversa").rglob("*"):
        if source.is_dir() or "__pycache__" in source.parts:
            continue
        target = published / source.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(source.read_bytes())
    git(published, "init", "-q")
    git(published, "add", "-A")
    git(published, "commit", "-q", "-m", "publish")
    rev = git(published, "rev-parse", "HEAD").strip()

    monkeypatch.setenv("PRE_COMMIT_HOME", str(tmp_path / "pre-commit-home"))
    consumer = make_repo(tmp_path / "consumer")
    # The configuration of docs/reasoning.md, as written: it names ~/src/git-obversa.
    (Path(os.environ["HOME"]) / "src").mkdir()
    (Path(os.environ["HOME"]) / "src" / "git-obversa").symlink_to(published)
    documented = [
        block.text
        for block in parse(root / "docs" / "reasoning.md")
        if block.language == "sh" and "pre-commit install" in block.text
    ]
    assert len(documented) == 1
    configured = subprocess.run(
        ["bash", "-e"], input=documented[0], cwd=consumer, capture_output=True, text=True
    )
    assert configured.returncode == 0, configured.stdout + configured.stderr
    assert f"rev: {rev}" in (consumer / ".pre-commit-config.yaml").read_text()
    git(consumer, "add", ".pre-commit-config.yaml")
    done = subprocess.run(["pre-commit", "install-hooks"], cwd=consumer, capture_output=True)
    assert done.returncode == 0, done.stdout + done.stderr

    capture(consumer)
    completed = commit(consumer, "-m", "Retry API calls", "-s")
    assert completed.returncode == 0, completed.stderr
    assert message(consumer) == (
        "Retry API calls\n\nWhy:\n" + REASON + "\n\n"
        "Signed-off-by: Test Author <author@example.com>\nObversa-Record: implement\n"
    )
    assert "Obversa-Record: implement" in trailers(consumer)
    # post-commit ran from the installed environment and cleared what the commit carried.
    assert TurnStore.for_worktree(consumer).read() == []
