"""The Git adapter in real repositories: SPEC.md §9 scenarios 55-73, layouts, fallback."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from git_obversa.memory import gitstore, store_git
from git_obversa.memory.git_memory import (
    SCOPE_REF_PREFIX,
    list_scopes,
    open_git_memory,
    parse_metadata,
    read_scope_tree,
    scope_digest,
    scope_ref,
)
from git_obversa.memory.port import MemoryFailure
from git_obversa.memory.scope_build import write_scope_tree
from git_obversa.repo import locks
from tests.gitutil import git, make_repo

REAL_GIT = shutil.which("git")


def ok(result: dict) -> dict:
    assert result["ok"], result
    return result["value"]


def code(result: dict) -> str:
    assert not result["ok"], result
    return result["error"]["code"]


def create(memory, path: str, text: str) -> dict:
    return memory.execute({"command": "create", "path": path, "file_text": text})


def view(memory, path: str = "/memories") -> dict:
    return memory.execute({"command": "view", "path": path})


def rename(memory, old: str, new: str) -> dict:
    return memory.execute({"command": "rename", "old_path": old, "new_path": new})


def root_names(memory) -> list[str]:
    return [entry["name"] for entry in ok(view(memory))["entries"]]


def write_bytes_blob(repo: Path, data: bytes) -> str:
    completed = subprocess.run(
        ["git", "hash-object", "-w", "--stdin"], cwd=repo, input=data, capture_output=True
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stdout.decode().strip()


def mktree(repo: Path, lines: list[str]) -> str:
    return git(repo, "mktree", input="".join(line + "\n" for line in lines)).strip()


def metadata(scope: str, entries: list[tuple[str, int, int]], next_write: int, **extra) -> bytes:
    """The original's metadata JSON, written out by hand (key order of SPEC §3.2)."""
    items = ",".join(
        f'{{"path":"{path}","byteLength":{size},"written":{written}}}'
        for path, size, written in entries
    )
    total = sum(size for _, size, _ in entries)
    text = (
        f'{{"format":1,"scopeDigest":"{scope_digest(scope)}","nextWrite":{next_write},'
        f'"totalBytes":{total},"entries":[{items}]'
    )
    for key, value in extra.items():
        text += f',"{key}":{json.dumps(value)}'
    return (text + "}").encode()


def store_scope(repo: Path, scope: str, meta: bytes, memories_lines: list[str]) -> str:
    """Point SCOPE's ref at a root tree built from META and the `memories` tree lines."""
    files = mktree(repo, memories_lines)
    root = mktree(
        repo,
        [
            f"100644 blob {write_bytes_blob(repo, meta)}\t.obversa-memory.json",
            f"040000 tree {files}\tmemories",
        ],
    )
    git(repo, "update-ref", scope_ref(scope), root)
    return root


def ref_value(repo: Path, scope: str) -> str:
    return git(repo, "rev-parse", scope_ref(scope)).strip()


def fsck_clean(repo: Path) -> None:
    completed = subprocess.run(
        ["git", "fsck", "--full", "--strict", "--no-dangling"],
        cwd=repo,
        capture_output=True,
        text=True,
    )
    assert completed.returncode == 0 and completed.stdout == "", completed.stdout + completed.stderr


def repository_view(repo: Path) -> dict:
    """Everything a user sees of HEAD, index, branches and worktree."""
    files = {}
    for path in sorted(repo.rglob("*")):
        if ".git" not in path.relative_to(repo).parts and path.is_file():
            files[str(path.relative_to(repo))] = path.read_bytes()
    return {
        "head": git(repo, "rev-parse", "HEAD"),
        "symbolic_head": git(repo, "symbolic-ref", "HEAD"),
        "stage": git(repo, "ls-files", "--stage"),
        "status": git(repo, "status", "--porcelain=v1", "--untracked-files=all"),
        "branches": git(repo, "for-each-ref", "refs/heads", "refs/tags"),
        "index": (repo / ".git" / "index").read_bytes(),
        "files": files,
    }


