"""Talking to the remote: which remote, the git processes that reach it, and the fetch
of its scopes, tombstones and names into the tracking namespace (tracking.py)."""

from __future__ import annotations

import os
import random
import re
import subprocess
import time
from collections.abc import Mapping

from git_obversa.memory.gitstore import past_stale_locks
from git_obversa.memory.store_errors import notify
from git_obversa.repo import git
from git_obversa.repo.locks import STALE_LOCK_SECONDS
from git_obversa.sync.tracking import SHARED, fetch_refspecs


class SyncError(Exception):
    """Sync could not run or finish; the message says what to do."""


# Transport needs the caller's ssh, credential and proxy setup; every other GIT_*
# variable (GIT_DIR, GIT_INDEX_FILE, ...) is dropped so a hook's context cannot redirect us.
TRANSPORT_VARIABLES = re.compile(
    r"GIT_(SSH\w*|ASKPASS|TERMINAL_PROMPT|PROXY_\w+|HTTP_\w+|SSL_\w+|CURL_\w+"
    r"|CONFIG_GLOBAL|CONFIG_SYSTEM|CONFIG_NOSYSTEM|TRACE\w*)"
)


# What git says when a remote ref names an object the remote no longer has (a
# `git gc --prune=now` there raced a push): the fetch of every ref fails on it.
MISSING_ON_REMOTE = re.compile(
    r"(?:not our ref|missing object|bad (?:tree|blob) object|missing (?:tree|blob)) "
    r"([0-9a-f]{40,64})"
)


# What git says when a local ref names a missing object; only sync's own records (bases,
# pending pushes, tracking refs) are dropped for it, never memory.
BROKEN_RECORD = re.compile(r"fatal: bad object (refs/obversa(?:/sync/|/sync-pending/|-remote/)\S+)")


# What git says when a `git gc` on either side moved things under a fetch (the remote's
# packs repacked; a local object directory pruned while an object was written into it):
# nothing is wrong with either side, and the next fetch succeeds.
GC_RACE = re.compile(
    r"pack-objects died|packfile .* cannot be accessed|early EOF"
    r"|unable to write file \S+: No such file or directory"
)


# Fetched objects always arrive as a pack that git keeps (a `.keep` beside it) until the
# tracking refs name them, never as loose objects (git's default below 100): a concurrent
# `git gc --prune=now` would take those before the refs move, leaving a tracking ref on
# objects that are gone, and every later fetch failing on it.
FETCH = ["-c", "fetch.unpackLimit=1", "fetch"]


def transport_environment() -> dict[str, str]:
    env = git.isolated_environment()
    env.update({k: v for k, v in os.environ.items() if TRANSPORT_VARIABLES.fullmatch(k)})
    return env


def run_git(repository: str, args: list[str], **kwargs) -> subprocess.CompletedProcess:
    return git.run(args, repository, isolated=True, check=False, **kwargs)


def run_transport(repository: str, args: list[str]) -> subprocess.CompletedProcess:
    return git.run(args, repository, check=False, isolated=True, env=transport_environment())


def resolve_remote(repository: str, remote: str | None) -> str:
    """REMOTE if it is a configured remote; without one, `origin` or the only remote."""
    listed = run_git(repository, ["remote"])
    if listed.returncode != 0:
        raise SyncError(f"{repository} is not a Git repository; run this inside one")
    remotes = listed.stdout.splitlines()
    if remote is None:
        if "origin" in remotes or len(remotes) != 1:
            remote = "origin"
        else:
            remote = remotes[0]
    if remote not in remotes:
        raise SyncError(
            f"'{remote}' is not a configured remote; add it with "
            f"`git remote add {remote} <url>` (configured: {', '.join(remotes) or 'none'})"
        )
    # A remote named like an option would reach git as one; `--end-of-options` guards
    # every call, and such a name is refused outright so no command line is ambiguous.
    if remote.startswith("-"):
        raise SyncError(
            f"remote name '{remote}' starts with '-'; rename it with `git remote rename`"
        )
    if run_git(repository, ["check-ref-format", f"refs/obversa-remote/{remote}/x"]).returncode:
        raise SyncError(f"remote name '{remote}' cannot be part of a ref name; rename it")
    return remote


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    for line in lines:
        if line.startswith(("fatal: ", "error: ")):
            return line
    return lines[-1] if lines else "no output"


