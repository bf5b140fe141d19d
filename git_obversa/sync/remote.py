"""Memory across machines: push, pull and merge scopes through any Git remote.

A scope is a ref that points at a tree (`refs/obversa/memory/v1/<digest>`). Sync moves
those refs with explicit refspecs and never lets Git overwrite local memory:

- pull fetches the remote's scopes into a separate namespace
  (`refs/obversa-remote/<remote>/memory/v1/<digest>`), then merges each scope into the
  local ref three-way against the base: the last tree both sides agreed on, kept per
  remote and scope in `refs/obversa/sync/<remote>/<digest>` (a ref, so it travels with
  the repository and needs no extra files, and its tree stays reachable for `git gc`);
- push sends every scope that differs from what was fetched, each with
  `--force-with-lease=<ref>:<fetched>`, the remote compare-and-swap: a remote change made
  in between is never overwritten; the scope is fetched, merged and pushed again.

The merge itself is `merge.py`: a pure function over scope states.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from git_obversa import git
from git_obversa.memory.engine import Entry
from git_obversa.memory.git_memory import (
    SCOPE_REF_PREFIX,
    ScopeTree,
    Store,
    empty_scope_tree,
    read_blob_text,
    read_scope_tree,
    scope_digest,
    write_scope_tree,
)
from git_obversa.memory.gitstore import MissingObject, StoreError, open_store, update_refs
from git_obversa.memory.port import MemoryLimits, validate_scope
from git_obversa.sync.merge import (
    Conflict,
    FileVersion,
    MergeResult,
    ScopeState,
    merge_scopes,
)

MEMORY_PREFIX = SCOPE_REF_PREFIX
DIGEST = re.compile(r"[0-9a-f]{64}")  # a scope ref's last segment: sha256 of the scope name
# Rounds of fetch, merge and push before giving up on a busy remote. Writers that keep
# pushing to one scope make some syncs lose the race many times in a row (measured: up
# to 20 rounds with three processes syncing non-stop on a loaded 2-core machine).
MAX_ATTEMPTS = 50
# Transport needs the caller's ssh, credential and proxy setup; every other GIT_*
# variable (GIT_DIR, GIT_INDEX_FILE, ...) is dropped so a hook's context cannot redirect us.
TRANSPORT_VARIABLES = re.compile(
    r"GIT_(SSH\w*|ASKPASS|TERMINAL_PROMPT|PROXY_\w+|HTTP_\w+|SSL_\w+|CURL_\w+"
    r"|CONFIG_GLOBAL|CONFIG_SYSTEM|CONFIG_NOSYSTEM|TRACE\w*)"
)


class SyncError(Exception):
    """Sync could not run or finish; the message says what to do."""


def tracking_prefix(remote: str) -> str:
    """Where the remote's scopes are fetched to: never over the local scope refs."""
    return f"refs/obversa-remote/{remote}/memory/v1/"


def base_prefix(remote: str) -> str:
    """Where the last tree both sides agreed on is kept, per remote and scope."""
    return f"refs/obversa/sync/{remote}/"


def fetch_refspec(remote: str) -> str:
    # `+` is safe here: the destination is our tracking namespace, never local memory.
    return f"+{MEMORY_PREFIX}*:{tracking_prefix(remote)}*"


def _transport_environment() -> dict[str, str]:
    env = git.isolated_environment()
    env.update({k: v for k, v in os.environ.items() if TRANSPORT_VARIABLES.fullmatch(k)})
    return env


def _git(repository: str, args: list[str], **kwargs) -> subprocess.CompletedProcess:
    return git.run(args, repository, isolated=True, check=False, **kwargs)


def resolve_remote(repository: str, remote: str | None) -> str:
    """REMOTE if it is a configured remote; without one, `origin` or the only remote."""
    listed = _git(repository, ["remote"])
    if listed.returncode != 0:
        raise SyncError(f"{repository} is not a Git repository")
    remotes = listed.stdout.split()
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
    if _git(repository, ["check-ref-format", f"refs/obversa-remote/{remote}/x"]).returncode:
        raise SyncError(f"remote name '{remote}' cannot be part of a ref name; rename it")
    return remote