def fake_git(tmp_path: Path, script: str) -> Path:
    """A `git` wrapper first on PATH; SCRIPT is bash that ends by running the real git."""
    bindir = tmp_path / "fakebin"
    bindir.mkdir()
    wrapper = bindir / "git"
    wrapper.write_text(f"#!/bin/bash\nREAL_GIT={REAL_GIT}\n{script}\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    return bindir


def precious(repo: Path) -> Path:
    """Turn on an extension the in-process store refuses (git supports it): forces the
    plumbing store."""
    git(repo, "config", "core.repositoryformatversion", "1")
    git(repo, "config", "extensions.preciousObjects", "true")
    return repo


# --- scenario 55 and the untouched-repository guarantee -----------------------------


# SPEC.md §9, scenario 55.
def test_create_lands_in_a_tree_ref_and_reopens(repo):
    before = repository_view(repo)
    memory = open_git_memory(str(repo), "default")
    receipt = ok(create(memory, "/memories/notes/plan.md", "one\ntwo\nthree\n"))
    assert receipt == {
        "path": "/memories/notes/plan.md",
        "byte_length": 14,
        "evicted": [],
        "overwritten": False,
    }
    again = open_git_memory(str(repo), "default")
    assert ok(view(again, "/memories/notes/plan.md"))["text"] == "one\ntwo\nthree\n"
    ref = "refs/obversa/memory/v1/" + hashlib.sha256(b"default").hexdigest()
    assert git(repo, "for-each-ref", "--format=%(refname)", "refs/obversa/memory").split() == [ref]
    assert git(repo, "cat-file", "-t", ref).strip() == "tree"
    assert git(repo, "cat-file", "-p", ref + ":memories/notes/plan.md") == "one\ntwo\nthree\n"
    assert repository_view(repo) == before


def test_every_command_leaves_head_index_worktree_and_status_alone(repo):
    # A repository mid-work: a staged change, an unstaged change, an untracked file.
    (repo / "staged.txt").write_text("staged\n")
    git(repo, "add", "staged.txt")
    (repo / "README.md").write_text("edited\n")
    (repo / "untracked.txt").write_text("untracked\n")
    before = repository_view(repo)
    memory = open_git_memory(str(repo), "work")
    commands = [
        {"command": "view", "path": "/memories"},
        {"command": "create", "path": "/memories/a/one.md", "file_text": "one\ntwo\n"},
        {"command": "create", "path": "/memories/b.md", "file_text": "b"},
        {"command": "view", "path": "/memories/a/one.md", "view_range": [1, 1]},
        {"command": "str_replace", "path": "/memories/a/one.md", "old_str": "two", "new_str": "2"},
        {"command": "insert", "path": "/memories/a/one.md", "insert_line": 0, "insert_text": "0"},
        {"command": "rename", "old_path": "/memories/a", "new_path": "/memories/c"},
        {"command": "delete", "path": "/memories/b.md"},
        {"command": "create", "path": "/memories/bad.ts", "file_text": "refused"},
        {"command": "delete", "path": "/memories/missing.md"},
    ]
    outcomes = [memory.execute(command)["ok"] for command in commands]
    assert outcomes == [True] * 8 + [False, False]
    assert repository_view(repo) == before
    assert ok(view(open_git_memory(str(repo), "work"), "/memories/c/one.md"))["text"] == (
        "0\none\n2\n"
    )
    fsck_clean(repo)


# --- scenario 56-58: environment and hooks ------------------------------------------


# SPEC.md §9, scenario 56.
def test_poisoned_git_environment_cannot_redirect_storage(repo, tmp_path, monkeypatch):
    other = make_repo(tmp_path / "other")
    plumbed = precious(make_repo(tmp_path / "plumbed"))
    before_other = git(other, "count-objects", "-v")
    with monkeypatch.context() as poisoned:
        poisoned.setenv("GIT_DIR", str(other / ".git"))
        poisoned.setenv("GIT_WORK_TREE", str(other))
        poisoned.setenv("GIT_INDEX_FILE", str(other / ".git" / "index"))
        poisoned.setenv("GIT_OBJECT_DIRECTORY", str(other / ".git" / "objects"))
        poisoned.setenv("GIT_COMMON_DIR", str(other / ".git"))
        poisoned.setenv("GIT_CONFIG_COUNT", "1")
        poisoned.setenv("GIT_CONFIG_KEY_0", "core.bare")
        poisoned.setenv("GIT_CONFIG_VALUE_0", "true")
        for path in (repo, plumbed):
            ok(create(open_git_memory(str(path), "env"), "/memories/landed.md", "here"))
    assert git(repo, "cat-file", "-p", scope_ref("env") + ":memories/landed.md") == "here"
    assert git(plumbed, "cat-file", "-p", scope_ref("env") + ":memories/landed.md") == "here"
    assert git(other, "for-each-ref", "refs/obversa") == ""
    assert git(other, "count-objects", "-v") == before_other


# SPEC.md §9, scenario 57.
def test_git_processes_run_with_no_lazy_fetch(repo, tmp_path, monkeypatch):
    bindir = fake_git(tmp_path, '[ "$GIT_NO_LAZY_FETCH" = 1 ] || exit 97\nexec "$REAL_GIT" "$@"')
    plumbed = precious(make_repo(tmp_path / "plumbed"))
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    assert subprocess.run(["git", "--version"], capture_output=True).returncode == 97
    for path in (repo, plumbed):
        memory = open_git_memory(str(path), "lazy")
        ok(create(memory, "/memories/a.md", "a"))
        assert ok(view(open_git_memory(str(path), "lazy"), "/memories/a.md"))["text"] == "a"


# SPEC.md §9, scenario 58.
def test_reference_transaction_hook_never_runs(repo, tmp_path):
    marker = tmp_path / "hook-ran"
    plumbed = precious(make_repo(tmp_path / "plumbed"))
    for path in (repo, plumbed):
        hook = path / ".git" / "hooks" / "reference-transaction"
        hook.write_text(f"#!/bin/sh\necho ran >> {marker}\n")
        hook.chmod(0o755)
        memory = open_git_memory(str(path), "hooks")
        ok(create(memory, "/memories/a.md", "a"))
        ok(
            memory.execute(
                {"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/b.md"}
            )
        )
        ok(memory.execute({"command": "delete", "path": "/memories/b.md"}))
    assert not marker.exists()
    git(repo, "update-ref", "refs/heads/probe", "HEAD")  # the hook itself works
    assert marker.exists()


# --- scenario 59-62: persisted metadata and limits ----------------------------------


# SPEC.md §9, scenario 59 and 60.
def test_eviction_and_recency_persist_across_reopen(repo):
    limits = {"max_files": 2}
    first = open_git_memory(str(repo), "evict", limits)
    ok(create(first, "/memories/a.md", "a"))
    ok(create(first, "/memories/b.md", "b"))
    ok(view(first, "/memories/a.md"))
    assert ok(create(first, "/memories/c.md", "c"))["evicted"] == ["/memories/a.md"]
    reopened = open_git_memory(str(repo), "evict", limits)
    assert code(view(reopened, "/memories/a.md")) == "NOT_FOUND"
    assert ok(view(reopened, "/memories/b.md"))["text"] == "b"
    assert ok(view(reopened, "/memories/c.md"))["text"] == "c"

    recency = open_git_memory(str(repo), "recency", limits)
    ok(create(recency, "/memories/a.md", "a"))
    ok(create(recency, "/memories/b.md", "b"))
    second = open_git_memory(str(repo), "recency", limits)
    assert ok(create(second, "/memories/c.md", "c"))["evicted"] == ["/memories/a.md"]
    third = open_git_memory(str(repo), "recency", limits)
    assert ok(create(third, "/memories/d.md", "d"))["evicted"] == ["/memories/b.md"]


# SPEC.md §9, scenario 61.
def test_over_limit_write_leaves_the_ref_alone(repo):
    limits = {"max_file_bytes": 4, "max_total_bytes": 4, "max_files": 1}
    memory = open_git_memory(str(repo), "limits", limits)
    ok(create(memory, "/memories/a.md", "safe"))
    before = ref_value(repo, "limits")
    assert code(create(memory, "/memories/b.md", "large")) == "LIMIT_EXCEEDED"
    assert ref_value(repo, "limits") == before
    assert ok(view(memory, "/memories/a.md"))["text"] == "safe"


# SPEC.md §9, scenario 62.
def test_scope_written_with_larger_limits_is_unsafe_under_smaller(repo):
    big = {"max_file_bytes": 8, "max_total_bytes": 8, "max_files": 1}
    ok(create(open_git_memory(str(repo), "shrink", big), "/memories/a.md", "12345"))
    small = {"max_file_bytes": 4, "max_total_bytes": 4, "max_files": 1}
    result = view(open_git_memory(str(repo), "shrink", small))
    assert result["error"] == {
        "code": "UNSAFE_STORAGE",
        "message": "Memory storage exceeds the current limits.",
    }


# --- scenario 63-69: validation of stored data --------------------------------------


# SPEC.md §9, scenario 63.
def test_symlink_and_gitlink_entries_are_unsafe(repo):
    target = write_bytes_blob(repo, b"target")
    meta = metadata("links", [("/memories/link.md", 6, 1)], 1)
    store_scope(repo, "links", meta, [f"120000 blob {target}\tlink.md"])
    assert view(open_git_memory(str(repo), "links"))["error"] == {
        "code": "UNSAFE_STORAGE",
        "message": "Memory tree contains an unsafe entry.",
    }
    head = git(repo, "rev-parse", "HEAD").strip()
    store_scope(repo, "gitlink", metadata("gitlink", [], 0), [f"160000 commit {head}\tsub"])
    assert code(view(open_git_memory(str(repo), "gitlink"))) == "UNSAFE_STORAGE"


# SPEC.md §9, scenario 64.
def test_invalid_utf8_blob_is_unsafe_when_read(repo):
    bad = write_bytes_blob(repo, bytes([0xF0, 0x28, 0x8C, 0xBC]))
    store_scope(repo, "utf8", metadata("utf8", [("/memories/a.md", 4, 1)], 1), [
        f"100644 blob {bad}\ta.md"
    ])  # fmt: skip
    memory = open_git_memory(str(repo), "utf8")
    assert view(memory, "/memories/a.md")["error"] == {
        "code": "UNSAFE_STORAGE",
        "message": "Memory content is not valid UTF-8.",
    }
    # A write that would rewrite the file reads it first, so it is refused as well.
    replace = {"command": "str_replace", "path": "/memories/a.md", "old_str": "(", "new_str": ""}
    assert code(memory.execute(replace)) == "UNSAFE_STORAGE"


def test_blob_longer_than_declared_is_unsafe(repo):
    blob = write_bytes_blob(repo, b"longer than declared")
    store_scope(repo, "size", metadata("size", [("/memories/a.md", 3, 1)], 1), [
        f"100644 blob {blob}\ta.md"
    ])  # fmt: skip
    error = view(open_git_memory(str(repo), "size"), "/memories/a.md")["error"]
    assert error["message"] == "Memory metadata does not match stored content."


# SPEC.md §9, scenario 65.
def test_hidden_empty_directory_is_unsafe(repo):
    memory = open_git_memory(str(repo), "hidden")
    ok(create(memory, "/memories/a.md", "a"))
    root = ref_value(repo, "hidden")
    files = git(repo, "rev-parse", root + ":memories").strip()
    empty = mktree(repo, [])
    deeper = mktree(repo, [f"040000 tree {empty}\tdeeper"])
    hidden = mktree(repo, [f"040000 tree {deeper}\thidden"])
    listing = git(repo, "ls-tree", files).splitlines()
    poisoned = mktree(repo, listing + [f"040000 tree {hidden}\tbranch"])
    meta = git(repo, "rev-parse", root + ":.obversa-memory.json").strip()
    new_root = mktree(
        repo, [f"100644 blob {meta}\t.obversa-memory.json", f"040000 tree {poisoned}\tmemories"]
    )
    git(repo, "update-ref", scope_ref("hidden"), new_root)
    assert view(open_git_memory(str(repo), "hidden"))["error"] == {
        "code": "UNSAFE_STORAGE",
        "message": "Memory tree contains an unsafe directory.",
    }


# SPEC.md §9, scenario 66.
def test_deeply_nested_file_reads_back(repo):
    path = "/memories/" + "a/" * 100 + "deep.md"
    memory = open_git_memory(str(repo), "deep", {"max_files": 1})
    ok(create(memory, path, "deep"))
    assert ok(view(open_git_memory(str(repo), "deep", {"max_files": 1}), path))["text"] == "deep"


# SPEC.md §9, scenario 67.
def test_symbolic_ref_is_unsafe_even_to_a_valid_tree(repo):
    ok(create(open_git_memory(str(repo), "real"), "/memories/a.md", "a"))
    git(repo, "symbolic-ref", scope_ref("alias"), scope_ref("real"))
    assert view(open_git_memory(str(repo), "alias"))["error"] == {
        "code": "UNSAFE_STORAGE",
        "message": "Memory ref must not be symbolic.",
    }
    assert code(create(open_git_memory(str(repo), "alias"), "/memories/b.md", "b")) == (
        "UNSAFE_STORAGE"
    )
    assert root_names(open_git_memory(str(repo), "real")) == ["a.md"]
    # The building block other storage code uses (sync, export) refuses it as well.
    with gitstore.open_store(str(repo)) as store:
        with pytest.raises(MemoryFailure, match="must not be symbolic"):
            read_scope_tree(store, store.read_ref(scope_ref("alias")), scope_digest("alias"), None)
    listed = {item["digest"]: item for item in list_scopes(str(repo))}
    assert listed[scope_digest("alias")]["error"] == "Memory ref must not be symbolic."


def raw_tree(repo: Path, entries: list[tuple[str, str, str]]) -> str:
    """Store a tree object exactly as given (mode, name, id), unchecked and unsorted, the
    way a tool other than git could write one."""
    data = b"".join(
        f"{mode} {name}".encode() + b"\0" + bytes.fromhex(oid) for mode, name, oid in entries
    )
    completed = subprocess.run(
        ["git", "hash-object", "-t", "tree", "-w", "--literally", "--stdin"],
        cwd=repo,
        input=data,
        capture_output=True,
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stdout.decode().strip()


def test_root_tree_with_a_repeated_name_is_unsafe(repo):
    blob = write_bytes_blob(repo, b"a")
    meta = write_bytes_blob(repo, metadata("repeat", [("/memories/a.md", 1, 1)], 1))
    files = raw_tree(repo, [("100644", "a.md", blob)])
    # Three entries, two of them named `memories`: git lists all three.
    root = raw_tree(
        repo,
        [("100644", ".obversa-memory.json", meta), ("100644", "memories", blob),
         ("40000", "memories", files)],
    )  # fmt: skip
    assert len(git(repo, "ls-tree", root).splitlines()) == 3
    git(repo, "update-ref", scope_ref("repeat"), root)
    assert view(open_git_memory(str(repo), "repeat"))["error"] == {
        "code": "UNSAFE_STORAGE",
        "message": "Memory root tree has an unexpected layout.",
    }


def test_tree_entry_name_holding_a_slash_is_unsafe(repo):
    # `memories` holds directory `a` (with c.md) and a blob named "a/b.md": joined, the
    # names would match metadata listing /memories/a/b.md and /memories/a/c.md.
    b, c = write_bytes_blob(repo, b"b"), write_bytes_blob(repo, b"c")
    a = raw_tree(repo, [("100644", "c.md", c)])
    files = raw_tree(repo, [("40000", "a", a), ("100644", "a/b.md", b)])
    meta = metadata("slash", [("/memories/a/b.md", 1, 1), ("/memories/a/c.md", 1, 2)], 2)
    meta_blob = write_bytes_blob(repo, meta)
    root = raw_tree(
        repo, [("100644", ".obversa-memory.json", meta_blob), ("40000", "memories", files)]
    )
    git(repo, "update-ref", scope_ref("slash"), root)
    memory = open_git_memory(str(repo), "slash")
    for path in ("/memories", "/memories/a/b.md"):
        assert view(memory, path)["error"] == {
            "code": "UNSAFE_STORAGE",
            "message": "Memory storage contains an invalid file path.",
        }


# SPEC.md §9, scenario 68.
def test_padded_metadata_exceeds_its_allowed_size(repo):
    blob = write_bytes_blob(repo, b"a")
    meta = metadata("padded", [("/memories/a.md", 1, 1)], 1, padding="x" * 524288)
    store_scope(repo, "padded", meta, [f"100644 blob {blob}\ta.md"])
    assert view(open_git_memory(str(repo), "padded"))["error"] == {
        "code": "UNSAFE_STORAGE",
        "message": "Memory blob exceeds its allowed size.",
    }


@pytest.mark.parametrize(
    ("meta", "message"),
    [
        (b"not json", "Memory metadata is not valid JSON."),
        (b'{"format":2}', "Memory metadata belongs to another scope or format."),
        (metadata("other", [], 0), "Memory metadata belongs to another scope or format."),
        (metadata("checks", [("/memories/a.ts", 1, 1)], 1), "invalid file path."),
        (metadata("checks", [("/memories/a.md", 1, 2)], 1), "conflicting entries."),
        (metadata("checks", [("/memories/a.md", 1, 1)], 1).replace(b":1,\"e", b":2,\"e"),
         "Memory metadata does not match its declared byte total."),
        (metadata("checks", [("/memories/b.md", 1, 1)], 1),
         "Memory metadata does not match stored content."),
    ],
)  # fmt: skip
def test_metadata_checks(repo, meta, message):
    blob = write_bytes_blob(repo, b"a")
    store_scope(repo, "checks", meta, [f"100644 blob {blob}\ta.md"])
    error = view(open_git_memory(str(repo), "checks"))["error"]
    assert error["code"] == "UNSAFE_STORAGE" and error["message"].endswith(message)
    assert set(error) == {"code", "message"}


def entry(path: object, length: object = 1, written: object = 1) -> dict:
    return {"path": path, "byteLength": length, "written": written}


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        # The entries are checked all at once; when that fails, one by one, so the
        # message is the first wrong entry's, as ever: an entry's own fault at once,
        # a repeated path or a stamp past the clock only after every entry.
        ([entry("/memories/a.md"), entry("/memories/a.md"), entry("/memories/b.md", True)],
         "Memory metadata contains an invalid entry."),
        ([entry("/memories/a.md", written=9), entry("/memories/b.ts")],
         "Memory storage contains an invalid file path."),
        ([entry("/memories/a.md", written=9), entry("/memories/b.md")],
         "Memory metadata contains conflicting entries."),
        ([entry("/memories/a.md", 2**53)], "Memory metadata contains an invalid entry."),
        ([entry("/memories/a.md", written=0)], "Memory metadata contains an invalid entry."),
        ([entry("/memories/a.md", 1.0)], "Memory metadata contains an invalid entry."),
        ([entry(["/memories/a.md"])], "Memory storage contains an invalid file path."),
        (["/memories/a.md"], "Memory metadata contains an invalid entry."),
        ([entry("/memories/a.md"), entry("/memories/a.md")],
         "Memory metadata contains conflicting entries."),
        ([entry("/memories/a.md\n/memories/b.md")],
         "Memory storage contains an invalid file path."),
    ],
)  # fmt: skip
def test_the_first_wrong_entry_names_the_fault(entries, message):
    digest = scope_digest("order")
    meta = {"format": 1, "scopeDigest": digest, "nextWrite": 5, "totalBytes": 2}
    data = json.dumps({**meta, "entries": entries}).encode()
    with pytest.raises(MemoryFailure) as failed:
        parse_metadata(data, digest, None)
    assert failed.value.code == "UNSAFE_STORAGE" and failed.value.message == message


