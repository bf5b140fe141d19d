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
import re
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from git_obversa.memory.engine import Entry
from git_obversa.memory.git_memory import (
    SCOPE_REF_PREFIX,
    ScopeTree,
    Store,
    empty_scope_tree,
    read_blob_text,
    read_scope_tree,
    scope_complete,
    write_scope_tree,
)
from git_obversa.memory.gitstore import open_store, past_stale_locks, update_refs
from git_obversa.memory.names import checked_name, display, names, resolve_scope
from git_obversa.memory.port import MemoryFailure, MemoryLimits
from git_obversa.memory.ref_names import NAME_REF_PREFIX
from git_obversa.memory.scopes import DROPPED_REF_PREFIX, shell_word, state_before
from git_obversa.memory.store_errors import MissingObject, StoreError, notify
from git_obversa.repo import git
from git_obversa.repo.locks import LOCK_FAILURE, STALE_LOCK_SECONDS
from git_obversa.sync.merge import FileVersion, MergeResult, ScopeState, merge_scopes

MEMORY_PREFIX = SCOPE_REF_PREFIX
DROPPED_PREFIX = DROPPED_REF_PREFIX
DIGEST = re.compile(r"[0-9a-f]{64}")  # a scope ref's last segment: sha256 of the scope name
DIGEST_OR_SHA1 = re.compile(rb"[0-9a-f]{40}|[0-9a-f]{64}")  # an object id, either hash
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
# `git config remote.<name>.obversaSync true`: set by `install --sync`, read by pre-push.
SYNC_MARKER = "obversaSync"


class SyncError(Exception):
    """Sync could not run or finish; the message says what to do."""


def tracking_prefix(remote: str, kind: str = "memory") -> str:
    """Where the remote's scopes (KIND "dropped": tombstones, "names": names) are
    fetched to: never over local memory."""
    return f"refs/obversa-remote/{remote}/{kind}/v1/"


def base_prefix(remote: str) -> str:
    """Where the last tree both sides agreed on is kept, per remote and scope."""
    return f"refs/obversa/sync/{remote}/"


def pending_prefix(remote: str) -> str:
    """Where a tree being pushed is noted until the push is recorded, per remote and scope."""
    return f"refs/obversa/sync-pending/{remote}/"


SHARED = {"memory": MEMORY_PREFIX, "dropped": DROPPED_PREFIX, "names": NAME_REF_PREFIX}


def fetch_refspecs(remote: str) -> list[str]:
    # `+` is safe here: the destination is our tracking namespace, never local memory.
    return [f"+{prefix}*:{tracking_prefix(remote, kind)}*" for kind, prefix in SHARED.items()]


def _transport_environment() -> dict[str, str]:
    env = git.isolated_environment()
    env.update({k: v for k, v in os.environ.items() if TRANSPORT_VARIABLES.fullmatch(k)})
    return env


def _git(repository: str, args: list[str], **kwargs) -> subprocess.CompletedProcess:
    return git.run(args, repository, isolated=True, check=False, **kwargs)


def _transport(repository: str, args: list[str]) -> subprocess.CompletedProcess:
    return git.run(args, repository, check=False, isolated=True, env=_transport_environment())


def resolve_remote(repository: str, remote: str | None) -> str:
    """REMOTE if it is a configured remote; without one, `origin` or the only remote."""
    listed = _git(repository, ["remote"])
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
    if _git(repository, ["check-ref-format", f"refs/obversa-remote/{remote}/x"]).returncode:
        raise SyncError(f"remote name '{remote}' cannot be part of a ref name; rename it")
    return remote


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    for line in lines:
        if line.startswith(("fatal: ", "error: ")):
            return line
    return lines[-1] if lines else "no output"


def _reach_hint(remote: str) -> str:
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
            lambda: _transport(
                repository,
                ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--prune",
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
            _git(repository, ["update-ref", "-d", "--end-of-options", broken.group(1)])
            notify(f"dropped {broken.group(1)}: it named an object that is gone")
            continue
        missing = MISSING_ON_REMOTE.search(completed.stderr)
        if missing is None and GC_RACE.search(completed.stderr):
            time.sleep(random.uniform(0.05, 0.2))  # a gc moved things under the fetch: again
            continue
        if missing is None:
            raise SyncError(
                f"git fetch {remote} failed: {_last_line(completed.stderr)}; {_reach_hint(remote)}"
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
        f"git fetch {remote} kept failing: {_last_line(completed.stderr)}; {_reach_hint(remote)}"
    )


def _unreadable(repository: str, remote: str, listed: Mapping[str, str]) -> dict[str, str]:
    """The refs of LISTED whose objects the remote cannot send, each fetched alone."""
    broken = {}
    for ref, value in listed.items():
        completed = _transport(
            repository,
            ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--no-auto-gc",
             "--end-of-options", remote, ref],
        )  # fmt: skip
        if completed.returncode != 0 and MISSING_ON_REMOTE.search(completed.stderr):
            broken[ref] = value
    return broken


def _list_remote(repository: str, remote: str) -> dict[str, str]:
    listed = _transport(
        repository, ["ls-remote", "--end-of-options", remote, *(p + "*" for p in SHARED.values())]
    )
    if listed.returncode != 0:
        raise SyncError(
            f"git ls-remote {remote} failed: {_last_line(listed.stderr)}; {_reach_hint(remote)}"
        )
    found = {}
    for line in listed.stdout.splitlines():
        value, _, ref = line.partition("\t")
        found[ref] = value
    return found


@dataclass
class Pushed:
    """What one `git push` did: refs accepted, refs refused because the remote moved
    (the lease), and refs the remote refused for another reason (ref -> git's reason)."""

    accepted: set[str] = field(default_factory=set)
    moved: set[str] = field(default_factory=set)
    refused: dict[str, str] = field(default_factory=dict)
    locked: dict[str, str] = field(default_factory=dict)  # refused ref -> lock file there


# How git on the remote (receive-pack) says a ref's lock file is in its way. Git waits
# core.filesRefLockTimeout (100 ms) for a live writer's; one a killed git left stays.
_REMOTE_LOCK = re.compile(r"cannot lock ref '([^']+)': " + LOCK_FAILURE)


def push_refs(
    repository: str,
    remote: str,
    updates: Mapping[str, tuple[str | None, str | None]],
    *,
    force: bool = False,
) -> Pushed:
    """Push REF -> (expected, new); with FORCE plain forced updates, otherwise a lease
    on each: `--force-with-lease=<ref>:<expected>` is the remote compare-and-swap (a tree
    is never a fast-forward, so the update must be forced), and it happens only if the
    remote ref still holds EXPECTED (None: absent). A None new value deletes the ref;
    `...` as expected pushes without force (a ref that must be new)."""
    args = ["push", "--porcelain", "--no-verify"]
    for ref, (expected, _) in updates.items():
        if not force and expected is not ...:
            args.append(f"--force-with-lease={ref}:{expected or ''}")
    args += ["--end-of-options", remote]
    args += [f"{'+' if force else ''}{new or ''}:{ref}" for ref, (_, new) in updates.items()]
    completed = _transport(repository, args)
    locks = dict(_REMOTE_LOCK.findall(completed.stderr))
    pushed = Pushed()
    for line in completed.stdout.splitlines():
        flag, _, rest = line.partition("\t")
        spec, _, summary = rest.partition("\t")
        ref = spec.rpartition(":")[2]
        if ref not in updates:
            continue
        if flag in (" ", "+", "-", "*", "="):
            pushed.accepted.add(ref)
        elif flag == "!":
            if "stale info" in summary or "fetch first" in summary:
                pushed.moved.add(ref)
            else:
                pushed.refused[ref] = summary.strip() or "rejected"
                if ref in locks:
                    pushed.locked[ref] = os.path.normpath(locks[ref])
    unreported = set(updates) - pushed.accepted - pushed.moved - set(pushed.refused)
    if unreported:
        raise SyncError(
            f"git push {remote} failed: {_last_line(completed.stderr)}; {_reach_hint(remote)}"
        )
    return pushed


def _lock_hint(remote: str, lock: str) -> str:
    return (
        f"{remote} could not update it: the ref is locked there by {lock} (a git process "
        "running in that repository, or the file a killed one left); sync again, and if it "
        "still fails while no git process runs there, remove that file"
    )


def _refusal_hint(remote: str, reason: str) -> str:
    return (
        f"{remote} refused the update {reason}; a host must accept forced updates of refs "
        "under refs/obversa/ that point at trees (docs/sync.md, 'What a Git host must "
        f"allow'); or sync through another remote: `git obversa memory sync <remote>`"
    )


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
    present = _git(repository, ["config", "--get-all", "--end-of-options", key]).stdout.split()
    for value in fetch_refspecs(remote):
        if value not in present:
            _git(repository, ["config", "--add", "--end-of-options", key, value])
            changed.setdefault(key, []).append(value)
    marker = f"remote.{remote}.{SYNC_MARKER}"
    if _git(repository, ["config", "--type=bool", "--get", marker]).stdout.strip() != "true":
        _git(repository, ["config", "--end-of-options", marker, "true"])
        changed.setdefault(marker, []).append("true")
    # Versions before this one pushed memory with a push refspec (and `HEAD` beside it
    # when the remote had none): take them out, so a plain push behaves as git's own.
    key = f"remote.{remote}.push"
    pushes = _git(repository, ["config", "--get-all", "--end-of-options", key]).stdout.split()
    ours = f"{MEMORY_PREFIX}*:{MEMORY_PREFIX}*"
    if ours in pushes:
        remaining = [value for value in pushes if value != ours]
        dropped = [ours] + (remaining if remaining == ["HEAD"] else [])
        _git(repository, ["config", "--unset-all", "--end-of-options", key])
        for value in pushes:
            if value not in dropped:
                _git(repository, ["config", "--add", "--end-of-options", key, value])
        changed["removed"] = [f"{key} {value}" for value in dropped]
    return changed


