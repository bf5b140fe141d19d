"""git_obversa/repo/objects.py and varint.py: Git's object files, read and written
beside real git, which must read back exactly what it wrote and what we wrote."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from git_obversa.repo import objects
from git_obversa.repo.varint import offset_varint, size_varint
from tests.gitutil import every_object, git, make_repo


def read(common_dir: Path, oid: str, packs: objects.Packs) -> tuple[str, bytes] | None:
    loose = objects.LooseObjects(str(common_dir))
    found = loose.read(oid, 1 << 30)
    if found is not None:
        return found
    located = packs.locate(bytes.fromhex(oid))
    if located is None:
        return None
    pack, offset = located
    return pack.read(offset, lambda base: read(common_dir, base.hex(), packs))


@pytest.mark.parametrize("offsets", ["true", "false"])  # OFS_DELTA, then REF_DELTA bases
def test_packed_and_loose_objects_read_as_git_reads_them(tmp_path, offsets):
    repo = make_repo(tmp_path / "r")
    for version in range(25):  # versions of one file: deltas of deltas once repacked
        lines = [f"line {n} of version {version if n % 7 == 0 else 0}\n" for n in range(300)]
        (repo / "notes.md").write_text("".join(lines))
        git(repo, "add", "notes.md")
        git(repo, "commit", "-qm", f"version {version}")
    git(repo, "-c", f"repack.useDeltaBaseOffset={offsets}", "repack", "-a", "-d", "-f", "-q")
    (repo / "loose.md").write_text("still loose\n")
    git(repo, "add", "loose.md")
    expected = every_object(repo)
    packs = objects.Packs(str(repo / ".git"), 20)
    try:
        assert {oid: read(repo / ".git", oid, packs) for oid in expected} == expected
        assert read(repo / ".git", "0" * 40, packs) is None
    finally:
        packs.close()


def test_a_loose_object_we_write_is_one_git_reads_and_fsck_accepts(tmp_path):
    repo = make_repo(tmp_path / "r")
    data = b"written by us\n" * 100
    oid = git(repo, "hash-object", "--stdin", input=data.decode()).strip()
    loose = objects.LooseObjects(str(repo / ".git"))
    compressed = objects.deflate(b"blob %d\0" % len(data) + data)
    loose.write(oid, compressed, fsync=True)
    loose.write(oid, compressed, fsync=False)  # there already: freshened, not doubled
    assert loose.exists(oid)
    assert git(repo, "cat-file", "-p", oid).encode() == data
    git(repo, "fsck", "--strict", "--no-dangling")
    assert not [n for n in os.listdir(repo / ".git" / "objects" / oid[:2]) if "tmp" in n]


def offset_encoded(value: int) -> bytes:
    """Git's `encode_varint` (offset encoding), written from its definition."""
    out = [value & 127]
    value >>= 7
    while value:
        value -= 1
        out.append(128 | (value & 127))
        value >>= 7
    return bytes(reversed(out))


def size_encoded(value: int) -> bytes:
    out = []
    while True:
        byte, value = value & 127, value >> 7
        out.append(byte | (128 if value else 0))
        if not value:
            return bytes(out)


@pytest.mark.parametrize("value", [0, 1, 127, 128, 129, 16383, 16384, 16511, 2**35 + 7])
def test_both_varints_read_what_git_writes(value):
    for encode, decode in ((offset_encoded, offset_varint), (size_encoded, size_varint)):
        data = b"\xff" + encode(value) + b"rest"
        assert decode(data, 1) == (value, len(data) - 4)
        with pytest.raises(IndexError):  # a number cut short is not a number
            decode(data[: len(data) - 5], 1)
    # The two encodings differ from two bytes on: offset encoding has no second spelling.
    if value >= 128:
        assert offset_encoded(value) != size_encoded(value)
