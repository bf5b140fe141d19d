"""Sync at scale: many scopes changed on both sides, one `git obversa memory sync`.

    python bench/sync.py [--scopes 1000] [--batch 200]

Two clones of one bare remote agree on SCOPES scopes (one file each); then each clone
adds a file to every scope, and the second clone runs one sync, which fetches, merges
every scope three-way and pushes them all back. Printed: the sync's wall time, the
number of `git push` runs it made (from git's own trace, GIT_TRACE2), its rounds,
and the time of `git obversa memory scopes` on those scopes (median of five), beside
`git for-each-ref` over the same refs as the floor measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from git_obversa.memory.engine import Entry  # noqa: E402
from git_obversa.memory.git_memory import SCOPE_REF_PREFIX, read_scope_tree  # noqa: E402
from git_obversa.memory.gitstore import open_store, update_refs  # noqa: E402
from git_obversa.memory.names import scope_digest  # noqa: E402
from git_obversa.memory.ref_names import NAME_REF_PREFIX  # noqa: E402
from git_obversa.memory.scope_build import write_scope_tree  # noqa: E402


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


def add_file(repository: Path, scopes: list[str], path: str, text: str) -> None:
    """Add PATH with TEXT to every scope of SCOPES (creating those that do not exist)
    in one ref transaction: the setup of a measurement, not what is measured."""
    updates: dict[str, tuple] = {}
    with open_store(str(repository)) as store:
        for name in scopes:
            digest = scope_digest(name)
            ref = SCOPE_REF_PREFIX + digest
            current = store.read_ref(ref)
            scope = read_scope_tree(store, current, digest, None) if current else None
            entries = dict(scope.entries) if scope else {}
            blobs = dict(scope.blobs) if scope else {}
            clock = scope.clock if scope else 1
            blobs[path] = store.write_object("blob", text.encode())
            entries[path] = Entry(len(text.encode()), clock)
            tree = write_scope_tree(store, digest, entries, clock + 1, blobs, scope)
            updates[ref] = (current, tree)
            if current is None:
                name_blob = store.write_object("blob", name.encode())
                updates[NAME_REF_PREFIX + digest] = (None, name_blob)
        store.take_pending()
        assert update_refs(str(repository), updates, "0" * store.hex_length)


def traced(directory: Path) -> tuple[dict[str, str], Path]:
    """An environment in which git logs each command it runs (GIT_TRACE2), and the log."""
    log = directory / "trace2.log"
    return dict(os.environ, GIT_TRACE2=str(log)), log


def runs_of(log: Path, command: str) -> int:
    """How many `git COMMAND` processes the trace LOG shows (children not counted)."""
    top = (f" cmd_name {command} ({command})", f" cmd_name {command} (_run_dashed_/{command})")
    return sum(any(form in line for form in top) for line in log.open())


def two_clones_diverged(root: Path, count: int) -> tuple[Path, Path]:
    """Two clones of ROOT/remote.git agreeing on COUNT scopes, then each changing all."""
    remote = root / "remote.git"
    git(root, "init", "-q", "--bare", str(remote))
    clones = []
    for name in ("a", "b"):
        git(root, "init", "-q", str(root / name))
        git(root / name, "remote", "add", "origin", str(remote))
        clones.append(root / name)
    a, b = clones
    scopes = [f"scope-{number:05d}" for number in range(count)]
    add_file(a, scopes, "/memories/start.md", "start\n")
    for clone in (a, b):
        subprocess.run(["git", "obversa", "memory", "sync", "--quiet"], cwd=clone, check=True)
    add_file(a, scopes, "/memories/a.md", "from a\n")
    subprocess.run(["git", "obversa", "memory", "sync", "--quiet"], cwd=a, check=True)
    add_file(b, scopes, "/memories/b.md", "from b\n")
    return a, b


def median_time(command: list[str], cwd: Path, runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scopes", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        started = time.perf_counter()
        a, b = two_clones_diverged(root, args.scopes)
        setup = time.perf_counter() - started
        env, log = traced(root)
        started = time.perf_counter()
        done = subprocess.run(
            ["git", "obversa", "memory", "sync", "--json"],
            cwd=b, env=env, check=True, capture_output=True, text=True,
        )  # fmt: skip
        elapsed = time.perf_counter() - started
        report = json.loads(done.stdout)
        merged = sum(scope["received"] == "merged" for scope in report["scopes"])
        pushed = sum(scope["sent"] == "pushed" for scope in report["scopes"])
        floor = median_time(["git", "for-each-ref", "refs/obversa/"], b)
        scopes = median_time(["git", "obversa", "memory", "scopes"], b)
        print(f"setup: {setup:.1f} s")
        print(
            f"sync of {args.scopes} scopes changed on both sides: {elapsed:.2f} s, "
            f"{merged} merged, {pushed} pushed, {runs_of(log, 'push')} git push runs, "
            f"{runs_of(log, 'fetch')} git fetch runs, {report['rounds']} round(s)"
        )
        print(
            f"memory scopes on {args.scopes} scopes: {scopes * 1000:.0f} ms "
            f"(git for-each-ref refs/obversa/: {floor * 1000:.0f} ms, "
            f"ratio {scopes / floor:.1f})"
        )


if __name__ == "__main__":
    main()
