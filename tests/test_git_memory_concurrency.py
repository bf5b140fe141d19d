"""Many processes writing one Git scope, with git maintenance running beside them."""

from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from git_obversa.memory.git_memory import open_git_memory, scope_ref
from git_obversa.memory.history import scope_log
from git_obversa.repo import locks
from tests.gitutil import git
from tests.test_git_memory import fsck_clean

WRITERS = 8
WRITES = 50
GC_WRITES = 20  # each writer's least count beside the maintenance loop
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

# One writer beside maintenance: at least argv[3] creates, then more until the file
# argv[5] exists (or 400 in all); prints how many it made.
STEADY_WRITER = """
import json, os, sys
from git_obversa import open_git_memory
repo, worker, least, stop = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[5]
memory = open_git_memory(repo, "crowd", json.loads(sys.argv[4]))
index = 0
while index < least or (index < 400 and not os.path.exists(stop)):
    path = f"/memories/w{worker}/f{index:03d}.md"
    result = memory.execute({"command": "create", "path": path, "file_text": f"{worker}:{index}"})
    if not result["ok"]:
        sys.exit(json.dumps(result))
    index += 1
print(index)
"""


def start_writer(repo: Path, worker: int, writes: int) -> subprocess.Popen:
    args = [sys.executable, "-c", WRITER, str(repo), str(worker), str(writes)]
    return subprocess.Popen([*args, repr(LIMITS).replace("'", '"')], stderr=subprocess.PIPE)


def run_writers(repo: Path, writes: int = WRITES) -> None:
    writers = [start_writer(repo, worker, writes) for worker in range(WRITERS)]
    failures = []
    for writer in writers:
        _, stderr = writer.communicate(timeout=300)
        if writer.returncode != 0:
            failures.append(stderr.decode())
    assert failures == []


def assert_every_file_present(repo: Path, writes: int | list[int] = WRITES) -> None:
    """Each worker's files f000 .. (its count of WRITES) are there, and no other."""
    counts = [writes] * WRITERS if isinstance(writes, int) else writes
    memory = open_git_memory(str(repo), "crowd", LIMITS)
    for worker, count in enumerate(counts):
        listing = memory.execute({"command": "view", "path": f"/memories/w{worker}"})
        names = [entry["name"] for entry in listing["value"]["entries"]]
        assert names == [f"f{index:03d}.md" for index in range(count)], worker
    last = counts[7] - 1
    sample = memory.execute({"command": "view", "path": f"/memories/w7/f{last:03d}.md"})
    assert sample["value"]["text"] == f"7:{last}"
    fsck_clean(repo)
    assert list((repo / ".git").rglob("*.lock")) == []


def test_eight_processes_lose_no_write(repo):
    run_writers(repo)
    assert_every_file_present(repo)


