"""Sync's own refs in this repository: where the remote's refs are fetched to, the
agreed base per remote and scope, the chain of trees being pushed, and the view of
all of them one round works from."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from git_obversa.memory.git_memory import (
    SCOPE_REF_PREFIX,
    ScopeTree,
    Store,
    empty_scope_tree,
    read_scope_tree,
)
from git_obversa.memory.port import MemoryLimits
from git_obversa.memory.ref_names import NAME_REF_PREFIX
from git_obversa.memory.scopes import DROPPED_REF_PREFIX
from git_obversa.memory.store_errors import MissingObject, StoreError

MEMORY_PREFIX = SCOPE_REF_PREFIX


DROPPED_PREFIX = DROPPED_REF_PREFIX


DIGEST = re.compile(r"[0-9a-f]{64}")  # a scope ref's last segment: sha256 of the scope name


DIGEST_OR_SHA1 = re.compile(rb"[0-9a-f]{40}|[0-9a-f]{64}")  # an object id, either hash


# `git config remote.<name>.obversaSync true`: set by `install --sync`, read by pre-push.
SYNC_MARKER = "obversaSync"


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


@dataclass(frozen=True)
class Side:
    """One side's view of a scope: its tree, or (tree None) the tombstone's tree when it
    was dropped on purpose; both None when that side simply lacks the scope."""

    tree: str | None
    dropped: str | None = None

    @property
    def lacks(self) -> bool:
        return self.tree is None and self.dropped is None


@dataclass
class View:
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


def read_view(store: Store, remote: str, fetched: bool, damaged: dict[str, str]) -> View:
    return View(
        local=scope_refs(store, MEMORY_PREFIX),
        dropped_here=scope_refs(store, DROPPED_PREFIX),
        names_here=scope_refs(store, NAME_REF_PREFIX),
        bases=scope_refs(store, base_prefix(remote)),
        pending=scope_refs(store, pending_prefix(remote)),
        fetched=scope_refs(store, tracking_prefix(remote)) if fetched else None,
        dropped_there=scope_refs(store, tracking_prefix(remote, "dropped")) if fetched else {},
        names_there=scope_refs(store, tracking_prefix(remote, "names")) if fetched else {},
        damaged={ref.rpartition("/")[2]: value for ref, value in damaged.items()
                 if ref.startswith(MEMORY_PREFIX)},
    )  # fmt: skip


def scope_refs(store: Store, prefix: str) -> dict[str, str]:
    """digest -> value of the refs under PREFIX. Other names are left alone: they are no
    scope (a remote may push anything), or they belong to another remote whose name
    extends this one's (`origin/x` under `origin`)."""
    found = {ref[len(prefix) :]: value for ref, value in store.list_refs(prefix).items()}
    return {digest: value for digest, value in found.items() if DIGEST.fullmatch(digest)}


def read_scope(
    store: Store, tree: str | None, digest: str, limits: MemoryLimits | None
) -> ScopeTree:
    return empty_scope_tree() if tree is None else read_scope_tree(store, tree, digest, limits)


MAX_PENDING = 16  # pushes noted per scope and remote (each killed sync may leave one)


def pending_trees(store: Store, noted: str | None) -> list[str]:
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


def pending_chain(store: Store, trees: list[str]) -> str | None:
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


# Progress of long work: (what, how many done, of how many); the CLI shows it on a
# terminal, the API passes None.
Progress = Callable[[str, int, int], None]


@dataclass
class Exchange:
    """What one pull, push or sync works with through all its rounds."""

    store: Store
    repository: str
    remote: str
    limits: MemoryLimits
    dry_run: bool
    progress: Progress | None = None
    reports: dict = field(default_factory=dict)  # digest -> ScopeReport
    waiting: dict[str, float] = field(default_factory=dict)  # remote ref -> until when

    def tell(self, what: str, done: int, total: int) -> None:
        if self.progress is not None and total:
            self.progress(what, done, total)
