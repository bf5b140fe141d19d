"""Memory across machines: push, pull and merge scopes through any Git remote.

A scope is a ref that points at a tree (`refs/obversa/memory/v1/<digest>`). Sync moves
those refs with explicit refspecs and never lets Git overwrite local memory. Beside the
scopes it keeps, in this repository:

    refs/obversa/dropped/v1/<digest>           a tombstone: the scope was dropped on
                                               purpose (`memory drop`, or a sync that
                                               applied a remote's drop); -> the tree it held
    refs/obversa/names/v1/<digest>             the scope's name (memory/names.py)
    refs/obversa-remote/<remote>/{memory,dropped,names}/v1/<digest>
                                               the remote's refs as last fetched
    refs/obversa/sync/<remote>/<digest>        the last tree both sides agreed on
    refs/obversa/sync-pending/<remote>/<digest>  trees being pushed (a commit chain), until
                                               a push is recorded

Rules that keep memory safe:

- **Absence is never a deletion.** A scope missing on one side is deleted on the other
  only when that side holds a tombstone for it. A remote that simply lacks a scope (new,
  re-created, another URL) gets it pushed back; a clone that lacks one gets it pulled.
- **Pull** fetches into the tracking namespace, then brings each scope in three-way
  against the base. Local scope refs, bases and tombstones move in one transaction that
  checks each local ref still holds what was merged (a write meanwhile: merge again).
- **Push** sends tombstones first (so no other clone ever sees a dropped scope merely
  missing), then every changed scope with `--force-with-lease=<ref>:<agreed>`, the
  remote compare-and-swap: a remote change made in between is never overwritten; the
  scope is fetched, merged and pushed again.
- **The record of what was agreed survives a kill.** A tree is written to the pending
  ref before it is pushed; if the sync dies after the push, the next one finds the remote
  holding that tree and takes it as agreed, so it never re-merges against an older base
  (which would bring deleted files back and copy the clone's own older text aside). A
  killed sync's git push may land after later syncs ran: notes are kept (a chain) until
  a push of ours is accepted.

The merge itself is `merge.py`: a pure function over scope states.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Mapping
from typing import Any

from git_obversa.memory.gitstore import open_store
from git_obversa.memory.names import names, resolve_scope
from git_obversa.memory.port import MemoryFailure, MemoryLimits
from git_obversa.memory.store_errors import StoreError
from git_obversa.repo import kept_pack
from git_obversa.sync.fetch import SyncError, fetch, resolve_remote, run_git
from git_obversa.sync.pull import MAX_ATTEMPTS, take_in, take_in_all
from git_obversa.sync.push import push_changes, push_refs
from git_obversa.sync.reports import ScopeReport, SyncReport
from git_obversa.sync.tracking import (
    DROPPED_PREFIX,
    MEMORY_PREFIX,
    SYNC_MARKER,
    Exchange,
    Progress,
    base_prefix,
    fetch_refspecs,
    pending_prefix,
    read_view,
    tracking_prefix,
)

BACKOFF_CAP_SECONDS = 1.0

__all__ = [
    "DROPPED_PREFIX",
    "MEMORY_PREFIX",
    "SYNC_MARKER",
    "ScopeReport",
    "SyncError",
    "SyncReport",
    "add_sync_refspecs",
    "base_prefix",
    "fetch",
    "fetch_refspecs",
    "pending_prefix",
    "pull",
    "push",
    "push_refs",
    "sync",
    "take_in",
    "tracking_prefix",
]


def pull(
    repository: str,
    remote: str | None = None,
    *,
    limits: MemoryLimits | Mapping[str, Any] | None = None,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> SyncReport:
    """Fetch the remote's scopes and merge each into the local one."""
    return _exchange(repository, remote, None, True, False, limits, dry_run, progress)


