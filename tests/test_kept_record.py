"""Issue 25 item 1: the whole record of a commit is kept, found from the commit, survives
the rewrites git offers (amend, rebase -i reword/squash/fixup, cherry-pick), travels
through a bare remote into a fresh clone, and can be dropped for good. Real `git`."""

from __future__ import annotations

import json
import os
import resource
import subprocess
from pathlib import Path

import pytest

from git_obversa.record.kept import RECORDS_REF, record_ids
from git_obversa.record.turns import TurnStore
from tests.gitutil import git, make_repo, obversa
from tests.test_hook_e2e import capture, change, commit, pending

REASON = "Retry twice because the upstream API fails in bursts of two."


@pytest.fixture
def hooked(repo: Path) -> Path:
    assert obversa("install", cwd=repo).returncode == 0
    return repo


def note(cwd: Path, text: str, *args: str) -> None:
    completed = obversa("record", "note", *args, text, cwd=cwd)
    assert completed.returncode == 0, completed.stderr


def kept(cwd: Path, rev: str = "HEAD") -> list[str]:
    """The texts of every turn REV's kept record holds, as `record show --json` prints."""
    shown = obversa("record", "show", rev, "--json", cwd=cwd)
    assert shown.returncode == 0, shown.stderr
    value = json.loads(shown.stdout)
    assert value["missing"] == []
    return [turn["text"] for turn in value["turns"]]


def committed_with(cwd: Path, text: str, subject: str, name: str = "code.py") -> str:
    note(cwd, text)
    change(cwd, name, f"# {subject}\n")
    completed = commit(cwd, "-m", subject)
    assert completed.returncode == 0, completed.stderr
    return git(cwd, "rev-parse", "HEAD").strip()


def script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def test_every_turn_is_kept_with_what_it_is_and_found_from_the_commit(hooked):
    note(hooked, REASON)
    capture(hooked, "Now I'll run the full test suite to see what else breaks.")
    capture(hooked, "The cache is per process, so a restart empties it.", kind="engine:thinking")
    change(hooked)
    assert commit(hooked, "-m", "Retry").returncode == 0
    body = git(hooked, "log", "-1", "--format=%B")
    assert "Now I'll run" not in body and "restart empties" not in body
    [record_id] = record_ids(body)
    shown = json.loads(obversa("record", "show", "HEAD", "--json", cwd=hooked).stdout)
    assert shown["ids"] == [record_id]
    assert [(turn["kind"], turn["text"]) for turn in shown["turns"]] == [
        ("note", REASON),
        ("engine:text", "Now I'll run the full test suite to see what else breaks."),
        ("engine:thinking", "The cache is per process, so a restart empties it."),
    ]
    assert all(turn["time"].endswith("Z") for turn in shown["turns"])
    full = obversa("why", "code.py:1", "--full", cwd=hooked)
    assert full.returncode == 0, full.stderr
    assert "Kept record:" in full.stdout and "restart empties it" in full.stdout
    assert pending(hooked) == []
    # Nothing of it is on a branch, in the index or in the worktree.
    assert git(hooked, "status", "--porcelain") == ""
    assert git(hooked, "for-each-ref", "--format=%(refname)", "refs/heads") == "refs/heads/main\n"


def test_secrets_are_scrubbed_before_the_record_is_written(hooked):
    note(hooked, "Deploys failed until I set postgres://deploy:Qm7vT2pL9xRk4sWn@db:5432/orders")
    change(hooked)
    assert commit(hooked, "-m", "Point at the new database").returncode == 0
    [text] = kept(hooked)
    assert "Qm7vT2pL9xRk4sWn" not in text and "[redacted]" in text
    objects = git(hooked, "rev-list", "--objects", RECORDS_REF)
    for line in objects.split():
        if len(line) == 40:
            content = subprocess.run(
                ["git", "cat-file", "-p", line], cwd=hooked, capture_output=True
            ).stdout
            assert b"Qm7vT2pL9xRk4sWn" not in content


