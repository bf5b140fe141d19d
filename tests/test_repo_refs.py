"""git_obversa/repo/refs.py, location.py and locks.py beside real git: refs loose and
packed, HEAD, where a repository is, and git's lock files."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from git_obversa.repo import location, locks, refs
from tests.gitutil import git, make_repo


def test_refs_loose_and_packed_read_as_git_lists_them(tmp_path):
    repo = make_repo(tmp_path / "r")
    git(repo, "tag", "-a", "-m", "annotated", "v1")  # packed with a peeled line
    git(repo, "branch", "side")
    git(repo, "pack-refs", "--all")
    git(repo, "commit", "-q", "--allow-empty", "-m", "loose again")  # main: loose, newer
    git(repo, "branch", "fresh")
    listed = dict(
        reversed(line.split(" "))
        for line in git(repo, "for-each-ref", "--format=%(objectname) %(refname)").splitlines()
    )
    files = refs.RefFiles(str(repo / ".git"))
    assert {name: files.read(name) for name in files.names("refs/")} == listed
    packed = (repo / ".git" / "packed-refs").read_bytes()
    assert refs.parse_packed_refs(packed)["refs/tags/v1"] == git(repo, "rev-parse", "v1").strip()
    assert files.read("refs/heads/missing") is None


def test_head_is_read_as_git_reads_it_or_left_to_git(tmp_path):
    repo = make_repo(tmp_path / "r")
    git_dir = str(repo / ".git")
    head = git(repo, "rev-parse", "HEAD").strip()
    assert refs.head_commit(git_dir, git_dir) == head  # a loose branch
    git(repo, "pack-refs", "--all")
    assert refs.head_commit(git_dir, git_dir) == head  # a packed branch
    git(repo, "checkout", "-q", "--detach")
    assert refs.head_commit(git_dir, git_dir) == head  # detached
    git(repo, "checkout", "-q", "--orphan", "unborn")
    assert refs.head_commit(git_dir, git_dir) is None  # unborn: git's to say
    assert not refs.merging(git_dir)


def test_a_repository_is_located_where_git_finds_it(tmp_path):
    repo = make_repo(tmp_path / "r")
    (repo / "sub").mkdir()
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", "-b", "side", str(linked))
    asked = ["rev-parse", "--path-format=absolute", "--git-common-dir", "--git-dir"]
    asked += ["--show-toplevel", "--show-prefix"]
    for where in (repo, repo / "sub", linked):
        common, git_dir, top, prefix = git(where, *asked).split("\n")[:4]
        assert location.located(where) == (common, git_dir, top, prefix)
    assert location.located(repo / ".git") is None  # inside the git directory: git's to say
    assert location.relative("../x", str(repo), "") is None
    assert location.relative("x/../y.md", str(repo), "sub/") == "sub/y.md"


HOLDER = """
import os, sys, time
from git_obversa.repo import locks
handle = locks.take(sys.argv[1])
print("held", flush=True)
if sys.argv[2] == "die":
    os._exit(0)
time.sleep(30)
"""


def held_by_another_process(lock: Path, how: str) -> subprocess.Popen:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(lock), how], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


def test_a_lock_stands_while_its_writer_lives_and_is_cleared_once_stale(tmp_path):
    # A git lock is dead only when no git process works in its repository: a real one.
    subprocess.run(["git", "init", "-q", "--bare", str(tmp_path)], check=True)
    target = tmp_path / "refs" / "heads" / "main"
    lock = locks.lock_path(str(target))
    assert locks.clear_if_stale(lock) == (False, None)  # no lock at all
    holder = held_by_another_process(Path(lock), "live")
    try:
        old = time.time() - locks.ORPHAN_LOCK_SECONDS - 1
        os.utime(lock, (old, old))
        assert locks.clear_if_stale(lock) == (True, None)  # empty but alive: it stands
        assert locks.take(lock) is None  # and nobody else takes it
    finally:
        holder.kill()
        holder.wait()
    assert locks.clear_if_stale(lock)[1] is not None  # its writer died: cleared
    assert not os.path.exists(lock)
    held_by_another_process(Path(lock), "die").wait()
    stale = time.time() - locks.STALE_LOCK_SECONDS - 2
    Path(lock).write_text("0" * 40 + "\n")  # git's lock: written at once, never flocked
    os.utime(lock, (stale, stale))
    stands, cleared = locks.clear_if_stale(lock)
    assert not stands and cleared is not None and cleared >= 7  # cleared, its age said
    handle = locks.take(lock)
    assert handle is not None
    locks.commit(lock, str(target), handle, b"1" * 40 + b"\n", fsync=False)
    assert target.read_text() == "1" * 40 + "\n" and not os.path.exists(lock)