# ---------------------------------------------------------------------------------------
# reports


@dataclass
class ScopeReport:
    """What one sync did (or, in a dry run, would do) to one scope."""

    digest: str
    name: str | None = None
    received: str | None = None  # "pulled", "merged" or "deleted" (the remote dropped it)
    sent: str | None = None  # "pushed" or "deleted" (dropped here, now gone there too)
    missing_there: bool = False  # the remote lacked it (no tombstone): pushed back
    missing_here: bool = False  # this clone lacked it (no tombstone): pulled
    repaired_there: bool = False  # the remote's copy named an object it lost: replaced
    conflicts: list = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    merged_in: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)  # files this sync deleted here
    evicted: list[str] = field(default_factory=list)
    restore: str | None = None  # the command that undoes what this sync deleted here
    error: str | None = None  # the scope could not be synced; the others were

    @property
    def label(self) -> str:
        return display(self.digest, self.name)

    def as_json(self) -> dict:
        return {
            "digest": self.digest,
            "name": self.name,
            "received": self.received,
            "sent": self.sent,
            "missing_there": self.missing_there,
            "missing_here": self.missing_here,
            "repaired_there": self.repaired_there,
            "conflicts": [{"path": c.path, "copy": c.copy} for c in self.conflicts],
            "restored": self.restored,
            "merged_in": self.merged_in,
            "removed": self.removed,
            "evicted": self.evicted,
            "restore": self.restore,
            "error": self.error,
        }


@dataclass
class SyncReport:
    remote: str
    scopes: list[ScopeReport] = field(default_factory=list)
    rounds: int = 0  # fetch/merge/push rounds; more than one means the remote moved meanwhile
    dry_run: bool = False

    def as_json(self) -> dict:
        return {
            "remote": self.remote,
            "dry_run": self.dry_run,
            "rounds": self.rounds,
            "scopes": [scope.as_json() for scope in self.scopes],
        }


# ---------------------------------------------------------------------------------------
# what to do with one scope


@dataclass(frozen=True)
class Side:
    """One side's view of a scope: its tree, or (tree None) the tombstone's tree when it
    was dropped on purpose; both None when that side simply lacks the scope."""

    tree: str | None
    dropped: str | None = None

    @property
    def lacks(self) -> bool:
        return self.tree is None and self.dropped is None


def take_in(ours: Side, base: str | None, theirs: Side) -> str:
    """What a pull does to one scope: "none" (our change, if any, goes out with push),
    "agree" (both hold the same: record it), "take" (local moves to theirs), "drop" (apply
    the remote's drop here) or "merge" (three-way)."""
    if theirs.lacks:
        return "none"  # never a deletion: push sends ours (or our tombstone) back
    if ours.lacks:
        return "agree" if theirs.tree is None else "take"
    if theirs.tree is None and base is None:
        return "none"  # they dropped a state we never shared: ours goes back
    if theirs.tree == base:
        return "none"
    if ours.tree == theirs.tree:
        return "agree"
    if ours.tree == base:
        return "drop" if theirs.tree is None else "take"
    return "merge"


# ---------------------------------------------------------------------------------------
# pull, push, sync


def pull(
    repository: str,
    remote: str | None = None,
    *,
    limits: MemoryLimits | Mapping[str, Any] | None = None,
    dry_run: bool = False,
) -> SyncReport:
    """Fetch the remote's scopes and merge each into the local one."""
    return _exchange(repository, remote, None, True, False, limits, dry_run)


def push(
    repository: str,
    remote: str | None = None,
    *,
    scope: str | None = None,
    limits: MemoryLimits | Mapping[str, Any] | None = None,
    dry_run: bool = False,
) -> SyncReport:
    """Push local changes (of SCOPE: a name, digest or unique digest prefix; or every
    scope); a scope the remote changed meanwhile is fetched, merged and pushed again,
    never overwritten."""
    only = None
    if scope is not None:
        try:
            with open_store(os.fspath(repository)) as store:
                only = {resolve_scope(store, scope).digest}
        except MemoryFailure as error:
            raise SyncError(error.message) from None
    return _exchange(repository, remote, only, dry_run, True, limits, dry_run)


def sync(
    repository: str,
    remote: str | None = None,
    *,
    limits: MemoryLimits | Mapping[str, Any] | None = None,
    dry_run: bool = False,
) -> SyncReport:
    """pull, then push: afterwards both sides hold the same trees (unless one moved on).
    With DRY_RUN nothing local or remote changes (the remote's refs are fetched into the
    tracking namespace only); the report says what a sync would do."""
    return _exchange(repository, remote, None, True, True, limits, dry_run)