def test_amend_keeps_the_record_and_adds_the_new_turns_one(hooked):
    committed_with(hooked, REASON, "Retry")
    assert commit(hooked, "--amend", "-m", "Retry API calls").returncode == 0
    assert kept(hooked) == [REASON]
    note(hooked, "Cap the delay at two seconds so a user never waits longer.")
    assert commit(hooked, "--amend", "--no-edit").returncode == 0
    assert len(record_ids(git(hooked, "log", "-1", "--format=%B"))) == 1  # the new one
    shown = json.loads(obversa("record", "show", "HEAD", "--json", cwd=hooked).stdout)
    assert len(shown["ids"]) == 2  # and the one `--amend -m` took out of the message
    assert sorted(kept(hooked)) == [
        "Cap the delay at two seconds so a user never waits longer.",
        REASON,
    ]


def test_rebase_reword_squash_and_fixup_keep_the_records(hooked, tmp_path):
    first = "First: the queue is bounded because bursts overflow the pool."
    second = "Second: jitter is added so workers never retry in the same instant."
    third = "Third: the fixup only corrects a typo."
    committed_with(hooked, first, "Bound the queue", "a.py")
    committed_with(hooked, second, "Add jitter", "b.py")
    committed_with(hooked, "Reworded later, because the subject was vague.", "Vague", "c.py")
    committed_with(hooked, third, "fixup! Bound the queue", "a.py")
    todo = script(
        tmp_path,
        "todo",
        # a: keep; b: squash into a; c: reword; the fixup! commit: fixup into a
        'awk \'/^pick/ {n++} n==2 && /^pick/ {sub("pick","squash")} '
        'n==3 && /^pick/ {sub("pick","reword")} '
        '/fixup!/ {sub("pick","fixup")} {print}\' "$1" > "$1.new" && mv "$1.new" "$1"\n'
        # move the fixup line right below the first pick
        "awk '/^fixup/ {f=$0; next} {print} /^pick/ && !done {print \"FIXUP\"; done=1}' "
        '"$1" > "$1.new" && sed "s/^FIXUP$/$(grep ^fixup "$1" | sed "s/[\\/&]/\\\\&/g")/" '
        '"$1.new" > "$1" && rm "$1.new"\n',
    )
    editor = script(tmp_path, "editor", 'sed -i "1s/^Vague$/Say what was vague/" "$1"\n')
    env = {**os.environ, "GIT_SEQUENCE_EDITOR": todo, "GIT_EDITOR": editor}
    rebased = subprocess.run(
        ["git", "rebase", "-q", "-i", "HEAD~4"], cwd=hooked, env=env, capture_output=True, text=True
    )
    assert rebased.returncode == 0, rebased.stderr
    subjects = git(hooked, "log", "--format=%s", "-3").splitlines()
    assert subjects == ["Say what was vague", "Bound the queue", "initial"]
    assert kept(hooked, "HEAD") == ["Reworded later, because the subject was vague."]
    # The squash carries both messages, so both records; git drops the fixup's message,
    # and post-rewrite passes its record on to the commit it went into.
    assert kept(hooked, "HEAD~1") == [first, second, third]


def test_cherry_pick_keeps_the_record(hooked):
    git(hooked, "switch", "-q", "-c", "topic")
    committed_with(hooked, REASON, "Retry")
    git(hooked, "switch", "-q", "main")
    change(hooked, "other.py")
    git(hooked, "commit", "-q", "--no-verify", "-m", "Meanwhile on main")
    git(hooked, "cherry-pick", "topic")
    assert git(hooked, "rev-parse", "HEAD") != git(hooked, "rev-parse", "topic")
    assert kept(hooked, "HEAD") == [REASON]


def test_push_and_a_fresh_clone_find_the_record(hooked, tmp_path):
    bare = make_repo(tmp_path / "remote.git", "--bare")
    git(hooked, "remote", "add", "origin", str(bare))
    assert obversa("install", "--sync", cwd=hooked).returncode == 0
    committed_with(hooked, REASON, "Retry")
    pushed = subprocess.run(
        ["git", "push", "-q", "origin", "main"], cwd=hooked, capture_output=True, text=True
    )
    assert pushed.returncode == 0, pushed.stderr
    assert git(bare, "for-each-ref", "--format=%(refname)", RECORDS_REF).strip() == RECORDS_REF
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(bare), str(clone))
    before = obversa("why", "code.py:1", "--full", cwd=clone)
    assert "record sync` fetches it" in before.stdout
    assert obversa("memory", "sync", cwd=clone).returncode == 0
    full = obversa("why", "code.py:1", "--full", cwd=clone)
    assert full.returncode == 0, full.stderr
    assert "Kept record:" in full.stdout and REASON in " ".join(full.stdout.split())