def test_no_write_lost_while_gc_and_pack_refs_loop(repo, tmp_path):
    # Writers go on until maintenance has run twice each (however fast writes are, or
    # slow git is on a loaded machine), so every write races a gc or a pack-refs.
    stop = tmp_path / "stop"
    runs = {"gc": 0, "pack-refs": 0}
    done = threading.Event()

    def maintenance() -> None:
        while not done.is_set():
            for args in (["gc", "--prune=now", "--quiet"], ["pack-refs", "--all"]):
                completed = subprocess.run(["git", *args], cwd=repo, capture_output=True)
                if completed.returncode == 0:
                    runs[args[0]] += 1
            if min(runs.values()) >= 2:
                stop.touch()

    loop = threading.Thread(target=maintenance)
    loop.start()
    limits = repr(LIMITS).replace("'", '"')
    try:
        writers = [
            subprocess.Popen(
                [sys.executable, "-c", STEADY_WRITER, str(repo), str(worker), str(GC_WRITES)]
                + [limits, str(stop)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for worker in range(WRITERS)
        ]
        outputs = [writer.communicate(timeout=300) for writer in writers]
    finally:
        done.set()
        loop.join()
    failures = [
        err.decode()
        for writer, (_, err) in zip(writers, outputs, strict=True)
        if writer.returncode != 0
    ]
    assert failures == []
    assert runs["gc"] >= 2 and runs["pack-refs"] >= 2, runs
    assert_every_file_present(repo, [int(out) for out, _ in outputs])


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

    # The writer may have died holding a lock: the next write clears it once it is
    # stale (with one line on stderr) and goes on.
    monkeypatch.setattr(locks, "STALE_LOCK_SECONDS", 0.5)
    after = memory.execute({"command": "create", "path": "/memories/after.md", "file_text": "x"})
    assert after["ok"], after
    fsck = subprocess.run(
        ["git", "fsck", "--full", "--no-dangling"], cwd=repo, capture_output=True, text=True
    )
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr


def acking_writer(repo: Path, name: str, acks: int) -> None:
    """In a forked child: write the file NAME again and again, writing "<index>" to the
    ACKS pipe after each acknowledged write, until killed."""
    memory = open_git_memory(str(repo), "killed", {"max_files": 1000})
    index = 0
    while True:
        index += 1
        command = {"command": "create", "path": f"/memories/{name}.md", "file_text": f"{index}"}
        result = memory.execute(command)
        if not result["ok"]:
            os.write(acks, b"FAILED %s\n" % repr(result).encode())
            os._exit(3)
        os.write(acks, b"%d\n" % index)


def kill_writers_at_random_points(repo: Path, kills: int, *, with_gc: bool) -> None:
    """KILLS writer processes, each SIGKILLed at a random moment (mid-write, between
    writes, holding a lock or not), optionally beside a `git gc --prune=now` loop.
    Afterwards every acknowledged write is there, git fsck is clean, and the next write
    is not blocked by anything a killed writer left. Writers are forked from this
    process (already imported), so a kill lands in the write loop, not in start-up."""
    rng = random.Random(kills * 2 + with_gc)
    gc_loop = None
    if with_gc:
        script = "while :; do git gc --prune=now --quiet; done"
        gc_loop = subprocess.Popen(["sh", "-c", script], cwd=repo, stderr=subprocess.DEVNULL)
    acked: dict[str, int] = {}
    try:
        for worker in range(kills):
            name = f"w{worker}"
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child never returns into pytest
                try:
                    os.close(read)
                    acking_writer(repo, name, write)
                finally:
                    os._exit(4)
            os.close(write)
            # Let it start (slow on a loaded machine), then kill it within a few writes.
            ready, _, _ = select.select([read], [], [], 60)
            assert ready, "the writer made no write in 60 s"
            time.sleep(rng.uniform(0, 0.08))
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            with os.fdopen(read) as pipe:
                said = pipe.read()
            assert os.WIFSIGNALED(status), said  # it never failed a write
            acked[name] = int(said.split()[-1])
    finally:
        if gc_loop is not None:
            gc_loop.kill()
            gc_loop.wait()
    started = time.monotonic()
    memory = open_git_memory(str(repo), "killed", {"max_files": 1000})
    after = memory.execute({"command": "create", "path": "/memories/after.md", "file_text": "x"})
    assert after["ok"], after
    # Within the stale-lock age (a killed writer's lock) and a loaded machine's slack.
    assert time.monotonic() - started < locks.STALE_LOCK_SECONDS + 30
    for name, index in acked.items():
        view = memory.execute({"command": "view", "path": f"/memories/{name}.md"})
        assert view["ok"], (name, view)
        written = int(view["value"]["text"])
        assert written in (index, index + 1), (name, index, written)  # +1: killed before its ack
    fsck_clean(repo)
    log = scope_log(repo, "killed")
    assert log[0]["action"] == "create" and len(log) >= sum(acked.values())


def test_sigkilled_writers_lose_no_acknowledged_write(repo):
    kill_writers_at_random_points(repo, 16, with_gc=False)


def test_sigkilled_writers_beside_a_gc_prune_now_loop_lose_no_acknowledged_write(repo):
    kill_writers_at_random_points(repo, 16, with_gc=True)