def test_a_tree_entry_in_a_mode_git_does_not_write_reads_as_before(repo):
    # `100644` spelled with a leading zero is still a file's mode: the usual listing
    # leaves such a tree to the reading entry by entry, which accepts it as it did.
    blob = write_bytes_blob(repo, b"a")
    meta = write_bytes_blob(repo, metadata("mode", [("/memories/a.md", 1, 1)], 1))
    files = raw_tree(repo, [("0100644", "a.md", blob)])
    root = raw_tree(repo, [("100644", ".obversa-memory.json", meta), ("40000", "memories", files)])
    git(repo, "update-ref", scope_ref("mode"), root)
    assert ok(view(open_git_memory(str(repo), "mode"), "/memories/a.md"))["text"] == "a"


# SPEC.md §9, scenario 69.
def test_exhausted_write_clock_is_a_storage_error_and_changes_nothing(repo):
    blob = write_bytes_blob(repo, b"old")
    clock = 2**53 - 1
    store_scope(repo, "clock", metadata("clock", [("/memories/old.md", 3, 5)], clock), [
        f"100644 blob {blob}\told.md"
    ])  # fmt: skip
    before = ref_value(repo, "clock")
    result = create(open_git_memory(str(repo), "clock"), "/memories/new.md", "new")
    assert result["error"]["code"] == "STORAGE_ERROR"
    assert ref_value(repo, "clock") == before
    assert ok(view(open_git_memory(str(repo), "clock"), "/memories/old.md"))["text"] == "old"


# --- scenario 70-71: compare-and-swap ------------------------------------------------


# SPEC.md §9, scenario 70.
def test_lost_race_is_retried_and_both_writes_survive(repo):
    memory = open_git_memory(str(repo), "race")
    racer = open_git_memory(str(repo), "race")
    store = memory._store
    real_update = store.update_ref
    raced = []

    def racing_update(ref, old, new):
        if not raced:  # a real concurrent writer moves the ref just before our CAS
            raced.append(ok(create(racer, "/memories/raced.md", "racer")))
        return real_update(ref, old, new)

    store.update_ref = racing_update
    ok(create(memory, "/memories/wanted.md", "mine"))
    reopened = open_git_memory(str(repo), "race")
    assert root_names(reopened) == ["raced.md", "wanted.md"]
    assert ok(view(reopened, "/memories/raced.md"))["text"] == "racer"


# SPEC.md §9, scenario 70.
def test_stale_cas_through_plumbing_is_retried(tmp_path, monkeypatch):
    plumbed = precious(make_repo(tmp_path / "plumbed"))
    marker = tmp_path / "raced"
    racer = (
        f'{sys.executable} -c "from git_obversa import open_git_memory as o; '
        f"r = o('{plumbed}', 'race').execute({{'command': 'create', "
        f"'path': '/memories/raced.md', 'file_text': 'racer'}}); assert r['ok'], r\""
    )
    bindir = fake_git(
        tmp_path,
        f'if [[ " $* " == *" update-ref "* && ! -e {marker} ]]; then\n'
        f"  touch {marker}; {racer} || exit 3; exit 1\nfi\n"
        'exec "$REAL_GIT" "$@"',
    )
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    memory = open_git_memory(str(plumbed), "race")
    assert memory.backend == "plumbing"
    ok(create(memory, "/memories/wanted.md", "mine"))
    assert marker.exists()
    assert root_names(open_git_memory(str(plumbed), "race")) == ["raced.md", "wanted.md"]


def test_sixty_four_lost_races_are_a_conflict(repo):
    memory = open_git_memory(str(repo), "busy")
    racer = open_git_memory(str(repo), "busy")
    real_move = memory._store.move_scope
    races = []

    def always_raced(digest, old, new, action):
        races.append(ok(create(racer, f"/memories/r{len(races)}.md", "r")))
        return real_move(digest, old, new, action)

    memory._store.move_scope = always_raced
    result = create(memory, "/memories/never.md", "x")
    assert result["error"] == {
        "code": "CONFLICT",
        "message": "Memory changed repeatedly while writing.",
    }
    assert len(races) == 64
    assert "never.md" not in root_names(racer)


# SPEC.md §9, scenario 71.
def test_concurrent_creates_through_two_adapters_all_land(repo):
    adapters = [open_git_memory(str(repo), "pair"), open_git_memory(str(repo), "pair")]
    results: list[dict] = []

    def write(index: int) -> None:
        results.append(create(adapters[index % 2], f"/memories/f{index}.md", str(index)))

    threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [result["ok"] for result in results] == [True] * 8
    assert len(root_names(open_git_memory(str(repo), "pair"))) == 8


# --- scenario 72-73: mirror clone, output cap -----------------------------------------


# SPEC.md §9, scenario 72.
def test_mirror_clone_reads_the_scope(repo, tmp_path):
    ok(create(open_git_memory(str(repo), "shared"), "/memories/a.md", "from origin"))
    mirror = tmp_path / "mirror.git"
    git(tmp_path, "clone", "-q", "--mirror", str(repo), str(mirror))
    assert ok(view(open_git_memory(str(mirror), "shared"), "/memories/a.md"))["text"] == (
        "from origin"
    )
    assert code(view(open_git_memory(str(mirror), "other"), "/memories/a.md")) == "NOT_FOUND"


# SPEC.md §9, scenario 73.
def test_flooding_git_output_is_refused_at_open(repo, tmp_path, monkeypatch):
    bindir = fake_git(
        tmp_path,
        'if [[ " $* " == *" --show-object-format"* ]]; then\n'
        "  head -c 524289 /dev/zero | tr '\\0' x; head -c 524288 /dev/zero | tr '\\0' y >&2\n"
        "  exit 0\nfi\n"
        'exec "$REAL_GIT" "$@"',
    )
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(MemoryFailure) as raised:
        open_git_memory(str(repo), "flood")
    assert raised.value.code == "UNSAFE_STORAGE"
    assert raised.value.message == "Git output exceeded the memory storage limit."


# --- opening: arguments, layouts ------------------------------------------------------


def test_open_rejects_bad_arguments_and_non_repositories(tmp_path):
    with pytest.raises(TypeError, match="non-empty string"):
        open_git_memory("", "s")
    with pytest.raises(TypeError, match="accessible"):
        open_git_memory(str(tmp_path / "absent"), "s")
    with pytest.raises(TypeError, match="scope"):
        open_git_memory(str(tmp_path), " ")
    # SPEC §3.1 order: the repository path is resolved before the limits are checked.
    with pytest.raises(TypeError, match="accessible"):
        open_git_memory(str(tmp_path / "absent"), "s", {"max_files": 0})
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(MemoryFailure) as raised:
        open_git_memory(str(plain), "s")
    assert raised.value.code == "STORAGE_ERROR"
    assert "must identify a Git repository" in raised.value.message


def test_linked_worktree_shares_the_repository_memory(repo, tmp_path):
    worktree = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", str(worktree), "-b", "side")
    (worktree / "sub").mkdir()
    ok(create(open_git_memory(str(worktree / "sub"), "team"), "/memories/a.md", "from wt"))
    assert ok(view(open_git_memory(str(repo), "team"), "/memories/a.md"))["text"] == "from wt"
    ok(create(open_git_memory(str(repo), "team"), "/memories/b.md", "from main"))
    assert root_names(open_git_memory(str(worktree), "team")) == ["a.md", "b.md"]
    assert (repo / ".git" / "refs" / "obversa" / "memory" / "v1" / scope_digest("team")).exists()
    assert git(worktree, "status", "--porcelain") == ""


def test_bare_repository(tmp_path):
    bare = make_repo(tmp_path / "bare.git", "--bare")
    ok(create(open_git_memory(str(bare), "b"), "/memories/a.md", "bare"))
    assert ok(view(open_git_memory(str(bare), "b"), "/memories/a.md"))["text"] == "bare"
    fsck_clean(bare)


def test_sha256_repository(tmp_path):
    repo = make_repo(tmp_path / "sha256", "--object-format=sha256")
    memory = open_git_memory(str(repo), "long")
    ok(create(memory, "/memories/dir/a.md", "one\n"))
    ok(create(memory, "/memories/dir/b.md", "two\n"))
    ok(
        memory.execute(
            {"command": "rename", "old_path": "/memories/dir", "new_path": "/memories/d"}
        )
    )
    assert len(ref_value(repo, "long")) == 64
    assert git(repo, "cat-file", "-p", scope_ref("long") + ":memories/d/b.md") == "two\n"
    assert ok(view(open_git_memory(str(repo), "long"), "/memories/d/a.md"))["text"] == "one\n"
    fsck_clean(repo)


def test_packed_refs(repo):
    memory = open_git_memory(str(repo), "packed")
    ok(create(memory, "/memories/a.md", "a"))
    git(repo, "pack-refs", "--all")
    loose = repo / ".git" / "refs" / "obversa" / "memory" / "v1" / scope_digest("packed")
    assert not loose.exists()
    reopened = open_git_memory(str(repo), "packed")
    assert ok(view(reopened, "/memories/a.md"))["text"] == "a"
    ok(create(reopened, "/memories/b.md", "b"))  # CAS against the packed value
    assert root_names(open_git_memory(str(repo), "packed")) == ["a.md", "b.md"]
    fsck_clean(repo)


# --- the plumbing fallback --------------------------------------------------------------


def test_plumbing_fallback_reads_and_writes_the_same_format(repo):
    ok(create(open_git_memory(str(repo), "mixed"), "/memories/in-process.md", "dulwich\n"))
    precious(repo)
    memory = open_git_memory(str(repo), "mixed")
    assert memory.backend == "plumbing"
    assert ok(view(memory, "/memories/in-process.md"))["text"] == "dulwich\n"
    ok(create(memory, "/memories/plumbing/a.md", "git\n"))
    replace = {"command": "str_replace", "path": "/memories/in-process.md", "old_str": "d"}
    ok(memory.execute({**replace, "new_str": "D"}))
    ok(memory.execute({"command": "delete", "path": "/memories/plumbing"}))
    assert code(view(memory, "/memories/plumbing/a.md")) == "NOT_FOUND"
    assert git(repo, "cat-file", "-p", scope_ref("mixed") + ":memories/in-process.md") == (
        "Dulwich\n"
    )
    git(repo, "config", "--unset", "extensions.preciousObjects")
    assert ok(view(open_git_memory(str(repo), "mixed"), "/memories/in-process.md"))["text"] == (
        "Dulwich\n"
    )
    fsck_clean(repo)


def test_plumbing_reads_a_file_as_large_as_the_limits_allow(repo):
    # Larger than the 2 MiB any other git output may be, within the scope's own limits.
    limits = {"max_file_bytes": 4 << 20, "max_total_bytes": 4 << 20}
    text = "x" * (3 << 20)
    ok(create(open_git_memory(str(precious(repo)), "large", limits), "/memories/big.md", text))
    reopened = open_git_memory(str(repo), "large", limits)
    assert reopened.backend == "plumbing"
    assert ok(view(reopened, "/memories/big.md"))["text"] == text


def test_repository_git_itself_refuses_gets_a_clear_error(repo):
    git(repo, "config", "core.repositoryformatversion", "1")
    git(repo, "config", "extensions.somethingnew", "true")
    with pytest.raises(MemoryFailure) as raised:
        open_git_memory(str(repo), "s")
    assert raised.value.code == "STORAGE_ERROR"


# --- the storage format, byte for byte -------------------------------------------------


def test_storage_format_matches_the_original_byte_for_byte(repo):
    memory = open_git_memory(str(repo), "format")
    ok(create(memory, "/memories/b.md", "bee"))
    ok(create(memory, "/memories/a/x.md", "ex"))
    root = scope_ref("format")
    assert git(repo, "ls-tree", root).splitlines() == [
        f"100644 blob {git(repo, 'rev-parse', root + ':.obversa-memory.json').strip()}"
        "\t.obversa-memory.json",
        f"040000 tree {git(repo, 'rev-parse', root + ':memories').strip()}\tmemories",
    ]
    expected = (
        f'{{"format":1,"scopeDigest":"{scope_digest("format")}","nextWrite":2,"totalBytes":5,'
        '"entries":[{"path":"/memories/a/x.md","byteLength":2,"written":2},'
        '{"path":"/memories/b.md","byteLength":3,"written":1}]}'
    )
    assert git(repo, "cat-file", "blob", root + ":.obversa-memory.json") == expected
    # The same content built with git plumbing (as the original does) has the same id.
    x = write_bytes_blob(repo, b"ex")
    a = mktree(repo, [f"100644 blob {x}\tx.md"])
    b = write_bytes_blob(repo, b"bee")
    files = mktree(repo, [f"040000 tree {a}\ta", f"100644 blob {b}\tb.md"])
    meta = write_bytes_blob(repo, expected.encode())
    original = mktree(
        repo, [f"100644 blob {meta}\t.obversa-memory.json", f"040000 tree {files}\tmemories"]
    )
    assert ref_value(repo, "format") == original


