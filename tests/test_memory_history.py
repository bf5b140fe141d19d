"""History of every scope (memory log / restore) and scope names, in real repositories."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from git_obversa.memory import gitstore, history_commits, ref_names
from git_obversa.memory.git_memory import list_scopes, open_git_memory, scope_digest, scope_ref
from git_obversa.memory.history import HistoryError, restore_scope, scope_log
from git_obversa.memory.names import AmbiguousScope, ScopeNotFound, by_digest, resolve_scope
from git_obversa.memory.scopes import drop_scope, export_scope, import_scope
from git_obversa.sync import remote as sync
from tests.gitutil import git, make_repo, obversa


def run(memory, command: str, **fields) -> dict:
    result = memory.execute({"command": command, **fields})
    assert result["ok"], result
    return result["value"]


def tree_of(repo: Path, scope: str) -> str | None:
    value = git(repo, "rev-parse", "--verify", "--quiet", scope_ref(scope), check=False).strip()
    return value or None


def texts(repo: Path, scope: str) -> dict[str, str]:
    tree = tree_of(repo, scope)
    if tree is None:
        return {}
    listing = git(repo, "ls-tree", "-r", "--name-only", tree, "memories").split()
    return {path: git(repo, "cat-file", "blob", f"{tree}:{path}") for path in listing}


def round_trip(repo: Path, scope: str, action: str) -> None:
    """The newest state was made by ACTION; restoring the one before brings its files
    back exactly, and restoring the newest again undoes that restore."""
    newest, before = scope_log(repo, scope)[:2]
    assert newest["action"] == action, newest
    after_files = texts(repo, scope)
    restore_scope(repo, scope, before["state"][:10])
    assert tree_of(repo, scope) == _tree_of_state(repo, before["state"])
    assert scope_log(repo, scope)[0]["action"] == "restore"
    restore_scope(repo, scope, newest["state"])
    assert texts(repo, scope) == after_files


def _tree_of_state(repo: Path, state: str) -> str | None:
    message = git(repo, "cat-file", "commit", state)
    if history_commits.ABSENT_TRAILER in message:
        return None
    return git(repo, "rev-parse", f"{state}^{{tree}}").strip()


def test_log_and_restore_round_trip_after_every_kind_of_change(repo):
    memory = open_git_memory(str(repo), "team")
    run(memory, "create", path="/memories/a.md", file_text="one\n")
    run(memory, "create", path="/memories/b.md", file_text="bee\n")
    round_trip(repo, "team", "create")
    run(memory, "str_replace", path="/memories/a.md", old_str="one", new_str="two")
    round_trip(repo, "team", "str_replace")
    run(memory, "insert", path="/memories/a.md", insert_line=0, insert_text="zero")
    round_trip(repo, "team", "insert")
    run(memory, "rename", old_path="/memories/a.md", new_path="/memories/c/a.md")
    round_trip(repo, "team", "rename")
    run(memory, "delete", path="/memories/b.md")
    round_trip(repo, "team", "delete")

    exported = export_scope(str(repo), "team")
    exported["files"][0]["text"] = "imported\n"
    import_scope(str(repo), exported, replace=True)
    round_trip(repo, "team", "import")

    before_drop = texts(repo, "team")
    drop_scope(str(repo), "team")
    assert tree_of(repo, "team") is None
    dropped, kept = scope_log(repo, "team")[:2]
    assert dropped["action"] == "drop" and not dropped["present"]
    assert dropped["removed"] == ["/memories/c/a.md"]
    restore_scope(repo, "team", kept["state"])
    assert texts(repo, "team") == before_drop
    with pytest.raises(HistoryError, match="dropped scope"):
        restore_scope(repo, "team", dropped["state"])


def test_log_says_what_changed_newest_first(repo):
    memory = open_git_memory(str(repo), "team")
    run(memory, "create", path="/memories/a.md", file_text="a")
    run(memory, "create", path="/memories/b.md", file_text="b")
    run(memory, "create", path="/memories/a.md", file_text="a2")
    run(memory, "rename", old_path="/memories/b.md", new_path="/memories/d.md")
    log = scope_log(repo, "team")
    assert [(e["action"], e["added"], e["changed"], e["removed"]) for e in log] == [
        ("rename", ["/memories/d.md"], [], ["/memories/b.md"]),
        ("create", [], ["/memories/a.md"], []),
        ("create", ["/memories/b.md"], [], []),
        ("create", ["/memories/a.md"], [], []),
    ]
    assert log[0]["summary"] == "rename /memories/b.md -> /memories/d.md"
    assert all(e["time"].endswith("Z") and e["scope"] == "team" for e in log)
    assert [e["files"] for e in scope_log(repo, "team", limit=2)] == [2, 2]


def test_gc_prune_now_keeps_every_state_and_fsck_stays_clean(repo):
    memory = open_git_memory(str(repo), "team")
    for index in range(6):
        run(memory, "create", path=f"/memories/f{index % 2}.md", file_text=f"text {index}")
    run(memory, "delete", path="/memories/f0.md")
    states = [(e["state"], _tree_of_state(repo, e["state"])) for e in scope_log(repo, "team")]
    gc = subprocess.run(["git", "gc", "--prune=now"], cwd=repo, capture_output=True, text=True)
    assert gc.returncode == 0 and "error" not in gc.stderr, gc.stderr
    fsck = subprocess.run(["git", "fsck", "--full", "--strict"], cwd=repo, capture_output=True)
    assert fsck.returncode == 0, fsck.stderr
    for state, tree in states:
        restore_scope(repo, "team", state)
        assert tree_of(repo, "team") == tree
        git(repo, "ls-tree", "-r", tree)  # every object of that state is still there


def test_a_scope_written_without_history_is_caught_up_and_restorable(repo):
    memory = open_git_memory(str(repo), "old")
    run(memory, "create", path="/memories/a.md", file_text="kept")
    original_tree = tree_of(repo, "old")
    # As the original implementation would: the ref moves, no history is written.
    git(repo, "update-ref", "-d", ref_names.history_ref(scope_digest("old")))
    blob = git(repo, "hash-object", "-w", "--stdin", input="gone").strip()
    files = git(repo, "mktree", input=f"100644 blob {blob}\ta.md\n").strip()
    metadata = json.dumps(
        {"format": 1, "scopeDigest": scope_digest("old"), "nextWrite": 2, "totalBytes": 4,
         "entries": [{"path": "/memories/a.md", "byteLength": 4, "written": 2}]},
        separators=(",", ":"),
    )  # fmt: skip
    meta = git(repo, "hash-object", "-w", "--stdin", input=metadata).strip()
    root = git(
        repo,
        "mktree",
        input=f"100644 blob {meta}\t.obversa-memory.json\n040000 tree {files}\tmemories\n",
    ).strip()
    git(repo, "update-ref", scope_ref("old"), root, original_tree)
    run(memory, "create", path="/memories/b.md", file_text="b")
    log = scope_log(repo, "old")
    assert [e["action"] for e in log] == ["create", "unrecorded"]
    assert log[1]["changed"] == [] and log[1]["added"] == ["/memories/a.md"]
    restore_scope(repo, "old", log[1]["state"])
    assert tree_of(repo, "old") == root


def test_merge_by_sync_is_a_state_that_restores(tmp_path):
    remote = make_repo(tmp_path / "remote.git", "--bare")
    a, b = make_repo(tmp_path / "a"), make_repo(tmp_path / "b")
    for clone in (a, b):
        git(clone, "remote", "add", "origin", str(remote))
    run(open_git_memory(str(a), "team"), "create", path="/memories/a.md", file_text="from a")
    sync.sync(str(a))
    run(open_git_memory(str(b), "team"), "create", path="/memories/b.md", file_text="from b")
    before = tree_of(b, "team")
    sync.sync(str(b))
    merged = texts(b, "team")
    assert set(merged) == {"memories/a.md", "memories/b.md"}
    newest, previous = scope_log(b, "team")[:2]
    assert newest["added"] == ["/memories/a.md"]
    assert _tree_of_state(b, previous["state"]) == before
    restore_scope(b, "team", previous["state"])
    assert set(texts(b, "team")) == {"memories/b.md"}
    restore_scope(b, "team", newest["state"])
    assert texts(b, "team") == merged


def test_restore_refuses_what_it_cannot_do_in_one_line(repo):
    run(open_git_memory(str(repo), "team"), "create", path="/memories/a.md", file_text="a")
    with pytest.raises(HistoryError, match="no state 0000000"):
        restore_scope(repo, "team", "0000000")
    with pytest.raises(HistoryError, match="not a state id"):
        restore_scope(repo, "team", "--all")
    with pytest.raises(ScopeNotFound, match="no scope named 'nobody'"):
        scope_log(repo, "nobody")


# --- names ----------------------------------------------------------------------------


def test_names_are_recorded_shown_and_accepted_as_name_digest_or_prefix(repo):
    run(open_git_memory(str(repo), "team"), "create", path="/memories/a.md", file_text="a")
    digest = scope_digest("team")
    ref = ref_names.NAME_REF_PREFIX + digest
    assert git(repo, "cat-file", "blob", ref) == "team"
    (listed,) = list_scopes(str(repo))
    assert listed["name"] == "team" and listed["digest"] == digest
    with gitstore.open_store(str(repo)) as store:
        assert resolve_scope(store, "team").digest == digest
        for text in (digest, digest[:6], digest[:12].upper()):  # issue 27: only so spelled
            assert resolve_scope(store, by_digest(text)).digest == digest
    out = obversa("memory", "view", "--scope-digest", digest[:8], "a.md", cwd=repo)
    assert out.returncode == 0 and out.stdout.strip().endswith("a"), out.stderr
    shown = obversa("memory", "scopes", "--scope", "team", cwd=repo).stdout
    assert shown.startswith(f"* team ({digest[:12]})")
    dropped = obversa("memory", "drop", "--scope-digest", digest[:10], cwd=repo)
    assert dropped.returncode == 0, dropped.stderr
    assert tree_of(repo, "team") is None


def test_a_scope_of_the_original_has_no_name_until_a_write_names_it(repo):
    memory = open_git_memory(str(repo), "theirs")
    run(memory, "create", path="/memories/a.md", file_text="a")
    digest = scope_digest("theirs")
    git(repo, "update-ref", "-d", ref_names.NAME_REF_PREFIX + digest)
    assert list_scopes(str(repo))[0]["name"] is None
    shown = obversa("memory", "scopes", cwd=repo).stdout
    assert f"  {digest[:12]}  " in shown and "theirs" not in shown
    run(open_git_memory(str(repo), "theirs"), "create", path="/memories/b.md", file_text="b")
    assert list_scopes(str(repo))[0]["name"] == "theirs"


def test_a_forged_name_is_ignored(repo):
    run(open_git_memory(str(repo), "team"), "create", path="/memories/a.md", file_text="a")
    forged = git(repo, "hash-object", "-w", "--stdin", input="admin").strip()
    git(repo, "update-ref", ref_names.NAME_REF_PREFIX + scope_digest("team"), forged)
    assert list_scopes(str(repo))[0]["name"] is None


def test_an_ambiguous_prefix_names_the_candidates(repo):
    # Two scope names whose digests share six leading hex digits, found by search.
    first, second = _colliding_names(6)
    for name in (first, second):
        run(open_git_memory(str(repo), name), "create", path="/memories/a.md", file_text=name)
    with gitstore.open_store(str(repo)) as store:
        with pytest.raises(AmbiguousScope, match=f"{first}|{second}"):
            resolve_scope(store, by_digest(scope_digest(first)[:6]))
        assert resolve_scope(store, by_digest(scope_digest(first)[:16])).name == first


def _colliding_names(digits: int) -> tuple[str, str]:
    seen: dict[str, str] = {}
    index = 0
    while True:
        name = f"s{index}"
        prefix = scope_digest(name)[:digits]
        if prefix in seen:
            return seen[prefix], name
        seen[prefix] = name
        index += 1


def test_cli_log_and_restore(repo):
    for text in ("one", "two"):
        assert obversa("memory", "create", "a.md", text, cwd=repo).returncode == 0
    log = json.loads(obversa("memory", "log", "--json", cwd=repo).stdout)
    assert [e["action"] for e in log] == ["create", "create"]
    assert {"state", "time", "action", "added", "changed", "removed"} <= set(log[0])
    text_log = obversa("memory", "log", cwd=repo).stdout.splitlines()
    assert text_log[0].startswith(log[0]["state"][:12]) and "~/memories/a.md" in text_log[0]
    restored = obversa("memory", "restore", log[1]["state"][:8], cwd=repo)
    assert restored.returncode == 0 and "restored default" in restored.stdout
    assert obversa("memory", "view", "a.md", cwd=repo).stdout.strip().endswith("one")
    bad = obversa("memory", "restore", "ffffffff", cwd=repo)
    assert bad.returncode == 1 and len(bad.stderr.strip().splitlines()) == 1
