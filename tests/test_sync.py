"""Sync of memory scopes through a Git remote: the merge rules, then real remotes."""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import pytest

from git_obversa.cli import Failure
from git_obversa.cli.memory_sync import add_verbs
from git_obversa.memory.git_memory import open_git_memory, scope_digest, scope_ref
from git_obversa.memory.port import MemoryLimits
from git_obversa.sync import remote as sync
from git_obversa.sync.merge import FileVersion, ScopeState, merge_scopes
from tests.gitutil import git, make_repo

# --- the three-way merge as a pure function -------------------------------------------
# A state is written as {name: text}; the text stands in for the blob id (same text, same
# blob), and the write stamps follow the order the names are listed in.


def state(files: dict[str, str], clock: int | None = None) -> ScopeState:
    versions = {
        f"/memories/{name}": FileVersion(text, len(text.encode()), stamp)
        for stamp, (name, text) in enumerate(files.items(), start=1)
    }
    return ScopeState(versions, len(files) if clock is None else clock)


def texts(result) -> dict[str, str]:
    return {path[len("/memories/") :]: v.blob for path, v in result.state.files.items()}


def merge(base, local, remote, **kwargs):
    return merge_scopes(state(base), state(local), state(remote), "origin", **kwargs)


def test_change_on_one_side_takes_that_side():
    base = {"a.md": "A", "b.md": "B"}
    result = merge(base, {"a.md": "A2", "b.md": "B"}, {"a.md": "A", "b.md": "B2"})
    assert texts(result) == {"a.md": "A2", "b.md": "B2"}
    assert result.conflicts == [] and result.merged_in == ["/memories/b.md"]


def test_additions_on_both_sides_are_kept():
    result = merge({}, {"l.md": "L"}, {"r.md": "R"})
    assert texts(result) == {"l.md": "L", "r.md": "R"}


def test_both_sides_edit_to_different_text_keeps_remote_text_beside():
    result = merge({"notes.md": "v1"}, {"notes.md": "local"}, {"notes.md": "remote"})
    assert texts(result) == {"notes.md": "local", "notes.from-origin.md": "remote"}
    assert [(c.path, c.copy) for c in result.conflicts] == [
        ("/memories/notes.md", "/memories/notes.from-origin.md")
    ]


def test_both_sides_edit_to_the_same_text_is_no_conflict():
    result = merge({"a.md": "v1"}, {"a.md": "same"}, {"a.md": "same"})
    assert texts(result) == {"a.md": "same"} and result.conflicts == []


def test_both_sides_add_same_path_with_different_text():
    result = merge({}, {"dir/x.txt": "mine"}, {"dir/x.txt": "theirs"})
    assert texts(result) == {"dir/x.txt": "mine", "dir/x.from-origin.txt": "theirs"}


def test_copy_name_avoids_an_existing_copy():
    result = merge(
        {"a.md": "v1", "a.from-origin.md": "old copy"},
        {"a.md": "local", "a.from-origin.md": "old copy"},
        {"a.md": "remote", "a.from-origin.md": "old copy"},
    )
    assert texts(result)["a.from-origin-2.md"] == "remote"
    assert texts(result)["a.from-origin.md"] == "old copy"


@pytest.mark.parametrize("editor", ["local", "remote"])
def test_an_edit_beats_a_delete(editor):
    base = {"a.md": "v1", "b.md": "B"}
    edited = {"a.md": "v2", "b.md": "B"}
    deleted = {"b.md": "B"}
    local, remote = (edited, deleted) if editor == "local" else (deleted, edited)
    result = merge(base, local, remote)
    assert texts(result) == {"a.md": "v2", "b.md": "B"}
    assert result.restored == ["/memories/a.md"]


def test_delete_of_an_unchanged_file_is_taken_from_either_side():
    base = {"a.md": "A", "b.md": "B", "c.md": "C"}
    result = merge(base, {"b.md": "B", "c.md": "C"}, {"a.md": "A", "c.md": "C"})
    assert texts(result) == {"c.md": "C"}


def test_rename_on_one_side_is_kept_and_the_other_sides_edit_follows_it():
    base = {"old.md": "v1"}
    result = merge(base, {"new.md": "v1"}, {"old.md": "v2"})
    assert texts(result) == {"new.md": "v2"}
    result = merge(base, {"old.md": "v2"}, {"new.md": "v1"})
    assert texts(result) == {"new.md": "v2"}