def test_a_write_from_a_scope_just_read_stores_what_a_warm_one_stores(repo):
    # A one-shot command writes from a scope it has only read (its metadata encoded all
    # at once); a long-lived adapter from the one it wrote last (entries re-encoded one
    # by one). The same command on the same state stores the same tree.
    warm = open_git_memory(str(repo), "cold")
    for name in ("b.md", "a/x.md", "a/y-1.md", "c/d/e_f.txt", "A.md", "0.json"):
        ok(create(warm, f"/memories/{name}", f"text of {name}\n"))
    before = ref_value(repo, "cold")
    for command in (
        {"command": "str_replace", "path": "/memories/a/x.md", "old_str": "of", "new_str": "o"},
        {"command": "create", "path": "/memories/new.md", "file_text": "new"},
        {"command": "rename", "old_path": "/memories/a", "new_path": "/memories/z"},
    ):
        ok(warm.execute(command))
        after = ref_value(repo, "cold")
        git(repo, "update-ref", scope_ref("cold"), before)
        ok(open_git_memory(str(repo), "cold").execute(command))
        assert ref_value(repo, "cold") == after
        git(repo, "update-ref", scope_ref("cold"), before)
        warm = open_git_memory(str(repo), "cold")
        ok(view(warm))  # read: warm again from the state before
        ok(warm.execute({"command": "create", "path": "/memories/b.md", "file_text": "b"}))
        before = ref_value(repo, "cold")


def test_scope_written_by_hand_in_the_original_format_is_read(repo):
    one = write_bytes_blob(repo, b"one\n")
    store_scope(repo, "hand", metadata("hand", [("/memories/one.md", 4, 3)], 7), [
        f"100644 blob {one}\tone.md"
    ])  # fmt: skip
    memory = open_git_memory(str(repo), "hand")
    assert ok(view(memory, "/memories/one.md"))["text"] == "one\n"
    ok(create(memory, "/memories/two.md", "two"))
    meta = json.loads(git(repo, "cat-file", "blob", scope_ref("hand") + ":.obversa-memory.json"))
    assert meta["nextWrite"] == 8
    assert meta["entries"][1] == {"path": "/memories/two.md", "byteLength": 3, "written": 8}


# --- stale locks, listing, building blocks -----------------------------------------------


def test_lock_left_by_a_killed_writer_is_cleared_with_one_line(repo, capfd):
    memory = open_git_memory(str(repo), "locked")
    ok(create(memory, "/memories/a.md", "a"))
    lock = Path(memory._store.ref_lock_path(scope_ref("locked")))
    lock.write_text("")
    old = time.time() - locks.STALE_LOCK_SECONDS - 1
    os.utime(lock, (old, old))
    ok(create(memory, "/memories/b.md", "b"))
    assert not lock.exists()
    said = capfd.readouterr().err.splitlines()
    assert len(said) == 1 and "stale lock" in said[0] and str(lock) in said[0]
    assert ok(view(memory, "/memories/a.md"))["text"] == "a"


def test_a_live_lock_wins_until_it_is_released(repo):
    memory = open_git_memory(str(repo), "locked")
    ok(create(memory, "/memories/a.md", "a"))
    lock = Path(memory._store.ref_lock_path(scope_ref("locked")))
    lock.write_text("")  # a writer holding the lock right now
    holder = threading.Timer(0.3, lock.unlink)
    holder.start()
    started = time.monotonic()
    ok(create(memory, "/memories/b.md", "b"))
    assert time.monotonic() - started >= 0.25
    assert sorted(ok(view(memory, "/memories"))["entries"], key=str)[1]["name"] == "b.md"


HOLD_A_LOCK = r"""
import sys, time
from git_obversa.memory.gitstore import open_store
store = open_store(sys.argv[1])
assert store._lock_ref(sys.argv[2]) is not None
print("held", flush=True)
time.sleep(600)
"""


def test_a_lock_whose_owner_died_is_cleared_at_once_a_live_one_waited_for(repo, capfd):
    memory = open_git_memory(str(repo), "owned")
    ok(create(memory, "/memories/a.md", "a"))
    ref = scope_ref("owned")
    lock = memory._store.ref_lock_path(ref)
    owner = subprocess.Popen(
        [sys.executable, "-c", HOLD_A_LOCK, str(repo), ref], stdout=subprocess.PIPE, text=True
    )
    try:
        assert owner.stdout.readline() == "held\n"
        time.sleep(locks.ORPHAN_LOCK_SECONDS + 0.3)
        assert gitstore.LockWatch(lock).present()  # alive: its lock stands, however empty
    finally:
        owner.kill()
        owner.wait()
    started = time.monotonic()
    ok(create(memory, "/memories/b.md", "b"))  # its owner is gone: no 5 s wait
    assert time.monotonic() - started < locks.STALE_LOCK_SECONDS / 2
    assert "stale lock" in capfd.readouterr().err and not Path(lock).exists()


def test_a_git_lock_stands_while_a_git_process_works_in_the_repository(repo):
    # Git marks its locks with nothing: one is known dead only when no git process can
    # be working in the repository; its age alone proves nothing (issue 27).
    lock = Path(open_git_memory(str(repo), "g")._store.ref_lock_path(scope_ref("g")))
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("1" * 40 + "\n")  # git writes the new value as soon as it locks
    old = time.time() - locks.STALE_LOCK_SECONDS - 60
    os.utime(lock, (old, old))
    working = subprocess.Popen(["git", "cat-file", "--batch"], cwd=repo, stdin=subprocess.PIPE)
    try:
        assert gitstore.LockWatch(str(lock)).present()
    finally:
        working.kill()
        working.wait()
    assert not gitstore.LockWatch(str(lock)).present() and not lock.exists()


def test_gc_pid_left_long_ago_on_another_host_does_not_hold_writes(repo):
    # Writers wait while a `git gc` runs; like git, they trust a gc.pid for 12 hours only.
    gc_pid = repo / ".git" / "gc.pid"
    gc_pid.write_text("4242 some-other-host")
    old = time.time() - 13 * 3600
    os.utime(gc_pid, (old, old))
    started = time.monotonic()
    ok(create(open_git_memory(str(repo), "gc"), "/memories/a.md", "a"))
    assert time.monotonic() - started < gitstore.GC_WAIT_SECONDS / 4


