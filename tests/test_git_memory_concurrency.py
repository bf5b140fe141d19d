"""Many processes writing one Git scope, with git maintenance running beside them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from git_obversa.memory import gitstore
from git_obversa.memory.git_memory import open_git_memory, scope_ref
from tests.gitutil import git
from tests.test_git_memory import fsck_clean

WRITERS = 8
WRITES = 50
LIMITS = {"max_files": 1000, "max_total_bytes": 10 * 1048576}

# One writer process: WRITES creates of its own distinct files, then exit 0, or the
# first failed result on stderr and exit 1.
WRITER = """
import json, sys
from git_obversa import open_git_memory
repo, worker, writes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
memory = open_git_memory(repo, "crowd", json.loads(sys.argv[4]))
for index in range(writes):
    path = f"/memories/w{worker}/f{index:03d}.md"
    result = memory.execute({"command": "create", "path": path, "file_text": f"{worker}:{index}"})
    if not result["ok"]:
        sys.exit(json.dumps(result))
"""


def start_writer(repo: Path, worker: int, writes: int) -> subprocess.Popen:
    args = [sys.executable, "-c", WRITER, str(repo), str(worker), str(writes)]
    return subprocess.Popen([*args, repr(LIMITS).replace("'", '"')], stderr=subprocess.PIPE)


def run_writers(repo: Path) -> None:
    writers = [start_writer(repo, worker, WRITES) for worker in range(WRITERS)]
    failures = []
    for writer in writers:
        _, stderr = writer.communicate(timeout=300)
        if writer.returncode != 0:
            failures.append(stderr.decode())
    assert failures == []


def assert_every_file_present(repo: Path) -> None:
    memory = open_git_memory(str(repo), "crowd", LIMITS)
    for worker in range(WRITERS):
        listing = memory.execute({"command": "view", "path": f"/memories/w{worker}"})
        names = [entry["name"] for entry in listing["value"]["entries"]]
        assert names == [f"f{index:03d}.md" for index in range(WRITES)], worker
    sample = memory.execute({"command": "view", "path": "/memories/w7/f049.md"})
    assert sample["value"]["text"] == "7:49"
    fsck_clean(repo)
    assert list((repo / ".git").rglob("*.lock")) == []


def test_eight_processes_lose_no_write(repo):
    run_writers(repo)
    assert_every_file_present(repo)


def test_no_write_lost_while_gc_and_pack_refs_loop(repo):
    stop = threading.Event()
    runs = {"gc": 0, "pack-refs": 0}

    def maintenance() -> None:
        while not stop.is_set():
            for args in (["gc", "--prune=now", "--quiet"], ["pack-refs", "--all"]):
                completed = subprocess.run(["git", *args], cwd=repo, capture_output=True)
                if completed.returncode == 0:
                    runs[args[0]] += 1

    loop = threading.Thread(target=maintenance)
    loop.start()
    try:
        run_writers(repo)
    finally:
        stop.set()
        loop.join()
    assert runs["gc"] >= 2 and runs["pack-refs"] >= 2, runs
    assert_every_file_present(repo)


def test_writer_killed_mid_loop_leaves_the_scope_readable(repo, monkeypatch):
    writer = start_writer(repo, 0, 100000)
    ref = scope_ref("crowd")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        tree = git(repo, "rev-parse", "--verify", "--quiet", ref, check=False).strip()
        if tree and len(git(repo, "ls-tree", f"{tree}:memories/w0").splitlines()) >= 20:
            break
        time.sleep(0.05)
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait()

    memory = open_git_memory(str(repo), "crowd", LIMITS)
    listing = memory.execute({"command": "view", "path": "/memories/w0"})
    names = [entry["name"] for entry in listing["value"]["entries"]]
    assert len(names) >= 20 and names == [f"f{index:03d}.md" for index in range(len(names))]
    last = memory.execute({"command": "view", "path": f"/memories/w0/{names[-1]}"})
    assert last["value"]["text"] == f"0:{len(names) - 1}"

    # The writer may have died holding the ref lock: a write then says which file to
    # remove (never removes it silently); once removed, writing goes on.
    monkeypatch.setattr(gitstore, "LOCK_WAIT_SECONDS", 0.5)
    write_after = {"command": "create", "path": "/memories/after.md", "file_text": "x"}
    after = memory.execute(write_after)
    lock = Path(memory._store.ref_lock_path(ref))
    if not after["ok"]:
        assert after["error"]["code"] == "STORAGE_ERROR"
        assert str(lock) in after["error"]["message"]
        lock.unlink()
        after = memory.execute(write_after)
    assert after["ok"], after
    fsck = subprocess.run(
        ["git", "fsck", "--full", "--no-dangling"], cwd=repo, capture_output=True, text=True
    )
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr
