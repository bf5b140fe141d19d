"""The three-way merge of one memory scope: a pure function over scope states.

`merge_scopes(base, local, incoming, ...)` folds two sides that diverged from the last
state both agreed on. A merge never invents text: every merged file is a blob one side
already has, so writing a merge is writing trees and metadata only. Kept apart from the
transport (`remote.py`) so its rules are tested without Git.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from git_obversa.memory.paths import validate_path
from git_obversa.memory.port import MEMORY_ROOT, MemoryLimits


@dataclass(frozen=True)
class FileVersion:
    """One stored file as the merge sees it: its text's identity, size and write stamp."""

    blob: str  # blob id; equal ids mean equal text
    byte_length: int
    written: int


@dataclass(frozen=True)
class ScopeState:
    files: Mapping[str, FileVersion]
    clock: int  # the scope's nextWrite


EMPTY_STATE = ScopeState({}, 0)


@dataclass(frozen=True)
class Conflict:
    """Both sides changed PATH to different text: local text at PATH, remote at COPY."""

    path: str
    copy: str


@dataclass
class MergeResult:
    state: ScopeState
    conflicts: list[Conflict] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)  # deleted on one side, edited on other
    merged_in: list[str] = field(default_factory=list)  # paths whose text came from remote
    evicted: list[str] = field(default_factory=list)  # dropped to hold the limits


@dataclass
class _Placed:
    """A file chosen for the merged scope, before write stamps are rebuilt."""

    version: FileVersion
    from_remote: bool  # the text came from the remote side
    recency: tuple  # sort key: older first


def merge_scopes(
    base: ScopeState,
    local: ScopeState,
    remote: ScopeState,
    remote_name: str,
    limits: MemoryLimits | None = None,
) -> MergeResult:
    """Merge REMOTE into LOCAL, three-way against BASE (the last state both agreed on).

    A file changed on one side takes that side; changed on both sides to different text
    keeps the local text at its path and the remote text beside it
    (`<name>.from-<remote>.<ext>`); an edit beats a delete; a rename (same blob at a new
    path) is kept, and an edit made on the other side follows it. Write stamps are
    rebuilt: files untouched since BASE stay oldest, changed files follow in the order
    each side wrote them. Then least-recently-written files are evicted until LIMITS
    hold; remote-merged files rank newest, so they go last, and every eviction is listed.
    """
    choice = _Choice(base, local, remote)
    for old, version in base.files.items():
        choice.decide(old, version)
    choice.add_new_files()
    placed, conflicts = choice.place("from-" + _remote_tag(remote_name))
    state, evicted = _stamp_and_evict(
        placed, local.clock, remote.clock, MemoryLimits.resolve(limits)
    )
    merged_in = sorted(
        path
        for path, want in placed.items()
        if want.from_remote
        and path in state.files
        and (path not in local.files or local.files[path].blob != want.version.blob)
    )
    return MergeResult(state, conflicts, sorted(choice.restored), merged_in, evicted)


class _Choice:
    """What each side wants placed where, decided file by file against the base; the
    local layout is placed first, so local paths never move."""

    def __init__(self, base: ScopeState, local: ScopeState, remote: ScopeState) -> None:
        self.base, self.local, self.remote = base, local, remote
        self.local_moves = _renames(base.files, local.files)
        self.remote_moves = _renames(base.files, remote.files)
        self.local_rank, self.remote_rank = _ranks(local.files), _ranks(remote.files)
        self.base_rank = _ranks(base.files)
        self.local_wants: list[tuple[str, _Placed]] = []
        self.remote_wants: list[tuple[str, _Placed]] = []
        self.followers: list[tuple[str, str, _Placed]] = []  # local edits the remote moved
        self.claimed_local: set[str | None] = set()
        self.claimed_remote: set[str | None] = set()
        self.restored: list[str] = []  # deleted on one side, edited on the other

    def from_local(self, path: str) -> _Placed:
        return _Placed(self.local.files[path], False, (1, self.local_rank[path], 0))

    def from_remote(self, path: str) -> _Placed:
        return _Placed(self.remote.files[path], True, (1, self.remote_rank[path], 1))

    def decide(self, old: str, version: FileVersion) -> None:
        """Where the base file OLD went on each side, and what the merge keeps of it."""
        local, remote = self.local.files, self.remote.files
        local_path = _follow(old, local, self.local_moves)
        remote_path = _follow(old, remote, self.remote_moves)
        self.claimed_local.add(local_path)
        self.claimed_remote.add(remote_path)
        local_changed = local_path is not None and local[local_path].blob != version.blob
        remote_changed = remote_path is not None and remote[remote_path].blob != version.blob
        if local_path is None and remote_path is None:
            return
        if local_path is None:  # deleted here: an edit or rename there beats the delete
            if remote_changed or remote_path != old:
                self.remote_wants.append((remote_path, self.from_remote(remote_path)))
                if remote_changed:
                    self.restored.append(remote_path)
            return
        if remote_path is None:
            if local_changed or local_path != old:
                self.local_wants.append((local_path, self.from_local(local_path)))
                if local_changed:
                    self.restored.append(local_path)
            return
        if not remote_changed:
            placed = self.from_local(local_path)
            if not local_changed:  # untouched text keeps its place in the write order
                placed = _Placed(placed.version, False, (0, self.base_rank[old], 0))
            if local_path == old and remote_path != old:
                self.followers.append((remote_path, local_path, placed))
            else:  # unmoved, or moved here (on both sides, the local name wins)
                self.local_wants.append((local_path, placed))
        elif not local_changed or local[local_path].blob == remote[remote_path].blob:
            # The remote text, at the local name if this side moved the file.
            target = local_path if local_path != old else remote_path
            self.remote_wants.append((target, self.from_remote(remote_path)))
        else:  # both edited (so neither moved): local text here, remote text beside it
            self.local_wants.append((local_path, self.from_local(local_path)))
            self.remote_wants.append((local_path, self.from_remote(remote_path)))

    def add_new_files(self) -> None:
        """Files neither side had at the base: each side's new files."""
        for path in self.local.files:
            if path not in self.claimed_local:
                self.local_wants.append((path, self.from_local(path)))
        for path in self.remote.files:
            if path not in self.claimed_remote:
                self.remote_wants.append((path, self.from_remote(path)))

    def place(self, tag: str) -> tuple[dict[str, _Placed], list[Conflict]]:
        """The local wants, the remote renames of local files where they are free, then
        the remote wants: a path taken by other text puts the remote text beside it."""
        placed: dict[str, _Placed] = dict(self.local_wants)
        for moved_to, path, want in self.followers:
            placed[moved_to if _blocking_segment(moved_to, placed) is None else path] = want
        conflicts = []
        for path, want in self.remote_wants:
            target = _free_path(path, want.version.blob, placed, tag)
            if target is None:  # the same text is already at that path
                continue
            placed[target] = want
            if target != path:
                conflicts.append(Conflict(path, target))
        return placed, conflicts