def test_rename_beats_a_delete_and_directory_renames_are_kept():
    base = {"d/a.md": "A", "d/b.md": "B", "x.md": "X"}
    local = {"e/a.md": "A", "e/b.md": "B", "x.md": "X"}
    remote = {"d/a.md": "A", "d/b.md": "B2"}
    assert texts(merge(base, local, remote)) == {"e/a.md": "A", "e/b.md": "B2"}


def test_renamed_differently_on_both_sides_keeps_one_file_at_the_local_name():
    result = merge({"a.md": "T"}, {"l.md": "T"}, {"r.md": "T"})
    assert texts(result) == {"l.md": "T"}


def test_remote_rename_onto_a_path_local_took_keeps_local_and_places_remote_beside():
    base = {"a.md": "A"}
    result = merge(base, {"a.md": "A", "b.md": "mine"}, {"b.md": "A"})
    # local's b.md stays; the remote's move of a.md cannot land on it, so a.md stays put.
    assert texts(result) == {"a.md": "A", "b.md": "mine"}


def test_file_and_directory_collision_moves_the_remote_side_aside():
    result = merge({}, {"a.md": "file"}, {"a.md/inner.md": "nested"})
    assert texts(result) == {"a.md": "file", "a.md.from-origin/inner.md": "nested"}
    result = merge({}, {"a/inner.md": "nested"}, {"a": "file"})
    assert texts(result) == {"a/inner.md": "nested", "a.from-origin": "file"}


def test_remote_name_is_made_safe_for_a_path_segment():
    result = merge_scopes(
        state({"n.md": "0"}), state({"n.md": "1"}), state({"n.md": "2"}), "team/srv 1"
    )
    assert "/memories/n.from-team-srv-1.md" in result.state.files


def test_write_clock_is_rebuilt_untouched_oldest_then_changes_interleaved():
    base = {"old1.md": "1", "old2.md": "2", "l.md": "l0", "r.md": "r0"}
    local = {"old1.md": "1", "old2.md": "2", "l.md": "l1", "r.md": "r0", "l2.md": "x"}
    remote = {"old1.md": "1", "old2.md": "2", "l.md": "l0", "r.md": "r1"}
    result = merge(base, local, remote)
    stamps = {p[len("/memories/") :]: v.written for p, v in result.state.files.items()}
    order = sorted(stamps, key=stamps.get)
    assert order[:2] == ["old1.md", "old2.md"]
    assert set(order[2:]) == {"l.md", "l2.md", "r.md"}
    assert sorted(stamps.values()) == list(range(1, 6))
    assert result.state.clock >= max(stamps.values())
    # stamps never run backwards for either side's next write
    assert result.state.clock >= max(len(local), len(remote))


def test_limits_hold_after_merge_and_evict_least_recently_written_first():
    base = {"old.md": "o" * 10}
    local = {"old.md": "o" * 10, "mine.md": "m" * 10}
    remote = {"old.md": "o" * 10, "theirs.md": "t" * 10}
    result = merge(base, local, remote, limits=MemoryLimits(max_files=2))
    assert result.evicted == ["/memories/old.md"]
    assert texts(result) == {"mine.md": "m" * 10, "theirs.md": "t" * 10}
    result = merge(base, local, remote, limits=MemoryLimits(max_total_bytes=15))
    # merged-in text ranks newest: it is the last thing to go, and the eviction is listed
    assert result.evicted == ["/memories/old.md", "/memories/mine.md"]
    assert texts(result) == {"theirs.md": "t" * 10}


def test_identical_sides_merge_to_the_same_files():
    files = {"a.md": "A", "d/b.md": "B"}
    result = merge({"a.md": "A"}, files, files)
    assert texts(result) == files and result.conflicts == [] and result.merged_in == []


ALPHABET = ["", "x", "y", "z"]  # "" = absent


