"""git_obversa/repo/index.py: a warm `why FILE` proves the file unchanged from git's index
instead of running `git diff-index` (`index_holds`), and gives that up, running git as
before, on everything it does not fully understand. Real repositories, real git: each case checks
the proof itself and that the CLI's answer is the one `--no-cache` gives."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from git_obversa.lookup import blame, cache, head_start
from git_obversa.repo import index as git_index
from git_obversa.repo import location, refs
from tests.gitutil import git, settle
from tests.test_lookup_blame import uncommitted_undated

TEXT = "".join(f"line {n}\n" for n in range(10))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """f.txt and d/x.txt committed, f.txt's blame cached, its index entry not racy."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "f.txt").write_text(TEXT)
    (repo / "d").mkdir()
    (repo / "d" / "x.txt").write_text("x\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "Add f\n\nWhy:\nA test needs it.")
    blame.lookup(repo, "f.txt", rev=None)
    settle(repo, "f.txt", "d/x.txt")
    return repo


def proof(repo: Path, name: str = "f.txt") -> str | None:
    read = location.located(repo)
    assert read is not None
    commit = refs.head_commit(read[1], read[0])
    assert commit is not None
    return head_start.proven(read, name, commit)


def blob(repo: Path, name: str = "f.txt") -> str:
    return git(repo, "rev-parse", f"HEAD:{name}")[:-1]


def why(repo: Path, *args: str) -> str:
    completed = subprocess.run(
        ["git-obversa", "why", "f.txt", *args], cwd=repo, capture_output=True, text=True
    )
    assert completed.returncode == 0, completed.stderr
    return uncommitted_undated(completed.stdout)


def assert_answer_is_gits(repo: Path) -> None:
    assert why(repo) == why(repo, "--no-cache")


@pytest.mark.parametrize("version", [2, 3, 4])
def test_a_settled_file_is_proven_in_every_index_version(repo, version):
    if version == 3:  # what git writes once an entry has extended flags: another one here
        git(repo, "update-index", "--skip-worktree", "d/x.txt")
    else:
        git(repo, "update-index", "--index-version", str(version))
    assert int.from_bytes((repo / ".git" / "index").read_bytes()[4:8], "big") == version
    assert proof(repo) == blob(repo)
    assert proof(repo, "d/x.txt") is None  # no blame of it is kept: no blob to prove
    assert "A test needs it." in why(repo)
    assert_answer_is_gits(repo)


def test_a_sha256_repository_is_proven_too(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "--object-format=sha256")
    (repo / "f.txt").write_text(TEXT)
    git(repo, "add", "f.txt")
    git(repo, "commit", "-q", "-m", "f")
    blame.lookup(repo, "f.txt", rev=None)
    settle(repo, "f.txt")
    assert len(blob(repo)) == 64 and proof(repo) == blob(repo)
    assert_answer_is_gits(repo)


def test_a_racy_entry_is_not_trusted(repo):
    """An entry whose file is not older than the index file (to the second) may hide a
    change made in the second the index was written: git reads such a file, and the
    proof gives way."""
    entry_file, index_file = repo / "f.txt", repo / ".git" / "index"
    modified = os.stat(entry_file).st_mtime_ns
    os.utime(index_file, ns=(modified, modified))  # the index written in the file's second
    assert proof(repo) is None
    settle(repo, "f.txt")
    assert proof(repo) == blob(repo)


def test_an_edit_in_the_second_of_the_commit_is_seen(repo):
    """The racy case itself: a file committed and rewritten, same size, within one
    second; and again with its modification time put back as recorded."""
    for attempt in range(3):
        committed = TEXT.replace("line 4", f"lin{attempt} 4")
        (repo / "f.txt").write_text(committed)
        git(repo, "commit", "-qam", f"four {attempt}")
        blame.lookup(repo, "f.txt", rev=None)
        recorded = os.stat(repo / "f.txt")
        (repo / "f.txt").write_text(committed.replace("line 5", "LINE 5"))  # line 6 differs
        os.utime(repo / "f.txt", ns=(recorded.st_atime_ns, recorded.st_mtime_ns))
        assert os.stat(repo / "f.txt").st_size == recorded.st_size
        assert proof(repo) is None
        answer = why(repo)
        assert "commit " + "0" * 40 + " (line 6 of f.txt)" in answer
        assert answer == why(repo, "--no-cache")
        git(repo, "checkout", "-q", "f.txt")


def fsmonitor(repo: Path) -> None:
    hook = repo.parent / "fsmonitor-hook"
    hook.write_text("#!/bin/sh\nprintf 'token\\0/\\0'\n")
    hook.chmod(0o755)
    git(repo, "config", "core.fsmonitor", str(hook))
    git(repo, "update-index", "--fsmonitor")


def intent_to_add(repo: Path) -> None:
    git(repo, "rm", "-q", "--cached", "f.txt")
    git(repo, "add", "-N", "f.txt")


GIVE_UPS = {
    "split index": lambda repo: git(repo, "update-index", "--split-index"),
    "sparse index": lambda repo: git(repo, "sparse-checkout", "init", "--cone", "--sparse-index"),
    "skip-worktree": lambda repo: git(repo, "update-index", "--skip-worktree", "f.txt"),
    "assume-unchanged": lambda repo: git(repo, "update-index", "--assume-unchanged", "f.txt"),
    "fsmonitor": fsmonitor,
    "intent-to-add": intent_to_add,
    "executable bit": lambda repo: (repo / "f.txt").chmod(0o755),
    "touched": lambda repo: os.utime(repo / "f.txt"),
}


@pytest.mark.parametrize("case", sorted(GIVE_UPS))
def test_what_the_proof_does_not_understand_goes_to_git(repo, case):
    assert proof(repo) == blob(repo)
    GIVE_UPS[case](repo)
    assert proof(repo) is None
    assert_answer_is_gits(repo)


def test_another_index_named_by_the_environment_goes_to_git(repo, monkeypatch):
    monkeypatch.setenv("GIT_INDEX_FILE", str(repo / ".git" / "index"))
    assert proof(repo) is None


def test_an_index_too_large_to_walk_goes_to_git(repo, monkeypatch):
    monkeypatch.setattr(git_index, "MAX_INDEX_ENTRIES", 1)  # the index holds two
    assert proof(repo) is None


def test_a_symlink_a_conflict_and_an_empty_file_are_not_proven(repo):
    empty = git(repo, "hash-object", "-w", "--stdin", input="")[:-1]
    (repo / "e.txt").write_text("")
    git(repo, "add", "e.txt")
    settle(repo, "e.txt")
    # size 0: smudged
    assert not git_index.index_holds(str(repo / ".git"), str(repo), "e.txt", empty)
    (repo / "f.txt").unlink()
    (repo / "f.txt").symlink_to("d/x.txt")
    assert proof(repo) is None
    git(repo, "checkout", "-q", "f.txt")
    git(repo, "checkout", "-q", "-b", "side")
    (repo / "f.txt").write_text(TEXT + "side\n")
    git(repo, "commit", "-qam", "side")
    git(repo, "checkout", "-q", "-")
    (repo / "f.txt").write_text(TEXT + "main\n")
    git(repo, "commit", "-qam", "main")
    git(repo, "merge", "-q", "side", check=False)  # a conflict: f.txt at stages 1-3
    assert "f.txt" in git(repo, "diff", "--name-only", "--diff-filter=U")
    ours = git(repo, "rev-parse", ":2:f.txt")[:-1]
    assert not git_index.index_holds(str(repo / ".git"), str(repo), "f.txt", ours)


def test_a_proof_resting_on_a_damaged_entry_asks_git(repo):
    """The blob is read from the entry's header before the entry is checked; when the
    entry then fails its check, git's diff decides, and the entry is computed anew."""
    commit = git(repo, "rev-parse", "HEAD")[:-1]
    folder = Path(cache.directory(str(repo / ".git")))
    location = folder / cache.entry_name(commit, "f.txt")
    good = location.read_bytes()
    assert proof(repo) == blob(repo)
    location.write_bytes(good.replace(b"line 3", b"line 8"))  # the payload, not the header
    assert proof(repo) == blob(repo)  # the header still names the blob
    uncached = blame.lookup(repo, "f.txt", rev=None, cache=False)
    assert blame.lookup(repo, "f.txt", rev=None) == uncached
    found = cache.load(str(folder), commit, "f.txt")  # deleted, computed anew, kept
    assert found is not None and found[1] == blob(repo)
    location.write_bytes(good.replace(b"line 3", b"line 8"))
    assert why(repo) == why(repo, "--no-cache")
