"""Ref locks (issue 27): a dead writer's lock is removed by whoever finds it, a live
holder's is never taken, however long it holds it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from git_obversa.memory.git_memory import scope_digest, scope_ref
from git_obversa.memory.ref_names import history_ref
from git_obversa.repo import locks
from tests.gitutil import git, make_repo, obversa

# A writer of ours holding a ref's lock (as a write does between taking and committing
# it), until killed.
HOLD_A_LOCK = r"""
import sys, time
from git_obversa.memory.gitstore import open_store
store = open_store(sys.argv[1])
assert store._lock_ref(sys.argv[2]) is not None
print("held", flush=True)
time.sleep(600)
"""


def scope_with_a_file(tmp_path: Path) -> Path:
    repo = make_repo(tmp_path / "repo")
    done = obversa("memory", "create", "/memories/a.md", "a", "--scope", "s", cwd=repo)
    assert done.returncode == 0, done.stderr
    return repo


def lock_file(repo: Path, ref: str) -> Path:
    return repo / ".git" / (ref + ".lock")


def test_a_lock_a_killed_writer_left_goes_with_the_next_view_and_git_gc_passes(tmp_path):
    repo = scope_with_a_file(tmp_path)
    ref = history_ref(scope_digest("s"))
    writer = subprocess.Popen(
        [sys.executable, "-c", HOLD_A_LOCK, str(repo), ref], stdout=subprocess.PIPE, text=True
    )
    assert writer.stdout is not None and writer.stdout.readline() == "held\n"
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait()
    lock = lock_file(repo, ref)
    assert lock.exists()
    # What the user meets until something removes it: git gc fails on the reflog.
    assert subprocess.run(["git", "gc", "-q"], cwd=repo, capture_output=True).returncode != 0
    past = time.time() - locks.ORPHAN_LOCK_SECONDS - 1  # the next command, a moment later
    os.utime(lock, (past, past))
    view = obversa("memory", "view", "/memories/a.md", "--scope", "s", cwd=repo)
    assert view.returncode == 0 and view.stdout.endswith("a\n"), view.stderr
    assert not lock.exists()
    gc = subprocess.run(["git", "gc", "-q"], cwd=repo, capture_output=True, text=True)
    assert gc.returncode == 0, gc.stderr


def test_memory_scopes_removes_a_killed_writers_lock_of_any_scope(tmp_path):
    repo = scope_with_a_file(tmp_path)
    ref = scope_ref("s")
    writer = subprocess.Popen(
        [sys.executable, "-c", HOLD_A_LOCK, str(repo), ref], stdout=subprocess.PIPE, text=True
    )
    assert writer.stdout is not None and writer.stdout.readline() == "held\n"
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait()
    lock = lock_file(repo, ref)
    past = time.time() - locks.ORPHAN_LOCK_SECONDS - 1
    os.utime(lock, (past, past))
    listed = obversa("memory", "scopes", cwd=repo)
    assert listed.returncode == 0 and "s (" in listed.stdout, listed.stderr
    assert not lock.exists() and "killed writer" in listed.stderr


def test_a_lock_a_stopped_git_holds_is_never_removed(tmp_path):
    repo = scope_with_a_file(tmp_path)
    ref = scope_ref("s")
    tree = git(repo, "rev-parse", ref).strip()
    # A git that took the scope ref's lock and was then stopped (Ctrl-Z, SIGSTOP): its
    # transaction is prepared (the lock written) and waits for "commit".
    holder = subprocess.Popen(
        ["git", "update-ref", "--stdin"], cwd=repo, stdin=subprocess.PIPE, text=True
    )
    assert holder.stdin is not None
    holder.stdin.write(f"start\nupdate {ref} {tree} {tree}\nprepare\n")
    holder.stdin.flush()
    lock = lock_file(repo, ref)
    deadline = time.monotonic() + 30
    while not lock.exists():
        assert time.monotonic() < deadline, "git took no lock"
        time.sleep(0.02)
    os.kill(holder.pid, signal.SIGSTOP)
    identity = os.stat(lock).st_ino
    try:
        started = time.monotonic()
        write = obversa("memory", "create", "/memories/b.md", "b", "--scope", "s", cwd=repo)
        # The write waits, then says which file is in its way; it never takes it.
        assert write.returncode != 0 and str(lock) in write.stderr, write.stderr
        while time.monotonic() - started < 30:
            for command in (["view", "/memories/a.md", "--scope", "s"], ["scopes"]):
                assert obversa("memory", *command, cwd=repo).returncode == 0
            assert os.stat(lock).st_ino == identity
            time.sleep(1)
        assert os.stat(lock).st_ino == identity
    finally:
        os.kill(holder.pid, signal.SIGCONT)
    holder.stdin.write("commit\n")
    holder.stdin.close()
    assert holder.wait(timeout=60) == 0
    assert not lock.exists()
    write = obversa("memory", "create", "/memories/b.md", "b", "--scope", "s", cwd=repo)
    assert write.returncode == 0, write.stderr