@dataclass
class _View:
    """The refs one round works from, digest -> value, read at one moment."""

    local: dict[str, str]
    dropped_here: dict[str, str]
    names_here: dict[str, str]
    bases: dict[str, str]
    pending: dict[str, str]
    fetched: dict[str, str] | None  # None: not fetched in this exchange
    dropped_there: dict[str, str]
    names_there: dict[str, str]
    damaged: dict[str, str]  # remote scopes naming objects the remote lost

    def ours(self, digest: str) -> Side:
        return Side(self.local.get(digest), self.dropped_here.get(digest))

    def theirs(self, digest: str) -> Side | None:
        if self.fetched is None:
            return None
        if digest in self.damaged:
            return Side(None)  # unreadable there: as if it lacked it
        return Side(self.fetched.get(digest), self.dropped_there.get(digest))


def _read_view(store: Store, remote: str, fetched: bool, damaged: dict[str, str]) -> _View:
    return _View(
        local=_refs(store, MEMORY_PREFIX),
        dropped_here=_refs(store, DROPPED_PREFIX),
        names_here=_refs(store, NAME_REF_PREFIX),
        bases=_refs(store, base_prefix(remote)),
        pending=_refs(store, pending_prefix(remote)),
        fetched=_refs(store, tracking_prefix(remote)) if fetched else None,
        dropped_there=_refs(store, tracking_prefix(remote, "dropped")) if fetched else {},
        names_there=_refs(store, tracking_prefix(remote, "names")) if fetched else {},
        damaged={ref.rpartition("/")[2]: value for ref, value in damaged.items()
                 if ref.startswith(MEMORY_PREFIX)},
    )  # fmt: skip


def _refs(store: Store, prefix: str) -> dict[str, str]:
    """digest -> value of the refs under PREFIX. Other names are left alone: they are no
    scope (a remote may push anything), or they belong to another remote whose name
    extends this one's (`origin/x` under `origin`)."""
    found = {ref[len(prefix) :]: value for ref, value in store.list_refs(prefix).items()}
    return {digest: value for digest, value in found.items() if DIGEST.fullmatch(digest)}


def _exchange(
    repository: str,
    remote: str | None,
    only: set[str] | None,
    pull_first: bool,
    push: bool,
    limits: MemoryLimits | Mapping[str, Any] | None,
    dry_run: bool,
) -> SyncReport:
    repository = os.fspath(repository)
    remote = resolve_remote(repository, remote)
    limits = MemoryLimits.resolve(limits)
    report = SyncReport(remote, dry_run=dry_run)
    reports: dict[str, ScopeReport] = {}
    try:
        store = open_store(repository)
    except StoreError as error:
        raise SyncError(f"{error.message}; run this inside a Git repository") from None
    with store:
        merge_only = only
        need_pull = pull_first
        fetched = False
        damaged: dict[str, str] = {}
        for attempt in range(MAX_ATTEMPTS):
            report.rounds = attempt + 1
            if need_pull:
                damaged = fetch(repository, remote)
                fetched = True
                _take_in_all(
                    store, repository, remote, merge_only, limits, reports, damaged, dry_run
                )
            if not push:
                break
            view = _read_view(store, remote, fetched, damaged)
            moved = _push_changes(store, repository, remote, only, view, reports, dry_run)
            if not moved:
                break
            # Someone pushed in between: take their change in and try again.
            merge_only = moved if only is not None or not pull_first else only
            need_pull = True
            time.sleep(random.uniform(0, 0.02 * (attempt + 1)))
        else:
            raise SyncError(
                f"{remote} kept changing during {MAX_ATTEMPTS} rounds; run the sync again"
            )
        known = names(store)
    for digest, scope in reports.items():
        scope.name = known.get(digest)
    report.scopes = [reports[digest] for digest in sorted(reports)]
    return report


UNSAFE_SHAPES = (MemoryFailure, ValueError, RecursionError, OverflowError, UnicodeError)


def _problem(error: BaseException) -> str:
    """One line for a scope that cannot be synced, naming the storage code."""
    if isinstance(error, MissingObject):
        return f"UNSAFE_STORAGE: a Git object is missing ({error.oid[:12]}): {error.message}"
    if isinstance(error, MemoryFailure):
        return f"{error.code}: {error.message}"
    return f"UNSAFE_STORAGE: the scope's stored data cannot be read ({type(error).__name__})"


