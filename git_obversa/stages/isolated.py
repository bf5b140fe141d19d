"""Isolated stages (SPEC §8): a job runs in its own worktree and lands with `--no-ff`.

`isolated(repository, job, label=...)` forks a branch `lines/<slug>-<n>` into a fresh
worktree, runs JOB there, and when the job passes commits what it changed — with the
record's message, and with whatever that worktree captured (`git obversa record note`
run inside it) written in by the same code the `prepare-commit-msg` hook runs. The fork
commit lands back on the repository's branch with a `--no-ff` merge, so `git blame` of a
changed line names the fork commit, whose body is the reasoning. The worktree is always
removed; the branch too, unless the job raised or its commit could not land: then the
branch stays, and the outcome names it with its commit and says what stopped it.
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import tempfile
import threading
from collections.abc import Callable
from typing import Any

from git_obversa.repo import git

log = logging.getLogger(__name__)

# Process-wide, as in the original: fork numbers, worktree add/remove, landing.
_fork_numbers = itertools.count(1)
_worktree_lock = threading.Lock()
_merge_lock = threading.Lock()

Job = Callable[[dict], dict]


def slug(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-") or "job"


def _fail(summary: str, code: str, path: list[str] | None = None, message: str | None = None):
    error: dict[str, Any] = {"code": code, "message": message or summary}
    if path is not None:
        error["path"] = path
    return {"status": "fail", "summary": summary, "error": error}


def isolated(
    repository: str | os.PathLike[str],
    job: Job,
    label: str = "isolated",
    record: Any = None,
    on_conflict: str = "fail",
    *,
    require_repository: bool = False,
) -> dict:
    """Run JOB ({"dir", "branch"} -> outcome {"status", "summary"?}) in a fresh worktree of
    REPOSITORY and land its changes; returns the outcome.

    On a pass the outcome gains "commit" (the fork commit or, without a record, the last
    commit the job made itself; absent when nothing changed); a failure to land turns it
    into a fail with "error" {"code", "message"} and "kept" {"branch", "commit"}: the
    stage's branch, left in place; a branch deleted with commits that never landed is
    listed in "discarded". Outside a Git work tree the job runs in place (SPEC §8.2),
    unless REQUIRE_REPOSITORY (the command line) or a record makes that a CONFIG fail.
    """
    if on_conflict != "fail":
        raise ValueError('on_conflict must be "fail": merge synthesis is not available')
    repository = os.fspath(repository)
    inside = git.run(["rev-parse", "--is-inside-work-tree"], repository, check=False)
    if inside.stdout.strip() != "true":
        if require_repository:
            summary = (
                f'isolated("{label}") needs a Git work tree: {os.path.abspath(repository)} '
                "is not inside one; run it from a Git repository"
            )
            return _fail(summary, "CONFIG", path=[label])
        if record is not None:
            summary = (
                f'isolated("{label}") cannot record its reasoning: '
                f"{repository} is not a git repository"
            )
            return _fail(summary, "CONFIG", path=[label])
        log.warning(
            'isolated("%s") requested a worktree but %s is not a git repo; '
            "running in the shared workspace",
            label,
            repository,
        )
        return job({"dir": repository, "branch": None})

    branch = _free_branch(repository, slug(label))
    directory = tempfile.mkdtemp(prefix="lines-wt-")
    with _worktree_lock:
        added = git.run(
            ["worktree", "add", "-q", "-b", branch, directory, "HEAD"], repository, check=False
        )
    if added.returncode != 0:
        os.rmdir(directory)
        raise RuntimeError(
            f"git worktree add failed (exit {added.returncode}): {added.stderr.strip()}"
        )
    raised = True
    outcome: dict = {}
    try:
        start = git.output(["rev-parse", "HEAD"], directory)
        outcome = dict(job({"dir": directory, "branch": branch}))
        raised = False
        if outcome.get("status") == "pass":
            outcome = _commit_and_land(repository, directory, branch, start, label, record, outcome)
    finally:
        _clean_up(repository, directory, branch, raised, outcome)
    return outcome


def _free_branch(repository: str, name: str) -> str:
    while True:
        branch = f"lines/{name}-{next(_fork_numbers)}"
        exists = git.run(
            ["rev-parse", "--verify", "-q", f"refs/heads/{branch}"], repository, check=False
        )
        if exists.returncode != 0:
            return branch


def _commit_and_land(
    repository: str, directory: str, branch: str, start: str, label: str, record: Any, outcome: dict
) -> dict:
    git.run(["add", "-A"], directory)
    staged = git.run(["diff", "--cached", "--quiet"], directory, check=False).returncode == 1
    moved = git.output(["rev-parse", "HEAD"], directory) != start
    if record is not None and moved:
        summary = (
            f'isolated("{label}") cannot record its reasoning: the stage committed its own '
            "work, and a record attaches to the commit this wrapper makes"
        )
        return _fail(summary, "BODY")
    if staged:
        _commit(directory, label, record, outcome)
    elif not moved:
        return outcome  # nothing changed, nothing to land
    sha = git.output(["rev-parse", "HEAD"], directory)

    with _merge_lock:
        stopped = _land(repository, branch)
    if stopped is not None:
        conflict, reason = stopped
        kept = f"the stage is kept on branch {branch} at {sha[:12]}"
        retry = f"`git merge --no-ff {branch}` lands it"
        if conflict:
            summary = (
                f'isolated("{label}") landed with a merge conflict; needs resolution '
                f"({reason}; the merge was aborted, {kept}; {retry} to resolve it by hand)"
            )
            failed = _fail(summary, "BODY", message=f'merge conflict landing isolated("{label}")')
        else:
            summary = (
                f'isolated("{label}") did not land: git merge refused: {reason}; '
                f"{kept}; {retry} once that is fixed"
            )
            failed = _fail(summary, "LAND", message=f"git merge refused: {reason}")
        return {**failed, "kept": {"branch": branch, "commit": sha}}
    if record is not None:
        record.committed(sha)
    return {**outcome, "commit": sha}


def _land(repository: str, branch: str) -> tuple[bool, str] | None:
    """Merge BRANCH into the current branch with `--no-ff`: None when it landed, else
    (whether it was a conflict, what stopped it).

    Only a merge that started and stopped on conflicts is aborted, which puts the
    repository back as it was. One that git refused to start (local changes in the way, a
    merge of the user's already in progress) changed nothing, and aborting would throw
    away the user's own merge.
    """
    already_merging = _merging(repository)
    merged = git.run(
        ["merge", "--no-ff", "-q", "-m", f"merge {branch}", branch], repository, check=False
    )
    if merged.returncode == 0:
        return None
    if not already_merging and _merging(repository):
        listed = git.run(["diff", "--name-only", "--diff-filter=U"], repository, check=False)
        git.run(["merge", "--abort"], repository, check=False)
        files = listed.stdout.split()
        return True, "conflicts in " + (", ".join(files) if files else "the merge")
    return False, _refusal(merged.stderr + merged.stdout)


def _merging(repository: str) -> bool:
    found = git.run(["rev-parse", "-q", "--verify", "MERGE_HEAD"], repository, check=False)
    return found.returncode == 0


def _refusal(text: str) -> str:
    """Git's reason in one line: its first error line, with the files it lists after it
    (`Your local changes to the following files would be overwritten` + tab-indented
    names becomes `Your local changes to README.md would be overwritten`)."""
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if not line.startswith(("error: ", "fatal: ")):
            continue
        reason = line.split(": ", 1)[1].rstrip(":").strip()
        listed = itertools.takewhile(lambda item: item.startswith("\t"), lines[index + 1 :])
        files = ", ".join(item.strip() for item in listed)
        if not files:
            return reason
        if "the following files" in reason:
            return reason.replace("the following files", files)
        return f"{reason}: {files}"
    return next((line.strip() for line in lines if line.strip()), "git merge failed")


def _commit(directory: str, label: str, record: Any, outcome: dict) -> None:
    """Commit what is staged in DIRECTORY with the record's message and the turns that
    worktree captured, or `chore(<slug>): worktree changes` when there is neither."""
    from git_obversa.hooks import commit as hook
    from git_obversa.record.message import comment_chars, insert_reasoning
    from git_obversa.record.turns import TurnStore

    text = ""
    if record is not None:
        composed = record.message(
            {key: outcome[key] for key in ("status", "summary") if key in outcome}
        )
        text = insert_reasoning(
            composed["subject"] + "\n",
            reasoning=composed["body"],
            stages=[getattr(record, "stage", label)],
            chars=comment_chars(hook.read_config(directory).get("core.commentchar")),
            is_trailer_block=lambda paragraph: False,  # an empty message has no trailers
            editor=False,  # it is committed as written, with no comment block of git's
        )
    # Turns captured inside the worktree go in as the hook would put them. Clearing them
    # first keeps an installed hook from adding them again; the worktree goes anyway.
    store = TurnStore.for_worktree(directory)
    turns = store.read()
    if turns:
        text = hook.add_reasoning(text, turns, directory)
        store.clear(through_seq=max(turn["seq"] for turn in turns))
    if not text.strip():
        text = f"chore({slug(label)}): worktree changes\n"
    committed = git.run(
        ["commit", "-q", "--cleanup=whitespace", "-F", "-"], directory, input=text, check=False
    )
    if committed.returncode != 0:
        raise RuntimeError(
            f"git commit failed (exit {committed.returncode}): {committed.stderr.strip()}"
        )


def _clean_up(repository: str, directory: str, branch: str, raised: bool, outcome: dict) -> None:
    with _worktree_lock:
        removed = git.run(["worktree", "remove", "--force", directory], repository, check=False)
    if removed.returncode != 0:
        log.warning("could not remove the worktree %s: %s", directory, removed.stderr.strip())
    if raised:
        log.warning("kept the branch %s: the step threw before its work could land", branch)
        return
    if "kept" in outcome:  # its commit did not land: the branch is the way back to it
        return
    # Cleanup never changes the outcome: a failed look-up just lists nothing.
    listed = git.run(["rev-list", "-1", branch, "--not", "HEAD"], repository, check=False)
    unlanded = listed.stdout.strip() if listed.returncode == 0 else ""
    deleted = git.run(["branch", "-D", branch], repository, check=False)
    if deleted.returncode != 0:
        log.warning("could not delete the branch %s: %s", branch, deleted.stderr.strip())
    elif unlanded:
        outcome.setdefault("discarded", []).append({"branch": branch, "sha": unlanded})
