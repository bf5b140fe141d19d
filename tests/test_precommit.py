"""The hooks through the pre-commit framework, from this repository's manifest.

pre-commit prints a line for every hook it runs, so the route is one hook at the
commit-msg stage; every commit here counts what the user sees. Most tests use the
manifest's entry in a `repo: local` config with language `unsupported` (it runs from
PATH, where the test venv's `git-obversa` is), so they run in a second or so. One test
consumes the manifest exactly as published: the config block of docs/reasoning.md, a
pinned `repo:` with `language: python`, which pre-commit installs into its own
virtualenv.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from git_obversa.record.turns import TurnStore
from tests.gitutil import git, make_repo, obversa
from tests.test_docs import parse
from tests.test_hook_e2e import without_record_ids

MANIFEST = Path(__file__).resolve().parent.parent / ".pre-commit-hooks.yaml"
REASON = "Retry twice because the upstream API fails in bursts of two."
# The one line pre-commit prints for the hook (its width follows the terminal's).
PASSED = re.compile(r"reasoning into the commit message \(git-obversa\)\.+Passed")
# A hook of the user's that refuses the commit after ours ran, while .git/refuse exists.
REFUSE = {
    "id": "refuse",
    "name": "refuse",
    "entry": "test ! -e .git/refuse",
    "language": "unsupported",
    "stages": ["commit-msg"],
    "always_run": True,
    "pass_filenames": False,
}


@pytest.fixture(scope="module")
def precommit_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("pre-commit-home")


def configured(path: Path, *others: dict) -> Path:
    """PATH, a new repository using the manifest's hooks (and OTHERS after them) with
    pre-commit, configured as docs/reasoning.md says, less the `pre-commit` hook type
    (no hook of that stage here: it would print nothing, only take time)."""
    make_repo(path)
    hooks = [{**hook, "language": "unsupported"} for hook in yaml.safe_load(MANIFEST.read_text())]
    config = {
        "default_stages": ["pre-commit"],
        "default_install_hook_types": ["commit-msg"],
        "repos": [{"repo": "local", "hooks": [*hooks, *others]}],
    }
    (path / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    git(path, "add", ".pre-commit-config.yaml")
    git(path, "commit", "-q", "--no-verify", "-m", "pre-commit config")
    installed = subprocess.run(["pre-commit", "install"], cwd=path, capture_output=True, text=True)
    assert installed.returncode == 0, installed.stderr
    return path


@pytest.fixture
def repo(tmp_path, precommit_home, monkeypatch) -> Path:
    monkeypatch.setenv("PRE_COMMIT_HOME", str(precommit_home))
    return configured(tmp_path / "repo")


@pytest.fixture
def refusing(tmp_path, precommit_home, monkeypatch) -> Path:
    """A repository where a commit-msg hook of the user's runs after ours and refuses
    the commit while .git/refuse exists (it prints a line of its own)."""
    monkeypatch.setenv("PRE_COMMIT_HOME", str(precommit_home))
    return configured(tmp_path / "repo", REFUSE)


def capture(cwd: Path, text: str = REASON) -> None:
    TurnStore.for_worktree(cwd).append(
        [{"stage": "implement", "node": "implement", "kind": "engine:text", "text": text}]
    )


def pending(cwd: Path) -> list[str]:
    return [turn["text"] for turn in TurnStore.for_worktree(cwd).read()]


def commit(cwd: Path, *args: str, editor: str = ":", change: bool = True):
    """`git commit -q ARGS` of a changed file; its stdout and stderr as one text."""
    if change:
        with open(cwd / "code.py", "a") as handle:
            handle.write(f"retries = {len(args)}\n")
        git(cwd, "add", "code.py")
    return subprocess.run(
        ["git", "commit", "-q", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "GIT_EDITOR": editor},
    )


def one_line(completed: subprocess.CompletedProcess) -> None:
    """The commit succeeded and the user saw exactly pre-commit's one line for our hook
    (and one for the refusing hook, where it is configured)."""
    assert completed.returncode == 0, completed.stdout
    lines = [line for line in completed.stdout.splitlines() if not line.startswith("refuse.")]
    assert len(lines) == 1 and PASSED.fullmatch(lines[0]), completed.stdout


def editor(tmp_path: Path, body: str) -> str:
    script = tmp_path / "editor.sh"
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(0o755)
    return str(script)


def message(cwd: Path, rev: str = "HEAD") -> str:
    return without_record_ids(git(cwd, "log", "-1", "--format=%B", rev)[:-1])


def trailers(cwd: Path) -> str:
    raw = git(cwd, "log", "-1", "--format=%B")
    return without_record_ids(git(cwd, "interpret-trailers", "--parse", input=raw))


def head(cwd: Path) -> str:
    return git(cwd, "rev-parse", "HEAD")


def test_manifest_is_valid_and_offers_one_hook_at_commit_msg():
    validated = subprocess.run(
        ["pre-commit", "validate-manifest", str(MANIFEST)], capture_output=True, text=True
    )
    assert validated.returncode == 0, validated.stdout + validated.stderr
    hook, attribution = yaml.safe_load(MANIFEST.read_text())
    assert hook["id"] == "obversa-reasoning"
    assert hook["stages"] == ["commit-msg"] and hook["always_run"] is True
    # Optional, for the notes of who wrote the lines (tests/test_precommit.py's last test).
    assert attribution["stages"] == ["post-commit"]


def test_one_line_per_commit_whatever_the_commit(repo, tmp_path):
    capture(repo)
    one_line(commit(repo, "-s", "--trailer", "Fixes: #12", "-m", "Retry API calls"))
    assert message(repo) == (
        f"Retry API calls\n\nWhy:\n{REASON}\n\n"
        "Signed-off-by: Test Author <author@example.com>\nFixes: #12\n"
        "Obversa-Record: implement\n"
    )
    one_line(commit(repo, "-m", "Nothing pending"))
    assert message(repo) == "Nothing pending\n"  # the last commit's turns went with it
    kept = obversa("record", "show", "HEAD~1", cwd=repo)  # ... into its kept record
    assert REASON in kept.stdout, kept.stderr
    # Through the command line: composed ahead, at capture (record.composition.compose_ahead).
    noted = obversa(
        "record", "note", "--stage", "implement", "Typed in the editor, written after it.", cwd=repo
    )
    assert noted.returncode == 0, noted.stderr
    assert "not installed" not in noted.stderr  # pre-commit's commit-msg hook counts
    assert (repo / ".git" / "obversa" / "record" / "composed").exists()
    one_line(commit(repo, "-v", editor=editor(tmp_path, 'sed -i "1i Typed" "$1"')))
    assert message(repo) == (
        "Typed\n\nWhy:\nTyped in the editor, written after it.\n\nObversa-Record: implement\n"
    )
    capture(repo, "Amended in.")
    one_line(commit(repo, "--amend", "--no-edit", change=False))
    assert message(repo).count("Why:") == 1
    assert "Why:\nTyped in the editor, written after it.\n\nAmended in.\n" in message(repo)
    assert trailers(repo) == "Obversa-Record: implement\n"
    shown = obversa("record", "show", cwd=repo)
    assert shown.stdout.startswith("No pending turns"), shown.stdout


def test_a_commit_git_aborts_after_the_hook_keeps_its_turns(refusing, tmp_path):
    repo = refusing
    capture(repo)
    before = head(repo)
    emptied = commit(repo, editor=editor(tmp_path, ': > "$1"'))
    assert "Aborting commit due to empty commit message." in emptied.stdout
    only_signed = commit(repo, "-s", editor=":")  # git counts a sign-off alone as empty
    assert "Aborting commit due to empty commit message." in only_signed.stdout
    template = tmp_path / "template.txt"
    template.write_text("Subject from the template\n")
    git(repo, "config", "commit.template", str(template))
    untouched = commit(repo, editor=":")
    assert "you did not edit the message" in untouched.stdout
    git(repo, "config", "--unset", "commit.template")
    (repo / ".git" / "refuse").touch()  # a hook after ours refuses: our claim was made
    refused = commit(repo, "-m", "Refused")
    assert refused.returncode != 0 and "refuse" in refused.stdout
    assert head(repo) == before
    assert "1 pending turn." in obversa("record", "show", cwd=repo).stdout
    assert pending(repo) == [REASON]
    (repo / ".git" / "refuse").unlink()
    one_line(commit(repo, "-m", "Retry API calls"))
    assert message(repo) == f"Retry API calls\n\nWhy:\n{REASON}\n\nObversa-Record: implement\n"
    one_line(commit(repo, "-m", "Next"))
    assert message(repo) == "Next\n"


def test_commits_that_came_without_the_block_never_drop_the_turns(refusing):
    repo = refusing
    capture(repo)
    (repo / ".git" / "refuse").touch()
    assert commit(repo, "-m", "Refused after our hook wrote the block").returncode != 0
    (repo / ".git" / "refuse").unlink()
    # HEAD moves by commits that carry someone's record trailer (a pull, --no-verify)
    # but not the block the refused commit was given.
    theirs = "Their change\n\nWhy:\nTheir reason.\n\nObversa-Record: implement\n"
    assert commit(repo, "--no-verify", "-m", theirs).returncode == 0
    assert obversa("record", "show", cwd=repo).stdout.endswith("1 pending turn.\n")
    one_line(commit(repo, "-m", "Mine"))
    assert message(repo) == f"Mine\n\nWhy:\n{REASON}\n\nObversa-Record: implement\n"


def test_merges_and_replays_are_left_alone(repo):
    git(repo, "checkout", "-q", "-b", "side")
    commit(repo, "--no-verify", "-m", "side work")
    git(repo, "checkout", "-q", "-")
    (repo / "main.txt").write_text("main\n")
    git(repo, "add", "main.txt")
    git(repo, "commit", "-q", "--no-verify", "-m", "main work")
    capture(repo)
    merged = subprocess.run(["git", "merge", "-q", "--no-edit", "side"], cwd=repo, text=True)
    assert merged.returncode == 0
    assert message(repo) == "Merge branch 'side'\n"
    git(repo, "revert", "--no-edit", "HEAD~1")
    assert "Why:" not in message(repo)
    git(repo, "cherry-pick", "HEAD~2")  # "main work" again
    assert message(repo) == "main work\n"
    git(repo, "checkout", "-q", "-b", "squashed", "HEAD~3")
    git(repo, "merge", "-q", "--squash", "side")
    assert commit(repo, "--no-edit", change=False).returncode == 0
    assert message(repo).startswith("Squashed commit of the following:")
    assert "Why:" not in message(repo)
    assert pending(repo) == [REASON]
    one_line(commit(repo, "-m", "My own work"))
    assert "Why:\nRetry twice" in message(repo)


def test_strict_mode_stops_the_commit_when_composition_fails(repo, tmp_path):
    composer = tmp_path / "composer.py"
    composer.write_text("import sys\nsys.exit(3)\n")
    git(repo, "config", "obversa.composer", f"{sys.executable} {composer}")
    git(repo, "config", "obversa.strict", "true")
    capture(repo)
    before = head(repo)
    completed = commit(repo, "-m", "Retry API calls")
    assert completed.returncode == 1
    assert "git obversa hook commit-msg: " in completed.stdout
    assert "(obversa.strict is set)" in completed.stdout
    assert head(repo) == before
    assert pending(repo) == [REASON]


def test_comment_char_and_strip_cleanup(repo):
    git(repo, "config", "core.commentChar", ";")
    capture(repo, "; a line that looks like a comment")
    one_line(commit(repo, "--cleanup=strip", "-m", "Subject"))
    assert message(repo) == (
        "Subject\n\nWhy:\n ; a line that looks like a comment\n\nObversa-Record: implement\n"
    )


def test_the_manifest_as_published_installs_and_runs(tmp_path, monkeypatch):
    """As a consumer uses it, with the configuration block of docs/reasoning.md: `repo:`
    pointing at a git repository holding this package, pinned by `rev:` to a commit of it,
    with the manifest's own `language: python` (pre-commit builds a
    virtualenv and pip-installs the package into it)."""
    root = MANIFEST.parent
    published = tmp_path / "published"
    published.mkdir()
    # What the wheel is built from: the package below, and the files pyproject.toml names.
    for name in (
        "pyproject.toml",
        "README.md",
        ".pre-commit-hooks.yaml",
        "bin/git-obversa",
        "man/git-obversa.1",
    ):
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
    one_line(commit(consumer, "-m", "Retry API calls", "-s"))
    assert message(consumer) == (
        "Retry API calls\n\nWhy:\n" + REASON + "\n\n"
        "Signed-off-by: Test Author <author@example.com>\nObversa-Record: implement\n"
    )
    # The next commit, run from the installed environment, settled what this one carried.
    one_line(commit(consumer, "-m", "Next"))
    assert message(consumer) == "Next\n"
    assert TurnStore.for_worktree(consumer).read() == []


def test_attribution_notes_on_this_route(tmp_path, precommit_home, monkeypatch):
    """With obversa.attribution set, the notes of who wrote the lines (issue 28): written
    when the next hook settles the claim, or at once with the manifest's post-commit hook."""
    from git_obversa.attribution import agent_trace, git_ai

    monkeypatch.setenv("PRE_COMMIT_HOME", str(precommit_home))
    turn = {"stage": "implement", "node": "implement", "kind": "note", "text": REASON}
    turn |= {"agent": "claude-code", "session": "conv-7f3a", "model": "claude-sonnet-4-5"}

    def notes(cwd: Path, rev: str) -> list[str]:
        return [
            git(cwd, "notes", "--ref", ref, "show", rev, check=False)
            for ref in (git_ai.NOTES_REF, agent_trace.NOTES_REF)
        ]

    repo = configured(tmp_path / "settled")
    git(repo, "config", "obversa.attribution", "git-ai,agent-trace")
    TurnStore.for_worktree(repo).append([turn])
    one_line(commit(repo, "-m", "Retry API calls"))
    first = head(repo).strip()
    assert notes(repo, first) == ["", ""]  # no post-commit here: settled by the next hook
    one_line(commit(repo, "-m", "Nothing pending"))
    log, record = notes(repo, first)
    assert git_ai.parse(log).files == {
        "code.py": [(git_ai.parse(log).files["code.py"][0][0], [(1, 1)])]
    }
    assert json.loads(record)["files"][0]["conversations"][0]["contributor"]["type"] == "ai"

    now = configured(tmp_path / "at-once")
    config = yaml.safe_load((now / ".pre-commit-config.yaml").read_text())
    config["default_install_hook_types"] = ["commit-msg", "post-commit"]
    (now / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    git(now, "commit", "-q", "--no-verify", "-am", "post-commit too")
    installed = subprocess.run(["pre-commit", "install"], cwd=now, capture_output=True, text=True)
    assert installed.returncode == 0, installed.stderr
    git(now, "config", "obversa.attribution", "git-ai,agent-trace")
    TurnStore.for_worktree(now).append([turn])
    done = commit(now, "-m", "Retry API calls")
    assert done.returncode == 0, done.stdout
    assert len(done.stdout.splitlines()) == 2, done.stdout  # a line for each hook
    log, record = notes(now, "HEAD")
    assert "claude-sonnet-4-5" in log and json.loads(record)["vcs"]["revision"] == head(now).strip()