@pytest.mark.parametrize(
    "base_text,local_text,remote_text", list(itertools.product(ALPHABET, repeat=3))
)
def test_every_single_file_combination_loses_no_changed_text(base_text, local_text, remote_text):
    """Exhaustive over one path: whatever each side did, no text written since base is lost."""

    def one(text):
        return {"f.md": text} if text else {}

    result = merge(one(base_text), one(local_text), one(remote_text))
    kept = set(texts(result).values())
    for side in (local_text, remote_text):
        if side and side != base_text:
            assert side in kept, (base_text, local_text, remote_text, texts(result))
    if local_text and local_text != base_text:  # local text keeps its path
        assert texts(result)["f.md"] == local_text
    # a side that did nothing never undoes the other side's change
    if local_text == base_text and remote_text != base_text:
        assert texts(result) == one(remote_text)
    if remote_text == base_text and local_text != base_text:
        assert texts(result) == one(local_text)


# --- real remotes: a bare repository and clones ---------------------------------------


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "remote.git", "--bare")


def clone(tmp_path: Path, remote: Path, name: str) -> Path:
    path = make_repo(tmp_path / name)
    git(path, "remote", "add", "origin", str(remote))
    return path


def write(repo: Path, scope: str, path: str, text: str) -> None:
    result = open_git_memory(str(repo), scope).execute(
        {"command": "create", "path": path, "file_text": text}
    )
    assert result["ok"], result


def files(repo: Path, scope: str) -> dict[str, str]:
    """Every file of SCOPE in REPO, read through the port (so the tree is also validated)."""
    memory = open_git_memory(str(repo), scope)
    found, pending = {}, ["/memories"]
    while pending:
        view = memory.execute({"command": "view", "path": pending.pop()})
        if not view["ok"]:
            assert view["error"]["code"] == "NOT_FOUND", view
            continue
        value = view["value"]
        if value["kind"] == "file":
            found[value["path"]] = value["text"]
            continue
        for entry in value["entries"]:
            pending.append(entry["path"])
    return found


def cli(cwd: Path, monkeypatch, capsys, *argv: str) -> tuple[int, str, str]:
    """Run a sync verb the way `git obversa memory VERB` does, in-process."""
    parser = argparse.ArgumentParser(prog="git obversa memory")
    add_verbs(parser.add_subparsers(dest="verb"))
    monkeypatch.chdir(cwd)
    args = parser.parse_args(list(argv))
    try:
        status = args.run(args)
    except Failure as failure:
        print(f"git obversa memory: {failure}", file=sys.stderr)
        status = 1
    out, err = capsys.readouterr()
    return status, out, err


def test_a_scope_written_in_one_clone_arrives_in_another(tmp_path, remote):
    a, b = clone(tmp_path, remote, "a"), clone(tmp_path, remote, "b")
    write(a, "team", "/memories/decisions.md", "use sqlite\n")
    report = sync.sync(str(a))
    assert [s.sent for s in report.scopes] == ["pushed"]
    assert (
        git(remote, "rev-parse", scope_ref("team")).strip()
        == git(a, "rev-parse", scope_ref("team")).strip()
    )
    report = sync.sync(str(b))
    assert [s.received for s in report.scopes] == ["pulled"]
    assert files(b, "team") == {"/memories/decisions.md": "use sqlite\n"}
    # nothing on the branch, index or worktree changed
    assert git(b, "status", "--porcelain") == ""
    assert git(b, "log", "--oneline").count("\n") == 1
    assert sync.sync(str(a)).scopes == []  # already in sync


def test_diverged_clones_merge_and_converge_without_losing_text(tmp_path, remote):
    a, b = clone(tmp_path, remote, "a"), clone(tmp_path, remote, "b")
    write(a, "team", "/memories/plan.md", "v1\n")
    write(a, "team", "/memories/old.md", "old\n")
    sync.sync(str(a))
    sync.sync(str(b))
    write(a, "team", "/memories/plan.md", "plan from a\n")
    write(b, "team", "/memories/plan.md", "plan from b\n")
    memory_b = open_git_memory(str(b), "team")
    assert memory_b.execute(
        {"command": "rename", "old_path": "/memories/old.md", "new_path": "/memories/arch/old.md"}
    )["ok"]
    write(a, "team", "/memories/old.md", "old, edited in a\n")  # the edit follows b's rename
    sync.sync(str(a))
    report = sync.sync(str(b))
    (scope,) = report.scopes
    assert scope.received == "merged" and scope.sent == "pushed"
    assert [(c.path, c.copy) for c in scope.conflicts] == [
        ("/memories/plan.md", "/memories/plan.from-origin.md")
    ]
    sync.sync(str(a))
    expected = {
        "/memories/plan.md": "plan from b\n",
        "/memories/plan.from-origin.md": "plan from a\n",
        "/memories/arch/old.md": "old, edited in a\n",
    }
    assert files(a, "team") == files(b, "team") == expected
    for repo in (a, b, remote):
        git(repo, "fsck", "--strict")