def test_list_scopes(repo):
    ok(create(open_git_memory(str(repo), "one"), "/memories/a.md", "abc"))
    second = open_git_memory(str(repo), "two")
    ok(create(second, "/memories/a.md", "a"))
    ok(create(second, "/memories/b/c.md", "bc"))
    git(repo, "update-ref", scope_ref("broken"), git(repo, "rev-parse", "HEAD^{tree}").strip())
    listed = {item["digest"]: item for item in list_scopes(str(repo))}
    assert listed[scope_digest("one")] == {
        "digest": scope_digest("one"),
        "name": "one",
        "ref": scope_ref("one"),
        "files": 1,
        "bytes": 3,
    }
    assert listed[scope_digest("two")]["files"] == 2 and listed[scope_digest("two")]["bytes"] == 3
    assert listed[scope_digest("broken")]["files"] is None
    assert "error" in listed[scope_digest("broken")]


def test_building_blocks_round_trip(repo):
    memory = open_git_memory(str(repo), "blocks")
    ok(create(memory, "/memories/a.md", "a"))
    ok(create(memory, "/memories/d/b.md", "bb"))
    store = gitstore.open_store(str(repo))
    try:
        digest = scope_digest("blocks")
        scope = read_scope_tree(store, ref_value(repo, "blocks"), digest, None)
        assert set(scope.blobs) == {"/memories/a.md", "/memories/d/b.md"}
        blobs = dict(scope.blobs)
        blobs["/memories/c.md"] = store.write_object("blob", b"ccc")
        entries = dict(scope.entries)
        entries["/memories/c.md"] = type(entries["/memories/a.md"])(3, scope.clock + 1)
        tree = write_scope_tree(store, digest, entries, scope.clock + 1, blobs, base=scope)
        assert store.update_ref(SCOPE_REF_PREFIX + digest, scope.tree, tree)
    finally:
        store.close()
    assert root_names(open_git_memory(str(repo), "blocks")) == ["a.md", "c.md", "d"]
    fsck_clean(repo)


# --- scenario 74: the conformance kit, on both stores --------------------------------------


# SPEC.md §9, scenario 74.
@pytest.mark.parametrize("backend", ["in-process", "plumbing"])
def test_conformance_kit_passes_on_both_stores(repo, backend):
    from git_obversa.memory.conformance import run_memory_conformance

    if backend == "plumbing":
        precious(repo)

    def factory(scope, limits):
        memory = open_git_memory(str(repo), scope, limits)
        assert memory.backend == backend
        return memory

    assert run_memory_conformance(factory) == {"ok": True, "cases": 17, "failures": []}


def test_plumbing_lists_a_symbolic_scope_ref_as_unsafe(repo):
    ok(create(open_git_memory(str(repo), "real"), "/memories/a.md", "a"))
    git(repo, "symbolic-ref", scope_ref("alias"), scope_ref("real"))
    precious(repo)
    listed = {item["digest"]: item for item in list_scopes(str(repo))}
    assert listed[scope_digest("alias")]["error"] == "Memory ref must not be symbolic."
    assert listed[scope_digest("real")]["files"] == 1


def counted_spawns(monkeypatch) -> list:
    """The git commands gitstore starts from now on, as a list that grows."""
    spawned = []
    spawn = gitstore.git.spawn

    def counted(args, *rest, **options):
        spawned.append(args)
        return spawn(args, *rest, **options)

    monkeypatch.setattr(gitstore.git, "spawn", counted)
    return spawned


def test_locating_asked_ahead_answers_only_for_its_own_repository(tmp_path, monkeypatch):
    # A one-shot command asks git where the store is before it imports the engine; the
    # answers serve the repository they were asked of, and no other.
    first, second = make_repo(tmp_path / "first"), make_repo(tmp_path / "second")
    git(second, "config", "core.fsync", "reference")  # an answer only SECOND gives
    spawned = counted_spawns(monkeypatch)

    store_git.start_locating(str(first))
    assert len(spawned) == 1  # one question now,
    store_git.start_locating(str(first))
    assert len(spawned) == 2  # the other when asked again (apart, they start faster)
    common_dir, _, config = store_git.locate(str(first))
    assert len(spawned) == 2  # and answered from there
    assert Path(common_dir) == (first / ".git").resolve() and "core.fsync" not in config

    store_git.start_locating(str(first))
    common_dir, _, config = store_git.locate(str(second))
    assert Path(common_dir) == (second / ".git").resolve()
    assert config["core.fsync"] == "reference"
    assert len(spawned) == 6  # FIRST's answers were not taken for SECOND's


def test_the_configured_scope_is_asked_in_the_store_s_own_git_config(tmp_path, monkeypatch):
    # A one-shot command needs `git config --get obversa.scope` and the store's settings:
    # one isolated `git config` answers both when the environment changes nothing git
    # reads, and the key stays out of the settings the store obeys.
    repo = make_repo(tmp_path / "repo")
    git(repo, "config", "obversa.scope", " first ")
    git(repo, "config", "--add", "obversa.scope", "team")  # the last value wins
    # As a user's shell has it (the suite's own GIT_CONFIG_* would keep the two apart),
    # and as git sets GIT_EXEC_PATH for the programs it runs.
    monkeypatch.delenv("GIT_CONFIG_GLOBAL")
    monkeypatch.delenv("GIT_CONFIG_NOSYSTEM")
    monkeypatch.setenv("GIT_EXEC_PATH", git(repo, "--exec-path").strip())
    spawned = counted_spawns(monkeypatch)
    configured = store_git.start_locating(str(repo), "obversa.scope")
    assert configured is not None and configured() == "team"
    _, _, config = store_git.locate(str(repo))
    assert len(spawned) == 2 and "obversa.scope" not in config

    # Unset: "" as `git config --get` prints nothing.
    git(repo, "config", "--unset-all", "obversa.scope")
    assert store_git.start_locating(str(repo), "obversa.scope")() == ""
    store_git.locate(str(repo))

    # Answers a command waited for but left to its store (its scope was refused) are
    # not taken for the next command's questions.
    configured = store_git.start_locating(str(repo), "obversa.scope")
    assert configured() == ""
    git(repo, "config", "obversa.scope", "later")
    assert store_git.start_locating(str(repo), "obversa.scope")() == "later"
    store_git.locate(str(repo))

    # A variable that may change what git reads (here `git -c`): the caller asks itself.
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'obversa.scope'='elsewhere'")
    assert store_git.start_locating(str(repo), "obversa.scope") is None
    _, _, config = store_git.locate(str(repo))
    assert "obversa.scope" not in config