def _take_in_all(
    store: Store,
    repository: str,
    remote: str,
    only: set[str] | None,
    limits: MemoryLimits,
    reports: dict[str, ScopeReport],
    damaged: dict[str, str],
    dry_run: bool,
) -> None:
    """Bring every fetched scope into the local one; record the new bases, names and
    tombstones. Everything moves in one transaction that checks each local ref still
    holds what was read: a local write that lands meanwhile makes us merge again."""
    zero = "0" * store.hex_length
    for _ in range(MAX_ATTEMPTS):
        view = _read_view(store, remote, True, damaged)
        updates: dict[str, tuple] = {}
        found: dict[str, ScopeReport] = {}
        for digest, blob in view.names_there.items():
            if digest not in view.names_here and checked_name(store, digest, blob) is not None:
                updates[NAME_REF_PREFIX + digest] = (None, blob)
        digests = set(view.local) | set(view.fetched or ()) | set(view.bases)
        digests |= set(view.dropped_there) | set(view.pending) | set(view.damaged)
        for digest in sorted(digests):
            if only is not None and digest not in only:
                continue
            ours, theirs = view.ours(digest), view.theirs(digest)
            base = view.bases.get(digest)
            pending = view.pending.get(digest)
            pushing = _pending_trees(store, pending)
            if theirs.tree is not None and theirs.tree in pushing:
                # A push of ours whose record was lost (a kill): the remote holds that
                # tree, so it is what both sides agreed on. Pushes noted after it may
                # still land (a killed sync's git can outlive it): they stay noted.
                base = theirs.tree
                if not dry_run:
                    newer = pushing[: pushing.index(theirs.tree)]
                    updates[pending_prefix(remote) + digest] = (
                        pending,
                        _pending_chain(store, newer),
                    )
            try:
                found_report = _take_in_one(
                    store, remote, digest, ours, base, theirs, limits, updates, dry_run
                )
            except UNSAFE_SHAPES as error:
                found[digest] = ScopeReport(digest, error=_problem(error))
                continue
            if found_report is not None:
                found[digest] = found_report
            if base != view.bases.get(digest) and base_prefix(remote) + digest not in updates:
                updates[base_prefix(remote) + digest] = (..., base)
        applied = dry_run or not updates
        if not applied:
            written = store.take_pending()  # the merged trees' objects, written above
            applied = update_refs(repository, updates, zero, action=f"sync {remote}")
            if applied:
                _write_again(store, written)
        if applied:
            named = names(store) if any(scope.removed for scope in found.values()) else {}
            for digest, scope in found.items():
                if scope.removed and not dry_run:
                    scope.restore = _restore_command(store, digest, named.get(digest))
                _fold(reports.setdefault(digest, ScopeReport(digest)), scope)
            return
    raise SyncError("local memory kept changing while merging; run the sync again")


def _write_again(store: Store, written: Mapping[str, tuple[str, bytes]]) -> None:
    """Objects written before the refs that name them moved: a concurrent `git gc
    --prune=now` may have taken them in between; now that refs protect them, put back
    any that are gone (an object still there is only freshened)."""
    for kind, data in written.values():
        store.write_object(kind, data)
    store.take_pending()


MAX_PENDING = 16  # pushes noted per scope and remote (each killed sync may leave one)


def _pending_trees(store: Store, noted: str | None) -> list[str]:
    """The trees noted as being pushed, newest first. The pending ref names a chain of
    commits, one per tree (a plain tree: noted by an earlier version); a chain that
    cannot be read counts as empty (what it guarded against is rare, never a loss)."""
    trees: list[str] = []
    commit = noted
    while commit is not None and len(trees) < MAX_PENDING:
        try:
            kind, raw = store.read_object(commit, 4096)
        except (StoreError, MissingObject):
            break
        if kind == "tree" and commit == noted:
            return [noted]
        if kind != "commit" or len(raw) > 4096:
            break
        fields = dict(line.partition(b" ")[::2] for line in raw.split(b"\n\n")[0].split(b"\n"))
        tree, parent = fields.get(b"tree", b""), fields.get(b"parent")
        if not DIGEST_OR_SHA1.fullmatch(tree):
            break
        trees.append(tree.decode("ascii"))
        commit = parent.decode("ascii") if parent and DIGEST_OR_SHA1.fullmatch(parent) else None
    return trees


def _pending_chain(store: Store, trees: list[str]) -> str | None:
    """Write TREES (newest first, the first MAX_PENDING of them) as a pending chain."""
    head = None
    stamp = b"git-obversa <obversa@localhost> 0 +0000"
    for tree in reversed(list(dict.fromkeys(trees))[:MAX_PENDING]):
        lines = [b"tree " + tree.encode("ascii")]
        if head is not None:
            lines.append(b"parent " + head.encode("ascii"))
        lines += [b"author " + stamp, b"committer " + stamp]
        head = store.write_object("commit", b"\n".join(lines) + b"\n\npushing\n")
    return head