def test_push_never_overwrites_a_change_made_in_between(tmp_path, remote):
    a, b = clone(tmp_path, remote, "a"), clone(tmp_path, remote, "b")
    write(a, "team", "/memories/a.md", "from a\n")
    sync.push(str(a))
    write(b, "team", "/memories/b.md", "from b\n")
    report = sync.push(str(b), scope="team")  # b never pulled: the lease fails, b merges
    assert report.rounds == 2
    remote_tree = git(remote, "rev-parse", scope_ref("team")).strip()
    assert remote_tree == git(b, "rev-parse", scope_ref("team")).strip()
    sync.pull(str(a))
    assert files(a, "team") == {"/memories/a.md": "from a\n", "/memories/b.md": "from b\n"}


def test_pull_does_not_push(tmp_path, remote):
    a = clone(tmp_path, remote, "a")
    write(a, "team", "/memories/a.md", "local only\n")
    sync.pull(str(a))
    assert git(remote, "for-each-ref") == ""


def test_drop_syncs_as_a_delete_but_an_edit_elsewhere_wins(tmp_path, remote, monkeypatch, capsys):
    a, b = clone(tmp_path, remote, "a"), clone(tmp_path, remote, "b")
    write(a, "gone", "/memories/x.md", "x\n")
    write(a, "kept", "/memories/y.md", "y\n")
    sync.sync(str(a))
    sync.sync(str(b))
    assert cli(a, monkeypatch, capsys, "drop", "--scope", "gone")[0] == 0
    assert cli(a, monkeypatch, capsys, "drop", "--scope", "kept")[0] == 0
    write(b, "kept", "/memories/y.md", "y, edited in b\n")
    sync.sync(str(b))
    sync.sync(str(a))
    sync.sync(str(b))
    for repo in (a, b):
        assert files(repo, "gone") == {}
        assert files(repo, "kept") == {"/memories/y.md": "y, edited in b\n"}
    assert git(remote, "for-each-ref", scope_ref("gone")) == ""
    status, _, err = cli(a, monkeypatch, capsys, "drop", "--scope", "gone")
    assert status == 1 and "dropped already" in err


def test_export_import_round_trip_keeps_texts_and_write_order(
    tmp_path, remote, monkeypatch, capsys
):
    a, b = clone(tmp_path, remote, "a"), clone(tmp_path, remote, "b")
    write(a, "notes", "/memories/one.md", "first\n")
    write(a, "notes", "/memories/d/two.md", "second 🧠\n")
    write(a, "notes", "/memories/one.md", "first, again\n")
    status, out, _ = cli(a, monkeypatch, capsys, "export", "--scope", "notes")
    assert status == 0
    exported = json.loads(out)
    assert exported["scope"] == "notes" and exported["next_write"] == 3
    written = {item["path"]: item["written"] for item in exported["files"]}
    assert written == {"/memories/d/two.md": 2, "/memories/one.md": 3}
    export_file = tmp_path / "notes.json"
    export_file.write_text(out)
    assert cli(b, monkeypatch, capsys, "import", str(export_file))[0] == 0
    assert git(b, "rev-parse", scope_ref("notes")) == git(a, "rev-parse", scope_ref("notes"))
    status, _, err = cli(b, monkeypatch, capsys, "import", str(export_file))
    assert status == 1 and "--replace" in err
    assert cli(b, monkeypatch, capsys, "import", "--replace", str(export_file))[0] == 0
    exported["files"][0]["path"] = "/memories/../x.md"
    export_file.write_text(json.dumps(exported))
    status, _, err = cli(b, monkeypatch, capsys, "import", "--replace", str(export_file))
    assert status == 1 and "not a scope export" in err


