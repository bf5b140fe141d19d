"""`git obversa install` / `uninstall`: where the shims go, chaining, idempotence."""

from __future__ import annotations

import json
from pathlib import Path

from git_obversa import open_git_memory
from git_obversa.record.turns import TurnStore
from tests.gitutil import git, make_repo, obversa

ROOT = Path(__file__).resolve().parent.parent
OLD_HOOK = '#!/bin/sh\necho "old hook ran with $*" >> "$(git rev-parse --git-dir)/old-hook.log"\n'


def install(repo: Path, *args: str) -> dict:
    completed = obversa("install", "--json", *args, cwd=repo)
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


def commit_with_reasoning(repo: Path, text: str = "Because of the bursts.") -> str:
    TurnStore.for_worktree(repo).append(
        [{"stage": "implement", "node": "implement", "kind": "engine:text", "text": text}]
    )
    (repo / "file.txt").write_text(text)
    git(repo, "add", "file.txt")
    git(repo, "commit", "-q", "-m", "Change")
    return git(repo, "log", "-1", "--format=%B")


def test_install_into_git_hooks_and_commit_carries_reasoning(repo):
    report = install(repo)
    assert report["hooks_dir"] == str(repo / ".git" / "hooks")
    assert [hook["action"] for hook in report["hooks"]] == ["installed"] * 4
    assert "Why:\nBecause of the bursts." in commit_with_reasoning(repo)


def test_install_twice_changes_nothing(repo):
    install(repo)
    before = (repo / ".git/hooks/prepare-commit-msg").read_text()
    again = install(repo)
    assert [hook["action"] for hook in again["hooks"]] == ["unchanged"] * 4
    assert (repo / ".git/hooks/prepare-commit-msg").read_text() == before
    assert not (repo / ".git/hooks/prepare-commit-msg.pre-obversa").exists()
    assert commit_with_reasoning(repo).count("Why:") == 1


def test_honours_core_hooks_path(repo):
    git(repo, "config", "core.hooksPath", "my-hooks")
    report = install(repo)
    assert report["hooks_dir"] == str(repo / "my-hooks")
    assert (repo / "my-hooks" / "prepare-commit-msg").exists()
    assert not (repo / ".git/hooks/prepare-commit-msg").exists()
    assert "Why:" in commit_with_reasoning(repo)


def test_existing_hook_is_kept_still_runs_and_uninstall_restores_it(repo):
    old = repo / ".git/hooks/prepare-commit-msg"
    old.write_text(OLD_HOOK)
    old.chmod(0o755)
    report = install(repo)
    assert report["hooks"][0] == {"name": "prepare-commit-msg", "action": "installed", "kept": True}
    body = commit_with_reasoning(repo)
    assert "Why:" in body
    assert (
        "old hook ran with .git/COMMIT_EDITMSG message" in (repo / ".git/old-hook.log").read_text()
    )

    completed = obversa("uninstall", cwd=repo)
    assert completed.returncode == 0, completed.stderr
    assert "prepare-commit-msg: restored" in completed.stdout
    assert "post-commit: removed" in completed.stdout
    assert old.read_text() == OLD_HOOK
    assert not (repo / ".git/hooks/post-commit").exists()
    assert "Why:" not in commit_with_reasoning(repo, "Not captured any more.")


def test_failing_kept_hook_still_stops_the_commit(repo):
    old = repo / ".git/hooks/prepare-commit-msg"
    old.write_text("#!/bin/sh\necho 'policy says no' >&2\nexit 1\n")
    old.chmod(0o755)
    install(repo)
    (repo / "x.txt").write_text("x")
    git(repo, "add", "x.txt")
    completed = git(repo, "commit", "-q", "-m", "blocked", check=False)
    assert completed == ""
    assert git(repo, "log", "-1", "--format=%s") == "initial\n"


def test_uninstall_leaves_foreign_hooks_alone(repo):
    hook = repo / ".git/hooks/post-commit"
    hook.write_text("#!/bin/sh\nexit 0\n")
    completed = obversa("uninstall", cwd=repo)
    assert completed.returncode == 0
    assert "post-commit: not git-obversa's, left alone" in completed.stdout
    assert hook.read_text() == "#!/bin/sh\nexit 0\n"