def _renames(base: Mapping[str, FileVersion], side: Mapping[str, FileVersion]) -> dict[str, str]:
    """Paths of BASE that SIDE moved: the same blob gone from its path, found at a new one."""
    added: dict[str, list[str]] = {}
    for path in sorted(side):
        if path not in base:
            added.setdefault(side[path].blob, []).append(path)
    moves = {}
    for path in sorted(base):
        if path not in side and added.get(base[path].blob):
            moves[path] = added[base[path].blob].pop(0)
    return moves


def _follow(path: str, side: Mapping[str, FileVersion], moves: Mapping[str, str]) -> str | None:
    """Where the base file at PATH lives on a side: same path, moved, or None (deleted)."""
    if path in side:
        return path
    return moves.get(path)


def _ranks(files: Mapping[str, FileVersion]) -> dict[str, float]:
    """Each file's position in its side's write order, scaled to (0, 1].

    Stamps of two sides are not comparable (each side counted its own writes); positions
    scaled by the side's size interleave them fairly.
    """
    order = sorted(files, key=lambda path: (files[path].written, path))
    return {path: (index + 1) / len(order) for index, path in enumerate(order)}


def _remote_tag(remote_name: str) -> str:
    """REMOTE_NAME as characters a memory path segment may hold."""
    cleaned = re.sub(r"[^A-Za-z0-9_-]+", "-", remote_name).strip("-")
    return cleaned[:32] or "remote"


def _free_path(path: str, blob: str, placed: Mapping[str, _Placed], tag: str) -> str | None:
    """PATH if the remote text can go there; otherwise a path beside it; None if there already.

    A path is taken when a file is there, when it is a directory of placed files, or when
    one of its directories is a placed file. The colliding segment gets `.<tag>` (then
    `.<tag>-2`, ...) before its extension.
    """
    if path in placed and placed[path].version.blob == blob:
        return None
    blocker = _blocking_segment(path, placed)
    if blocker is None:
        return path
    for attempt in range(1, 1000):
        candidate = _aside(path, blocker, tag if attempt == 1 else f"{tag}-{attempt}")
        if candidate is not None and _blocking_segment(candidate, placed) is None:
            return candidate
    raise RuntimeError(f"no free path beside {path}")


def _blocking_segment(path: str, placed: Mapping[str, _Placed]) -> int | None:
    """The index of the first segment of PATH that collides with placed files, or None."""
    segments = path[len(MEMORY_ROOT) + 1 :].split("/")
    for index in range(1, len(segments)):
        if MEMORY_ROOT + "/" + "/".join(segments[:index]) in placed:
            return index - 1
    prefix = path + "/"
    if path in placed or any(other.startswith(prefix) for other in placed):
        return len(segments) - 1
    return None


def _aside(path: str, index: int, tag: str) -> str | None:
    """PATH with segment INDEX renamed `<stem>.<tag><ext>` (a file keeps its extension)."""
    segments = path[len(MEMORY_ROOT) + 1 :].split("/")
    name = segments[index]
    is_file = index == len(segments) - 1
    dot = name.rfind(".") if is_file else -1
    stem, extension = (name[:dot], name[dot:]) if dot > 0 else (name, "")
    room = 128 - len(tag) - 1 - len(extension)
    overflow = len(path.encode()) + len(tag) + 1 - 1024
    stem = stem[: max(1, min(room, len(stem) - max(overflow, 0)))]
    segments[index] = f"{stem}.{tag}{extension}"
    candidate = MEMORY_ROOT + "/" + "/".join(segments)
    try:
        validate_path(candidate)
    except Exception:
        return None
    return candidate


def _stamp_and_evict(
    placed: Mapping[str, _Placed], local_clock: int, remote_clock: int, limits: MemoryLimits
) -> tuple[ScopeState, list[str]]:
    order = sorted(placed, key=lambda path: (placed[path].recency, path))
    stamps = {path: index + 1 for index, path in enumerate(order)}
    files = {
        path: FileVersion(placed[path].version.blob, placed[path].version.byte_length, stamps[path])
        for path in sorted(placed)
    }
    total = sum(version.byte_length for version in files.values())
    evicted = []
    for path in order:
        if len(files) <= limits.max_files and total <= limits.max_total_bytes:
            break
        total -= files.pop(path).byte_length
        evicted.append(path)
    clock = max(len(order), local_clock, remote_clock)
    return ScopeState(files, clock), evicted