def test_sync_cli_reports_conflicts_in_text_and_json(tmp_path, remote, monkeypatch, capsys):
    a, b = clone(tmp_path, remote, "a"), clone(tmp_path, remote, "b")
    write(a, "team", "/memories/n.md", "base\n")
    sync.sync(str(a))
    sync.sync(str(b))
    write(a, "team", "/memories/n.md", "a\n")
    write(b, "team", "/memories/n.md", "b\n")
    assert cli(a, monkeypatch, capsys, "push")[0] == 0
    status, out, _ = cli(b, monkeypatch, capsys, "sync")
    assert status == 0
    assert f"team ({scope_digest('team')[:12]}): merged with origin, pushed to origin" in out
    assert "both changed /memories/n.md: theirs kept as /memories/n.from-origin.md" in out
    status, out, _ = cli(a, monkeypatch, capsys, "pull", "--json", "origin")
    (scope,) = json.loads(out)["scopes"]
    assert scope["digest"] == scope_digest("team") and scope["received"] == "pulled"
    status, out, _ = cli(a, monkeypatch, capsys, "sync")
    assert out == "origin: memory already in sync\n"


def test_unknown_remote_is_one_clear_line(tmp_path, remote, monkeypatch, capsys):
    a = clone(tmp_path, remote, "a")
    status, out, err = cli(a, monkeypatch, capsys, "sync", "nowhere")
    assert status == 1
    assert err == (
        "git obversa memory: 'nowhere' is not a configured remote; add it with "
        "`git remote add nowhere <url>` (configured: origin)\n"
    )


def test_a_remote_scope_that_fails_validation_is_reported_and_the_rest_sync(tmp_path, remote):
    a, b = clone(tmp_path, remote, "a"), clone(tmp_path, remote, "b")
    write(a, "good", "/memories/g.md", "good\n")
    sync.sync(str(a))
    # Someone pushes a ref named like a scope whose tree is not a scope.
    bogus = git(b, "hash-object", "-w", "--stdin", input="not a scope\n").strip()
    tree = git(b, "mktree", input=f"100644 blob {bogus}\tjunk.txt\n").strip()
    git(b, "push", "-q", str(remote), f"{tree}:{scope_ref('bad')}")
    report = sync.sync(str(b))
    by_digest = {s.digest: s for s in report.scopes}
    assert by_digest[scope_digest("good")].received == "pulled"
    assert "unexpected layout" in by_digest[scope_digest("bad")].error
    assert git(b, "for-each-ref", scope_ref("bad")) == ""  # never copied into local memory


def test_install_sync_refspecs_let_plain_fetch_carry_memory(tmp_path, remote):
    a, b = clone(tmp_path, remote, "a"), clone(tmp_path, remote, "b")
    added = sync.add_sync_refspecs(str(a), "origin")
    assert added == {
        "remote.origin.fetch": sync.fetch_refspecs("origin"),
        "remote.origin.obversaSync": ["true"],
    }
    assert sync.add_sync_refspecs(str(a), "origin") == {}  # idempotent
    assert git(a, "config", "--type=bool", "remote.origin.obversaSync") == "true\n"
    write(a, "team", "/memories/t.md", "fetched by plain git fetch\n")
    sync.push(str(a))
    sync.add_sync_refspecs(str(b), "origin")
    git(b, "fetch", "-q")
    assert git(b, "for-each-ref", scope_ref("team")) == ""  # fetch never writes local memory
    tracking = sync.tracking_prefix("origin") + scope_digest("team")
    assert git(b, "rev-parse", tracking) == git(a, "rev-parse", scope_ref("team"))
    sync.pull(str(b))
    assert files(b, "team") == {"/memories/t.md": "fetched by plain git fetch\n"}


def test_a_remote_whose_name_extends_another_keeps_its_own_bases(tmp_path, remote):
    a, b = clone(tmp_path, remote, "a"), clone(tmp_path, remote, "b")
    write(b, "other", "/memories/o.md", "o\n")
    git(a, "remote", "add", "origin/mirror", str(remote))
    write(a, "team", "/memories/t.md", "v1\n")
    sync.sync(str(a), "origin/mirror")
    mirror_base = sync.base_prefix("origin/mirror") + scope_digest("team")
    before = git(a, "rev-parse", mirror_base)
    sync.sync(str(a), "origin")
    assert git(a, "rev-parse", mirror_base) == before  # not taken for a scope of origin's
    # A ref under the memory prefix that names no scope is never copied into memory.
    odd = git(b, "rev-parse", scope_ref("other")).strip()
    git(b, "push", "-q", str(remote), f"{odd}:refs/obversa/memory/v1/x/y")
    report = sync.sync(str(a), "origin")
    assert report.scopes == []  # ignored, not reported as a broken scope
    assert git(a, "for-each-ref", "refs/obversa/memory/v1/x") == ""


