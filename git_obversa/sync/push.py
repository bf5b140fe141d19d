"""Push: tombstones first, then every scope changed since the last agreement, each
under a lease (the remote compare-and-swap); what the remote did with each ref."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from git_obversa.memory.git_memory import Store, scope_complete
from git_obversa.memory.gitstore import update_refs
from git_obversa.memory.ref_names import NAME_REF_PREFIX
from git_obversa.repo.locks import LOCK_FAILURE
from git_obversa.sync.fetch import SyncError, last_line, reach_hint, run_transport
from git_obversa.sync.reports import UNSAFE_SHAPES, ScopeReport, note_sent, problem
from git_obversa.sync.tracking import (
    DROPPED_PREFIX,
    MEMORY_PREFIX,
    Exchange,
    View,
    base_prefix,
    pending_chain,
    pending_prefix,
    pending_trees,
    read_scope,
    tracking_prefix,
)


@dataclass
class Pushed:
    """What one `git push` did to each ref: accepted; moved (the remote ref no longer
    held the expected value: the lease failed, or another push got there first); busy
    (another process held the ref's lock there; ref -> that lock file); or refused for
    another reason (ref -> git's reason), with what the remote said about it."""

    accepted: set[str] = field(default_factory=set)
    moved: set[str] = field(default_factory=set)
    busy: dict[str, str] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    causes: dict[str, str] = field(default_factory=dict)  # refused ref -> git's detail
    said: str = ""  # the remote's own words (a hook's message), if any


# How receive-pack says why it could not update a ref (on stderr, after "remote: "
# when it comes through a server). A ref that moved after the remote advertised it
# (another clone's push won) and a lock another push holds are contention; git waits
# core.filesRefLockTimeout (100 ms) for a lock, then gives up on that ref.
REF_FAILURE = re.compile(r"cannot lock ref '([^']+)': ([^\n]*)")
MOVED_THERE = re.compile(
    r"is at [0-9a-f]+ but expected|reference already exists|reference is missing"
    r"|unable to resolve reference"
)
LOCKED_THERE = re.compile(LOCK_FAILURE)
# How long a remote ref's lock is waited for before it is reported as left behind.
LOCK_PATIENCE_SECONDS = 3.0
# receive-pack's own lines, never what a hook or host printed.
GIT_NOISE = re.compile(
    r"error: |fatal: |Another git process|an editor opened|are terminated|may have crashed"
    r"|remove the file|To |Done$"
)


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
    completed = run_transport(repository, args)
    causes = {ref: cause.strip() for ref, cause in REF_FAILURE.findall(completed.stderr)}
    pushed = Pushed(said=_remote_words(completed.stderr))
    for line in completed.stdout.splitlines():
        flag, _, rest = line.partition("\t")
        spec, _, summary = rest.partition("\t")
        ref = spec.rpartition(":")[2]
        if ref not in updates:
            continue
        cause = causes.get(ref, "")
        if flag in (" ", "+", "-", "*", "="):
            pushed.accepted.add(ref)
        elif flag != "!":
            continue
        elif "stale info" in summary or "fetch first" in summary or MOVED_THERE.search(cause):
            pushed.moved.add(ref)
        elif (lock := LOCKED_THERE.search(cause)) is not None:
            pushed.busy[ref] = os.path.normpath(lock.group(1))
        else:
            pushed.refused[ref] = summary.strip() or "rejected"
            pushed.causes[ref] = cause
    unreported = set(updates) - pushed.accepted - pushed.moved - set(pushed.busy)
    if unreported - set(pushed.refused):
        raise SyncError(
            f"git push {remote} failed: {last_line(completed.stderr)}; {reach_hint(remote)}"
        )
    return pushed


def _remote_words(stderr: str) -> str:
    """What the remote itself printed (a hook's or host's message), up to three lines."""
    said = []
    for line in stderr.splitlines():
        text = line.removeprefix("remote:").strip()
        if line.startswith("remote:") and text and not GIT_NOISE.match(text):
            said.append(text)
    return " / ".join(said[:3])


def _lock_hint(remote: str, lock: str) -> str:
    return (
        f"{remote} could not update it: the ref is locked there by {lock} (a git process "
        "running in that repository, or the file a killed one left); sync again, and if it "
        "still fails while no git process runs there, remove that file"
    )


HOST_RULES = (
    "a host must accept forced updates of refs under refs/obversa/ that point at trees "
    "(docs/sync.md, 'What a Git host must allow'); or sync through another remote: "
    "`git obversa memory sync <remote>`"
)


def refusal_message(remote: str, reason: str, cause: str = "", said: str = "") -> str:
    """One line for a ref the remote refused, naming the cause: the host's rules only
    where a rule of the host (a hook, a setting) refused it."""
    says = f" ({remote} says: {said})" if said else ""
    declined = re.search(r"\((\S+) hook declined\)|\(hook declined\)", reason)
    if declined is not None:
        hook = f"its {declined.group(1)} hook" if declined.group(1) else "a hook there"
        return f"{remote} refused the update: {hook} declined it{says}; {HOST_RULES}"
    if "non-fast-forward" in reason:
        return (
            f"{remote} refuses forced updates (receive.denyNonFastForwards on these refs, "
            f"or a rule of the host){says}; {HOST_RULES}"
        )
    if "deletion prohibited" in reason:
        return (
            f"{remote} refuses to delete refs (receive.denyDeletes on these refs, or a "
            f"rule of the host){says}; {HOST_RULES}"
        )
    if "failed to update ref" in reason or "unpack" in reason or "failed to write" in reason:
        detail = cause or reason.strip()
        return (
            f"{remote} could not store the update ({detail}){says}; check that its disk "
            "has room and its repository is writable, then sync again"
        )
    return f"{remote} refused the update {reason}{says}; {HOST_RULES}"


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
    view: View,
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
                read_scope(store, ours.tree, digest, None)
            except UNSAFE_SHAPES as error:
                reports.setdefault(digest, ScopeReport(digest)).error = problem(error)
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


# Refs per `git push`: a sync of thousands of scopes sends them in several pushes of
# bounded size (a command line well under the system's limit, one receive-pack run
# each), and records each batch before the next starts, so a kill loses little.
PUSH_BATCH = 250


def push_changes(exchange: Exchange, only: set[str] | None, view: View) -> set[str]:
    """Push tombstones, then every scope that changed since the last agreement; the
    digests to fetch, merge and push again: the remote moved meanwhile, or another push
    held the ref there (exchange.waiting: how long each such ref is waited for).

    A local scope is validated before it goes out: one that cannot be read here (a
    symbolic ref, a broken tree) is reported and stays, the others are pushed.
    """
    reports = exchange.reports
    out = _plan_push(exchange.store, exchange.remote, only, view, reports)
    if exchange.dry_run:
        for ref, (_, new) in out.scopes.items():
            note_sent(reports, ref[len(MEMORY_PREFIX) :], new, view)
        for digest in out.agreed_absent:
            note_sent(reports, digest, None, view)
        return set()
    recorded: dict[str, tuple] = {}
    again = _send_tombstones(exchange, out, recorded) if out.tombstones else set()
    if out.repairs:
        again |= _send_repairs(exchange, out.repairs, recorded)
    for digest in out.agreed_absent:
        recorded[base_prefix(exchange.remote) + digest] = (..., None)
        note_sent(reports, digest, None, view)
    outgoing = sorted({**out.scopes, **out.cleanups, **_names_out(view, out)}.items())
    for start in range(0, len(outgoing), PUSH_BATCH):
        batch = dict(outgoing[start : start + PUSH_BATCH])
        again |= _send_batch(exchange, batch, view, recorded)
        _record(exchange, recorded, "could not record what was pushed")
        exchange.tell("Pushing scopes", min(start + PUSH_BATCH, len(outgoing)), len(outgoing))
    _record(exchange, recorded, "could not record what was pushed")
    return again


def _record(
    exchange: Exchange,
    updates: dict[str, tuple],
    failure: str,
    written: Mapping[str, tuple[str, bytes]] | None = None,
) -> None:
    """Move sync's own refs (UPDATES, emptied after) in one transaction; WRITTEN: the
    objects written for them."""
    zero = "0" * exchange.store.hex_length
    if updates and not update_refs(exchange.repository, updates, zero, written=written):
        raise SyncError(f"{failure}; run the sync again")
    updates.clear()


def _send_tombstones(exchange: Exchange, out: _Outgoing, recorded: dict) -> set[str]:
    """Send the tombstones (forced: one only says "dropped on purpose"); a scope whose
    tombstone did not arrive is not deleted there."""
    remote, reports = exchange.remote, exchange.reports
    pushed = push_refs(exchange.repository, remote, out.tombstones, force=True)
    _refused(reports, remote, pushed, DROPPED_PREFIX)
    again = _busy(reports, remote, pushed, DROPPED_PREFIX, exchange.waiting)
    for ref in out.tombstones:
        digest = ref[len(DROPPED_PREFIX) :]
        if ref in pushed.accepted:
            recorded[tracking_prefix(remote, "dropped") + digest] = out.tombstones[ref]
        else:  # no delete without the tombstone that explains it
            out.scopes.pop(MEMORY_PREFIX + digest, None)
            out.agreed_absent.discard(digest)
    return again


def _send_repairs(
    exchange: Exchange, repairs: Mapping[str, tuple[str, str]], recorded: dict
) -> set[str]:
    """Send damaged remote scopes again whole; the next round merges what they hold."""
    remote, reports = exchange.remote, exchange.reports
    pushed = _replace_broken(exchange.repository, remote, repairs)
    _refused(reports, remote, pushed, MEMORY_PREFIX)
    _busy(reports, remote, pushed, MEMORY_PREFIX, exchange.waiting)
    for ref, (_, tree) in repairs.items():
        digest = ref[len(MEMORY_PREFIX) :]
        if ref in pushed.accepted:
            reports.setdefault(digest, ScopeReport(digest)).repaired_there = True
            recorded[tracking_prefix(remote) + digest] = (..., tree)
    return {ref[len(MEMORY_PREFIX) :] for ref in repairs}


def _send_batch(
    exchange: Exchange, batch: dict[str, tuple], view: View, recorded: dict
) -> set[str]:
    """Push one batch of scopes (each under its lease), tombstone cleanups and names;
    note what is being pushed first, put what was accepted in RECORDED."""
    store, remote, reports = exchange.store, exchange.remote, exchange.reports
    scopes = {ref: value for ref, value in batch.items() if ref.startswith(MEMORY_PREFIX)}
    pending = {}
    for ref, (_, new) in scopes.items():
        if new is not None:
            digest = ref[len(MEMORY_PREFIX) :]
            noted = view.pending.get(digest)
            chain = pending_chain(store, [new, *pending_trees(store, noted)])
            pending[pending_prefix(remote) + digest] = (noted, chain)
    # Noted before the push: if we are killed after it, the next sync recognises the
    # remote's tree as ours and takes it as agreed.
    written = store.take_pending()  # the chains' commits
    _record(exchange, pending, "could not note what is being pushed", written)
    pushed = push_refs(exchange.repository, remote, batch)
    _repair_incomplete(exchange.repository, remote, scopes, pushed, reports)
    _refused(reports, remote, pushed, MEMORY_PREFIX)
    again = _busy(reports, remote, pushed, MEMORY_PREFIX, exchange.waiting)
    for ref, (_, new) in batch.items():
        digest = ref.rpartition("/")[2]
        if ref in pushed.moved and ref in scopes:
            again.add(digest)
        if ref not in pushed.accepted:
            continue
        if ref in scopes:
            # The remote moved to NEW: no push noted before can land now (each one's
            # lease names an older value), so the whole chain goes.
            recorded[pending_prefix(remote) + digest] = (..., None)
            recorded[base_prefix(remote) + digest] = (..., new)
            recorded[tracking_prefix(remote) + digest] = (..., new)
            note_sent(reports, digest, new, view)
        else:
            kind = "dropped" if ref.startswith(DROPPED_PREFIX) else "names"
            recorded[tracking_prefix(remote, kind) + digest] = (..., new)
    return again


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
            pushed.causes[ref] = again.causes.get(ref, "")
        elif ref in again.busy:
            pushed.busy[ref] = again.busy[ref]
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


def _names_out(view: View, out: _Outgoing) -> dict[str, tuple]:
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


def _refused(reports: dict[str, ScopeReport], remote: str, pushed: Pushed, prefix: str) -> None:
    for ref, reason in pushed.refused.items():
        if not ref.startswith(prefix):
            continue  # a name the remote would not take is no scope's failure
        digest = ref[len(prefix) :]
        error = refusal_message(remote, reason, pushed.causes.get(ref, ""), pushed.said)
        reports.setdefault(digest, ScopeReport(digest)).error = error


def _busy(
    reports: dict[str, ScopeReport],
    remote: str,
    pushed: Pushed,
    prefix: str,
    waiting: dict[str, float],
) -> set[str]:
    """The digests whose ref another process held locked on the remote: pushed again
    (WAITING: ref -> until when). A lock still there after LOCK_PATIENCE_SECONDS is no
    other push's (those hold it for milliseconds): it is reported, the others sync."""
    again = set()
    now = time.monotonic()
    for ref, lock in pushed.busy.items():
        if not ref.startswith(prefix):
            continue
        digest = ref[len(prefix) :]
        if now < waiting.setdefault(ref, now + LOCK_PATIENCE_SECONDS):
            again.add(digest)
        else:
            reports.setdefault(digest, ScopeReport(digest)).error = _lock_hint(remote, lock)
    return again
