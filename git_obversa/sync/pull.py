"""Pull: bring each fetched scope into the local one (take, drop or merge three-way),
and record local refs, bases, tombstones and names in one transaction."""

from __future__ import annotations

from git_obversa.memory.engine import Entry
from git_obversa.memory.git_memory import ScopeTree, Store, read_blob_text
from git_obversa.memory.gitstore import update_refs
from git_obversa.memory.names import checked_name, names
from git_obversa.memory.port import MemoryLimits
from git_obversa.memory.ref_names import NAME_REF_PREFIX
from git_obversa.memory.scope_build import write_scope_tree
from git_obversa.memory.scopes import scope_option, state_before
from git_obversa.sync.fetch import SyncError
from git_obversa.sync.merge import (
    EMPTY_STATE,
    FileVersion,
    MergeResult,
    ScopeState,
    merge_scopes,
)
from git_obversa.sync.reports import UNSAFE_SHAPES, ScopeReport, fold, problem
from git_obversa.sync.tracking import (
    DROPPED_PREFIX,
    MEMORY_PREFIX,
    Exchange,
    Side,
    base_prefix,
    pending_chain,
    pending_prefix,
    pending_trees,
    read_scope,
    read_view,
)

# Rounds of fetch, merge and push before giving up on a busy remote. Writers that keep
# pushing to one scope make some syncs lose the race many times in a row (measured: up
# to 20 rounds with three processes syncing non-stop on a loaded 2-core machine).
MAX_ATTEMPTS = 50


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


def take_in_all(exchange: Exchange, only: set[str] | None, damaged: dict[str, str]) -> None:
    """Bring every fetched scope into the local one; record the new bases, names and
    tombstones. Everything moves in one transaction that checks each local ref still
    holds what was read: a local write that lands meanwhile makes us merge again."""
    store, repository, remote = exchange.store, exchange.repository, exchange.remote
    limits, reports, dry_run = exchange.limits, exchange.reports, exchange.dry_run
    zero = "0" * store.hex_length
    for _ in range(MAX_ATTEMPTS):
        view = read_view(store, remote, True, damaged)
        updates: dict[str, tuple] = {}
        found: dict[str, ScopeReport] = {}
        for digest, blob in view.names_there.items():
            if digest not in view.names_here and checked_name(store, digest, blob) is not None:
                updates[NAME_REF_PREFIX + digest] = (None, blob)
        digests = set(view.local) | set(view.fetched or ()) | set(view.bases)
        digests |= set(view.dropped_there) | set(view.pending) | set(view.damaged)
        chosen = [digest for digest in sorted(digests) if only is None or digest in only]
        for done, digest in enumerate(chosen, 1):
            exchange.tell("Merging scopes", done, len(chosen))
            ours, theirs = view.ours(digest), view.theirs(digest)
            base = view.bases.get(digest)
            pending = view.pending.get(digest)
            pushing = pending_trees(store, pending)
            if theirs.tree is not None and theirs.tree in pushing:
                # A push of ours whose record was lost (a kill): the remote holds that
                # tree, so it is what both sides agreed on. Pushes noted after it may
                # still land (a killed sync's git can outlive it): they stay noted.
                base = theirs.tree
                if not dry_run:
                    newer = pushing[: pushing.index(theirs.tree)]
                    updates[pending_prefix(remote) + digest] = (
                        pending,
                        pending_chain(store, newer),
                    )
            try:
                found_report = _take_in_one(
                    store, remote, digest, ours, (base, pushing), theirs, limits, updates, dry_run
                )
            except UNSAFE_SHAPES as error:
                found[digest] = ScopeReport(digest, error=problem(error))
                continue
            if found_report is not None:
                found[digest] = found_report
            if base != view.bases.get(digest) and base_prefix(remote) + digest not in updates:
                updates[base_prefix(remote) + digest] = (..., base)
        applied = dry_run or not updates
        if not applied:
            written = store.take_pending()  # the merged trees' objects, written above
            applied = update_refs(
                repository, updates, zero, action=f"sync {remote}", written=written
            )
        if applied:
            named = names(store) if any(scope.removed for scope in found.values()) else {}
            for digest, scope in found.items():
                if scope.removed and not dry_run:
                    scope.restore = _restore_command(store, digest, named.get(digest))
                fold(reports.setdefault(digest, ScopeReport(digest)), scope)
            return
    raise SyncError("local memory kept changing while merging; run the sync again")


def _take_in_one(
    store: Store,
    remote: str,
    digest: str,
    ours: Side,
    agreed: tuple[str | None, list[str]],
    theirs: Side,
    limits: MemoryLimits,
    updates: dict[str, tuple],
    dry_run: bool,
) -> ScopeReport | None:
    """Plan one scope's pull into UPDATES (ref -> (expected, new)); what it did.
    AGREED: the base, and the trees noted as being pushed (newest first)."""
    base, pushing = agreed
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
        removed = sorted(read_scope(store, ours.tree, digest, None).entries)
        updates[local_ref] = (ours.tree, None)
        updates[DROPPED_PREFIX + digest] = (..., ours.tree)
        updates[base_ref] = (..., None)
        return ScopeReport(digest, received="deleted", removed=removed)
    merged, result, local = _merge_trees(
        store, digest, agreed, ours.tree, theirs.tree, remote, limits, dry_run
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
    return f"git obversa memory restore {scope_option(digest, name)} {state[:12]}"


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
    local = read_scope(store, ours, digest, limits)
    incoming = read_scope(store, theirs, digest, limits)
    known = set(local.blobs.values())
    for path, blob in incoming.blobs.items():
        if blob not in known:
            read_blob_text(store, blob, incoming.entries[path].byte_length)
    return local, incoming


def _with_our_pushes(
    store: Store, digest: str, agreed: ScopeState, theirs: ScopeState, pushing: list[str]
) -> ScopeState:
    """AGREED, corrected by pushes of ours whose record a kill lost (PUSHING: newest
    first) and that the remote holds only as another clone merged them and pushed on. A
    file the remote holds exactly as one of our pushes sent it is our own text, not a
    change of theirs; a file such a push had deleted and the remote lacks was deleted by
    us. Without this the clone's own earlier text would come back beside its newer text
    as a conflict copy, and its deletes would be undone."""
    files = dict(agreed.files)
    settled: set[str] = set()
    for tree in pushing:
        try:
            sent = _state(read_scope(store, tree, digest, None)).files
        except UNSAFE_SHAPES:
            continue  # a damaged note only spares work; the plain base stays safe
        landed = False  # the remote holds a change this push made
        for path, version in sent.items():
            there = theirs.files.get(path)
            if path not in settled and there is not None and there.blob == version.blob:
                before = agreed.files.get(path)
                landed = landed or before is None or before.blob != version.blob
                files[path] = version
                settled.add(path)
        if not landed:
            continue  # a push that never arrived tells nothing about deletes
        for path in list(files):
            if path not in settled and path not in sent and path not in theirs.files:
                del files[path]
                settled.add(path)
    return ScopeState(files, agreed.clock)


def _merge_trees(
    store: Store,
    digest: str,
    agreed_trees: tuple[str | None, list[str]],
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
    base, pushing = agreed_trees
    try:
        agreed = _state(read_scope(store, base, digest, None))
    except UNSAFE_SHAPES:
        agreed = EMPTY_STATE  # without a base nothing counts as deleted: none is lost
    theirs_state = _state(incoming)
    if pushing:
        agreed = _with_our_pushes(store, digest, agreed, theirs_state, pushing)
    result = merge_scopes(agreed, _state(local), theirs_state, remote, limits)
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