def reach_hint(remote: str) -> str:
    return (
        f"check that `git fetch {remote}` works (the URL: `git remote get-url {remote}`, "
        "your access), then sync again"
    )


def fetch(repository: str, remote: str) -> dict[str, str]:
    """Fetch the remote's scopes, tombstones and names into the tracking namespace
    (deleted ones are pruned). Returns the remote's damaged refs: ref -> the object it
    names that the remote no longer has; they are left out, the rest are fetched."""
    damaged: dict[str, str] = {}
    for _ in range(8):
        # A tracking ref's lock that a fetch killed with its sync (Ctrl-C) left is
        # waited for until stale, then cleared: git would fail on it for good.
        completed = past_stale_locks(
            lambda: run_transport(
                repository,
                [*FETCH, "--quiet", "--no-tags", "--no-write-fetch-head", "--prune",
                 "--no-auto-gc", "--no-show-forced-updates", "--end-of-options", remote,
                 *fetch_refspecs(remote), *(f"^{ref}" for ref in damaged)],
            ),
            time.monotonic() + 2 * STALE_LOCK_SECONDS,
        )  # fmt: skip
        if completed.returncode == 0:
            return damaged
        broken = BROKEN_RECORD.search(completed.stderr)
        if broken is not None:
            # A record of ours naming an object a gc took (a sync killed between writing
            # it and checking it): git refuses every fetch over it. It only spares work.
            run_git(repository, ["update-ref", "-d", "--end-of-options", broken.group(1)])
            notify(f"dropped {broken.group(1)}: it named an object that is gone")
            continue
        missing = MISSING_ON_REMOTE.search(completed.stderr)
        if missing is None and GC_RACE.search(completed.stderr):
            time.sleep(random.uniform(0.05, 0.2))  # a gc moved things under the fetch: again
            continue
        if missing is None:
            raise SyncError(
                f"git fetch {remote} failed: {last_line(completed.stderr)}; {reach_hint(remote)}"
            )
        # Which of the remote's refs name the missing object? None: it lies deeper in a
        # tree (each ref is then fetched alone to find the broken ones), or the ref
        # moved on between git's listing and its request (a push raced us): try again.
        listed = {
            ref: value
            for ref, value in _list_remote(repository, remote).items()
            if any(ref.startswith(p) for p in SHARED.values()) and ref not in damaged
        }
        named = {ref: value for ref, value in listed.items() if value == missing.group(1)}
        damaged.update(named or _unreadable(repository, remote, listed))
        time.sleep(random.uniform(0, 0.05))
    raise SyncError(
        f"git fetch {remote} kept failing: {last_line(completed.stderr)}; {reach_hint(remote)}"
    )


def _unreadable(repository: str, remote: str, listed: Mapping[str, str]) -> dict[str, str]:
    """The refs of LISTED whose objects the remote cannot send, each fetched alone."""
    broken = {}
    for ref, value in listed.items():
        completed = run_transport(
            repository,
            [*FETCH, "--quiet", "--no-tags", "--no-write-fetch-head", "--no-auto-gc",
             "--end-of-options", remote, ref],
        )  # fmt: skip
        if completed.returncode != 0 and MISSING_ON_REMOTE.search(completed.stderr):
            broken[ref] = value
    return broken


def _list_remote(repository: str, remote: str) -> dict[str, str]:
    listed = run_transport(
        repository, ["ls-remote", "--end-of-options", remote, *(p + "*" for p in SHARED.values())]
    )
    if listed.returncode != 0:
        raise SyncError(
            f"git ls-remote {remote} failed: {last_line(listed.stderr)}; {reach_hint(remote)}"
        )
    found = {}
    for line in listed.stdout.splitlines():
        value, _, ref = line.partition("\t")
        found[ref] = value
    return found