def fetch(repository: str, remote: str) -> None:
    """Fetch the remote's scopes into the tracking namespace (deleted ones are pruned)."""
    completed = git.run(
        ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--prune",
         "--no-auto-gc", "--no-show-forced-updates", remote, fetch_refspec(remote)],
        repository, check=False, isolated=True, env=_transport_environment(),
    )  # fmt: skip
    if completed.returncode != 0:
        raise SyncError(f"git fetch {remote} failed: {_last_line(completed.stderr)}")


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def push_refs(
    repository: str, remote: str, updates: Mapping[str, tuple[str | None, str | None]]
) -> tuple[set[str], set[str]]:
    """Push REF -> (expected, new) with a lease on each: (accepted refs, rejected refs).

    `--force-with-lease=<ref>:<expected>` is the remote compare-and-swap: the update
    (which must be forced, a tree is not a fast-forward) happens only if the remote ref
    still holds what we last agreed on; None expects the ref to be absent, a None new
    value deletes it.
    """
    args = ["push", "--porcelain", "--no-verify", remote]
    for ref, (expected, _) in updates.items():
        args.append(f"--force-with-lease={ref}:{expected or ''}")
    args += [f"{new or ''}:{ref}" for ref, (_, new) in updates.items()]
    completed = git.run(args, repository, check=False, isolated=True, env=_transport_environment())
    accepted: set[str] = set()
    for line in completed.stdout.splitlines():
        flag, _, rest = line.partition("\t")
        if flag in (" ", "+", "-", "*", "=") and ":" in rest:
            accepted.add(rest.split("\t")[0].rpartition(":")[2])
    rejected = set(updates) - accepted
    if rejected and not any(line.startswith("!\t") for line in completed.stdout.splitlines()):
        raise SyncError(f"git push {remote} failed: {_last_line(completed.stderr)}")
    return accepted, rejected


def add_sync_refspecs(repository: str, remote: str) -> dict[str, list[str]]:
    """Configure REMOTE so plain `git fetch` / `git push` carry memory scopes.

    Fetch lands in the tracking namespace (`git obversa memory pull` merges from there).
    The push refspec has no `+`: a plain push creates new scopes but never overwrites a
    remote scope (Git refuses the non-fast-forward); `git obversa memory push` merges and
    updates them. Because a configured push refspec replaces what a bare `git push`
    pushes, `HEAD` is added too so branches still go out as before. Returns what was added.
    """
    remote = resolve_remote(repository, remote)
    wanted = {
        f"remote.{remote}.fetch": [fetch_refspec(remote)],
        f"remote.{remote}.push": ["HEAD", f"{MEMORY_PREFIX}*:{MEMORY_PREFIX}*"],
    }
    added: dict[str, list[str]] = {}
    for key, values in wanted.items():
        present = _git(repository, ["config", "--get-all", key]).stdout.split()
        if key.endswith(".push") and present:
            values = values[1:]  # the user already chose what a bare push sends
        for value in values:
            if value not in present:
                _git(repository, ["config", "--add", key, value])
                added.setdefault(key, []).append(value)
    return added


# ---------------------------------------------------------------------------------------
# pull, push, sync


@dataclass
class ScopeReport:
    """What one sync did to one scope (by digest: refs do not hold scope names)."""

    digest: str
    received: str | None = None  # "pulled", "merged" or "deleted" (the remote dropped it)
    sent: str | None = None  # "pushed" or "deleted" (dropped here, now gone there too)
    conflicts: list[Conflict] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    merged_in: list[str] = field(default_factory=list)
    evicted: list[str] = field(default_factory=list)
    error: str | None = None  # the scope could not be merged; the others were

    def as_json(self) -> dict:
        return {
            "digest": self.digest,
            "received": self.received,
            "sent": self.sent,
            "conflicts": [{"path": c.path, "copy": c.copy} for c in self.conflicts],
            "restored": self.restored,
            "merged_in": self.merged_in,
            "evicted": self.evicted,
            "error": self.error,
        }


@dataclass
class SyncReport:
    remote: str
    scopes: list[ScopeReport] = field(default_factory=list)
    rounds: int = 0  # fetch/merge/push rounds; more than one means the remote moved meanwhile

    def as_json(self) -> dict:
        return {
            "remote": self.remote,
            "rounds": self.rounds,
            "scopes": [scope.as_json() for scope in self.scopes],
        }


def pull(
    repository: str,
    remote: str | None = None,
    *,
    limits: MemoryLimits | Mapping[str, Any] | None = None,
) -> SyncReport:
    """Fetch the remote's scopes and merge each into the local one."""
    return _exchange(repository, remote, None, pull_first=True, push=False, limits=limits)


