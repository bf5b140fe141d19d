"""What a sync did (or, in a dry run, would do) to each scope."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from git_obversa.memory.names import display
from git_obversa.memory.port import MemoryFailure
from git_obversa.memory.store_errors import MissingObject

if TYPE_CHECKING:
    from git_obversa.sync.tracking import View


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


UNSAFE_SHAPES = (MemoryFailure, ValueError, RecursionError, OverflowError, UnicodeError)


def problem(error: BaseException) -> str:
    """One line for a scope that cannot be synced, naming the storage code."""
    if isinstance(error, MissingObject):
        return f"UNSAFE_STORAGE: a Git object is missing ({error.oid[:12]}): {error.message}"
    if isinstance(error, MemoryFailure):
        return f"{error.code}: {error.message}"
    return f"UNSAFE_STORAGE: the scope's stored data cannot be read ({type(error).__name__})"


def fold(into: ScopeReport, found: ScopeReport) -> None:
    into.received = found.received or into.received
    into.error = found.error
    into.missing_here = into.missing_here or found.missing_here
    into.restore = found.restore or into.restore
    into.conflicts += found.conflicts
    into.restored += found.restored
    into.merged_in += found.merged_in
    into.removed += found.removed
    into.evicted += found.evicted


def note_sent(reports: dict[str, ScopeReport], digest: str, new: str | None, view: View) -> None:
    scope = reports.setdefault(digest, ScopeReport(digest))
    scope.sent = "pushed" if new else "deleted"
    theirs = view.theirs(digest)
    if new and theirs is not None and theirs.lacks and digest not in view.damaged:
        scope.missing_there = True
