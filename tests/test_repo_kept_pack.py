"""git_obversa/repo/kept_pack.py: objects kept from `git gc --prune=now` until the refs
that name them have moved, in a pack real git reads, checks and keeps; a `.keep` left by
a killed process removed, nobody else's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from git_obversa.memory.gitstore import object_id, open_store
from git_obversa.repo import kept_pack, locks
from tests.gitutil import git, make_repo


def some_objects(object_format: str) -> dict[str, tuple[str, bytes]]:
    """A blob large enough for a multi-byte size, small ones, a tree and a commit."""
    found: dict[str, tuple[str, bytes]] = {}

    def add(kind: str, data: bytes) -> str:
        oid = object_id(kind, data, object_format)
        found[oid] = (kind, data)
        return oid

    blobs = [add("blob", b"line %d\n" % index * (index * 40 + 1)) for index in range(40)]
    width = 32 if object_format == "sha256" else 20
    assert all(len(bytes.fromhex(blob)) == width for blob in blobs)
    tree = add(
        "tree", b"".join(b"100644 f%02d\0" % i + bytes.fromhex(b) for i, b in enumerate(blobs))
    )
    add(
        "commit",
        b"tree %s\nauthor A <a@b> 0 +0000\ncommitter A <a@b> 0 +0000\n\nx\n" % tree.encode(),
    )
    return found


def present(repository: Path, oid: str) -> bool:
    return subprocess.run(["git", "cat-file", "-e", oid], cwd=repository).returncode == 0


def keeps(repository: Path) -> list[str]:
    return sorted(path.name for path in (repository / "objects" / "pack").glob("*.keep"))


def packs(repository: Path) -> int:
    return len(list((repository / "objects" / "pack").glob("*.pack")))


@pytest.mark.parametrize("object_format", ["sha1", "sha256"])
def test_a_kept_pack_is_git_s_own_and_survives_gc_prune_now_until_released(tmp_path, object_format):
    repository = make_repo(tmp_path / "r.git", "--bare", f"--object-format={object_format}")
    objects = some_objects(object_format)
    kept = kept_pack.write(str(repository), objects, object_format, fsync=True)
    index = kept.keep[: -len(".keep")] + ".idx"
    git(repository, "verify-pack", index)
    for oid, (kind, data) in objects.items():
        assert git(repository, "cat-file", "-t", oid).strip() == kind
        with open_store(str(repository)) as store:
            assert store.read_object(oid) == (kind, data)
    git(repository, "fsck", "--strict")
    git(repository, "gc", "--prune=now", "--quiet")  # nothing names them: kept all the same
    assert all(present(repository, oid) for oid in objects)
    kept.release(moved=True)  # (the objects are not loose too: the pack stays)
    assert keeps(repository) == [] and packs(repository) == 1
    git(repository, "gc", "--prune=now", "--quiet")  # now they go as any unnamed object
    assert not any(present(repository, oid) for oid in objects)


def test_the_same_objects_kept_twice_get_packs_of_their_own(tmp_path):
    # A sync run again after a kill writes what the killed one did: the earlier pack
    # may be about to go (its `.keep` gone, a repack deleting it), so each has its own.
    repository = make_repo(tmp_path / "r.git", "--bare")
    objects = some_objects("sha1")
    first = kept_pack.write(str(repository), objects, "sha1", fsync=False)
    second = kept_pack.write(str(repository), objects, "sha1", fsync=False)
    first.release(moved=True)
    third = kept_pack.write(str(repository), objects, "sha1", fsync=False)
    assert len({first.keep, second.keep, third.keep}) == 3
    assert keeps(repository) == sorted(Path(k.keep).name for k in (second, third))
    for kept in (second, third):
        git(repository, "verify-pack", kept.keep[: -len(".keep")] + ".idx")
        kept.release(moved=True)
    # One small object, written again and again (a sync noting the same push each round):
    # its zlib stream is the same at every level, its header is not.
    [(oid, note)] = list(objects.items())[-1:]
    for _ in range(8):
        kept_pack.write(str(repository), {oid: note}, "sha1", fsync=False).release(moved=True)
    assert packs(repository) == 3 + 8
    git(repository, "fsck", "--strict")


def test_a_pack_nothing_needs_goes_with_its_keep(tmp_path):
    # The common case: the refs did not move, or they did and every object is loose too
    # while no git runs there (none can have walked the refs before they moved). Then
    # nothing piles up: a sync writes a few packs per run.
    repository = make_repo(tmp_path / "r.git", "--bare")
    objects = some_objects("sha1")
    kept_pack.write(str(repository), objects, "sha1", fsync=False).release(moved=False)
    assert packs(repository) == 0 and keeps(repository) == []
    for oid, (kind, data) in objects.items():
        done = subprocess.run(["git", "hash-object", "-w", "-t", kind, "--stdin"], cwd=repository,
                              input=data, capture_output=True, check=True)  # fmt: skip
        assert done.stdout.decode().strip() == oid
    kept_pack.write(str(repository), objects, "sha1", fsync=False).release(moved=True)
    assert packs(repository) == 0 and keeps(repository) == []
    # A git at work there (a gc that walked the refs before they moved could prune the
    # loose copies): the pack stays, unkept.
    running = subprocess.Popen(["git", "cat-file", "--batch"], cwd=repository,
                               stdin=subprocess.PIPE)  # fmt: skip
    try:
        kept_pack.write(str(repository), objects, "sha1", fsync=False).release(moved=True)
    finally:
        running.kill()
        running.wait()
    assert packs(repository) == 1 and keeps(repository) == []
    git(repository, "fsck", "--strict")


HOLDER = r"""
import sys, time
from git_obversa.memory.gitstore import object_id
from git_obversa.repo import kept_pack
data = sys.argv[2].encode()
objects = {object_id("blob", data, "sha1"): ("blob", data)}
kept = kept_pack.write(sys.argv[1], objects, "sha1", False)
print(kept.keep, flush=True)
time.sleep(600)
"""


def test_a_killed_writers_keep_goes_a_live_writers_stays(tmp_path):
    repository = make_repo(tmp_path / "r.git", "--bare")
    holders = [
        subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(repository), text],
            stdout=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).resolve().parents[1],
        )
        for text in ("alive", "killed")
    ]
    try:
        live, dead = (Path(holder.stdout.readline().strip()) for holder in holders)
        assert kept_pack.dead_keeps_removed(str(repository)) == []
        holders[1].send_signal(signal.SIGKILL)
        holders[1].wait()
        assert kept_pack.dead_keeps_removed(str(repository)) == [str(dead)]
        assert live.exists() and not dead.exists()
        git(repository, "gc", "--prune=now", "--quiet")
        assert present(repository, object_id("blob", b"alive", "sha1"))
        assert not present(repository, object_id("blob", b"killed", "sha1"))
    finally:
        for holder in holders:
            holder.kill()
            holder.wait()


def test_git_s_fetch_keep_goes_when_its_git_is_gone_and_no_other_keep_is_touched(tmp_path):
    repository = make_repo(tmp_path / "r.git", "--bare")
    finished = subprocess.Popen(["git", "--version"], stdout=subprocess.DEVNULL)
    finished.wait()
    running = subprocess.Popen(["git", "cat-file", "--batch"], stdin=subprocess.PIPE)
    host = os.uname().nodename
    try:
        texts = {
            "dead-fetch": f"fetch-pack {finished.pid} on {host}\n",
            "live-fetch": f"fetch-pack {running.pid} on {host}\n",
            "other-host": f"fetch-pack {finished.pid} on not-{host}\n",
            "receive": f"receive-pack {finished.pid} on {host}\n",
            "user": "",
        }
        for name, text in texts.items():
            (repository / "objects" / "pack" / f"pack-{name}.keep").write_text(text)
        removed = kept_pack.dead_keeps_removed(str(repository))
    finally:
        running.kill()
        running.wait()
    assert [Path(path).name for path in removed] == ["pack-dead-fetch.keep"]
    assert keeps(repository) == sorted(f"pack-{n}.keep" for n in texts if n != "dead-fetch")


@pytest.mark.parametrize(
    ("setting", "flushed"),
    [
        (None, True),  # git flushes packs by default
        ("reference", True),
        ("none", False),
        ("-pack", False),
        ("-objects", False),
        ("none,pack", True),
        ("none,committed", True),
    ],
)
def test_a_pack_is_flushed_when_git_would_flush_one(setting, flushed):
    assert locks.fsyncs({"core.fsync": setting}, "pack") is flushed
    assert (
        locks.fsyncs({"core.fsync": setting, "core.fsyncmethod": "writeout-only"}, "pack") is False
    )