def test_dangling_symlink_hook_is_kept_and_restored(repo):
    hook = repo / ".git/hooks/prepare-commit-msg"
    hook.symlink_to("../../tools/missing-hook")
    assert install(repo)["hooks"][0]["kept"] is True
    kept = repo / ".git/hooks/prepare-commit-msg.pre-obversa"
    assert kept.is_symlink() and str(kept.readlink()) == "../../tools/missing-hook"
    assert "Why:" in commit_with_reasoning(repo)  # a kept hook that cannot run is skipped
    assert obversa("uninstall", cwd=repo).returncode == 0
    assert hook.is_symlink() and str(hook.readlink()) == "../../tools/missing-hook"


def test_install_refuses_to_overwrite_a_kept_dangling_symlink(repo):
    hooks = repo / ".git/hooks"
    (hooks / "prepare-commit-msg").write_text(OLD_HOOK)
    (hooks / "prepare-commit-msg.pre-obversa").symlink_to("gone")
    completed = obversa("install", cwd=repo)
    assert completed.returncode == 1
    assert "prepare-commit-msg.pre-obversa is taken" in completed.stderr
    assert (hooks / "prepare-commit-msg").read_text() == OLD_HOOK
    assert str((hooks / "prepare-commit-msg.pre-obversa").readlink()) == "gone"


def test_install_again_makes_a_shim_that_lost_its_execute_bit_run_again(repo):
    install(repo)
    shim = repo / ".git/hooks/prepare-commit-msg"
    shim.chmod(0o644)
    again = install(repo)
    assert [hook["action"] for hook in again["hooks"]] == [
        "updated",
        "unchanged",
        "unchanged",
        "unchanged",
    ]
    assert shim.stat().st_mode & 0o111
    assert "Why:" in commit_with_reasoning(repo)


def test_install_outside_a_repository_is_one_line_error(tmp_path):
    completed = obversa("install", cwd=tmp_path)
    assert completed.returncode == 1
    assert completed.stderr.startswith("git obversa install: ")
    assert len(completed.stderr.strip().splitlines()) == 1


def test_help_teaches(repo):
    completed = obversa("install", "--help", cwd=repo)
    assert completed.returncode == 0
    assert "core.hooksPath" in completed.stdout and "git obversa record note" in completed.stdout


def test_install_sync_makes_plain_push_and_fetch_carry_memory(tmp_path):
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    first = make_repo(tmp_path / "first")
    git(first, "remote", "add", "origin", str(remote))
    completed = obversa("install", "--sync", cwd=first)
    assert completed.returncode == 0, completed.stderr
    assert "refs/obversa/memory/v1/*" in completed.stdout
    assert "pre-push: installed" in completed.stdout
    memory = open_git_memory(str(first), "team")
    created = memory.execute(
        {"command": "create", "path": "/memories/a.md", "file_text": "shared\n"}
    )
    assert created["ok"]
    git(first, "push", "-q", "origin", "HEAD:main")  # the pre-push hook sends memory

    second = tmp_path / "second"
    git(tmp_path, "clone", "-q", str(remote), str(second))
    assert obversa("install", "--sync", cwd=second).returncode == 0
    git(second, "fetch", "-q", "origin")
    pulled = obversa("memory", "pull", cwd=second)
    assert pulled.returncode == 0, pulled.stderr
    viewed = open_git_memory(str(second), "team").execute(
        {"command": "view", "path": "/memories/a.md"}
    )
    assert viewed["value"]["text"] == "shared\n"


def test_install_sync_with_an_unknown_remote_fails_before_installing(repo):
    completed = obversa("install", "--sync", "nowhere", cwd=repo)
    assert completed.returncode == 1
    assert "'nowhere' is not a configured remote" in completed.stderr
    assert not (repo / ".git" / "hooks" / "prepare-commit-msg").exists()