def push(
    repository: str,
    remote: str | None = None,
    *,
    scope: str | None = None,
    limits: MemoryLimits | Mapping[str, Any] | None = None,
) -> SyncReport:
    """Push local changes (of SCOPE, or every scope); a scope the remote changed
    meanwhile is fetched, merged and pushed again, never overwritten."""
    only = {scope_digest(validate_scope(scope))} if scope is not None else None
    return _exchange(repository, remote, only, pull_first=False, push=True, limits=limits)


def sync(
    repository: str,
    remote: str | None = None,
    *,
    limits: MemoryLimits | Mapping[str, Any] | None = None,
) -> SyncReport:
    """pull, then push: afterwards both sides hold the same trees (unless one moved on)."""
    return _exchange(repository, remote, None, pull_first=True, push=True, limits=limits)


def _exchange(
    repository: str,
    remote: str | None,
    only: set[str] | None,
    *,
    pull_first: bool,
    push: bool,
    limits: MemoryLimits | Mapping[str, Any] | None,
) -> SyncReport:
    repository = os.fspath(repository)
    remote = resolve_remote(repository, remote)
    limits = MemoryLimits.resolve(limits)
    report = SyncReport(remote)
    reports: dict[str, ScopeReport] = {}
    with open_store(repository) as store:
        merge_only = only
        need_pull = pull_first
        for attempt in range(MAX_ATTEMPTS):
            report.rounds = attempt + 1
            if need_pull:
                fetch(repository, remote)
                _merge_remote(store, repository, remote, merge_only, limits, reports)
            if not push:
                break
            rejected = _push_changes(store, repository, remote, only, reports)
            if not rejected:
                break
            # Someone pushed in between: take their change in and try again.
            merge_only = rejected if only is not None or not pull_first else only
            need_pull = True
            time.sleep(random.uniform(0, 0.02 * (attempt + 1)))
        else:
            raise SyncError(
                f"{remote} kept changing during {MAX_ATTEMPTS} rounds; run the sync again"
            )
    report.scopes = [reports[digest] for digest in sorted(reports)]
    return report


def _refs(store: Store, prefix: str) -> dict[str, str]:
    """digest -> value of the scope refs under PREFIX. Other names are left alone: they
    are no scope (a remote may push anything), or they belong to another remote whose
    name extends this one's (`origin/x` under `origin`)."""
    found = {ref[len(prefix) :]: value for ref, value in store.list_refs(prefix).items()}
    return {digest: value for digest, value in found.items() if DIGEST.fullmatch(digest)}


def _merge_remote(
    store: Store,
    repository: str,
    remote: str,
    only: set[str] | None,
    limits: MemoryLimits,
    reports: dict[str, ScopeReport],
) -> None:
    """Bring every fetched scope into the local one; record the new bases.

    All local refs and bases move in one transaction that checks each local ref still
    holds what was merged: a local write that lands meanwhile makes us merge again.
    """
    zero = "0" * store.hex_length
    for _ in range(MAX_ATTEMPTS):
        local = _refs(store, MEMORY_PREFIX)
        fetched = _refs(store, tracking_prefix(remote))
        bases = _refs(store, base_prefix(remote))
        updates: dict[str, tuple] = {}
        found: dict[str, ScopeReport] = {}
        for digest in sorted(set(local) | set(fetched) | set(bases)):
            if only is not None and digest not in only:
                continue
            ours, theirs, base = local.get(digest), fetched.get(digest), bases.get(digest)
            if theirs == base:
                continue  # nothing new there; our changes, if any, go out with push
            local_ref = MEMORY_PREFIX + digest
            if ours not in (base, theirs):
                try:
                    merged, result = _merge_trees(store, digest, base, ours, theirs, remote, limits)
                except (StoreError, MissingObject) as error:  # this scope stays, unsent
                    found[digest] = ScopeReport(digest, error=_problem(error))
                    continue
                updates[local_ref] = (ours, merged)
                found[digest] = ScopeReport(
                    digest, "merged", None, result.conflicts, result.restored,
                    result.merged_in, result.evicted,
                )  # fmt: skip
            elif ours == base:
                try:
                    _check_incoming(store, digest, ours, theirs, limits)
                except (StoreError, MissingObject) as error:
                    found[digest] = ScopeReport(digest, error=_problem(error))
                    continue
                updates[local_ref] = (ours, theirs)
                found[digest] = ScopeReport(digest, "pulled" if theirs else "deleted")
            updates[base_prefix(remote) + digest] = (..., theirs)
        if not updates or update_refs(repository, updates, zero):
            for digest, report in found.items():
                previous = reports.setdefault(digest, ScopeReport(digest))
                previous.received = report.received or previous.received
                previous.error = report.error
                previous.conflicts += report.conflicts
                previous.restored += report.restored
                previous.merged_in += report.merged_in
                previous.evicted += report.evicted
            return
    raise SyncError("local memory kept changing while merging; run the sync again")


