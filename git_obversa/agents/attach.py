"""The why lands even where git hooks do not run: attaching it after the agent's tool call.

Some clients run their shell commands with git hooks turned off (Gemini CLI sets
`core.hooksPath` empty and `GIT_CONFIG_GLOBAL=/dev/null`), and any agent may commit with
`--no-verify` or its own commit call. Then `prepare-commit-msg` never sees the commit and
the pending reasoning would land on a later, unrelated one. So the agent's hooks bracket
each shell call that may commit:

- before it (`remember_head`): HEAD as it is, kept under the agent's capture directory
  under the call's key;
- after it (`attach_after_call`): if HEAD moved during the call, the commit HEAD now names
  gets the pending reasoning, composed exactly as `prepare-commit-msg` would write it, by
  rewriting that one commit: same tree, parents, author and committer (dates too), a new
  message; the branch moves from the old id to the new with a compare-and-swap and a
  reflog entry. Then the turns it carries are dropped, as `post-commit` does.

Only when all of these hold, else nothing is touched: HEAD moved during this call and the
commit it names sits on what HEAD was before (the call made it); it is not on any
remote-tracking branch; it carries no `Why:` block yet (the hooks ran); it is not signed;
and no rebase, merge or cherry-pick is in progress. A call that makes several commits gets
the why on its last one.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from git_obversa.record.message import RECORD_TRAILER
from git_obversa.repo import git

CALLS = "calls"
REFLOG_MESSAGE = "obversa: why attached after the agent's commit"


def _call_file(capture_dir: Path, key: str) -> Path:
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:24]
    return capture_dir / CALLS / digest


def _head(cwd: str | os.PathLike[str]) -> str:
    done = git.run(["rev-parse", "-q", "--verify", "HEAD"], cwd, check=False)
    return done.stdout.strip() if done.returncode == 0 else ""


def remember_head(capture_dir: Path, key: str, cwd: str | os.PathLike[str]) -> None:
    """Before a call that may commit: keep HEAD (empty on an unborn branch) under KEY."""
    path = _call_file(capture_dir, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_head(cwd), encoding="ascii")


def head_before(capture_dir: Path, key: str) -> str | None:
    try:
        return _call_file(capture_dir, key).read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return None


def made_by_call(capture_dir: Path, key: str, cwd: str | os.PathLike[str]) -> str | None:
    """The commit HEAD names when the call under KEY made it (HEAD moved, onto what it was
    before); None otherwise. Forgets the call."""
    path = _call_file(capture_dir, key)
    before = head_before(capture_dir, key)
    path.unlink(missing_ok=True)
    if before is None:
        return None
    head = _head(cwd)
    if not head or head == before:
        return None
    if before:
        ancestor = git.run(["merge-base", "--is-ancestor", before, head], cwd, check=False)
        if ancestor.returncode != 0:
            return None  # HEAD moved elsewhere (a checkout, a reset): not a commit of it
    return head


def _commit_fields(head: str, cwd) -> tuple[dict[str, str], list[str], str, bool]:
    """(environment naming author and committer as in HEAD, the parents, the message,
    whether it is signed) of commit HEAD."""
    raw = git.run(["cat-file", "commit", head], cwd).stdout
    header, _, message = raw.partition("\n\n")
    env: dict[str, str] = {}
    parents: list[str] = []
    signed = False
    for line in header.split("\n"):
        name, _, value = line.partition(" ")
        if name == "parent":
            parents.append(value)
        elif name in ("author", "committer"):
            who, _, stamp = value.rpartition("> ")
            person, _, email = who.partition(" <")
            role = name.upper()
            env[f"GIT_{role}_NAME"] = person
            env[f"GIT_{role}_EMAIL"] = email
            env[f"GIT_{role}_DATE"] = stamp
        elif name in ("gpgsig", "gpgsig-sha256"):
            signed = True
    return env, parents, message, signed


def _on_remote(head: str, cwd) -> bool:
    contains = git.output(["for-each-ref", "--contains", head, "--count=1", "refs/remotes"], cwd)
    return bool(contains.strip())


def _replaying(cwd) -> bool:
    names = ("MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD", "rebase-merge", "rebase-apply")
    paths = git.output(
        ["rev-parse", "--path-format=absolute", *[a for n in names for a in ("--git-path", n)]],
        cwd,
    ).splitlines()
    return any(os.path.exists(path) for path in paths)


def attach(head: str, cwd: str | os.PathLike[str]) -> str | None:
    """Give commit HEAD (which must be HEAD) the pending reasoning; the new commit id, or
    None when there was nothing to add or a condition of the module docstring fails."""
    from git_obversa.hooks import commit as hooks

    env, parents, message, signed = _commit_fields(head, cwd)
    if signed or _on_remote(head, cwd) or _replaying(cwd):
        return None
    carried = git.output(
        ["log", "-1", f"--format=%(trailers:key={RECORD_TRAILER},valueonly)", head], cwd
    )
    if carried.strip():
        return None  # the commit hooks ran: the why is there
    store = git.git_path("obversa/record", cwd)
    store.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=store, suffix=".msg", delete=False) as handle:
        handle.write(message)
        path = handle.name
    try:
        previous = os.environ.get("GIT_EDITOR")
        os.environ["GIT_EDITOR"] = ":"  # the message is given: write the block, no editor
        try:
            if not hooks.prepare_commit_msg(path, "message", cwd):
                return None
        finally:
            if previous is None:
                os.environ.pop("GIT_EDITOR", None)
            else:
                os.environ["GIT_EDITOR"] = previous
        tree = git.output(["rev-parse", f"{head}^{{tree}}"], cwd).strip()
        arguments = ["commit-tree", tree, "-F", path]
        for parent in parents:
            arguments += ["-p", parent]
        rewritten = git.run(arguments, cwd, env={**os.environ, **env}).stdout.strip()
    finally:
        Path(path).unlink(missing_ok=True)
    done = git.run(["update-ref", "-m", REFLOG_MESSAGE, "HEAD", rewritten, head], cwd, check=False)
    if done.returncode != 0:
        # HEAD moved meanwhile: leave it; the turns stay claimed until the next commit
        # hook settles them, as after an aborted commit.
        return None
    hooks.post_commit(cwd)
    return rewritten


def attach_after_call(capture_dir: Path, key: str, cwd: str | os.PathLike[str]) -> str | None:
    """After a call that may have committed: attach the pending reasoning to the commit it
    made (see the module docstring). The rewritten commit's id, or None."""
    head = made_by_call(capture_dir, key, cwd)
    return attach(head, cwd) if head else None