def _take_in_one(
    store: Store,
    remote: str,
    digest: str,
    ours: Side,
    base: str | None,
    theirs: Side,
    limits: MemoryLimits,
    updates: dict[str, tuple],
    dry_run: bool,
) -> ScopeReport | None:
    """Plan one scope's pull into UPDATES (ref -> (expected, new)); what it did."""
    local_ref, base_ref = MEMORY_PREFIX + digest, base_prefix(remote) + digest
    action = take_in(ours, base, theirs)
    if action == "none":
        return None
    if action == "agree":
        updates[base_ref] = (..., theirs.tree)
        return None
    if action == "take":
        local, incoming = _check_incoming(store, digest, ours.tree, theirs.tree, limits)
        updates[local_ref] = (ours.tree, theirs.tree)
        updates[base_ref] = (..., theirs.tree)
        removed = sorted(set(local.entries) - set(incoming.entries))
        return ScopeReport(digest, received="pulled", missing_here=ours.lacks, removed=removed)
    if action == "drop":
        removed = sorted(_scope(store, ours.tree, digest, None).entries)
        updates[local_ref] = (ours.tree, None)
        updates[DROPPED_PREFIX + digest] = (..., ours.tree)
        updates[base_ref] = (..., None)
        return ScopeReport(digest, received="deleted", removed=removed)
    merged, result, local = _merge_trees(
        store, digest, base, ours.tree, theirs.tree, remote, limits, dry_run
    )
    if merged != ours.tree:
        updates[local_ref] = (ours.tree, merged)
        if merged is None:
            updates[DROPPED_PREFIX + digest] = (..., ours.tree)
    updates[base_ref] = (..., theirs.tree)
    if merged is None and ours.tree is None:
        return None  # dropped here; there only deletions since: it stays dropped
    return ScopeReport(
        digest,
        received="deleted" if merged is None else "merged",
        conflicts=result.conflicts,
        restored=result.restored,
        merged_in=result.merged_in,
        removed=sorted(set(local.entries) - set(result.state.files)),
        evicted=result.evicted,
    )


def _restore_command(store: Store, digest: str, name: str | None) -> str | None:
    """`git obversa memory restore ...` bringing back the state this sync replaced."""
    state = state_before(store, digest)
    if state is None:
        return None
    scope = name if name is not None and not name.startswith("-") else digest[:12]
    return f"git obversa memory restore --scope {shell_word(scope)} {state[:12]}"


def _fold(into: ScopeReport, found: ScopeReport) -> None:
    into.received = found.received or into.received
    into.error = found.error
    into.missing_here = into.missing_here or found.missing_here
    into.restore = found.restore or into.restore
    into.conflicts += found.conflicts
    into.restored += found.restored
    into.merged_in += found.merged_in
    into.removed += found.removed
    into.evicted += found.evicted


@dataclass
class _Outgoing:
    """What one push sends, ref -> (expected, new) as `push_refs` takes it."""

    tombstones: dict[str, tuple] = field(default_factory=dict)  # forced, sent first
    # Damaged remote refs -> (the value they name, the same tree sent again whole).
    repairs: dict[str, tuple[str, str]] = field(default_factory=dict)
    scopes: dict[str, tuple] = field(default_factory=dict)  # leased
    cleanups: dict[str, tuple] = field(default_factory=dict)  # stale remote tombstones
    agreed_absent: set[str] = field(default_factory=set)  # digests: nothing to send


def _plan_push(
    store: Store,
    remote: str,
    only: set[str] | None,
    view: _View,
    reports: dict[str, ScopeReport],
) -> _Outgoing:
    out = _Outgoing()
    digests = set(view.local) | set(view.dropped_here) | set(view.bases) | set(view.damaged)
    for digest in sorted(digests):
        if only is not None and digest not in only:
            continue
        if digest in reports and reports[digest].error is not None:
            continue  # could not be merged: pushing it would only be refused again
        ours, theirs, base = view.ours(digest), view.theirs(digest), view.bases.get(digest)
        lacks_there = theirs is not None and theirs.lacks
        if theirs is None:
            lease = base  # not fetched: the agreed tree is what the remote must still hold
        else:
            lease = None if lacks_there else base
        scope_ref, tombstone_ref = MEMORY_PREFIX + digest, DROPPED_PREFIX + digest
        if ours.tree is not None:
            if ours.tree == lease:
                if theirs is not None and theirs.dropped is not None and theirs.tree == ours.tree:
                    out.cleanups[tombstone_ref] = (theirs.dropped, None)
                continue
            if theirs is not None and theirs.tree is None and lease is not None:
                continue  # dropped there after we shared it: the pull decides, not push
            try:
                _scope(store, ours.tree, digest, None)
            except UNSAFE_SHAPES as error:
                reports.setdefault(digest, ScopeReport(digest)).error = _problem(error)
                continue
            if digest in view.damaged:
                broken = view.damaged[digest]
                if not scope_complete(store, broken, digest):
                    _report_damaged(reports, remote, digest)
                    continue
                # Sent again whole (the broken ref deleted first, under its lease, so git
                # sends every object); the next round merges it as any remote change.
                out.repairs[scope_ref] = (broken, broken)
                continue
            out.scopes[scope_ref] = (lease, ours.tree)
        elif digest in view.damaged:
            _report_damaged(reports, remote, digest)
        elif ours.dropped is not None and base is not None:
            # Dropped here since we shared it: the tombstone goes first, then the delete.
            if theirs is None or theirs.dropped != ours.dropped:
                out.tombstones[tombstone_ref] = (..., ours.dropped)
            if lacks_there:
                out.agreed_absent.add(digest)
            else:
                out.scopes[scope_ref] = (lease, None)
        # A scope this clone lacks without a tombstone is never deleted there.
    return out