def _push_changes(
    store: Store,
    repository: str,
    remote: str,
    only: set[str] | None,
    reports: dict[str, ScopeReport],
) -> set[str]:
    """Push every scope that changed since the last agreement; the rejected digests.

    A local scope is validated before it goes out: one that cannot be read here (a
    symbolic ref, a broken tree) is reported and stays, the others are pushed.
    """
    local = _refs(store, MEMORY_PREFIX)
    bases = _refs(store, base_prefix(remote))
    pushes = {}
    for digest in sorted(set(local) | set(bases)):
        if digest in reports and reports[digest].error is not None:
            continue  # could not be merged: pushing it would only be rejected again
        ours = local.get(digest)
        if (only is not None and digest not in only) or ours == bases.get(digest):
            continue
        try:
            _scope(store, ours, digest, None)
        except (StoreError, MissingObject) as error:
            reports.setdefault(digest, ScopeReport(digest)).error = _problem(error)
            continue
        pushes[MEMORY_PREFIX + digest] = (bases.get(digest), ours)
    if not pushes:
        return set()
    accepted, rejected = push_refs(repository, remote, pushes)
    agreed = {}
    for ref in accepted:
        digest = ref[len(MEMORY_PREFIX) :]
        new = pushes[ref][1]
        agreed[base_prefix(remote) + digest] = (..., new)
        agreed[tracking_prefix(remote) + digest] = (..., new)
        reports.setdefault(digest, ScopeReport(digest)).sent = "pushed" if new else "deleted"
    if agreed and not update_refs(repository, agreed, "0" * store.hex_length):
        raise SyncError("could not record what was pushed; run the sync again")
    return {ref[len(MEMORY_PREFIX) :] for ref in rejected}


def _problem(error: Exception) -> str:
    if isinstance(error, StoreError):
        return error.message
    return f"a Git object is missing ({error})"


def _scope(store: Store, tree: str | None, digest: str, limits: MemoryLimits | None) -> ScopeTree:
    return empty_scope_tree() if tree is None else read_scope_tree(store, tree, digest, limits)


def _state(scope: ScopeTree) -> ScopeState:
    files = {
        path: FileVersion(scope.blobs[path], entry.byte_length, entry.written)
        for path, entry in scope.entries.items()
    }
    return ScopeState(files, scope.clock)


def _check_incoming(
    store: Store, digest: str, ours: str | None, theirs: str | None, limits: MemoryLimits
) -> tuple[ScopeTree, ScopeTree]:
    """Validate the fetched tree as strictly as local storage (the remote is not trusted):
    layout, metadata and limits, and the text of every blob we do not hold already."""
    local = _scope(store, ours, digest, limits)
    incoming = _scope(store, theirs, digest, limits)
    known = set(local.blobs.values())
    for path, blob in incoming.blobs.items():
        if blob not in known:
            read_blob_text(store, blob, incoming.entries[path].byte_length)
    return local, incoming


def _merge_trees(
    store: Store,
    digest: str,
    base: str | None,
    ours: str | None,
    theirs: str | None,
    remote: str,
    limits: MemoryLimits,
) -> tuple[str | None, MergeResult]:
    """Merge the fetched tree THEIRS into the local tree OURS: (merged tree or None, result)."""
    local, incoming = _check_incoming(store, digest, ours, theirs, limits)
    try:
        agreed = _scope(store, base, digest, None)
    except (StoreError, MissingObject):
        agreed = empty_scope_tree()  # without a base nothing counts as deleted: none is lost
    result = merge_scopes(_state(agreed), _state(local), _state(incoming), remote, limits)
    files = result.state.files
    if not files and (ours is None or theirs is None):
        return None, result  # dropped on one side, emptied on the other: stays dropped
    entries = {path: Entry(version.byte_length, version.written) for path, version in files.items()}
    blobs = {path: version.blob for path, version in files.items()}
    reuse = local if ours is not None else None
    return write_scope_tree(store, digest, entries, result.state.clock, blobs, reuse), result
