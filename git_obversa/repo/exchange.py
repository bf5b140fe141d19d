"""Refs exchanged with a remote under a lease: each fetched into a tracking ref of its
own, merged into ours by the caller, and ours pushed only over what was fetched
(`--force-with-lease`), never forced over something not seen; fetched and merged again
when the remote moved in between. The kept records (`record/kept.py`) and the notes of
who wrote the lines (`attribution/travel.py`) travel this way."""

from __future__ import annotations

import os
from collections.abc import Callable

from git_obversa.repo import git

ATTEMPTS = 8


class ExchangeError(Exception):
    """A fetch or a push failed for a reason other than the remote moving meanwhile, or
    the remote kept moving; the text says which, with git's reason."""


def tip(ref: str, cwd: str | os.PathLike[str] | None = None) -> str | None:
    """The commit REF names, or None when there is none."""
    [(status, found)] = git.outputs([["rev-parse", "-q", "--verify", f"{ref}^{{commit}}"]], cwd)
    return found.decode().strip() if status == 0 else None


def exchange(
    remote: str,
    tracking: dict[str, str],
    merge: Callable[[str, str | None], str | None],
    cwd: str | os.PathLike[str] | None = None,
    what: str = "refs",
) -> dict[str, tuple[str | None, str | None, str | None]]:
    """Exchange each ref of TRACKING (ref -> its tracking ref here) with REMOTE; WHAT
    names them in errors.

    A ref REMOTE does not have is fetched as none (its tracking ref goes). MERGE(ref,
    theirs) merges THEIRS (the fetched tip, or None) into REF and returns REF's tip after
    it (None when there is still none). Returns ref -> (ours before, theirs, ours after)
    of the attempt that went through."""
    refspecs = [f"+{ref}*:{there}*" for ref, there in tracking.items()]  # absent: no error
    for _ in range(ATTEMPTS):
        fetched = git.run(
            ["fetch", "--no-tags", "--no-write-fetch-head", "--prune", "--quiet", remote]
            + refspecs,
            cwd,
            check=False,
        )
        if fetched.returncode != 0:
            raise ExchangeError(f"cannot fetch {what} from {remote}: {reason(fetched.stderr)}")
        tips, pushes, leases = {}, [], []
        for ref, there in tracking.items():
            before, theirs = tip(ref, cwd), tip(there, cwd)
            ours = merge(ref, theirs)
            tips[ref] = (before, theirs, ours)
            if ours is not None and ours != theirs:
                pushes.append(f"{ours}:{ref}")
                leases.append(f"--force-with-lease={ref}:{theirs or ''}")
        if not pushes:
            return tips
        pushed = git.run(
            ["push", "--no-verify", "--quiet", "--porcelain", *leases, remote, *pushes],
            cwd,
            check=False,
        )
        if pushed.returncode == 0:
            for push in pushes:
                pushed_tip, _, ref = push.partition(":")
                git.run(["update-ref", tracking[ref], pushed_tip], cwd)
            return tips
        said = pushed.stdout + pushed.stderr
        if "stale info" not in said and "fetch first" not in said:
            raise ExchangeError(f"cannot push {what} to {remote}: {reason(pushed.stderr)}")
    raise ExchangeError(f"{remote}'s {what} kept changing during the sync; run it again")


def reason(stderr: str) -> str:
    """Git's reason, from the last line it said."""
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    return lines[-1].removeprefix("fatal: ").removeprefix("error: ") if lines else "git failed"