def test_a_local_scope_that_cannot_be_read_is_reported_and_the_rest_sync(
    tmp_path, remote, monkeypatch, capsys
):
    a = clone(tmp_path, remote, "a")
    write(a, "good", "/memories/g.md", "good\n")
    write(a, "bent", "/memories/b.md", "bent\n")
    git(a, "symbolic-ref", scope_ref("bent"), "refs/heads/main")
    status, out, err = cli(a, monkeypatch, capsys, "sync")
    assert status == 1
    assert err == (
        f"git obversa memory: scope bent ({scope_digest('bent')[:12]}): "
        "UNSAFE_STORAGE: Memory ref must not be symbolic.\n"
    )
    assert git(remote, "rev-parse", scope_ref("good")) == git(a, "rev-parse", scope_ref("good"))
    assert git(remote, "for-each-ref", scope_ref("bent")) == ""
    assert git(a, "symbolic-ref", scope_ref("bent")) == "refs/heads/main\n"  # left as it was


def test_sync_verbs_fail_with_one_line_outside_a_repository_or_for_a_bad_scope(
    tmp_path, remote, monkeypatch, capsys
):
    a = clone(tmp_path, remote, "a")
    write(a, "team", "/memories/t.md", "t\n")
    status, _, err = cli(a, monkeypatch, capsys, "push", "--scope", "")
    assert status == 1 and err.startswith("git obversa memory: --scope: scope must be")
    assert git(remote, "for-each-ref") == ""  # an empty scope is not "every scope"
    elsewhere = tmp_path / "not-a-repo"
    elsewhere.mkdir()
    export_file = tmp_path / "team.json"
    export_file.write_text(cli(a, monkeypatch, capsys, "export", "--scope", "team")[1])
    for argv in (
        ["export", "--scope", "team"],
        ["drop", "--scope", "team"],
        ["import", str(export_file)],
        ["sync"],
    ):
        status, out, err = cli(elsewhere, monkeypatch, capsys, *argv)
        assert status == 1 and out == "", argv
        assert err.count("\n") == 1 and "Git repository" in err, (argv, err)


def test_import_refuses_before_writing_anything(tmp_path, remote, monkeypatch, capsys):
    a = clone(tmp_path, remote, "a")
    write(a, "team", "/memories/t.md", "t\n")
    exported = json.loads(cli(a, monkeypatch, capsys, "export", "--scope", "team")[1])
    exported["files"][0]["text"] = "a text this repository has never stored\n"
    export_file = tmp_path / "team.json"
    export_file.write_text(json.dumps(exported))
    objects = git(a, "count-objects", "-v")
    status, _, err = cli(a, monkeypatch, capsys, "import", str(export_file))
    assert status == 1 and "--replace" in err
    assert git(a, "count-objects", "-v") == objects
    exported["files"].append({"path": "/memories/t.md/inner.md", "written": 1, "text": "x"})
    export_file.write_text(json.dumps(exported))
    status, _, err = cli(a, monkeypatch, capsys, "import", "--replace", str(export_file))
    assert status == 1 and "/memories/t.md is a file and a directory" in err


def test_a_bundle_made_as_docs_sync_md_says_can_be_pulled_from(tmp_path, remote):
    a, b = clone(tmp_path, remote, "a"), clone(tmp_path, remote, "b")
    write(a, "team", "/memories/t.md", "carried by a bundle\n")
    bundle = tmp_path / "memory.bundle"
    git(a, "bundle", "create", str(bundle), "--glob=refs/obversa/memory/v1/*")
    git(b, "remote", "add", "carried", str(bundle))
    assert [scope.received for scope in sync.pull(str(b), "carried").scopes] == ["pulled"]
    assert files(b, "team") == {"/memories/t.md": "carried by a bundle\n"}
