"""Sync that cannot lose memory (issue 11): absence is never a deletion, drops travel as
tombstones and can be undone, names travel, a killed push is recognised, plain
`git push` stays green, hostile remotes are refused scope by scope."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from git_obversa.memory.git_memory import open_git_memory, scope_digest, scope_ref
from git_obversa.memory.gitstore import open_store
from git_obversa.memory.names import names
from git_obversa.sync import remote as sync
from tests.gitutil import git, make_repo, obversa
from tests.test_sync import clone, files, write


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "remote.git", "--bare")


def delete(repo: Path, scope: str, path: str) -> None:
    result = open_git_memory(str(repo), scope).execute({"command": "delete", "path": path})
    assert result["ok"], result


def by_digest(report) -> dict:
    return {scope.digest: scope for scope in report.scopes}


def seeded(tmp_path: Path, remote: Path) -> tuple[Path, Path]:
    """Two clones that agreed on two scopes with origin."""
    a, b = clone(tmp_path, remote, "a"), clone(tmp_path, remote, "b")
    write(a, "team", "/memories/plan.md", "plan\n")
    write(a, "team", "/memories/notes/x.md", "x\n")
    write(a, "solo", "/memories/s.md", "s\n")
    sync.sync(str(a))
    sync.sync(str(b))
    return a, b


# --- absence is never a deletion ------------------------------------------------------


def test_a_re_created_remote_gets_every_scope_pushed_back_and_nothing_is_deleted(tmp_path, remote):
    a, b = seeded(tmp_path, remote)
    before = {scope: files(a, scope) for scope in ("team", "solo")}
    shutil.rmtree(remote)
    make_repo(remote, "--bare")  # the same URL, an empty repository
    report = sync.sync(str(a))
    for scope in ("team", "solo"):
        found = by_digest(report)[scope_digest(scope)]
        assert found.received is None and found.sent == "pushed" and found.missing_there
        assert files(a, scope) == before[scope]
        assert git(remote, "rev-parse", scope_ref(scope)) == git(a, "rev-parse", scope_ref(scope))
    assert all(scope.received != "deleted" for scope in sync.sync(str(b)).scopes)
    for scope in ("team", "solo"):
        assert files(b, scope) == before[scope]


def test_a_remote_url_set_to_a_fresh_repository_gets_the_scopes_too(tmp_path, remote):
    a, _ = seeded(tmp_path, remote)
    fresh = make_repo(tmp_path / "fresh.git", "--bare")
    git(a, "remote", "set-url", "origin", str(fresh))
    status = obversa("memory", "sync", cwd=a)
    assert status.returncode == 0, status.stderr
    assert (
        "team (" in status.stdout and "pushed to origin (origin did not have it)" in status.stdout
    )
    assert git(fresh, "rev-parse", scope_ref("team")) == git(a, "rev-parse", scope_ref("team"))


def test_a_clone_missing_a_scope_pulls_it_back_and_never_deletes_it_there(tmp_path, remote):
    a, b = seeded(tmp_path, remote)
    git(b, "update-ref", "-d", scope_ref("team"))  # gone here, but nobody dropped it
    report = sync.sync(str(b))
    found = by_digest(report)[scope_digest("team")]
    assert found.received == "pulled" and found.missing_here and found.sent is None
    assert files(b, "team") == files(a, "team")
    assert git(remote, "rev-parse", scope_ref("team")) == git(a, "rev-parse", scope_ref("team"))


# --- drops travel as tombstones, and can be undone everywhere --------------------------


def test_a_drop_reaches_a_second_clone_which_can_restore_it_and_the_restore_travels(
    tmp_path, remote
):
    a, b = seeded(tmp_path, remote)
    kept = files(b, "team")
    dropped = obversa("memory", "drop", "--scope", "team", cwd=a)
    assert dropped.returncode == 0, dropped.stderr
    assert git(a, "for-each-ref", "refs/obversa/dropped/v1/") != ""  # the tombstone
    sent = obversa("memory", "sync", cwd=a)
    assert f"team ({scope_digest('team')[:12]}): dropped here: deleted on origin" in sent.stdout
    assert git(remote, "for-each-ref", scope_ref("team")) == ""
    received = obversa("memory", "sync", cwd=b)
    assert received.returncode == 0, received.stderr
    lines = received.stdout.splitlines()
    assert f"team ({scope_digest('team')[:12]}): dropped on origin: deleted here" in lines
    assert "  removed here: /memories/notes/x.md, /memories/plan.md" in lines
    (undo,) = [line for line in lines if line.startswith("  undo: ")]
    assert undo.startswith("  undo: git obversa memory restore --scope team ")
    assert git(b, "for-each-ref", scope_ref("team")) == ""
    assert files(b, "solo") == {"/memories/s.md": "s\n"}  # the other scope untouched
    restored = obversa(*undo[len("  undo: git obversa ") :].split(), cwd=b)
    assert restored.returncode == 0, restored.stderr
    assert files(b, "team") == kept
    # A restore is a change like any other: it goes back to origin and on to `a`.
    assert by_digest(sync.sync(str(b)))[scope_digest("team")].sent == "pushed"
    assert by_digest(sync.sync(str(a)))[scope_digest("team")].received == "pulled"
    assert files(a, "team") == kept


def test_a_drop_travels_through_a_second_remote_and_an_edit_elsewhere_wins(tmp_path, remote):
    a, b = seeded(tmp_path, remote)
    mirror = make_repo(tmp_path / "mirror.git", "--bare")
    c = clone(tmp_path, mirror, "c")
    git(b, "remote", "add", "mirror", str(mirror))
    sync.sync(str(b), "mirror")
    sync.sync(str(c))
    write(c, "solo", "/memories/s.md", "s, edited in c\n")
    assert obversa("memory", "drop", "--scope", "team", cwd=a).returncode == 0
    assert obversa("memory", "drop", "--scope", "solo", cwd=a).returncode == 0
    sync.sync(str(a))
    sync.sync(str(b))  # applies the drops here, then carries them on to the mirror
    sync.sync(str(b), "mirror")
    report = by_digest(sync.sync(str(c)))
    assert report[scope_digest("team")].received == "deleted"
    assert git(c, "for-each-ref", scope_ref("team")) == ""
    # c edited solo after the last agreement: its edit wins over the drop and goes back.
    assert files(c, "solo") == {"/memories/s.md": "s, edited in c\n"}
    sync.sync(str(b), "mirror")
    sync.sync(str(b))
    sync.sync(str(a))
    assert files(a, "solo") == {"/memories/s.md": "s, edited in c\n"}
    assert git(a, "for-each-ref", scope_ref("team")) == ""


def test_dry_run_says_what_would_happen_and_changes_nothing(tmp_path, remote):
    a, b = seeded(tmp_path, remote)
    write(a, "team", "/memories/new.md", "new\n")
    sync.sync(str(a))
    assert obversa("memory", "drop", "--scope", "solo", cwd=b).returncode == 0
    refs_before = git(b, "for-each-ref", "refs/obversa/memory", "refs/obversa/sync")
    remote_before = git(remote, "for-each-ref")
    out = obversa("memory", "sync", "--dry-run", cwd=b)
    assert out.returncode == 0, out.stderr
    assert f"team ({scope_digest('team')[:12]}): would pull from origin" in out.stdout
    assert f"solo ({scope_digest('solo')[:12]}): dropped here: would delete on origin" in out.stdout
    assert git(b, "for-each-ref", "refs/obversa/memory", "refs/obversa/sync") == refs_before
    assert git(remote, "for-each-ref") == remote_before
    as_json = json.loads(obversa("memory", "sync", "--dry-run", "--json", cwd=b).stdout)
    assert as_json["dry_run"] is True and as_json["remote"] == "origin"


# --- names -----------------------------------------------------------------------------


def test_names_travel_to_a_third_clone_through_two_remotes(tmp_path, remote):
    a, b = seeded(tmp_path, remote)
    mirror = make_repo(tmp_path / "mirror.git", "--bare")
    git(b, "remote", "add", "mirror", str(mirror))
    sync.sync(str(b), "mirror")
    c = clone(tmp_path, mirror, "c")
    report = sync.sync(str(c))
    assert {scope.name for scope in report.scopes} == {"team", "solo"}
    with open_store(str(c)) as store:
        assert names(store) == {scope_digest("team"): "team", scope_digest("solo"): "solo"}
    # A scope is named by its name, its digest or a digest prefix.
    prefix = scope_digest("solo")[:10]
    assert obversa("memory", "drop", "--scope-digest", prefix, cwd=c).returncode == 0
    assert git(c, "for-each-ref", scope_ref("solo")) == ""


def test_a_forged_name_is_not_taken(tmp_path, remote):
    a, b = seeded(tmp_path, remote)
    liar = git(a, "hash-object", "-w", "--stdin", input="not-team").strip()
    digest = scope_digest("team")
    git(a, "push", "-q", str(remote), f"+{liar}:refs/obversa/names/v1/{digest}")
    c = clone(tmp_path, remote, "c")
    sync.sync(str(c))
    with open_store(str(c)) as store:
        assert digest not in names(store)


# --- a killed push: the record of what was agreed -------------------------------------


def test_a_push_whose_record_was_lost_neither_resurrects_deletes_nor_copies_own_text(
    tmp_path, remote
):
    a, _ = seeded(tmp_path, remote)
    base_ref = sync.base_prefix("origin") + scope_digest("team")
    old_base = git(a, "rev-parse", base_ref).strip()
    write(a, "team", "/memories/plan.md", "plan v2\n")
    pushed_tree = git(a, "rev-parse", scope_ref("team")).strip()
    pending_ref = sync.pending_prefix("origin") + scope_digest("team")
    # What a sync killed just after its push leaves: the remote holds the new tree, the
    # base still names the old one, the pending ref names what was pushed.
    git(a, "update-ref", pending_ref, pushed_tree)
    git(a, "push", "-q", "origin", f"+{pushed_tree}:{scope_ref('team')}")
    git(a, "update-ref", base_ref, old_base)
    # Then the clone keeps working: a delete and another edit of the same file.
    delete(a, "team", "/memories/notes/x.md")
    write(a, "team", "/memories/plan.md", "plan v3\n")
    report = by_digest(sync.sync(str(a)))[scope_digest("team")]
    assert report.conflicts == [] and report.received is None and report.sent == "pushed"
    assert files(a, "team") == {"/memories/plan.md": "plan v3\n"}
    assert git(a, "for-each-ref", pending_ref) == ""


def test_a_lost_push_record_after_another_clone_merged_that_push_leaves_no_trace(tmp_path, remote):
    a, b = seeded(tmp_path, remote)
    write(a, "team", "/memories/new.md", "new\n")
    base_ref = sync.base_prefix("origin") + scope_digest("team")
    old_base = git(a, "rev-parse", base_ref).strip()
    write(a, "team", "/memories/plan.md", "plan v2\n")
    delete(a, "team", "/memories/notes/x.md")
    pushed_tree = git(a, "rev-parse", scope_ref("team")).strip()
    pending_ref = sync.pending_prefix("origin") + scope_digest("team")
    # A sync of a killed just after its push (pending noted, base not moved); then b
    # merges that push with a change of its own and pushes on: origin holds neither
    # a's base nor a's pushed tree.
    git(a, "update-ref", pending_ref, pushed_tree)
    git(a, "push", "-q", "origin", f"+{pushed_tree}:{scope_ref('team')}")
    git(a, "update-ref", base_ref, old_base)
    write(b, "team", "/memories/b.md", "b\n")
    sync.sync(str(b))
    # a goes on: edits its own file again and deletes the file it had created.
    write(a, "team", "/memories/plan.md", "plan v3\n")
    delete(a, "team", "/memories/new.md")
    report = by_digest(sync.sync(str(a)))[scope_digest("team")]
    assert report.conflicts == [], report.as_json()
    expected = {"/memories/plan.md": "plan v3\n", "/memories/b.md": "b\n"}
    assert files(a, "team") == expected
    sync.sync(str(b))
    assert files(b, "team") == expected


def test_a_push_that_lands_after_a_later_pull_is_still_recognised_as_ours(tmp_path, remote):
    a, _ = seeded(tmp_path, remote)
    write(a, "team", "/memories/plan.md", "plan v2\n")
    in_flight = git(a, "rev-parse", scope_ref("team")).strip()
    pending_ref = sync.pending_prefix("origin") + scope_digest("team")
    # A sync killed after noting its push: its git push outlives it (a SIGKILL of a
    # process leaves its children running) and lands only after the next pull ran.
    git(a, "update-ref", pending_ref, in_flight)
    write(a, "team", "/memories/plan.md", "plan v3\n")
    sync.pull(str(a))
    git(a, "push", "-q", "origin", f"+{in_flight}:{scope_ref('team')}")
    report = by_digest(sync.sync(str(a)))[scope_digest("team")]
    assert report.conflicts == [] and report.received is None and report.sent == "pushed"
    assert files(a, "team") == {"/memories/plan.md": "plan v3\n", "/memories/notes/x.md": "x\n"}
    assert git(a, "for-each-ref", pending_ref) == ""


def test_a_record_naming_an_object_a_gc_took_is_dropped_not_fatal(tmp_path, remote, capfd):
    a, _ = seeded(tmp_path, remote)
    pending_ref = sync.pending_prefix("origin") + scope_digest("team")
    # A sync killed after noting its push, while a gc pruned the note's commit: git
    # then refuses every fetch ("fatal: bad object refs/...").
    (a / ".git" / pending_ref).parent.mkdir(parents=True, exist_ok=True)
    (a / ".git" / pending_ref).write_text("2" * 40 + "\n")
    write(a, "team", "/memories/plan.md", "plan v2\n")
    report = by_digest(sync.sync(str(a)))[scope_digest("team")]
    assert report.error is None and report.sent == "pushed"
    assert f"dropped {pending_ref}" in capfd.readouterr().err
    git(a, "fsck", "--strict", "--no-dangling")


# --- plain git push and fetch after install --sync ------------------------------------


def test_plain_git_push_syncs_memory_changed_on_both_sides_and_exits_0(tmp_path, remote):
    a, b = seeded(tmp_path, remote)
    git(a, "push", "-q", "origin", "main")
    for repo in (a, b):
        installed = obversa("install", "--sync", cwd=repo)
        assert installed.returncode == 0, installed.stderr
    git(b, "fetch", "-q")
    git(b, "reset", "-q", "--hard", "origin/main")
    git(b, "branch", "-q", "--set-upstream-to=origin/main")
    write(a, "team", "/memories/from-a.md", "a\n")
    write(b, "team", "/memories/from-b.md", "b\n")
    sync.sync(str(a))  # the remote's scope moves on: b's memory changed on both sides
    (b / "work.txt").write_text("branch work\n")
    git(b, "add", "work.txt")
    git(b, "commit", "-q", "-m", "work")
    pushed = subprocess.run(["git", "push"], cwd=b, capture_output=True, text=True)
    assert pushed.returncode == 0, pushed.stderr
    assert git(remote, "rev-parse", "main") == git(b, "rev-parse", "main")
    expected = {**files(a, "team"), "/memories/from-b.md": "b\n"}
    assert files(b, "team") == expected
    assert git(remote, "rev-parse", scope_ref("team")) == git(b, "rev-parse", scope_ref("team"))
    # Nothing of the branch to push: git says so, exits 0, and memory still goes.
    write(b, "team", "/memories/later.md", "later\n")
    again = subprocess.run(["git", "push"], cwd=b, capture_output=True, text=True)
    assert again.returncode == 0 and "Everything up-to-date" in again.stderr
    assert git(remote, "rev-parse", scope_ref("team")) == git(b, "rev-parse", scope_ref("team"))
    # Plain fetch exits 0 and brings the remote's memory to the tracking namespace.
    fetched = subprocess.run(["git", "fetch"], cwd=a, capture_output=True, text=True)
    assert fetched.returncode == 0, fetched.stderr
    tracking = sync.tracking_prefix("origin") + scope_digest("team")
    assert git(a, "rev-parse", tracking) == git(b, "rev-parse", scope_ref("team"))
    assert by_digest(sync.pull(str(a)))[scope_digest("team")].received == "pulled"


def test_a_memory_failure_in_the_pre_push_hook_never_fails_the_push(tmp_path, remote):
    a, _ = seeded(tmp_path, remote)
    assert obversa("install", "--sync", cwd=a).returncode == 0
    git(a, "symbolic-ref", scope_ref("solo"), "refs/heads/main")  # a scope sync refuses
    pushed = subprocess.run(
        ["git", "push", "origin", "main"], cwd=a, capture_output=True, text=True
    )
    assert pushed.returncode == 0, pushed.stderr
    assert "warning: memory was not synced with origin" in pushed.stderr
    assert git(remote, "rev-parse", "main") == git(a, "rev-parse", "main")


def test_a_pre_push_hook_that_was_there_still_decides_and_reads_the_refs(tmp_path, remote):
    a, _ = seeded(tmp_path, remote)
    hook = a / ".git/hooks/pre-push"
    hook.write_text(
        '#!/bin/sh\ncat > "$0.seen"\ngrep -q refs/heads/blocked "$0.seen" && exit 1\n:\n'
    )
    hook.chmod(0o755)
    assert obversa("install", "--sync", cwd=a).returncode == 0
    git(a, "branch", "blocked")
    refused = subprocess.run(["git", "push", "origin", "blocked"], cwd=a, capture_output=True)
    assert refused.returncode == 1  # the user's hook still stops the push
    assert "refs/heads/blocked" in (a / ".git/hooks/pre-push.pre-obversa.seen").read_text()
    write(a, "team", "/memories/late.md", "late\n")
    assert subprocess.run(["git", "push", "origin", "main"], cwd=a).returncode == 0
    assert git(remote, "rev-parse", scope_ref("team")) == git(a, "rev-parse", scope_ref("team"))


def test_install_sync_replaces_an_earlier_push_refspec_and_uninstall_removes_the_hook(
    tmp_path, remote
):
    a = clone(tmp_path, remote, "a")
    git(a, "config", "--add", "remote.origin.push", "HEAD")
    git(
        a,
        "config",
        "--add",
        "remote.origin.push",
        f"{scope_ref('x')[:-64]}*:{scope_ref('x')[:-64]}*",
    )
    installed = obversa("install", "--sync", "--json", cwd=a)
    assert installed.returncode == 0, installed.stderr
    assert git(a, "config", "--get-all", "remote.origin.push", check=False) == ""
    assert (a / ".git/hooks/pre-push").exists()
    assert git(a, "config", "--get-all", "remote.origin.fetch").count("obversa-remote") == 3
    assert obversa("uninstall", cwd=a).returncode == 0
    assert not (a / ".git/hooks/pre-push").exists()


# --- hostile remotes ------------------------------------------------------------------


def test_a_remote_named_like_an_option_runs_nothing(tmp_path, remote):
    a = clone(tmp_path, remote, "a")
    write(a, "team", "/memories/t.md", "t\n")
    git(a, "remote", "remove", "origin")
    evil = "--upload-pack=touch pwned;git-upload-pack"
    git(a, "config", f"remote.{evil}.url", str(remote))
    for argv in (
        ["memory", "sync"],
        ["memory", "pull", "--", evil],
        ["memory", "push", "--", evil],
    ):
        completed = obversa(*argv, cwd=a)
        assert completed.returncode == 1, argv
        assert completed.stderr.count("\n") == 1 and "rename" in completed.stderr, completed.stderr
    assert not (a / "pwned").exists()
    assert git(remote, "for-each-ref") == ""


def test_an_unreachable_remote_says_what_to_do(tmp_path, remote):
    a = clone(tmp_path, remote, "a")
    git(a, "remote", "set-url", "origin", str(tmp_path / "nowhere.git"))
    completed = obversa("memory", "sync", cwd=a)
    assert completed.returncode == 1
    assert completed.stderr.count("\n") == 1
    assert "check that `git fetch origin` works" in completed.stderr


def push_hostile(repo: Path, remote: Path, scope: str, shape: str) -> None:
    """Push to REMOTE a ref named like SCOPE holding SHAPE: a copy of REPO's valid `team`
    scope with its metadata replaced, or (shape "blob", "copied") no scope tree at all."""
    team = git(repo, "rev-parse", scope_ref("team")).strip()
    if shape == "copied":  # a valid scope under another scope's digest
        value = team
    elif shape == "blob":
        value = git(repo, "hash-object", "-w", "--stdin", input="not a tree").strip()
    else:
        blob = (
            subprocess.run(
                ["git", "hash-object", "-w", "--stdin"],
                cwd=repo,
                input=HOSTILE[shape],
                capture_output=True,
            )
            .stdout.decode()
            .strip()
        )
        files = git(repo, "rev-parse", f"{team}:memories").strip()
        listing = f"100644 blob {blob}\t.obversa-memory.json\n040000 tree {files}\tmemories\n"
        value = git(repo, "mktree", input=listing).strip()
    git(repo, "push", "-q", "--force", str(remote), f"{value}:{scope_ref(scope)}")


HOSTILE = {
    "nested": b"[" * 5000 + b"]" * 5000,
    "deep-object": b'{"a":' * 3000 + b"1" + b"}" * 3000,
    "nested-in-files": b'{"files": ' + b"[" * 10000 + b"]" * 10000 + b"}",
    "huge": b'{"pad": "' + b"x" * (3 * 1024 * 1024) + b'"}',
    "types": b'{"format": "1", "nextWrite": [], "files": "no"}',
    "not-json": b"\xff\xfe not json",
}


@pytest.mark.parametrize("shape", sorted(HOSTILE) + ["blob", "copied"])
def test_a_hostile_fetched_scope_is_refused_by_name_and_the_rest_sync(tmp_path, remote, shape):
    a, b = seeded(tmp_path, remote)
    write(a, "team", "/memories/more.md", "more\n")
    sync.sync(str(a))
    push_hostile(a, remote, "bad", shape)
    completed = obversa("memory", "sync", cwd=b)
    assert completed.returncode == 1
    assert "Traceback" not in completed.stderr
    (line,) = completed.stderr.splitlines()
    assert line.startswith(f"git obversa memory: scope {scope_digest('bad')[:12]}: UNSAFE_STORAGE")
    assert files(b, "team") == files(a, "team")  # the other scopes synced
    assert git(b, "for-each-ref", scope_ref("bad")) == ""  # never copied into memory


def test_limits_apply_to_fetched_scopes(tmp_path, remote):
    a, b = seeded(tmp_path, remote)
    write(a, "solo", "/memories/t.md", "t\n")
    sync.sync(str(a))
    completed = obversa("memory", "pull", "--limits", '{"max_files": 1}', cwd=b)
    assert completed.returncode == 1
    assert f"scope solo ({scope_digest('solo')[:12]}): UNSAFE_STORAGE" in completed.stderr
    assert files(b, "solo") == {"/memories/s.md": "s\n"}
    assert obversa("memory", "pull", cwd=b).returncode == 0
    bad = obversa("memory", "sync", "--limits", "{not json", cwd=b)
    assert bad.returncode == 2 and "invalid limits" in bad.stderr


def test_a_remote_ref_naming_a_lost_object_is_left_to_the_clone_that_holds_it(tmp_path, remote):
    a, b = seeded(tmp_path, remote)
    write(a, "team", "/memories/more.md", "only a has this\n")
    sync.sync(str(a))
    pushed = git(remote, "rev-parse", scope_ref("team")).strip()
    # What a `gc --prune=now` racing that push can leave: the ref, not its tree.
    (remote / "objects" / pushed[:2] / pushed[2:]).unlink()
    write(b, "team", "/memories/b.md", "b\n")
    completed = obversa("memory", "sync", cwd=b)  # cannot read it: must not replace it
    assert completed.returncode == 1
    assert "no longer has" in completed.stderr and "the clone that pushed it" in completed.stderr
    assert files(b, "solo") == files(a, "solo")  # the other scopes synced
    assert git(remote, "rev-parse", scope_ref("team")).strip() == pushed
    write(a, "team", "/memories/next.md", "next\n")  # a holds it whole: its next push
    report = by_digest(sync.sync(str(a)))[scope_digest("team")]
    assert report.repaired_there and report.error is None
    git(remote, "fsck", "--strict")
    assert obversa("memory", "sync", cwd=b).returncode == 0
    assert files(b, "team")["/memories/more.md"] == "only a has this\n"
    assert files(b, "team")["/memories/b.md"] == "b\n"


def test_a_remote_ref_no_clone_can_repair_is_deleted_by_hand_then_pushed_back(tmp_path, remote):
    a, b = seeded(tmp_path, remote)
    (remote / scope_ref("team")).write_text("1" * 40 + "\n")  # an object nobody has
    completed = obversa("memory", "sync", cwd=b)
    assert completed.returncode == 1
    (hint,) = [line for line in completed.stderr.splitlines() if "no longer has" in line]
    assert f"git push origin :{scope_ref('team')}" in hint
    git(b, "push", "-q", "origin", f":{scope_ref('team')}")  # as the hint says
    assert obversa("memory", "sync", cwd=b).returncode == 0
    assert git(remote, "rev-parse", scope_ref("team")) == git(b, "rev-parse", scope_ref("team"))
    git(remote, "fsck", "--strict")


def test_a_remote_that_lost_the_tree_its_ref_names_takes_pushes_again(tmp_path, remote):
    # A `gc --prune=now` racing a push can leave the remote naming a tree it lost; a
    # fetch still succeeds (this clone holds the tree), but the remote refuses every later
    # push ("missing necessary objects") while it advertises that ref.
    a, b = seeded(tmp_path, remote)
    write(a, "team", "/memories/kept.md", "kept\n")
    sync.sync(str(a))
    tree = git(remote, "rev-parse", scope_ref("team")).strip()
    loose = remote / "objects" / tree[:2] / tree[2:]
    assert loose.exists()  # a small push leaves its objects loose
    loose.unlink()
    write(a, "team", "/memories/after.md", "after\n")
    report = by_digest(sync.sync(str(a)))[scope_digest("team")]
    assert report.error is None and report.sent == "pushed" and report.repaired_there
    assert git(remote, "rev-parse", scope_ref("team")) == git(a, "rev-parse", scope_ref("team"))
    git(remote, "fsck", "--strict")
    sync.sync(str(b))
    assert files(b, "team") == files(a, "team")


def test_outside_a_repository_every_sync_verb_is_one_line(tmp_path):
    elsewhere = tmp_path / "plain"
    elsewhere.mkdir()
    for verb in ("sync", "pull", "push"):
        completed = obversa("memory", verb, "--dry-run", cwd=elsewhere)
        assert completed.returncode == 1 and completed.stderr.count("\n") == 1, completed.stderr
    assert os.listdir(elsewhere) == []