def _report_damaged(reports: dict[str, ScopeReport], remote: str, digest: str) -> None:
    # Replacing the copy with this clone's scope would lose what it holds beyond ours:
    # the clone that pushed it has it whole and repairs it.
    reports.setdefault(digest, ScopeReport(digest)).error = (
        f"{remote}'s copy names objects {remote} no longer has (a `git gc --prune=now` "
        "there during a push?); the clone that pushed it repairs it when it next syncs a "
        f"change; if none can, delete it there (`git push {remote} :{MEMORY_PREFIX + digest}`)"
        " and sync"
    )


def _push_changes(
    store: Store,
    repository: str,
    remote: str,
    only: set[str] | None,
    view: _View,
    reports: dict[str, ScopeReport],
    dry_run: bool,
) -> set[str]:
    """Push tombstones, then every scope that changed since the last agreement; the
    digests the remote moved meanwhile (to merge and push again).

    A local scope is validated before it goes out: one that cannot be read here (a
    symbolic ref, a broken tree) is reported and stays, the others are pushed.
    """
    out = _plan_push(store, remote, only, view, reports)
    if dry_run:
        for ref, (_, new) in out.scopes.items():
            _note_sent(reports, ref[len(MEMORY_PREFIX) :], new, view)
        for digest in out.agreed_absent:
            _note_sent(reports, digest, None, view)
        return set()
    moved: set[str] = set()
    recorded: dict[str, tuple] = {}
    if out.tombstones:
        pushed = push_refs(repository, remote, out.tombstones, force=True)
        _refused(reports, remote, pushed, DROPPED_PREFIX)
        for ref in out.tombstones:
            digest = ref[len(DROPPED_PREFIX) :]
            if ref in pushed.accepted:
                recorded[tracking_prefix(remote, "dropped") + digest] = out.tombstones[ref]
            else:  # no delete without the tombstone that explains it
                out.scopes.pop(MEMORY_PREFIX + digest, None)
                out.agreed_absent.discard(digest)
    if out.repairs:
        again = _replace_broken(repository, remote, out.repairs)
        _refused(reports, remote, again, MEMORY_PREFIX)
        for ref, (_, tree) in out.repairs.items():
            digest = ref[len(MEMORY_PREFIX) :]
            if ref in again.accepted:
                reports.setdefault(digest, ScopeReport(digest)).repaired_there = True
                recorded[tracking_prefix(remote) + digest] = (..., tree)
            moved.add(digest)  # the next round merges what the remote now holds
    for digest in out.agreed_absent:
        recorded[base_prefix(remote) + digest] = (..., None)
        _note_sent(reports, digest, None, view)
    names_out = _names_out(view, out)
    outgoing = {**out.scopes, **out.cleanups, **names_out}
    if outgoing:
        pending = {}
        for ref, (_, new) in out.scopes.items():
            if new is not None:
                digest = ref[len(MEMORY_PREFIX) :]
                noted = view.pending.get(digest)
                chain = _pending_chain(store, [new, *_pending_trees(store, noted)])
                pending[pending_prefix(remote) + digest] = (noted, chain)
        # Noted before the push: if we are killed after it, the next sync recognises
        # the remote's tree as ours and takes it as agreed.
        written = store.take_pending()  # the chains' commits
        if pending and not update_refs(repository, pending, "0" * store.hex_length):
            raise SyncError("could not note what is being pushed; run the sync again")
        _write_again(store, written)
        pushed = push_refs(repository, remote, outgoing)
        _repair_incomplete(repository, remote, out.scopes, pushed, reports)
        _refused(reports, remote, pushed, MEMORY_PREFIX)
        for ref, (_, new) in out.scopes.items():
            digest = ref[len(MEMORY_PREFIX) :]
            if ref in pushed.moved:
                moved.add(digest)
            if ref in pushed.accepted:
                # The remote moved to NEW: no push noted before can land now (each one's
                # lease names an older value), so the whole chain goes.
                recorded[pending_prefix(remote) + digest] = (..., None)
                recorded[base_prefix(remote) + digest] = (..., new)
                recorded[tracking_prefix(remote) + digest] = (..., new)
                _note_sent(reports, digest, new, view)
        for ref, (_, new) in {**out.cleanups, **names_out}.items():
            kind = "dropped" if ref.startswith(DROPPED_PREFIX) else "names"
            if ref in pushed.accepted:
                recorded[tracking_prefix(remote, kind) + ref.rpartition("/")[2]] = (..., new)
    if recorded and not update_refs(repository, recorded, "0" * store.hex_length):
        raise SyncError("could not record what was pushed; run the sync again")
    return moved


