"""Sync under real concurrency: several processes, one bare remote, and SIGKILL mid-sync."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from git_obversa.memory.git_memory import (
    open_git_memory,
    read_blob_text,
    read_scope_tree,
    scope_digest,
    scope_ref,
)
from git_obversa.memory.gitstore import open_store
from git_obversa.sync import remote as sync
from tests.gitutil import git, make_repo

SCOPES = ("shared-1", "shared-2")
ROUNDS = 100

# One clone's life: each round it creates, appends to, renames and deletes files of the
# shared scopes (every text it writes is a unique token), then syncs. It logs the tokens
# it wrote and the tokens its deletes removed (as it saw them): afterwards every token
# not deliberately removed must still exist somewhere.
WORKER = r"""
import json, random, sys
from git_obversa.sync import remote as sync
from git_obversa.memory.git_memory import open_git_memory

repo, name, rounds, log_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
rng = random.Random(name)
scopes = json.loads(sys.argv[5])
memories = {scope: open_git_memory(repo, scope) for scope in scopes}
written, removed, rounds_used = [], [], []

def paths(memory, directory="/memories"):
    view = memory.execute({"command": "view", "path": directory})
    if not view["ok"]:
        return []
    found = []
    for entry in view["value"]["entries"]:
        found += [entry["path"]] if entry["kind"] == "file" else paths(memory, entry["path"])
    return found

def text(memory, path):
    return memory.execute({"command": "view", "path": path})["value"]["text"]

for round_ in range(rounds):
    for op in range(2):
        memory = memories[rng.choice(scopes)]
        existing = paths(memory)
        token = f"{name}-{round_}-{op}"
        choice = rng.random()
        if not existing or choice < 0.3:
            path = f"/memories/{rng.choice(['a', 'b'])}/{token}.md"
            result = memory.execute({"command": "create", "path": path, "file_text": token + "\n"})
        elif choice < 0.65:
            path = rng.choice(existing)
            result = memory.execute({"command": "insert", "path": path,
                                     "insert_line": len(text(memory, path).splitlines()),
                                     "insert_text": token})
        elif choice < 0.8:
            path = rng.choice(existing)
            result = memory.execute({"command": "rename", "old_path": path,
                                     "new_path": f"/memories/moved/{token}.md"})
            token = None
        else:
            path = rng.choice(existing)
            removed += text(memory, path).split()
            result = memory.execute({"command": "delete", "path": path})
            token = None
        assert result["ok"], result
        if token:
            written.append(token)
    rounds_used.append(sync.sync(repo).rounds)

with open(log_path, "w") as log:
    json.dump({"written": written, "removed": removed, "rounds": rounds_used}, log)
"""


def clones(tmp_path: Path, count: int) -> tuple[Path, list[Path]]:
    remote = make_repo(tmp_path / "remote.git", "--bare")
    repos = []
    for index in range(count):
        repo = make_repo(tmp_path / f"clone{index}")
        git(repo, "remote", "add", "origin", str(remote))
        repos.append(repo)
    return remote, repos


def scope_texts(repository: Path, scope: str) -> dict[str, str] | None:
    """Every file of SCOPE in REPOSITORY (bare or not), fully validated; None if absent."""
    with open_store(str(repository)) as store:
        tree = store.read_ref(scope_ref(scope))
        if tree is None:
            return None
        stored = read_scope_tree(store, tree, scope_digest(scope), None)
        return {
            path: read_blob_text(store, stored.blobs[path], entry.byte_length)
            for path, entry in stored.entries.items()
        }


def test_three_clones_syncing_concurrently_converge_and_lose_no_text(tmp_path):
    remote, repos = clones(tmp_path, 3)
    started = time.monotonic()
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WORKER,
                str(repo),
                f"c{index}",
                str(ROUNDS),
                str(tmp_path / f"log{index}.json"),
                json.dumps(SCOPES),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for index, repo in enumerate(repos)
    ]
    for worker in workers:
        out, err = worker.communicate(timeout=600)
        assert worker.returncode == 0, err
    elapsed = time.monotonic() - started
    # Let the last writers' changes reach everyone: each clone syncs once more, in turn.
    for repo in repos + repos:
        sync.sync(str(repo))
    logs = [json.loads((tmp_path / f"log{i}.json").read_text()) for i in range(3)]
    for scope in SCOPES:
        trees = {git(repo, "rev-parse", scope_ref(scope)).strip() for repo in [remote, *repos]}
        assert len(trees) == 1, f"{scope}: clones hold different trees"
    written = {token for log in logs for token in log["written"]}
    removed = {token for log in logs for token in log["removed"]}
    surviving = set()
    for scope in SCOPES:
        for text in scope_texts(remote, scope).values():
            surviving.update(text.split())
    missing = written - removed - surviving
    assert not missing, f"{len(missing)} written texts are gone: {sorted(missing)[:10]}"
    assert len(written) >= 3 * ROUNDS  # the workload really wrote
    for repo in [remote, *repos]:
        git(repo, "fsck", "--strict", "--no-dangling")
    retried = sum(rounds > 1 for log in logs for rounds in log["rounds"])
    print(f"\n3 x {ROUNDS} rounds in {elapsed:.1f} s; {retried} syncs needed a second round")


KILLED_SYNC = r"""
import sys
from git_obversa.sync import remote as sync
sync.sync(sys.argv[1])
"""


def test_a_sync_killed_at_any_point_leaves_scopes_readable_and_the_next_sync_completes(
    tmp_path,
):
    remote, (a, b) = clones(tmp_path, 2)
    for index in range(20):
        memory = open_git_memory(str(a), SCOPES[index % 2])
        memory.execute({"command": "create", "path": f"/memories/f{index}.md", "file_text": "x\n"})
    sync.sync(str(a))
    sync.sync(str(b))
    # How long one diverged sync takes, to spread the kills over its whole length.
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", KILLED_SYNC, str(b)], check=True)
    duration = time.monotonic() - started
    kills = 12
    for attempt in range(kills):
        for repo, who in ((a, "a"), (b, "b")):
            for scope in SCOPES:
                memory = open_git_memory(str(repo), scope)
                path = f"/memories/f{attempt % 20}.md"
                memory.execute(
                    {"command": "create", "path": path, "file_text": f"{who}{attempt}\n"}
                )
        sync.sync(str(a))
        process = subprocess.Popen([sys.executable, "-c", KILLED_SYNC, str(b)])
        time.sleep(duration * attempt / kills)
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        for repository in (remote, a, b):
            for scope in SCOPES:
                assert scope_texts(repository, scope)  # present and valid
        time.sleep(0.05)  # git children orphaned by the kill finish on their own
        report = sync.sync(str(b))
        assert all(scope.error is None for scope in report.scopes)
    sync.sync(str(a))
    for scope in SCOPES:
        assert scope_texts(a, scope) == scope_texts(b, scope) == scope_texts(remote, scope)
        assert f"b{kills - 1}\n" in scope_texts(remote, scope).values()
    for repo in (remote, a, b):
        git(repo, "fsck", "--strict", "--no-dangling")