def push(
    repository: str,
    remote: str | None = None,
    *,
    scope: str | None = None,
    limits: MemoryLimits | Mapping[str, Any] | None = None,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> SyncReport:
    """Push local changes (of SCOPE: a name, or `names.by_digest(prefix)`; or every
    scope); a scope the remote changed meanwhile is fetched, merged and pushed again,
    never overwritten."""
    only = None
    if scope is not None:
        try:
            with open_store(os.fspath(repository)) as store:
                only = {resolve_scope(store, scope).digest}
        except MemoryFailure as error:
            raise SyncError(error.message) from None
    return _exchange(repository, remote, only, dry_run, True, limits, dry_run, progress)


def sync(
    repository: str,
    remote: str | None = None,
    *,
    limits: MemoryLimits | Mapping[str, Any] | None = None,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> SyncReport:
    """pull, then push: afterwards both sides hold the same trees (unless one moved on).
    With DRY_RUN nothing local or remote changes (the remote's refs are fetched into the
    tracking namespace only); the report says what a sync would do. PROGRESS, if given,
    is called with (what, done, total) as long work goes on (every verb takes it)."""
    return _exchange(repository, remote, None, True, True, limits, dry_run, progress)


def _exchange(
    repository: str,
    remote: str | None,
    only: set[str] | None,
    pull_first: bool,
    push: bool,
    limits: MemoryLimits | Mapping[str, Any] | None,
    dry_run: bool,
    progress: Progress | None,
) -> SyncReport:
    repository = os.fspath(repository)
    remote = resolve_remote(repository, remote)
    report = SyncReport(remote, dry_run=dry_run)
    try:
        store = open_store(repository)
    except StoreError as error:
        raise SyncError(f"{error.message}; run this inside a Git repository") from None
    with store:
        # A sync killed while its refs moved left the pack of their objects kept.
        kept_pack.dead_keeps_removed(store.common_dir)
        exchange = Exchange(
            store, repository, remote, MemoryLimits.resolve(limits), dry_run, progress
        )
        merge_only = only
        need_pull = pull_first
        fetched = False
        damaged: dict[str, str] = {}
        for attempt in range(MAX_ATTEMPTS):
            report.rounds = attempt + 1
            if need_pull:
                damaged = fetch(repository, remote)
                fetched = True
                take_in_all(exchange, merge_only, damaged)
            if not push:
                break
            moved = push_changes(exchange, only, read_view(store, remote, fetched, damaged))
            if not moved:
                break
            # Another clone pushed in between, or was pushing at that moment: take its
            # change in and try again, after a pause that grows and differs per process
            # so that racing clones fall out of step.
            merge_only = moved if only is not None or not pull_first else only
            need_pull = True
            time.sleep(random.uniform(0, min(BACKOFF_CAP_SECONDS, 0.02 * 2**attempt)))
        else:
            raise SyncError(
                f"{remote} kept changing during {MAX_ATTEMPTS} rounds; run the sync again"
            )
        known = names(store)
    reports = exchange.reports
    for digest, scope in reports.items():
        scope.name = known.get(digest)
    report.scopes = [reports[digest] for digest in sorted(reports)]
    return report


def add_sync_refspecs(repository: str, remote: str | None) -> dict[str, list[str]]:
    """Set REMOTE up so plain `git fetch` / `git push` carry memory; returns what changed
    ({config key: values added}, and "removed" for refspecs an earlier version added).

    Fetch refspecs bring the remote's scopes into the tracking namespace (never over
    local memory). Pushing is the `pre-push` hook's job (`hooks/install.py`): it runs
    `git obversa memory sync` for remotes marked `remote.<name>.obversaSync`, so memory
    is merged, never forced, and a memory problem never fails the user's push. No push
    refspec is added: a configured one would make git itself push scopes and fail the
    whole push whenever a scope changed on both sides.
    """
    remote = resolve_remote(repository, remote)
    changed: dict[str, list[str]] = {}
    key = f"remote.{remote}.fetch"
    present = run_git(repository, ["config", "--get-all", "--end-of-options", key]).stdout.split()
    for value in fetch_refspecs(remote):
        if value not in present:
            run_git(repository, ["config", "--add", "--end-of-options", key, value])
            changed.setdefault(key, []).append(value)
    marker = f"remote.{remote}.{SYNC_MARKER}"
    if run_git(repository, ["config", "--type=bool", "--get", marker]).stdout.strip() != "true":
        run_git(repository, ["config", "--end-of-options", marker, "true"])
        changed.setdefault(marker, []).append("true")
    # Versions before this one pushed memory with a push refspec (and `HEAD` beside it
    # when the remote had none): take them out, so a plain push behaves as git's own.
    key = f"remote.{remote}.push"
    pushes = run_git(repository, ["config", "--get-all", "--end-of-options", key]).stdout.split()
    ours = f"{MEMORY_PREFIX}*:{MEMORY_PREFIX}*"
    if ours in pushes:
        remaining = [value for value in pushes if value != ours]
        dropped = [ours] + (remaining if remaining == ["HEAD"] else [])
        run_git(repository, ["config", "--unset-all", "--end-of-options", key])
        for value in pushes:
            if value not in dropped:
                run_git(repository, ["config", "--add", "--end-of-options", key, value])
        changed["removed"] = [f"{key} {value}" for value in dropped]
    return changed