def _repair_incomplete(
    repository: str,
    remote: str,
    scopes: Mapping[str, tuple],
    pushed: Pushed,
    reports: dict[str, ScopeReport],
) -> None:
    """Push again the scopes the remote refused for "missing necessary objects".

    Git sends only what the refs the remote advertises do not reach; a remote whose ref
    names objects it lost (`git gc --prune=now` during an earlier push) therefore refuses
    every later push of that scope, even though a fetch of it still succeeds (this clone
    holds those objects). The broken ref is deleted under its lease (the value this
    clone merged), so git sends every object of ours again, in one more push.
    """
    broken = {
        ref: scopes[ref]
        for ref, reason in pushed.refused.items()
        if ref in scopes and scopes[ref][0] is not None and "missing necessary" in reason
    }
    if not broken:
        return
    again = _replace_broken(repository, remote, broken)
    for ref in broken:
        del pushed.refused[ref]
        if ref in again.accepted:
            pushed.accepted.add(ref)
            digest = ref[len(MEMORY_PREFIX) :]
            reports.setdefault(digest, ScopeReport(digest)).repaired_there = True
        elif ref in again.refused:
            pushed.refused[ref] = again.refused[ref]
            if ref in again.locked:
                pushed.locked[ref] = again.locked[ref]
        else:  # it moved (the delete's or the push's lease): merge and push again
            pushed.moved.add(ref)


def _replace_broken(
    repository: str, remote: str, replacements: Mapping[str, tuple[str, str]]
) -> Pushed:
    """Replace remote refs that name objects the remote lost: REF -> (the value it names,
    the tree to push). Git sends only what the refs the remote advertises do not reach,
    so each ref is deleted first (under a lease on that value), then pushed as a new ref.
    The result of that second push (a ref whose delete failed is in none of its sets)."""
    deletes = {ref: (broken, None) for ref, (broken, _) in replacements.items()}
    deleted = push_refs(repository, remote, deletes)
    pushes = {ref: (None, new) for ref, (_, new) in replacements.items() if ref in deleted.accepted}
    return push_refs(repository, remote, pushes) if pushes else Pushed()


def _names_out(view: _View, out: _Outgoing) -> dict[str, tuple]:
    """The names of scopes the remote holds (or is about to) that it has no name for."""
    if view.fetched is None:
        return {}  # not fetched: we do not know which names it lacks
    alive = {digest for digest in view.fetched if digest not in view.damaged}
    alive |= {ref[len(MEMORY_PREFIX) :] for ref, (_, new) in out.scopes.items() if new}
    return {
        NAME_REF_PREFIX + digest: (..., view.names_here[digest])
        for digest in sorted(alive)
        if digest in view.names_here and digest not in view.names_there
    }


def _note_sent(reports: dict[str, ScopeReport], digest: str, new: str | None, view: _View) -> None:
    scope = reports.setdefault(digest, ScopeReport(digest))
    scope.sent = "pushed" if new else "deleted"
    theirs = view.theirs(digest)
    if new and theirs is not None and theirs.lacks and digest not in view.damaged:
        scope.missing_there = True


def _refused(reports: dict[str, ScopeReport], remote: str, pushed: Pushed, prefix: str) -> None:
    for ref, reason in pushed.refused.items():
        if not ref.startswith(prefix):
            continue  # a name the remote would not take is no scope's failure
        digest = ref[len(prefix) :]
        lock = pushed.locked.get(ref)
        error = _lock_hint(remote, lock) if lock else _refusal_hint(remote, reason)
        reports.setdefault(digest, ScopeReport(digest)).error = error


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
    dry_run: bool = False,
) -> tuple[str | None, MergeResult, ScopeTree]:
    """Merge the fetched tree THEIRS into the local tree OURS: (merged tree or None, the
    result, the local scope). In a dry run nothing is written and a merged scope is
    returned as OURS."""
    local, incoming = _check_incoming(store, digest, ours, theirs, limits)
    try:
        agreed = _scope(store, base, digest, None)
    except UNSAFE_SHAPES:
        agreed = empty_scope_tree()  # without a base nothing counts as deleted: none is lost
    result = merge_scopes(_state(agreed), _state(local), _state(incoming), remote, limits)
    files = result.state.files
    if not files and (ours is None or theirs is None):
        return None, result, local  # dropped on one side, emptied on the other: stays dropped
    if dry_run:
        return ours, result, local
    entries = {path: Entry(version.byte_length, version.written) for path, version in files.items()}
    blobs = {path: version.blob for path, version in files.items()}
    reuse = local if ours is not None else None
    merged = write_scope_tree(store, digest, entries, result.state.clock, blobs, reuse)
    return merged, result, local