def test_a_dropped_record_is_gone_for_good_and_stays_dropped_after_a_sync(hooked, tmp_path):
    bare = make_repo(tmp_path / "remote.git", "--bare")
    git(hooked, "remote", "add", "origin", str(bare))
    secret_ish = "The customer's name was in the log, so the log level goes to warning."
    committed_with(hooked, secret_ish, "Quieter logs")
    git(hooked, "push", "-q", "origin", "main")
    assert obversa("record", "sync", cwd=hooked).returncode == 0
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(bare), str(clone))
    assert obversa("record", "sync", cwd=clone).returncode == 0
    assert kept(clone) == [secret_ish]
    blob = git(hooked, "rev-parse", f"{RECORDS_REF}:" + _record_path(hooked)).strip()

    dropped = obversa("record", "drop", "HEAD", cwd=hooked)
    assert dropped.returncode == 0 and "dropped" in dropped.stdout
    shown = json.loads(obversa("record", "show", "HEAD", "--json", cwd=hooked).stdout)
    assert shown["turns"] == [] and shown["missing"] == shown["ids"]
    git(hooked, "gc", "-q", "--prune=now")
    assert subprocess.run(["git", "cat-file", "-e", blob], cwd=hooked).returncode != 0
    # The other clone still had it: a sync on either side never brings it back.
    assert obversa("record", "sync", cwd=hooked).returncode == 0
    assert obversa("record", "sync", cwd=clone).returncode == 0
    assert obversa("record", "sync", cwd=hooked).returncode == 0
    git(hooked, "gc", "-q", "--prune=now")
    assert subprocess.run(["git", "cat-file", "-e", blob], cwd=hooked).returncode != 0
    for side in (hooked, clone):
        shown = json.loads(obversa("record", "show", "HEAD", "--json", cwd=side).stdout)
        assert shown["turns"] == [], side


def _record_path(cwd: Path) -> str:
    [record_id] = record_ids(git(cwd, "log", "-1", "--format=%B"))
    return f"{record_id[:2]}/{record_id[2:]}"


def timed_commit(cwd: Path, *args: str) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    completed = commit(cwd, *args)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert completed.returncode == 0, completed.stderr
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


@pytest.mark.parametrize("max_why", [None, 300])
def test_ten_thousand_reasons_are_all_in_the_message_or_the_kept_record(hooked, max_why):
    if max_why is not None:
        git(hooked, "config", "obversa.maxWhy", str(max_why))
    change(hooked, "warm.txt")
    plain = timed_commit(hooked, "-m", "plain")
    reasons = [f"Turn {n}: retry because the gateway bursts." for n in range(10000)]
    TurnStore.for_worktree(hooked).append(
        {"stage": "implement", "node": "implement", "kind": "engine:text", "text": text}
        for text in reasons
    )
    change(hooked)
    added = timed_commit(hooked, "-m", "Retry") - plain
    assert added < 1.0, f"the commit took {added:.2f} s of CPU more"
    body = git(hooked, "log", "-1", "--format=%B")
    why = body.split("Why:\n", 1)[1].split("\n\nObversa-Record:", 1)[0]
    assert len(why) <= (max_why or 1200) + 200  # concise, and says the rest is kept
    assert "in the kept record" in why
    assert pending(hooked) == []
    in_record = set(kept(hooked))
    flat = " ".join(why.split())
    assert all(reason in in_record or reason in flat for reason in reasons)


def test_a_message_written_in_the_editor_names_its_record_too(hooked, tmp_path):
    note(hooked, REASON)
    change(hooked)
    # The reasoning is shown as comment lines; the user writes a subject above them.
    editor = script(tmp_path, "write", 'printf "Retry API calls\\n" | cat - "$1" > "$1.new"\n'
                    'mv "$1.new" "$1"\n')  # fmt: skip
    completed = commit(hooked, editor=editor)
    assert completed.returncode == 0, completed.stderr
    assert len(record_ids(git(hooked, "log", "-1", "--format=%B"))) == 1
    assert kept(hooked) == [REASON]
    assert pending(hooked) == []
