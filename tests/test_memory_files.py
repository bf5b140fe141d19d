"""The in-process store reading Git's own files, the durability it takes from the
repository's config, and what a one-shot memory command imports."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from git_obversa.memory import gitstore, ref_names
from git_obversa.memory.git_memory import open_git_memory, scope_ref
from git_obversa.repo import objects
from tests.gitutil import every_object, git, obversa


def write(repo: Path, scope: str, path: str, text: str) -> dict:
    with open_git_memory(str(repo), scope) as memory:
        result = memory.execute({"command": "create", "path": path, "file_text": text})
    assert result["ok"], result
    return result


@pytest.mark.parametrize("offsets", ["true", "false"])  # OFS_DELTA, then REF_DELTA entries
def test_packed_objects_read_exactly_as_git_reads_them(repo, offsets):
    # Versions of one file, so that the repack stores most of them as deltas of deltas.
    for version in range(30):
        lines = [f"line {n} of version {version if n % 7 == 0 else 0}\n" for n in range(200)]
        write(repo, "packed", "/memories/notes.md", "".join(lines))
    git(repo, "-c", f"repack.useDeltaBaseOffset={offsets}", "repack", "-a", "-d", "-f", "-q")
    assert not list((repo / ".git" / "objects").glob("??/*"))  # nothing loose is left
    expected = every_object(repo)
    with gitstore.open_store(str(repo)) as store:
        assert store.kind == "in-process"
        assert {oid: store.read_object(oid) for oid in expected} == expected
    with open_git_memory(str(repo), "packed") as memory:
        view = memory.execute({"command": "view", "path": "/memories/notes.md"})
    assert "line 0 of version 29" in view["value"]["text"]


def test_refs_packed_by_git_are_read_and_listed(repo):
    write(repo, "one", "/memories/a.md", "a")
    write(repo, "two", "/memories/b.md", "b")
    git(repo, "pack-refs", "--all")
    assert not (repo / ".git" / scope_ref("one")).exists()
    write(repo, "two", "/memories/c.md", "c")  # a loose ref again, beside packed ones
    with gitstore.open_store(str(repo)) as store:
        listed = store.list_refs(ref_names.SCOPE_REF_PREFIX)
    assert listed == {
        scope_ref(scope): git(repo, "rev-parse", scope_ref(scope)).strip()
        for scope in ("one", "two")
    }


FSYNC_CASES = {  # core.* settings -> (objects flushed, refs and reflog flushed)
    (): (False, False),  # git's default flushes neither loose objects nor refs
    (("core.fsync", "loose-object"),): (True, False),
    (("core.fsync", "reference"),): (False, True),
    (("core.fsync", "committed"),): (True, True),
    (("core.fsync", "all"), ("core.fsyncMethod", "writeout-only")): (False, False),
    (("core.fsync", "none"),): (False, False),
    (("core.fsyncObjectFiles", "true"),): (True, False),
}


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
@pytest.mark.parametrize("settings", list(FSYNC_CASES), ids=str)
def test_a_write_flushes_what_the_repository_config_asks_git_to(repo, settings, monkeypatch):
    for key, value in settings:
        git(repo, "config", key, value)
    flushed: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(descriptor: int) -> None:
        flushed.append(os.readlink(f"/proc/self/fd/{descriptor}"))
        real_fsync(descriptor)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    write(repo, "durable", "/memories/a.md", "kept")
    objects = [path for path in flushed if "/objects/" in path]
    refs = [path for path in flushed if "/refs/" in path or "/logs/" in path]
    expect_objects, expect_refs = FSYNC_CASES[settings]
    # A first write: a blob, 2 trees, the metadata, a history commit, the name blob.
    assert (len(objects) >= 5) if expect_objects else objects == []
    # The scope ref's lock, the history ref's lock and its reflog, the name ref's lock.
    assert (len(refs) >= 3) if expect_refs else refs == []


def test_core_fsync_set_in_an_included_global_file_is_honoured(repo, git_environment, tmp_path):
    # What git itself obeys: system, global, repository and included files alike.
    included = tmp_path / "durable.gitconfig"
    included.write_text("[core]\n\tfsync = committed\n")
    global_config = git_environment / ".gitconfig"
    global_config.write_text(global_config.read_text() + f"[include]\n\tpath = {included}\n")
    with gitstore.open_store(str(repo)) as store:
        assert (store.fsync_objects, store.fsync_refs) == (True, True)
    included.write_text("[core]\n\tfsync = reference\n")
    with gitstore.open_store(str(repo)) as store:
        assert (store.fsync_objects, store.fsync_refs) == (False, True)


def imported_modules(stderr: str) -> set[str]:
    """The modules a process run with PYTHONPROFILEIMPORTTIME=1 imported (its stderr)."""
    return {
        line.rsplit("|", 1)[1].strip()
        for line in stderr.splitlines()
        if line.startswith("import time:")
    }


# Machinery a one-shot memory command does not use: an object library, the dataclasses
# module (it imports inspect, ast, dis, tokenize), typing, subprocess (git is spawned with
# posix_spawn), threads, and the sync verbs' module.
NOT_IMPORTED = ("dulwich", "dataclasses", "inspect", "subprocess", "threading", "typing", "asyncio")


@pytest.mark.parametrize(
    "args",
    [
        ["view", "/memories/a.md"],
        ["str-replace", "/memories/a.md", "first", "second"],
        ["create", "/memories/b.md", "new text"],
    ],
)
def test_a_one_shot_memory_command_imports_only_what_it_uses(repo, args):
    write(repo, "default", "/memories/a.md", "first line\n")
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    completed = obversa("memory", *args, cwd=repo, env=env)
    assert completed.returncode == 0, completed.stderr
    modules = imported_modules(completed.stderr)
    assert "git_obversa.repo.objects" in modules  # the profile did list the imports
    for heavy in NOT_IMPORTED:
        assert not any(name.split(".")[0] == heavy for name in modules), heavy
    assert "git_obversa.cli.memory_sync" not in modules


def test_a_write_that_changes_one_file_gives_the_tree_a_full_build_gives(repo):
    """A write puts new ids into the raw trees it read or wrote before (and encodes
    anew only the metadata entries it changed): every state equals the scope built
    whole from its files, whether the adapter wrote the trees it edits or read them."""
    from git_obversa.memory.git_memory import read_scope_tree, scope_digest
    from git_obversa.memory.scope_build import write_scope_tree

    digest = scope_digest("tree")

    def check(memory, command):
        assert memory.execute(command)["ok"], command
        tree = git(repo, "rev-parse", scope_ref("tree")).strip()
        with gitstore.open_store(str(repo)) as store:
            scope = read_scope_tree(store, tree, digest, None)
            rebuilt = write_scope_tree(store, digest, scope.entries, scope.clock, scope.blobs)
        assert rebuilt == tree, command

    def edit(index, old, new):
        path = f"/memories/d{index % 4}/e{index % 3}/f{index}.md"
        return {"command": "str_replace", "path": path, "old_str": old, "new_str": new}

    with open_git_memory(str(repo), "tree") as memory:
        for index in range(40):
            path = f"/memories/d{index % 4}/e{index % 3}/f{index}.md"
            check(memory, {"command": "create", "path": path, "file_text": "x"})
        check(memory, edit(5, "x", "xy"))  # trees this adapter wrote
    with open_git_memory(str(repo), "tree") as memory:  # trees it read
        for index, old, new in ((17, "x", "xy"), (5, "xy", "x"), (17, "xy", "x")):
            check(memory, edit(index, old, new))
        # Files gone, moved and added between edits.
        for command in (
            {"command": "delete", "path": "/memories/d1/e1/f1.md"},
            edit(9, "x", "z"),
            {"command": "rename", "old_path": "/memories/d2", "new_path": "/memories/z2"},
            edit(13, "x", "w"),
            {"command": "create", "path": "/memories/d0/new.md", "file_text": "n"},
            {
                "command": "str_replace",
                "path": "/memories/d0/new.md",
                "old_str": "n",
                "new_str": "m",
            },
            {"command": "create", "path": "/memories/top.md", "file_text": "t"},
            {"command": "create", "path": "/memories/top.md", "file_text": "u"},
        ):
            check(memory, command)
    assert git(repo, "fsck", "--no-progress", "--strict").strip() == ""


def test_a_long_session_of_files_come_and_gone_keeps_writing_right_trees(repo):
    """Files created and deleted by the dozen in one session: what the adapter keeps of
    the trees stays the size of the scope (the paths gone are dropped), and an edit
    after it still gives the tree a whole build gives."""
    from git_obversa.memory.git_memory import read_scope_tree, scope_digest
    from git_obversa.memory.scope_build import write_scope_tree

    with open_git_memory(str(repo), "churn") as memory:
        keep = {"command": "create", "path": "/memories/keep.md", "file_text": "kept"}
        assert memory.execute(keep)["ok"]
        for index in range(60):
            path = f"/memories/d{index}/f{index}.md"
            assert memory.execute({"command": "create", "path": path, "file_text": "x"})["ok"]
            assert memory.execute({"command": "delete", "path": f"/memories/d{index}"})["ok"]
        edit = {"command": "str_replace", "path": "/memories/keep.md", "old_str": "kept"}
        assert memory.execute({**edit, "new_str": "edited"})["ok"]
        kept = memory._scope
        assert len(kept.slots) < 70 and len(kept.raws) < 70  # not 120 paths and 60 trees
    digest = scope_digest("churn")
    tree = git(repo, "rev-parse", scope_ref("churn")).strip()
    with gitstore.open_store(str(repo)) as store:
        scope = read_scope_tree(store, tree, digest, None)
        assert write_scope_tree(store, digest, scope.entries, scope.clock, scope.blobs) == tree
    assert git(repo, "show", f"{tree}:memories/keep.md") == "edited"


@pytest.mark.parametrize("unnamed", [True, False], ids=["O_TMPFILE", "named temporary"])
def test_objects_are_written_whole_and_one_already_there_is_freshened(repo, unnamed):
    """Loose objects start as unnamed files where the system has them (else as
    `tmp_obj_*` files): either way git reads every one, none is left behind, and one
    that is there already is freshened (so a prune with an expiry keeps it)."""
    with gitstore.open_store(str(repo)) as store:
        store.loose.unnamed = unnamed and objects.O_TMPFILE != 0
        oid = store.write_object("blob", b"kept\n")
        path = repo / ".git" / "objects" / oid[:2] / oid[2:]
        os.utime(path, (1_000_000_000, 1_000_000_000))  # 2001: any prune expiry passed
        assert store.write_object("blob", b"kept\n") == oid
        assert path.stat().st_mtime > 1_000_000_000
        notes = {store.write_object("blob", b"note %d\n" % n): b"note %d\n" % n for n in range(20)}
        for size in (255, 256, 257, 4095, 40000):  # zlib windows sized to each, up to 32 KB
            text = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
            notes[store.write_object("blob", text)] = text
    assert git(repo, "cat-file", "blob", oid) == "kept\n"
    assert git(repo, "fsck", "--no-progress", "--strict", "--no-dangling").strip() == ""
    found = every_object(repo)
    assert all(found[note] == ("blob", text) for note, text in notes.items())
    assert not list((repo / ".git" / "objects").glob("*/tmp_obj_*"))
